"""`inspo data world|fetch|list`: make the synthetic search world, get the paper's benchmarks, see what is here.

inspo data world --seed 0 --size default --out data/world
inspo data fetch all                             # online: FlashRAG test sets from the Hugging Face hub
inspo data fetch nq_hotpotqa                     # online: the NQ+HotpotQA training mixture
inspo data list                                  # which benchmarks are available locally
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from inspo_cli.console import console, progress_bar, user_errors
from inspo_cli.errors import InspoError
from inspo_cli.files import check_can_create
from inspo_cli.jsonio import read_json

app = typer.Typer(help="Generate the synthetic search world and manage benchmark data.", no_args_is_help=True)

DEFAULT_BENCHMARKS_DIR = Path("data/benchmarks")
DEFAULT_WORLD_DIR = Path("data/world")


def _check_overwrite(out: Path, seed: int, size: str, force: bool, arithmetic_share: float = 0.0) -> None:
    """Refuse to replace a different world unless --force, and, even with it, files of a world's names (corpus.jsonl,
    train.jsonl, ...) that are not a world's: the world is written over them, and they may be the user's own data."""
    from inspo_cli.world import WORLD_FILES

    if not out.exists():
        return
    if not out.is_dir():
        raise InspoError(f"--out {out} is a file; choose a directory")
    meta = _world_manifest(out)
    if meta is not None:
        if force or (meta["seed"], meta["size"], meta.get("arithmetic_share", 0.0)) == (seed, size, arithmetic_share):
            return  # the same world again gives identical bytes; --force replaces a world
        share = f", arithmetic share {meta['arithmetic_share']}" if meta.get("arithmetic_share") else ""
        raise InspoError(
            f"--out {out} holds another world (seed {meta['seed']}, size {meta['size']}{share}); "
            "choose another --out or pass --force to replace it"
        )
    if clash := [name for name in WORLD_FILES if os.path.lexists(out / name)]:
        raise InspoError(
            f"--out {out} holds {', '.join(clash)} but no world (no world.json of `inspo data world`), "
            "so not even --force writes over them; choose another --out (files an interrupted "
            "`inspo data world` left: delete them yourself)"
        )
    if any(out.iterdir()) and not force:
        raise InspoError(
            f"--out {out} is not empty and holds no world; choose an empty or new directory or pass --force"
        )


def _world_manifest(out: Path) -> dict | None:
    """world.json as `inspo data world` writes it, or None for anything else (absent, damaged, some other file)."""
    from inspo_cli.world import GENERATOR

    path = out / "world.json"
    if not path.is_file():  # a FIFO is never opened
        return None
    try:
        meta = read_json(path, {"generator": str, "seed": int, "size": str, "*": object}, "")
    except InspoError:
        return None
    return meta if meta["generator"] == GENERATOR else None


@app.command("world")
@user_errors
def world(
    out: Annotated[
        Path, typer.Option("--out", help="Directory to write corpus.jsonl, train/dev/test.jsonl and world.json.")
    ],
    seed: Annotated[int, typer.Option(help="Random seed; the same seed and size give identical files.")] = 0,
    size: Annotated[str, typer.Option(help="Preset: tiny, small, default or large.")] = "default",
    force: Annotated[bool, typer.Option(help="Replace a different world already in --out.")] = False,
    arithmetic_share: Annotated[
        float,
        typer.Option(
            help="Share of every split's questions that are arithmetic "
            "(two searched years and a subtraction, for an agent with "
            "the calculator tool), 0 to 0.5; 0 (the default) makes the "
            "world exactly as before the option."
        ),
    ] = 0.0,
) -> None:
    """Generate a fictional multi-hop QA world whose facts exist only in its own corpus."""
    from inspo_cli.world import WORLD_SIZES, generate_world, write_world

    if size not in WORLD_SIZES:
        raise InspoError(f"--size {size!r} is not a preset; use one of {', '.join(WORLD_SIZES)}")
    if not 0 <= seed < 2**32:  # -1 silently made the world of seed 1
        raise InspoError(f"--seed {seed}: use 0 .. 2**32 - 1")
    if not 0.0 <= arithmetic_share <= 0.5:  # NaN fails both
        raise InspoError(f"--arithmetic-share {arithmetic_share}: use a value from 0 to 0.5")
    _check_overwrite(out, seed, size, force, arithmetic_share)
    check_can_create(out, "--out")  # before the world is generated
    start = time.perf_counter()
    with progress_bar(transient=True) as progress:
        task = progress.add_task("generating world", total=None)
        world_data = generate_world(
            seed=seed,
            size=size,
            arithmetic_share=arithmetic_share,
            progress=lambda done, total: progress.update(task, completed=done, total=total),
        )
        progress.update(task, description="writing files")
        meta = write_world(world_data, out)
    elapsed = time.perf_counter() - start

    table = Table(title=f"world seed={seed} size={size}", show_header=True)
    table.add_column("what")
    table.add_column("count", justify="right")
    table.add_row("passages", f"{meta['passages']:,}")
    for split, count in meta["questions"].items():
        table.add_row(f"{split} questions", f"{count:,}")
    for qtype, count in meta["question_types"].items():
        table.add_row(f"  type {qtype}", f"{count:,}")
    console.print(table)
    console.print(f"wrote {out}/ in {elapsed:.1f}s")


@app.command("fetch")
@user_errors
def fetch(
    benchmarks: Annotated[
        str,
        typer.Argument(
            help="Comma-separated names (hotpotqa,2wikimultihopqa,musique,bamboogle,"
            "nq,triviaqa,popqa), 'all' for the seven test sets, or "
            "'nq_hotpotqa' for the training mixture."
        ),
    ],
    split: Annotated[str | None, typer.Option(help="Split to fetch; default: the split Search-R1 tests on.")] = None,
    out: Annotated[Path, typer.Option("--out", help="Where local benchmark files live.")] = DEFAULT_BENCHMARKS_DIR,
) -> None:
    """Download FlashRAG benchmark files from the Hugging Face hub into OUT/<name>/<split>.jsonl."""
    from inspo_cli.benchmark_fetch import fetch_benchmarks

    progress, task = progress_bar(), None

    def report(done: int, total: int) -> None:  # the bar starts with the first download, not before a refusal
        nonlocal task
        if task is None:
            progress.start()
            task = progress.add_task("fetching", total=total)
        progress.update(task, completed=done, total=total)

    try:
        paths = fetch_benchmarks(benchmarks, splits=[split] if split else None, data_dir=out, progress=report)
    finally:
        progress.stop()
    for path in paths:
        console.print(f"wrote {path}")


@app.command("list")
@user_errors
def list_data(
    data_dir: Annotated[Path, typer.Option(help="Where local benchmark files live.")] = DEFAULT_BENCHMARKS_DIR,
    world_dir: Annotated[Path, typer.Option(help="The synthetic world to report on.")] = DEFAULT_WORLD_DIR,
) -> None:
    """Show which benchmarks and splits are available locally, and where missing ones belong."""
    from inspo_cli.benchmark_fetch import benchmark_status
    from inspo_cli.config import resolve_path

    data_dir = resolve_path(str(data_dir)) or data_dir
    world_dir = resolve_path(str(world_dir)) or world_dir
    table = Table(title="benchmarks")
    for column in ("benchmark", "split", "rows", "full size", "file"):
        table.add_column(column, justify="right" if column in ("rows", "full size") else "left")
    for row in benchmark_status(data_dir, world_dir):
        if row["path"] is None:
            rows, where = "-", f"[dim]missing: {row['expected_path']}[/]"
        else:
            rows = f"{row['rows']:,}" if row["rows"] is not None else "[red]unreadable[/]"
            where = str(row["path"])
        full = f"{row['expected_rows']:,}" if row["expected_rows"] else ""
        table.add_row(row["display_name"], row["split"], rows, full, where)
    console.print(table)
