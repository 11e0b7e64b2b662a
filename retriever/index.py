"""Building and opening self-describing index directories (`inspo index`, `open_retriever(dir)`).

    meta = build_index("data/world/corpus.jsonl", "indexes/world-bm25", kind="bm25")
    retriever = open_index("indexes/world-bm25")          # needs nothing but the directory
    retriever.search(["who founded Hokin Works?"], k=3)

An index directory holds `index.json` (kind, encoder, faiss type, fp16, the corpus' absolute path, size and
head hash, creation time, inspo version), `offsets.npy` (byte offset of every passage in the corpus; the
corpus itself is not copied, hits are read from it at search time) and the engine's files: `bm25s/`
(bm25s's own save format), `faiss.index`, or `lucene/`. What depends on the kind (its build, memory estimate
and opening) is the kind's module, looked up in the registry `retriever.kinds`; nothing here names a kind.

Safety: the build writes into a hidden temporary directory next to `out` and renames it into place only when
complete (index.json is written last, atomically), so an interrupted build never leaves a directory that
looks like an index. An existing non-empty `out` is replaced only with `force=True`, and only if it is an index
itself. Memory is estimated before anything heavy runs, and the build is refused above `max_memory_gb`.
The directory and index.json get the usual permissions (0777/0666 less the umask, applied by the OS): nothing
here reads or changes the process' umask.
"""

from __future__ import annotations

import datetime as _dt
import errno
import json
import os
import secrets
import shutil
import socket
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

from retriever.checked import NonNegative, read_json_object, shape_problem
from retriever.errors import RetrieverError
from retriever.kinds import KINDS, BuildOptions, OpenOptions, Progress, kind_module
from retriever.store import check_corpus_file, corpus_fingerprint, estimate_passages

__all__ = [
    "INDEX_FORMAT",
    "INDEX_FORMAT_VERSION",
    "KINDS",
    "MemoryEstimate",
    "Progress",
    "build_index",
    "estimate_memory",
    "open_index",
    "read_index_meta",
]

INDEX_FORMAT = "inspo-index"
INDEX_FORMAT_VERSION = 1
_T = TypeVar("_T")


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
        raise RetrieverError(f"--out {out} contains the corpus {corpus}; choose an output directory outside it")
    if not out.exists():
        return
    if not out.is_dir():
        raise RetrieverError(f"--out {out} is a file; choose a directory")
    if not any(out.iterdir()):
        return
    if not _is_index(out):  # an index.json of some other program's (a web app's, say) is no index of ours
        raise RetrieverError(
            f"--out {out} is not empty and is not an inspo index (no index.json of format "
            f"{INDEX_FORMAT!r}); refusing to touch it even with --force; choose a new or empty "
            "directory"
        )
    if not force:
        raise RetrieverError(f"--out {out} already holds an index; pass --force to replace it, or choose another --out")
    foreign = sorted(p.name for p in out.iterdir() if p.name not in _index_files())
    if foreign:  # --force replaces the directory whole: a file of the user's (notes, a nested index) would go too
        names = ", ".join(name if name.isprintable() else ascii(name) for name in foreign[:3])
        raise RetrieverError(
            f"--out {out} holds {names}{' ...' if len(foreign) > 3 else ''}, which no index build "
            "writes, and --force replaces the index directory whole; move them out, or choose "
            "another --out"
        )


def _index_files() -> set[str]:
    """The names an index build writes at the top of its directory: index.json, offsets.npy, each kind's FILES."""
    return {"index.json", "offsets.npy"}.union(*(getattr(kind_module(kind), "FILES", ()) for kind in KINDS))


def _is_index(out: Path) -> bool:
    """Whether `out` holds the index.json an index build writes (it is a few hundred bytes: 1 MiB is no index's)."""
    if not (out / "index.json").is_file():
        return False
    try:
        meta = read_json_object(out / "index.json", "index.json", 1 << 20, "")
    except RetrieverError:
        return False
    return meta.get("format") == INDEX_FORMAT


def estimate_memory(
    corpus: Path, kind: str, options: BuildOptions | None = None, prepared: Any = None
) -> MemoryEstimate:
    """Memory the build of a `kind` index of `corpus` needs; `prepared` is what the kind's `prepare` returned."""
    n = estimate_passages(corpus)
    total, detail = kind_module(kind).estimate(corpus, n, prepared, options or BuildOptions())
    return MemoryEstimate(n, total, detail)


def check_memory(estimate: MemoryEstimate, kind: str, options: BuildOptions, max_memory_gb: float | None) -> None:
    available = available_memory_bytes() / 1e9
    limit = 0.8 * available if max_memory_gb is None else max_memory_gb
    if estimate.gb <= limit:
        return
    source = (
        f"--max-memory-gb {max_memory_gb:g}"
        if max_memory_gb is not None
        else f"the default limit {limit:.1f} GB (80% of the {available:.1f} GB available)"
    )
    advice = getattr(kind_module(kind), "memory_advice", None)
    fix = (advice(options) if advice is not None else None) or "a machine with more memory"
    raise RetrieverError(
        f"building this {kind} index needs about {str(estimate).lstrip('~')}, over "
        f"{source}; use {fix}, or raise --max-memory-gb if you know it fits"
    )


