"""Retrieval for inspo: the corpus format shared with Search-R1, index building, and search.

A package on its own: it never imports `inspo_cli` (which builds on it), so a retrieval node can run it, and
other code can use it, without the rest of inspo. Its user-facing errors are `RetrieverError`s.

    from retriever import open_retriever
    retriever = open_retriever("indexes/world-bm25")           # an index directory built by `inspo index`
    retriever = open_retriever("data/world/corpus.jsonl")      # BM25 built in memory (cached per process)
    retriever = open_retriever("http://127.0.0.1:8000/retrieve", timeout_s=30)   # a Search-R1 server
    retriever.search(["who founded Hokin Works?"], k=3)        # -> [[Passage, ...]], best first

Modules: `corpus` (the row format), `search` (the `Retriever` Protocol), `errors` (`RetrieverError`), `store`
(streaming the corpus, reading hits by byte offset), `kinds` (the registry of index kinds), one module per kind:
`bm25` (bm25s), `dense` (encoder + faiss), `lucene` (pyserini, optional); `index` (building and opening index
directories), `client` and `server` (HTTP). Importing the package is cheap: the names below that live in
`index` or `bm25` are imported on first use, and no engine (numpy, bm25s, faiss, torch) is loaded before then.
"""

from __future__ import annotations

import importlib
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from retriever.client import HTTPRetriever
from retriever.corpus import Passage
from retriever.errors import RetrieverError
from retriever.kinds import KINDS
from retriever.search import Retriever

if TYPE_CHECKING:
    from retriever.bm25 import bm25_in_memory
    from retriever.index import MemoryEstimate, build_index, open_index, read_index_meta

__all__ = [
    "KINDS",
    "MemoryEstimate",
    "Passage",
    "Retriever",
    "RetrieverError",
    "bm25_in_memory",
    "build_index",
    "check_spec",
    "open_index",
    "open_retriever",
    "read_index_meta",
]

_LAZY = {
    "MemoryEstimate": "retriever.index",
    "build_index": "retriever.index",
    "open_index": "retriever.index",
    "read_index_meta": "retriever.index",
    "bm25_in_memory": "retriever.bm25",
}
_IN_MEMORY: dict[tuple, Retriever] = {}
_IN_MEMORY_LOCK = threading.Lock()


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'retriever' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


def open_retriever(spec: str | os.PathLike, **options) -> Retriever:
    """A `Retriever` for `spec`: an index directory, a corpus .jsonl (in-memory BM25), or an http(s):// URL.

    `options` go to the backend: for an index `corpus=` (a moved corpus), `device=`, `gpu=`, `n_threads=`,
    `nprobe=`, `ef_search=`, `mmap=`; for a corpus `n_threads=`; for a URL `timeout_s=` and the client's others.
    """
    text = str(spec)
    kind = check_spec(text)
    if kind == "url":
        return HTTPRetriever(text, **options)
    from retriever.index import open_index  # numpy and an index kind's library: lazy, as _LAZY above

    path = Path(text).expanduser()
    if kind == "index":
        return open_index(path if path.is_dir() else path.parent, **options)
    # kind == "corpus"
    unknown = set(options) - {"n_threads"}
    if unknown:
        raise RetrieverError(
            f"open_retriever({text!r}): option(s) {', '.join(sorted(unknown))} do not apply to "
            "an in-memory BM25 corpus; only n_threads does"
        )
    from retriever.bm25 import bm25_in_memory  # numpy: lazy, as _LAZY above

    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns, options.get("n_threads"))
    with _IN_MEMORY_LOCK:  # one build per corpus per process, even when threads ask at once
        if key not in _IN_MEMORY:
            _IN_MEMORY[key] = bm25_in_memory(path, n_threads=options.get("n_threads"))
        return _IN_MEMORY[key]


def check_spec(spec: str | os.PathLike, what: str = "retriever") -> str:
    """What `open_retriever(spec)` will open: "url", "index" or "corpus", told without opening anything, so a command
    can refuse a bad --retriever before it loads a model; `RetrieverError` (one line, naming `what`) for anything
    else."""
    text = str(spec)
    fix = "give an index directory (`inspo index --out DIR`), a corpus .jsonl or http://HOST:PORT/retrieve"
    if "://" in text:
        from urllib.parse import urlsplit

        if not text.startswith(("http://", "https://")) or not urlsplit(text).hostname:
            raise RetrieverError(f"{what} {text!r}: not an http(s)://HOST URL; {fix}")
        return "url"
    if not text.strip():
        raise RetrieverError(f"{what} is empty; {fix}")
    path = Path(text).expanduser()
    if path.is_dir():
        if not (path / "index.json").is_file():
            raise RetrieverError(f"{what} {text!r}: a directory without index.json, so not an inspo index; {fix}")
        return "index"
    if path.is_file():
        return "index" if path.name == "index.json" else "corpus"
    problem = "does not exist" if not os.path.lexists(path) else "is a FIFO, a socket or a device, not a file"
    raise RetrieverError(
        f"{what} {text!r} {problem}: neither an index directory, a corpus .jsonl file nor an http(s):// URL; {fix}"
    )
