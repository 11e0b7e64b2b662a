"""Retrieval for inspo: the corpus format shared with Search-R1, index building, and search.

Kept as a top-level package, separate from `inspo_cli`, so a retrieval node can run it on its own.

    from retriever import open_retriever
    retriever = open_retriever("indexes/world-bm25")           # an index directory built by `inspo index`
    retriever = open_retriever("data/world/corpus.jsonl")      # BM25 built in memory (cached per process)
    retriever = open_retriever("http://127.0.0.1:8000/retrieve", timeout_s=30)   # a Search-R1 server
    retriever.search(["who founded Hokin Works?"], k=3)        # -> [[Passage, ...]], best first

Modules: `corpus` (the row format), `search` (the `Retriever` Protocol), `store` (streaming the corpus,
reading hits by byte offset), `bm25` (bm25s), `dense` (encoder + faiss), `lucene` (pyserini, optional),
`index` (building and opening index directories).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from inspo_cli.errors import InspoError
from retriever.corpus import Passage
from retriever.index import KINDS, MemoryEstimate, bm25_in_memory, build_index, open_index, read_index_meta
from retriever.search import Retriever

__all__ = ["KINDS", "MemoryEstimate", "Passage", "Retriever", "build_index", "open_from_config", "open_index",
           "open_retriever", "read_index_meta"]

_IN_MEMORY: dict[tuple, Retriever] = {}
_IN_MEMORY_LOCK = threading.Lock()


def open_retriever(spec: str | os.PathLike, **options) -> Retriever:
    """A `Retriever` for `spec`: an index directory, a corpus .jsonl (in-memory BM25), or an http(s):// URL.

    `options` go to the backend: for an index `corpus=` (a moved corpus), `device=`, `gpu=`, `n_threads=`,
    `nprobe=`, `ef_search=`, `mmap=`; for a corpus `n_threads=`; for a URL `timeout_s=` and the client's others.
    """
    text = str(spec)
    if text.startswith(("http://", "https://")):
        from retriever.client import HTTPRetriever

        return HTTPRetriever(text, **options)
    path = Path(text).expanduser()
    if path.is_dir():
        return open_index(path, **options)
    if path.is_file():
        if (path.parent / "index.json").is_file() and path.name == "index.json":
            return open_index(path.parent, **options)
        unknown = set(options) - {"n_threads"}
        if unknown:
            raise InspoError(f"open_retriever({text!r}): option(s) {', '.join(sorted(unknown))} do not apply to an "
                             "in-memory BM25 corpus; only n_threads does")
        stat = path.stat()
        key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns, options.get("n_threads"))
        with _IN_MEMORY_LOCK:  # one build per corpus per process, even when threads ask at once
            if key not in _IN_MEMORY:
                _IN_MEMORY[key] = bm25_in_memory(path, n_threads=options.get("n_threads"))
            return _IN_MEMORY[key]
    raise InspoError(f"retriever {text!r} is neither an index directory, a corpus .jsonl file nor an http(s):// URL; "
                     f"build an index with `inspo index --corpus CORPUS --out DIR`, or check the path")


def open_from_config(config) -> Retriever:
    """The retriever a recipe's `retriever` section describes: its server URL, its index, or BM25 over its corpus."""
    from inspo_cli.config import resolve_path

    if config.kind == "http" or config.url:
        return open_retriever(config.url, timeout_s=config.timeout_s)
    spec = config.index if config.index else config.corpus
    return open_retriever(resolve_path(spec) or spec)
