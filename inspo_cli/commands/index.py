"""`inspo index`: build an index of a Search-R1 corpus, of any kind in `retriever.kinds` (BM25, dense, Lucene).

    inspo index --corpus data/world/corpus.jsonl --out indexes/world-bm25                    # bm25s, seconds
    inspo index --corpus data/world/corpus.jsonl --kind dense --out indexes/world-minilm    # packaged MiniLM
    inspo index --corpus wiki18.jsonl --kind dense --encoder intfloat/e5-base-v2 --faiss flat --out indexes/wiki18-e5
    inspo index --recipe recipes/demo.yaml        # corpus, kind and --out from the recipe's retriever section

The memory estimate is printed before anything heavy runs, and the build is refused when it exceeds
--max-memory-gb (default: 80% of available RAM). The result is a self-describing directory (index.json) that
`inspo serve-retriever --index DIR`, recipes (`retriever.index: DIR`) and `open_retriever(DIR)` use directly.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from inspo_cli.console import console, progress_bar, user_errors
from inspo_cli.errors import InspoError
from inspo_cli.files import check_can_create
from inspo_cli.registry import RETRIEVER_KINDS

DEFAULT_KIND = "bm25"
DEFAULT_FAISS = "flat"


def _recipe_defaults(recipe: Path, overrides: list[str]) -> dict:
    """corpus, kind, out, encoder, faiss and fp16 from the recipe's `retriever` section."""
    from inspo_cli.config import load_recipe, resolve_path

    section = load_recipe(recipe, overrides, check_paths=False).retriever  # the index is what we are building
    corpus = resolve_path(section.corpus) or Path(section.corpus)
    return {
        "corpus": corpus,
        "out": Path(section.index) if section.index else None,
        "kind": section.kind if section.kind != "http" else None,
        "encoder": section.encoder,
        "faiss": section.faiss,
        "fp16": section.fp16,
    }


def _dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


@user_errors
def index(
    corpus: Annotated[Path | None, typer.Option(help='Search-R1 corpus JSONL: {"id", "contents"} per line.')] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Index directory to create.")] = None,
    kind: Annotated[str | None, typer.Option(help=f"Index kind: {RETRIEVER_KINDS.choices()}.")] = None,
    encoder: Annotated[
        str | None,
        typer.Option(
            help="kind=dense: sentence encoder, a hub id or local directory "
            "(e.g. intfloat/e5-base-v2); default: the packaged "
            "all-MiniLM-L6-v2."
        ),
    ] = None,
    faiss: Annotated[str | None, typer.Option("--faiss", help="kind=dense: flat (exact), hnsw or ivfpq.")] = None,
    fp16: Annotated[
        bool | None,
        typer.Option("--fp16/--no-fp16", help="kind=dense: store vectors as float16 (half the disk and RAM)."),
    ] = None,
    batch_size: Annotated[int, typer.Option(help="kind=dense: passages per encoder batch.")] = 64,
    device: Annotated[str, typer.Option(help="kind=dense: where to encode: cpu, cuda or auto.")] = "auto",
    encoder_dtype: Annotated[
        str,
        typer.Option(
            help="kind=dense: encoder precision: auto (float16 on CUDA, float32 on CPU), float32, float16 or bfloat16."
        ),
    ] = "auto",
    max_memory_gb: Annotated[
        float | None,
        typer.Option(help="Refuse to build when the estimate exceeds this; default: 80% of available RAM."),
    ] = None,
    force: Annotated[bool, typer.Option(help="Replace an existing index in --out.")] = False,
    recipe: Annotated[Path | None, typer.Option(help="Take defaults from this recipe's retriever section.")] = None,
    overrides: Annotated[
        list[str] | None,
        typer.Option("--set", help="Override a recipe field, e.g. --set retriever.corpus=wiki18.jsonl."),
    ] = None,
) -> None:
    """Build an index of a Search-R1 corpus, of any --kind, into a self-describing directory."""
    from retriever.index import build_index

    defaults = _recipe_defaults(recipe, overrides or []) if recipe is not None else {}
    if overrides and recipe is None:
        raise InspoError("--set needs --recipe; pass the options directly instead")
    corpus = corpus or defaults.get("corpus")
    out = out or defaults.get("out")
    kind = kind or defaults.get("kind") or DEFAULT_KIND
    if corpus is None:
        raise InspoError(
            "--corpus is required (or --recipe with retriever.corpus); e.g. --corpus data/world/corpus.jsonl"
        )
    if out is None:
        raise InspoError("--out is required (or --recipe with retriever.index); e.g. --out indexes/world-bm25")
    faiss_type = faiss or defaults.get("faiss") or DEFAULT_FAISS
    fp16 = fp16 if fp16 is not None else bool(defaults.get("fp16", False))
    if kind != "dense" and (encoder or faiss or fp16):
        raise InspoError(f"--encoder, --faiss and --fp16 apply to --kind dense, not --kind {kind}")
    check_can_create(out, "--out")  # before the build, not after it

    start = time.perf_counter()
    with progress_bar(transient=True) as progress:
        task = progress.add_task("preparing", total=None)

        def report(phase: str, done: int, total: int | None) -> None:
            progress.update(task, description=phase, completed=done, total=total)

        meta = build_index(
            corpus,
            out,
            kind,
            encoder=encoder or defaults.get("encoder"),
            faiss_type=faiss_type,
            fp16=fp16,
            batch_size=batch_size,
            device=device,
            encoder_dtype=encoder_dtype,
            max_memory_gb=max_memory_gb,
            force=force,
            on_estimate=lambda e: console.print(
                f"corpus {corpus}: ~{e.passages:,} passages; memory needed to build the {kind} index: {e}"
            ),
            progress=report,
        )
    elapsed = time.perf_counter() - start

    table = Table(title=f"index {out}", show_header=False)
    table.add_column("what")
    table.add_column("value", justify="right")
    table.add_row(
        "kind",
        kind
        + (
            f" ({meta['faiss']['type']}{', fp16' if meta['faiss']['fp16'] else ''}, "
            f"{meta['encoder']['name']}, dim {meta['encoder']['dim']})"
            if kind == "dense"
            else ""
        ),
    )
    table.add_row("passages", f"{meta['corpus']['passages']:,}")
    table.add_row("time", f"{elapsed:.1f}s")
    if kind == "dense":
        table.add_row(
            "encoding",
            f"{meta['corpus']['passages'] / max(elapsed, 1e-9):,.0f} passages/s overall "
            f"({meta['encoder'].get('device', '?')}, {meta['encoder'].get('dtype', '?')})",
        )
    table.add_row("size on disk", f"{_dir_size(Path(out)) / 1e6:,.1f} MB")
    console.print(table)
