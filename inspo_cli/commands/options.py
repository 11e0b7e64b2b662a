"""Options several commands take, declared once so that their flag and help read the same in each.

def train(overrides: SetOption = None, name: RunNameOption = None, device: DeviceOption = None, ...)
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from inspo_cli.errors import InspoError

SetOption = Annotated[
    list[str] | None,
    typer.Option(
        "--set", help="Override a recipe field, e.g. --set training.learning_rate=1e-6 (repeatable; values are YAML)."
    ),
]
OutputDirOption = Annotated[
    Path | None, typer.Option(help="Where new run directories go (default: run.output_dir, i.e. runs/).")
]
RunNameOption = Annotated[str | None, typer.Option(help="Run directory name (default: recipe name + timestamp).")]
DeviceOption = Annotated[str | None, typer.Option(help="cpu or cuda (default: cuda when available).")]
ReplayOptimizerOption = Annotated[
    Path | None,
    typer.Option(
        help="Answer every optimizer call from a record (a run's optimizer_calls.jsonl, or a run or ablation "
        "directory): the run evolves as recorded, with no key or server (optimizer.replay)."
    ),
]


def run_flags(name: str | None, replay_optimizer: Path | None) -> dict[str, tuple[str, object]]:
    """The recipe keys `--name` and `--replay-optimizer` set (`load_recipe(flags=...)`; None: not given)."""
    return {
        "--name": ("run.name", name),
        "--replay-optimizer": ("optimizer.replay", replay_optimizer and str(replay_optimizer)),
    }


def refuse_with_resume(given: dict[str, object]) -> None:
    """--resume continues a run with its own recipe: flags that would change it (flag name -> value) are refused."""
    flags = [flag for flag, value in given.items() if value]
    if flags:
        raise InspoError(f"--resume continues a run with its own recipe; drop {', '.join(flags)}")
