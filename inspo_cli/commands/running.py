"""What `inspo train` and `inspo evolve` share: start (or resume) a run through the run API, say where it is, and
turn Ctrl-C into the command that continues it, or into "start it again" for a run removed because it had written
nothing yet (exit code 130)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import typer

from inspo_cli.console import console, err_console

RESUMES_FROM = {"train": "the last checkpoint", "evolve": "the last step"}


def start_run(kind: str, config, recipe_path, resume: Path | None, output_dir: Path | None, device: str | None):
    """`experiment.run(kind, ...)`, the run directory printed as soon as it exists; the finished `RunDir`."""
    from inspo_cli import experiment

    try:
        return experiment.run(
            kind,
            config,
            recipe_path=recipe_path,
            resume=resume,
            output_dir=output_dir,
            command=sys.argv,
            device=device,
            on_start=lambda d: console.print(f"run directory: {d}", soft_wrap=True),
        )
    except experiment.RunInterrupted as stop:
        again = (
            f"continue from {RESUMES_FROM[kind]} with: inspo {kind} --resume {shlex.quote(str(stop.run))}"
            if stop.kept
            else f"it had written nothing to continue from, so {stop.run} was removed; start it again"
        )
        err_console.print(f"interrupted; {again}", markup=False, soft_wrap=True)
        raise typer.Exit(130) from None
