"""Building and opening self-describing index directories (`inspo index`, `open_retriever(dir)`).

    meta = build_index("data/world/corpus.jsonl", "indexes/world-bm25", kind="bm25")
    retriever = open_index("indexes/world-bm25")          # needs nothing but the directory
    retriever.search(["who founded Hokin Works?"], k=3)

An index directory holds `index.json` (kind, encoder, faiss type, fp16, the corpus' absolute path, size and
head hash, creation time, inspo version), `offsets.npy` (byte offset of every passage in the corpus; the
corpus itself is not copied, hits are read from it at search time) and the engine's files: `bm25s/`
(bm25s's own save format), `faiss.index`, or `lucene/`.

Safety: the build writes into a hidden temporary directory next to `out` and renames it into place only when
complete (index.json is written last), so an interrupted build never leaves a directory that looks like an
index. An existing non-empty `out` is replaced only with `force=True`, and only if it is an index itself.
Memory is estimated before anything heavy runs, and the build is refused above `max_memory_gb`.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import random
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from inspo_cli import __version__
from inspo_cli.errors import InspoError
from inspo_cli.jsonio import atomic_write_json
from retriever.store import (PassageStore, check_corpus_file, corpus_fingerprint, estimate_passages,
                             iter_corpus_chunks, open_passage_store, sample_lines)

KINDS = ("bm25", "dense", "lucene")
INDEX_FORMAT = "inspo-index"
INDEX_FORMAT_VERSION = 1
_UMASK = os.umask(0o022)
os.umask(_UMASK)
Progress = Callable[[str, int, "int | None"], None]  # (phase, done, total)


@dataclass
class MemoryEstimate:
    passages: int  # estimated from the corpus' size and its first lines
    bytes: int
    detail: str

    @property
    def gb(self) -> float:
        return self.bytes / 1e9

    def __str__(self) -> str:
        size = f"{self.gb:.2f} GB" if self.bytes >= 1e9 else f"{self.bytes / 1e6:.0f} MB"
        return f"~{size} ({self.detail})"


def available_memory_bytes() -> int:
    """MemAvailable from /proc/meminfo (Linux), else free physical pages."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def check_out_dir(out: Path, corpus: Path, force: bool) -> None:
    """Refuse an `out` that is a file, a non-empty non-index directory, or (without force) an existing index."""
    if corpus.resolve().is_relative_to(out.resolve()):
        raise InspoError(f"--out {out} contains the corpus {corpus}; choose an output directory outside it")
    if not out.exists():
        return
    if not out.is_dir():
        raise InspoError(f"--out {out} is a file; choose a directory")
    if not any(out.iterdir()):
        return
    if not (out / "index.json").is_file():
        raise InspoError(f"--out {out} is not empty and is not an inspo index (no index.json); refusing to touch it "
                         "even with --force; choose a new or empty directory")
    if not force:
        raise InspoError(f"--out {out} already holds an index; pass --force to replace it, or choose another --out")


def estimate_memory(corpus: Path, kind: str, *, dim: int | None = None, faiss_type: str = "flat",
                    fp16: bool = False, encoder_bytes: int = 0) -> MemoryEstimate:
    n = estimate_passages(corpus)
    if kind == "bm25":
        from retriever.bm25 import estimate_bm25_bytes, stemmer_name

        total, detail = estimate_bm25_bytes(sample_lines(corpus), n, stemmer_name())
    elif kind == "dense":
        from retriever.dense import estimate_dense_bytes

        total, detail = estimate_dense_bytes(n, dim, faiss_type, fp16)
        total += encoder_bytes
        detail += f" + encoder {encoder_bytes / 1e9:.2f} GB"
    else:  # Lucene indexes on disk in the JVM's own heap; our side holds nothing
        total, detail = 0, "Lucene builds on disk in the JVM (its heap is set by Java, not counted here)"
    return MemoryEstimate(n, total, detail)


