"""The registry of index kinds: each kind is named once, here, and implemented by one module.

    KINDS["dense"].summary              # "encoder + faiss"   (no import of the module: cheap)
    kind_module("dense").build(...)     # the module is imported on first use

Everything that depends on the kind looks it up here: building an index (`index.build_index`), its memory
estimate, opening one (`index.open_index`), checking an index.json, `inspo index --kind` and the recipe's
`retriever.kind` (validated against these names plus "http"; inspo lists, documents and checks them through
`inspo_cli.registry.RETRIEVER_KINDS`). Adding a kind is one new module plus one line in `KINDS`. This module
imports only the standard library, so anything may import it cheaply; a kind's module is imported only when that
kind is used, and imports its engine (faiss, bm25s, pyserini, torch) only inside the functions that need it.

A kind module provides these functions (see `retriever.bm25` for a complete one):

    check_options(options: BuildOptions) -> None
        Cheap checks of the build options, before the corpus is read or anything is loaded.
    prepare(options: BuildOptions, progress: Progress) -> object
        Load what the build needs (an encoder, a Java runtime check ...); the result is handed to
        the others.
    estimate(corpus: Path, passages: int, prepared, options: BuildOptions) -> tuple[int, str]
        Peak bytes of memory the build needs for about `passages` passages, and how that number
        is made up.
    build(corpus: Path, out_dir: Path, prepared, options: BuildOptions, passages: int,
          progress: Progress) -> tuple[int, dict]
        Write the index files into `out_dir` (plus `offsets.npy`, see `store.save_offsets`, if hits
        are read back from the corpus); return the passage count and the kind's own entries for
        index.json.
    load(index_dir: Path, meta: dict, options: OpenOptions) -> Retriever
        Open a built index (`meta` is its index.json).
    memory_advice(options: BuildOptions) -> str | None        (optional)
        What to change when the estimate is over the limit; default: "a machine with more memory".
    FILES: tuple[str, ...]                                    (optional)
        The names `build` writes at the top of `out_dir` (index.json and offsets.npy aside):
        `inspo index --force` replaces a directory holding nothing else.
    META_SHAPE: dict                                          (optional)
        What `load` reads of its own entries in index.json, checked before it runs
        (`retriever.checked`).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, NamedTuple

from retriever.errors import RetrieverError

Progress = Callable[[str, int, int | None], None]  # (phase, done, total or None when unknown)


class Kind(NamedTuple):
    module: str  # imported on first use
    summary: str  # a few words for help texts
    origin: str = "beyond"  # for inspo's docs (inspo_cli.registry.ORIGINS): paper, search-r1 or beyond (the paper)


KINDS: dict[str, Kind] = {
    "bm25": Kind("retriever.bm25", "bm25s, the default"),
    "dense": Kind("retriever.dense", "sentence encoder + faiss", "paper"),  # the paper's E5 + faiss
    "lucene": Kind("retriever.lucene", "pyserini, needs the lucene extra", "search-r1"),  # Search-R1's BM25
}


@dataclass(frozen=True)
class BuildOptions:
    """The build options of every kind; each kind reads (and checks) the ones that apply to it."""

    encoder: Any = None  # dense: a hub id, a local directory, None (the packaged MiniLM) or a loaded Encoder
    faiss_type: str = "flat"  # dense
    fp16: bool = False  # dense
    batch_size: int = 64  # dense: passages per encoder batch
    device: str = "auto"  # dense: where to encode
    encoder_dtype: str = "auto"  # dense


@dataclass(frozen=True)
class OpenOptions:
    """The options of `open_index`; each kind uses the ones that apply to it and ignores the others."""

    corpus: str | os.PathLike | None = None  # a corpus that moved since the build
    device: str = "auto"  # dense: where to encode queries
    gpu: bool = True  # dense: let faiss search on GPUs when there are any
    n_threads: int | None = None  # bm25, lucene
    nprobe: int | None = None  # dense ivfpq
    ef_search: int | None = None  # dense hnsw
    mmap: bool = False  # bm25, dense: memory-map the index files
    encoder: Any = None  # dense: reuse a loaded Encoder


def kind_module(name: str) -> ModuleType:
    """The module implementing kind `name`; a `RetrieverError` listing the kinds when there is none."""
    kind = KINDS.get(name)
    if kind is None:
        raise RetrieverError(f"--kind {name!r} is not one of {', '.join(KINDS)}")
    return importlib.import_module(kind.module)
