"""Experiment trackers beside metrics.jsonl and TensorBoard (`run.report_to`): Weights & Biases.

A training run hands `report_to` to TRL (HF's `WandbCallback` then logs every step's metrics, the population's and
the periodic evaluations' included, with the trainer's config); `inspo evolve`, which has no trainer, logs its
step rows through `log_step_row`. Both name the W&B run after the run directory, keep W&B's files inside it (`wandb/`)
and give it a stable id, so a resumed run goes on in the same W&B run. Offline mode (`WANDB_MODE=offline`, sync
later with `wandb sync`) needs no key; online needs `WANDB_API_KEY` (or `wandb login`), checked before the run
starts. The key is never written anywhere by inspo.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path

from inspo_cli.config import Recipe
from inspo_cli.errors import InspoError

WANDB_OFFLINE_MODES = ("offline", "disabled", "dryrun")


def uses_wandb(recipe: Recipe) -> bool:
    return "wandb" in recipe.run.report_to


def check_wandb(recipe: Recipe) -> None:
    """Refuse before anything starts what would fail at the first step: wandb missing, or online without a key."""
    if not uses_wandb(recipe):
        return
    if importlib.util.find_spec("wandb") is None:
        raise InspoError(
            "run.report_to lists wandb but the wandb package is not installed; pip install -e "
            '".[wandb]", or remove wandb from run.report_to'
        )
    mode = os.environ.get("WANDB_MODE", "").lower()
    if mode in WANDB_OFFLINE_MODES or os.environ.get("WANDB_API_KEY", "").strip() or _netrc_has_wandb():
        return
    raise InspoError(
        "run.report_to lists wandb but no W&B key is set; export WANDB_API_KEY=<your key> (or run "
        "`wandb login`), or export WANDB_MODE=offline and upload later with `wandb sync`"
    )


def _netrc_has_wandb() -> bool:
    import netrc

    try:
        return (
            netrc.netrc().authenticators(
                os.environ.get("WANDB_BASE_URL", "api.wandb.ai").removeprefix("https://").removeprefix("http://")
            )
            is not None
        )
    except (OSError, netrc.NetrcParseError):
        return False


@contextlib.contextmanager
def wandb_run(recipe: Recipe, run_dir: Path, main_process: bool = True) -> Iterator[None]:
    """While a run trains or evolves, its W&B run (on the main process): named after the run directory, its files
    in it, an id derived from it (resumable), the recipe as its config; `WANDB_PROJECT` (default `inspo`),
    `WANDB_DIR` and `WANDB_RUN_ID` override. Started here, not left to TRL's callback (which then logs into it),
    because wandb reads its environment once per process and an ablation trains many runs in one; finished at the
    end, so its files are whole."""
    if not (uses_wandb(recipe) and main_process):
        yield
        return
    import dataclasses

    import wandb

    run = wandb.init(
        project=os.environ.get("WANDB_PROJECT", "inspo"),
        name=Path(run_dir).name,
        dir=os.environ.get("WANDB_DIR", str(run_dir)),
        id=os.environ.get("WANDB_RUN_ID", run_id(run_dir)),
        resume="allow",
        config=dataclasses.asdict(recipe),
        settings=wandb.Settings(silent=True),
    )
    try:
        yield
    finally:
        run.finish()


def run_id(run_dir: Path) -> str:
    """A W&B run id for a run directory: its name and a digest of its absolute path (ids allow [a-z0-9-_])."""
    digest = hashlib.sha256(str(Path(run_dir).resolve()).encode()).hexdigest()[:8]
    name = "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in Path(run_dir).name.lower())[:48]
    return f"{name}-{digest}"


def log_step_row(row: dict) -> None:
    """One of `inspo evolve`'s step rows into the W&B run `wandb_run` started (a training run's go through TRL)."""
    import wandb

    wandb.log({k: v for k, v in row.items() if k != "step" and v is not None}, step=row["step"])