def check_memory(estimate: MemoryEstimate, kind: str, faiss_type: str, fp16: bool, max_memory_gb: float | None) -> None:
    available = available_memory_bytes() / 1e9
    limit = 0.8 * available if max_memory_gb is None else max_memory_gb
    if estimate.gb <= limit:
        return
    source = f"--max-memory-gb {max_memory_gb:g}" if max_memory_gb is not None else \
        f"the default limit {limit:.1f} GB (80% of the {available:.1f} GB available)"
    if kind == "dense" and faiss_type != "ivfpq":
        fix = ("--fp16 (half the size) or " if not fp16 else "") + "--faiss ivfpq (compressed codes)"
    else:
        fix = "a machine with more memory"
    raise InspoError(f"building this {kind} index needs about {str(estimate).lstrip('~')}, over "
                     f"{source}; use {fix}, or raise --max-memory-gb if you know it fits")


def build_index(corpus: str | os.PathLike, out: str | os.PathLike, kind: str = "bm25", *, encoder=None,
                faiss_type: str = "flat", fp16: bool = False, batch_size: int = 64, device: str = "auto",
                encoder_dtype: str = "auto",
                max_memory_gb: float | None = None, force: bool = False,
                on_estimate: Callable[[MemoryEstimate], None] | None = None,
                progress: Progress | None = None) -> dict:
    """Build a `kind` index of `corpus` into directory `out`; returns its index.json contents.

    `encoder` (kind=dense): a hub id or local directory, None for the packaged MiniLM, or a loaded `Encoder`.
    `on_estimate` sees the memory estimate before the build starts; `progress(phase, done, total)` its progress.
    """
    if kind not in KINDS:
        raise InspoError(f"--kind {kind!r} is not one of {', '.join(KINDS)}")
    if kind == "dense":
        from retriever.dense import FAISS_TYPES

        if faiss_type not in FAISS_TYPES:
            raise InspoError(f"--faiss {faiss_type!r} is not one of {', '.join(FAISS_TYPES)}")
        if fp16 and faiss_type == "ivfpq":
            raise InspoError("--fp16 applies to --faiss flat and hnsw; ivfpq already stores compressed "
                             "m-byte codes; drop --fp16")
    if batch_size < 1:
        raise InspoError(f"--batch-size must be >= 1 (got {batch_size})")
    corpus, out = check_corpus_file(corpus).resolve(), Path(out).expanduser()
    check_out_dir(out, corpus, force)
    progress = progress or (lambda phase, done, total: None)

    loaded_encoder = None
    if kind == "dense":
        from retriever.dense import load_encoder

        progress("loading encoder", 0, None)
        if encoder is None or isinstance(encoder, (str, os.PathLike)):
            loaded_encoder = load_encoder(None if encoder is None else str(encoder), device=device,
                                          batch_size=batch_size, dtype=encoder_dtype)
        else:  # an already loaded `Encoder` (or a test double with the same methods)
            loaded_encoder = encoder
    elif kind == "lucene":
        from retriever.lucene import check_available

        check_available()
    estimate = estimate_memory(corpus, kind, dim=loaded_encoder.dim if loaded_encoder else None,
                               faiss_type=faiss_type, fp16=fp16,
                               encoder_bytes=loaded_encoder.parameter_bytes() if loaded_encoder else 0)
    if on_estimate is not None:
        on_estimate(estimate)
    check_memory(estimate, kind, faiss_type, fp16, max_memory_gb)

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.partial-"))
    os.chmod(tmp, 0o777 & ~_UMASK)  # mkdtemp makes it 0700; the index should get the usual permissions
    try:
        start = time.perf_counter()
        fingerprint = corpus_fingerprint(corpus)
        if kind == "bm25":
            n, details = _build_bm25(corpus, tmp, estimate.passages, progress)
        elif kind == "dense":
            n, details = _build_dense(corpus, tmp, loaded_encoder, faiss_type, fp16, estimate.passages, progress)
        else:
            n, details = _build_lucene(corpus, tmp, progress)
        fingerprint["passages"] = n
        meta = {"format": INDEX_FORMAT, "format_version": INDEX_FORMAT_VERSION, "kind": kind, **details,
                "corpus": fingerprint, "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                "build_seconds": round(time.perf_counter() - start, 3), "inspo_version": __version__}
        atomic_write_json(tmp / "index.json", meta)  # last: a directory with index.json is a complete index
        _move_into_place(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return meta


def _move_into_place(tmp: Path, out: Path) -> None:
    old = None
    if out.exists():  # checked by check_out_dir: empty, or an index being replaced with --force
        old = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.old-"))
        os.rename(out, old / "index")
    os.rename(tmp, out)
    if old is not None:
        shutil.rmtree(old)


def _save_offsets(tmp: Path, parts: list[np.ndarray], end: int) -> np.ndarray:
    offsets = np.concatenate([*parts, np.array([end], dtype=np.int64)])
    np.save(tmp / "offsets.npy", offsets)
    return offsets


def _build_bm25(corpus: Path, tmp: Path, n_est: int, progress: Progress) -> tuple[int, dict]:
    from retriever.bm25 import B, K1, METHOD, BM25Builder, make_tokenizer, save_bm25, stemmer_name, tokenizer_description

    stemmer = stemmer_name()
    builder = BM25Builder(make_tokenizer(stemmer))
    parts = []
    for chunk in iter_corpus_chunks(corpus, chunk_size=10_000):
        builder.add(chunk.contents)
        parts.append(chunk.offsets)
        progress("tokenising", builder.n_docs, max(n_est, builder.n_docs))
    _save_offsets(tmp, parts, corpus.stat().st_size)
    progress("scoring", builder.n_docs, builder.n_docs)
    n, tokens = builder.n_docs, builder.n_tokens
    bm25 = builder.finish()
    save_bm25(bm25, builder.tokenizer, tmp)
    return n, {"bm25": {"engine": "bm25s", "method": METHOD, "k1": K1, "b": B, "tokenizer": tokenizer_description(stemmer),
                        "tokens": tokens, "vocabulary": len(bm25.vocab_dict)}}


def _build_dense(corpus: Path, tmp: Path, encoder, faiss_type: str, fp16: bool, n_est: int,
                 progress: Progress) -> tuple[int, dict]:
    import faiss

    from retriever.dense import new_faiss_index

    chunk_size = encoder.batch_size * 8
    parts, n = [], 0
    if faiss_type == "ivfpq":  # training needs the exact size and a random sample: one scan pass first
        for chunk in iter_corpus_chunks(corpus, chunk_size=50_000):
            parts.append(chunk.offsets)
            n += len(chunk.contents)
            progress("scanning", n, max(n_est, n))
        offsets = _save_offsets(tmp, parts, corpus.stat().st_size)
        index, params = new_faiss_index(faiss_type, encoder.dim, fp16, n)
        sample = sorted(random.Random(0).sample(range(n), params["train_size"]))
        store, vectors = PassageStore(corpus, offsets), []
        for i in range(0, len(sample), chunk_size):
            vectors.append(encoder.encode_passages([p.contents for p in store.get(sample[i:i + chunk_size])]))
            progress("encoding training sample", min(i + chunk_size, len(sample)), len(sample))
        store.close()
        progress("training ivfpq", 0, None)
        index.train(np.concatenate(vectors))
        del vectors
        n_est = n
    else:
        index, params = new_faiss_index(faiss_type, encoder.dim, fp16, n_est)
    added = 0
    for chunk in iter_corpus_chunks(corpus, chunk_size=chunk_size):
        index.add(encoder.encode_passages(chunk.contents))
        if faiss_type != "ivfpq":
            parts.append(chunk.offsets)
        added += len(chunk.contents)
        progress("encoding", added, max(n_est, added))
    if faiss_type != "ivfpq":
        _save_offsets(tmp, parts, corpus.stat().st_size)
    progress("writing faiss index", added, added)
    faiss.write_index(index, str(tmp / "faiss.index"))
    return added, {"encoder": encoder.describe(), "faiss": params}


def _build_lucene(corpus: Path, tmp: Path, progress: Progress) -> tuple[int, dict]:
    from retriever.lucene import build_lucene

    parts, n = [], 0
    for chunk in iter_corpus_chunks(corpus, chunk_size=50_000):  # validates lines with our messages first
        parts.append(chunk.offsets)
        n += len(chunk.contents)
        progress("checking corpus", n, None)
    _save_offsets(tmp, parts, corpus.stat().st_size)
    progress("indexing with pyserini", 0, None)
    return n, {"lucene": build_lucene(corpus, tmp, threads=os.cpu_count() or 1)}


def read_index_meta(index_dir: str | os.PathLike) -> dict:
    index_dir = Path(index_dir)
    path = index_dir / "index.json"
    if not path.is_file():
        raise InspoError(f"{index_dir} is not an inspo index (no index.json); build one with "
                         f"`inspo index --corpus CORPUS --out {index_dir}`")
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise InspoError(f"{path}: not valid JSON ({e.msg}); rebuild the index with --force") from None
    if meta.get("format") != INDEX_FORMAT or meta.get("kind") not in KINDS:
        raise InspoError(f"{path}: not an inspo index description (format {meta.get('format')!r}, kind "
                         f"{meta.get('kind')!r}); rebuild it with `inspo index`")
    if meta.get("format_version", 0) > INDEX_FORMAT_VERSION:
        raise InspoError(f"{path}: index format {meta['format_version']} is newer than this inspo understands "
                         f"({INDEX_FORMAT_VERSION}); upgrade inspo or rebuild the index")
    return meta


def open_index(index_dir: str | os.PathLike, *, corpus: str | os.PathLike | None = None, device: str = "auto",
               gpu: bool = True, n_threads: int | None = None, nprobe: int | None = None,
               ef_search: int | None = None, mmap: bool = False, encoder=None):
    """A `Retriever` for an index directory; `corpus` points at a corpus that moved since the build.

    Dense: `device` encodes queries (cpu, cuda, auto), `gpu` lets faiss search on GPUs when it has them,
    `nprobe`/`ef_search` override ivfpq/hnsw search breadth, `encoder` reuses a loaded `Encoder`.
    BM25: `n_threads` for bm25s (None: by batch size), `mmap` memory-maps the score arrays.
    """
    index_dir = Path(index_dir).expanduser().resolve()
    meta = read_index_meta(index_dir)
    if meta["kind"] == "lucene":
        from retriever.lucene import LuceneRetriever

        return LuceneRetriever(index_dir, threads=n_threads)
    store = open_passage_store(index_dir, meta["corpus"], corpus)
    if meta["kind"] == "bm25":
        from retriever.bm25 import BM25Retriever

        return BM25Retriever.load(index_dir, meta, store, mmap=mmap, n_threads=n_threads)
    from retriever.dense import DenseRetriever

    return DenseRetriever.load(index_dir, meta, store, device=device, gpu=gpu, nprobe=nprobe, ef_search=ef_search,
                               mmap=mmap, encoder=encoder)


def bm25_in_memory(corpus: str | os.PathLike, n_threads: int | None = None):
    """A BM25 retriever over `corpus` built in memory (nothing written): the demo's zero-setup path."""
    from retriever.bm25 import BM25Builder, BM25Retriever, make_tokenizer, stemmer_name

    corpus = check_corpus_file(corpus).resolve()
    builder = BM25Builder(make_tokenizer(stemmer_name()))
    parts = []
    for chunk in iter_corpus_chunks(corpus, chunk_size=10_000):
        builder.add(chunk.contents)
        parts.append(chunk.offsets)
    offsets = np.concatenate([*parts, np.array([corpus.stat().st_size], dtype=np.int64)])
    tokenizer = builder.tokenizer
    return BM25Retriever(builder.finish(), tokenizer, PassageStore(corpus, offsets), n_threads=n_threads)
