"""Reading a corpus without holding it: streamed chunks while indexing, byte offsets while searching.

A Search-R1 corpus (wiki-18) has 21M lines, far too many to keep as Python objects. Indexing therefore
streams the file in chunks (`iter_corpus_chunks`), validating each line and recording where it starts; the
index keeps only those byte offsets (one int64 per passage, `offsets.npy`) plus the corpus' absolute path.
At search time `PassageStore` reads just the k hit lines with `os.pread`, which is thread-safe (no shared
file position), so an HTTP server can search from several threads.

    for chunk in iter_corpus_chunks("data/world/corpus.jsonl", chunk_size=10_000):
        ...  # chunk.contents: list[str], chunk.offsets: int64 start of each line
    store = PassageStore("data/world/corpus.jsonl", offsets)
    store.get([0, 5])  # -> [Passage, Passage]
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from retriever.checked import iter_lines, open_regular
from retriever.corpus import Passage, make_passage, parse_contents
from retriever.errors import RetrieverError

_DECODER = json.JSONDecoder()
FINGERPRINT_BYTES = 1 << 20  # sha256 of the first MiB: cheap to check at every open, catches an edited corpus


@dataclass
class CorpusChunk:
    start_row: int  # row number of the first passage in this chunk (0-based, blank lines not counted)
    offsets: np.ndarray  # int64 byte offset of each passage's line
    contents: list[str]  # the `contents` field ("Title"\ntext), what BM25 tokenises and the encoder embeds


def corpus_fingerprint(path: str | os.PathLike) -> dict:
    """Absolute path, size and a hash of the head of the corpus, recorded in index.json."""
    path = Path(path).resolve()
    with open_regular(path, "corpus") as f:
        stat = os.fstat(f.fileno())
        head = f.read(FINGERPRINT_BYTES)
    return {
        "path": str(path),
        "bytes": stat.st_size,
        "sha256_first_mib": hashlib.sha256(head).hexdigest(),
        "mtime": stat.st_mtime,
    }


def check_corpus_file(path: str | os.PathLike) -> Path:
    """The corpus path, or a RetrieverError saying what is wrong with it."""
    path = Path(path).expanduser()
    if not path.exists():
        raise RetrieverError(
            f"corpus {path} does not exist; pass a Search-R1 JSONL corpus "
            '({"id", "contents"} per line), e.g. data/world/corpus.jsonl'
        )
    if not path.is_file():
        raise RetrieverError(f"corpus {path} is not a file; pass the .jsonl file itself")
    return path


def _parse_line(path: Path, lineno: int, line: bytes) -> str:
    try:
        row = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
        reason = (
            e.msg
            if isinstance(e, json.JSONDecodeError)
            else "not UTF-8"
            if isinstance(e, UnicodeDecodeError)
            else "nested too deeply"
        )
        raise RetrieverError(f"{path}:{lineno}: not valid JSON ({reason}); fix or remove that line") from None
    if not isinstance(row, dict):
        raise RetrieverError(f"{path}:{lineno}: expected a JSON object per line, got {type(row).__name__}")
    if "id" not in row or not isinstance(row.get("contents"), str):
        missing = "id" if "id" not in row else "contents (a string)"
        raise RetrieverError(
            f"{path}:{lineno}: missing field {missing}; corpus rows need "
            '{"id": ..., "contents": "\\"Title\\"\\ntext"} (Search-R1 format)'
        )
    return row["contents"]


def iter_corpus_chunks(path: str | os.PathLike, chunk_size: int = 10_000) -> Iterator[CorpusChunk]:
    """Stream the corpus in chunks of `chunk_size` passages; a bad line is a RetrieverError naming file:line."""
    path = check_corpus_file(path)
    offsets: list[int] = []
    contents: list[str] = []
    start_row = 0
    position = 0
    with open_regular(path, "corpus") as f:
        for lineno, line in iter_lines(f, path, "fix or remove that line"):
            if line.strip():
                contents.append(_parse_line(path, lineno, line))
                offsets.append(position)
                if len(contents) == chunk_size:
                    yield CorpusChunk(start_row, np.asarray(offsets, dtype=np.int64), contents)
                    start_row += len(contents)
                    offsets, contents = [], []
            position += len(line)
    if contents:
        yield CorpusChunk(start_row, np.asarray(offsets, dtype=np.int64), contents)
    elif start_row == 0:
        raise RetrieverError(
            f"corpus {path} has no passages; it needs one JSON row per line: "
            '{"id": ..., "contents": "\\"Title\\"\\ntext"}'
        )


def sample_lines(path: str | os.PathLike, n: int = 2000) -> list[str]:
    """`contents` of the first `n` passages, for estimates made before a build (validated like the rest)."""
    out: list[str] = []
    for chunk in iter_corpus_chunks(path, chunk_size=n):
        out.extend(chunk.contents)
        break
    return out


def save_offsets(out_dir: Path, parts: list[np.ndarray], end: int) -> np.ndarray:
    """Write `offsets.npy` (each passage's byte offset, then the corpus size) from the chunks' offsets."""
    offsets = np.concatenate([*parts, np.array([end], dtype=np.int64)])
    np.save(out_dir / "offsets.npy", offsets)
    return offsets


def estimate_passages(path: str | os.PathLike, sample: int = 2000) -> int:
    """Passages in the corpus, extrapolated from the bytes per line of its first `sample` lines."""
    path = Path(path)
    seen = count = 0
    with open_regular(path, "corpus") as f:
        size = os.fstat(f.fileno()).st_size
        for count, line in iter_lines(f, path, "fix or remove that line"):
            seen += len(line)
            if count == sample:
                return max(1, round(size * count / seen))
    return count


class PassageStore:
    """Passages by row number, read from the corpus file at `offsets` (n + 1 values, the last is the end)."""

    def __init__(self, corpus_path: str | os.PathLike, offsets: np.ndarray):
        self.corpus_path = Path(corpus_path)
        self.offsets = offsets
        self._fd: int | None = os.open(self.corpus_path, os.O_RDONLY)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def get(self, rows: Sequence[int], scores: Sequence[float] | None = None) -> list[Passage]:
        """Passages at `rows` (with `scores` set when given); reads only those lines."""
        out = []
        offsets, fd, decode = self.offsets, self._fd, _DECODER.decode
        if fd is None:
            raise ValueError(f"passage store of {self.corpus_path} is closed")
        for i, row in enumerate(rows):
            start, end = int(offsets[row]), int(offsets[row + 1])
            try:
                data = decode(os.pread(fd, end - start, start).decode("utf-8"))
                title, text = parse_contents(data["contents"])
                ident = data["id"]
            except (ValueError, KeyError, TypeError, AttributeError, RecursionError):  # corpus changed past its head
                raise RetrieverError(
                    f"corpus {self.corpus_path}: the passage at byte {start:,} is not a passage "
                    "row; the corpus changed since the index was built: rebuild it"
                ) from None
            out.append(
                make_passage(
                    ident if type(ident) is str else str(ident),
                    title,
                    text,
                    None if scores is None else float(scores[i]),
                )
            )
        return out

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass


def open_passage_store(index_dir: Path, corpus_meta: dict, corpus: str | os.PathLike | None = None) -> PassageStore:
    """The store for an index, after checking that its corpus is where (and what) index.json says it is.

    `corpus` overrides the recorded path, for a corpus that was moved; its size and head hash must match.
    """
    path = Path(corpus).expanduser().resolve() if corpus is not None else Path(corpus_meta["path"])
    if not path.is_file():
        raise RetrieverError(
            f"index {index_dir} was built from corpus {corpus_meta['path']}, which is not there "
            "any more; put the corpus back at that path, pass its new location (corpus=PATH), "
            f"or rebuild with `inspo index --corpus NEW_PATH --out {index_dir} --force`"
        )
    now = corpus_fingerprint(path)
    if now["bytes"] != corpus_meta["bytes"] or now["sha256_first_mib"] != corpus_meta["sha256_first_mib"]:
        raise RetrieverError(
            f"corpus {path} changed since index {index_dir} was built "
            f"({now['bytes']:,} bytes now, {corpus_meta['bytes']:,} then); rebuild with "
            f"`inspo index --corpus {path} --out {index_dir} --force`"
        )
    return PassageStore(path, load_offsets(index_dir, corpus_meta))


def load_offsets(index_dir: Path, corpus_meta: dict) -> np.ndarray:
    """offsets.npy, checked before and after it is read (8 bytes a passage: 170 MB for wiki-18): a 1-D int64 array
    of index.json's passages + 1 values in a file of exactly that size, starting at or after 0, strictly increasing
    (every passage is a line of at least one byte), ending at the corpus' size. Each search reads the bytes between
    two offsets, so a damaged file would read the wrong passages or gigabytes."""
    path = index_dir / "offsets.npy"
    rebuild = f"rebuild the index with `inspo index --corpus {corpus_meta['path']} --out {index_dir} --force`"
    n = corpus_meta["passages"] + 1
    with open_regular(path, "index file") as f:
        size = os.fstat(f.fileno()).st_size
        try:
            version = np.lib.format.read_magic(f)
            read_header = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
            shape, fortran, dtype = read_header[version](f)
        except (ValueError, KeyError, OSError, SyntaxError, TypeError):
            raise RetrieverError(f"{path}: not a numpy .npy file (cut short or corrupt); {rebuild}") from None
        if shape != (n,) or dtype != np.dtype("<i8") or size != f.tell() + 8 * n:
            raise RetrieverError(
                f"{path}: holds {shape} {dtype} in {size:,} bytes, not the {n:,} int64 offsets of "
                f"the {n - 1:,} passages index.json counts (cut short or corrupt); {rebuild}"
            )
        offsets = np.fromfile(f, dtype=dtype, count=n)
    if len(offsets) != n or offsets[0] < 0 or offsets[-1] != corpus_meta["bytes"] or np.any(np.diff(offsets) <= 0):
        raise RetrieverError(f"{path}: its offsets are not those of the corpus' passages (corrupt); {rebuild}")
    return offsets