def build_index(
    corpus: str | os.PathLike,
    out: str | os.PathLike,
    kind: str = "bm25",
    *,
    encoder=None,
    faiss_type: str = "flat",
    fp16: bool = False,
    batch_size: int = 64,
    device: str = "auto",
    encoder_dtype: str = "auto",
    max_memory_gb: float | None = None,
    force: bool = False,
    on_estimate: Callable[[MemoryEstimate], None] | None = None,
    progress: Progress | None = None,
) -> dict:
    """Build a `kind` index of `corpus` into directory `out`; returns its index.json contents.

    `kind` is one of `KINDS` (the registry in `retriever.kinds`); the other options are `BuildOptions`, each
    kind reads those that apply to it. `encoder` (kind=dense): a hub id or local directory, None for the
    packaged MiniLM, or a loaded `Encoder`.
    `on_estimate` sees the memory estimate before the build starts; `progress(phase, done, total)` its progress.
    """
    module = kind_module(kind)
    options = BuildOptions(
        encoder=encoder,
        faiss_type=faiss_type,
        fp16=fp16,
        batch_size=batch_size,
        device=device,
        encoder_dtype=encoder_dtype,
    )
    module.check_options(options)
    if batch_size < 1:
        raise RetrieverError(f"--batch-size must be >= 1 (got {batch_size})")
    corpus, out = check_corpus_file(corpus).resolve(), Path(out).expanduser()
    check_out_dir(out, corpus, force)
    progress = progress or (lambda phase, done, total: None)

    prepared = module.prepare(options, progress)
    estimate = estimate_memory(corpus, kind, options, prepared)
    if on_estimate is not None:
        on_estimate(estimate)
    check_memory(estimate, kind, options, max_memory_gb)

    out.parent.mkdir(parents=True, exist_ok=True)
    remove_abandoned_builds(out)
    # os.mkdir applies the umask itself: the index gets the usual permissions (mkdtemp would make it 0700)
    tmp, _ = _create_unique(out.parent, f".{out.name}.partial-", "", lambda path: os.mkdir(path, 0o777))
    try:
        (tmp / BUILDER).write_text(f"{socket.gethostname()} {os.getpid()}\n")
        start = time.perf_counter()
        fingerprint = corpus_fingerprint(corpus)
        n, details = module.build(corpus, tmp, prepared, options, estimate.passages, progress)
        fingerprint["passages"] = n
        meta = {
            "format": INDEX_FORMAT,
            "format_version": INDEX_FORMAT_VERSION,
            "kind": kind,
            **details,
            "corpus": fingerprint,
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "build_seconds": round(time.perf_counter() - start, 3),
            "inspo_version": package_version(),
        }
        (tmp / BUILDER).unlink()
        _atomic_write_json(tmp / "index.json", meta)  # last: a directory with index.json is a complete index
        check_out_dir(out, corpus, force)  # again: what is at `out` now is what gets replaced
        _move_into_place(tmp, out)
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if (reason := _disk_full(e)) is not None:
            raise RetrieverError(
                f"--out {out}: could not write the index ({reason}); free some space there or choose "
                "another --out (the partial build was removed)"
            ) from None
        raise
    return meta


def _disk_full(error: BaseException) -> str | None:
    """Why a build's write ran out of space, or None for any other error (a read error of the corpus names its file
    and is none of these): ENOSPC or a quota; numpy's short write ("N requested and M written"), which has no errno;
    faiss's RuntimeError ("write error in F: ... (No space left on device)")."""
    full = os.strerror(errno.ENOSPC)
    if isinstance(error, OSError):
        if error.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
            return error.strerror or full
        return "a write was cut short" if error.errno is None and " requested and " in str(error) else None
    return full if isinstance(error, RuntimeError) and full in str(error) else None


BUILDER = ".builder"  # in a build's temporary directory: "<host> <pid>" of the process building it


def remove_abandoned_builds(out: Path) -> list[Path]:
    """Remove the temporary directories (`.<name>.partial-*`) that killed builds of `out` left beside it: those
    whose builder process on this machine is gone, or that never got as far as naming their builder and are over
    an hour old. A build still running, here or on another machine sharing the disk, is left alone."""
    removed = []
    for tmp in out.parent.glob(f".{out.name}.partial-*"):
        try:
            host, pid = (tmp / BUILDER).read_text().split()
            abandoned = host == socket.gethostname() and not process_alive(int(pid))
        except FileNotFoundError:
            abandoned = time.time() - tmp.stat().st_mtime > 3600
        except (OSError, ValueError):
            abandoned = False
        if abandoned:
            shutil.rmtree(tmp, ignore_errors=True)
            removed.append(tmp)
    return removed


def process_alive(pid: int) -> bool:
    """Whether process `pid` runs on this host (one of another user counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def package_version() -> str:
    """The installed inspo distribution's version (recorded in index.json), or "unknown" when not installed."""
    try:
        return metadata.version("inspo")
    except metadata.PackageNotFoundError:
        return "unknown"


def _create_unique(parent: Path, prefix: str, suffix: str, create: Callable[[Path], _T]) -> tuple[Path, _T]:
    """`create(path)` for a new random name `parent/prefix…suffix` (it must raise FileExistsError if taken)."""
    for _ in range(100):
        path = parent / f"{prefix}{secrets.token_hex(6)}{suffix}"
        try:
            return path, create(path)
        except FileExistsError:
            continue
    raise FileExistsError(f"no unused temporary name {prefix}*{suffix} in {parent}")


def _atomic_write_json(path: Path, obj: Any) -> None:
    """Write `obj` as indented JSON to `path`: a temporary file in the same directory, fsync'd, then renamed over
    `path`, so that `path` is either absent (or the old file) or complete. The temporary file is created with
    mode 0666, which the OS reduces by the umask: the usual permissions, without reading the umask."""
    data = (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    tmp, fd = _create_unique(path.parent, f".{path.name}.", ".tmp", lambda p: os.open(p, flags, 0o666))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _move_into_place(tmp: Path, out: Path) -> None:
    old = None
    if out.exists():  # checked by check_out_dir: empty, or an index being replaced with --force
        old = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.old-"))
        os.rename(out, old / "index")
    os.rename(tmp, out)
    if old is not None:
        shutil.rmtree(old)


INDEX_JSON_BYTES = 16 << 20  # index.json is a kilobyte
META_SHAPE = {
    "format": str,
    "format_version": int,
    "kind": str,  # every kind's; a kind's module adds its META_SHAPE
    "corpus": {"path": str, "bytes": NonNegative, "sha256_first_mib": str, "passages": NonNegative},
}


def read_index_meta(index_dir: str | os.PathLike) -> dict:
    """index.json, checked against what opening the index reads from it (`META_SHAPE` and the kind's own)."""
    index_dir = Path(index_dir)
    path = index_dir / "index.json"
    if not path.exists():
        raise RetrieverError(
            f"{index_dir} is not an inspo index (no index.json); build one with "
            f"`inspo index --corpus CORPUS --out {index_dir}`"
        )
    rebuild = f"rebuild it with `inspo index --corpus CORPUS --out {index_dir} --force`"
    meta = read_json_object(path, "index description", INDEX_JSON_BYTES, rebuild)
    if meta.get("format") != INDEX_FORMAT or meta.get("kind") not in KINDS:
        raise RetrieverError(
            f"{path}: not an inspo index description (format {meta.get('format')!r}, kind "
            f"{meta.get('kind')!r}); rebuild it with `inspo index`"
        )
    if type(meta.get("format_version")) is int and meta["format_version"] > INDEX_FORMAT_VERSION:
        raise RetrieverError(
            f"{path}: index format {meta['format_version']} is newer than this inspo understands "
            f"({INDEX_FORMAT_VERSION}); upgrade inspo or rebuild the index"
        )
    shape = {**META_SHAPE, **getattr(kind_module(meta["kind"]), "META_SHAPE", {})}
    if (problem := shape_problem(meta, shape)) is not None:
        raise RetrieverError(f"{path}: {problem}; {rebuild}")
    return meta


def open_index(
    index_dir: str | os.PathLike,
    *,
    corpus: str | os.PathLike | None = None,
    device: str = "auto",
    gpu: bool = True,
    n_threads: int | None = None,
    nprobe: int | None = None,
    ef_search: int | None = None,
    mmap: bool = False,
    encoder=None,
):
    """A `Retriever` for an index directory; `corpus` points at a corpus that moved since the build.

    Dense: `device` encodes queries (cpu, cuda, auto), `gpu` lets faiss search on GPUs when it has them,
    `nprobe`/`ef_search` override ivfpq/hnsw search breadth, `encoder` reuses a loaded `Encoder`.
    BM25: `n_threads` for bm25s (None: by batch size), `mmap` memory-maps the score arrays.
    """
    index_dir = Path(index_dir).expanduser().resolve()
    meta = read_index_meta(index_dir)
    options = OpenOptions(
        corpus=corpus,
        device=device,
        gpu=gpu,
        n_threads=n_threads,
        nprobe=nprobe,
        ef_search=ef_search,
        mmap=mmap,
        encoder=encoder,
    )
    return kind_module(meta["kind"]).load(index_dir, meta, options)
