"""`inspo train`: multi-turn GRPO with search, from a recipe; `inspo train` alone runs the laptop demo.

    inspo train                                             # recipes/demo.yaml: SmolLM2-135M, the world, BM25
    inspo train --recipe qwen3b.yaml                        # the paper's 3B INSPO run (recipes/qwen2.5-3b/inspo.yaml)
    inspo train --recipe recipes/qwen2.5-3b/search-r1.yaml --set retriever.url=http://10.0.0.5:8000/retrieve
    inspo train --resume runs/demo-20261122-101500          # continue an interrupted run from its last checkpoint
    accelerate launch --config_file recipes/accelerate/8gpu-zero3.yaml -m inspo_cli train --recipe ...

The run itself is `inspo_cli.experiment.run("train", ...)`; this command parses flags and prints.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated

import typer

from inspo_cli.commands.options import (
    DeviceOption,
    OutputDirOption,
    ReplayOptimizerOption,
    RunNameOption,
    SetOption,
    refuse_with_resume,
    run_flags,
)
from inspo_cli.commands.running import start_run
from inspo_cli.console import console, user_errors
from inspo_cli.registry import ALGORITHMS

DEMO_RECIPE = "recipes/demo.yaml"


@user_errors
def train(
    recipe: Annotated[
        Path | None,
        typer.Option(
            help="Recipe YAML or a bundled recipe's name, e.g. qwen2.5-3b/inspo "
            f"(inspo recipe list; default: {DEMO_RECIPE}, "
            "the CPU demo)."
        ),
    ] = None,
    overrides: SetOption = None,
    resume: Annotated[
        Path | None,
        typer.Option(help="A run directory to continue from its newest checkpoint; its own recipe is used."),
    ] = None,
    output_dir: OutputDirOption = None,
    name: RunNameOption = None,
    device: DeviceOption = None,
    replay_optimizer: ReplayOptimizerOption = None,
) -> None:
    """Train a search agent (Search-R1 protocol, observation tokens masked out of the loss) by the recipe's
    training.algorithm; INSPO recipes co-evolve the instructions."""
    from inspo_cli.config import PROJECT_ROOT, load_recipe

    config, recipe_path = None, None
    if resume is not None:
        refuse_with_resume(
            {
                "--recipe": recipe,
                "--set": overrides,
                "--name": name,
                "--output-dir": output_dir,
                "--replay-optimizer": replay_optimizer,
            }
        )
    else:
        recipe_path = recipe if recipe is not None else PROJECT_ROOT / DEMO_RECIPE
        config = load_recipe(
            recipe_path,
            overrides or [],
            flags=run_flags(name, replay_optimizer),
        )
    run = start_run("train", config, recipe_path, resume, output_dir, device)
    summary = run.summary()
    if summary is not None and _main_process():
        _report(run, summary)


def _main_process() -> bool:
    from accelerate import PartialState

    return PartialState().is_main_process


def _report(run, summary: dict) -> None:
    def show(value) -> str:
        return "-" if value is None else f"{value:.3f}"

    if summary["reward_first_quarter"] is None and summary.get("loss_first_quarter") is not None:  # SFT
        change = (
            f"loss {show(summary['loss_first_quarter'])} (first quarter) -> "
            f"{show(summary['loss_last_quarter'])} (last quarter)"
        )
    else:
        change = (
            f"reward {show(summary['reward_first_quarter'])} (first quarter) -> "
            f"{show(summary['reward_last_quarter'])} (last quarter), EM {show(summary['em_first_quarter'])} -> "
            f"{show(summary['em_last_quarter'])}"
        )
    console.print(
        f"trained {summary['steps']} steps in {summary['wall_seconds'] / 60:.1f} min; {change}", soft_wrap=True
    )
    if summary.get("stages"):  # population.stage pre-rl / post-rl
        console.print(
            "stages:  "
            + ", then ".join(
                f"{s['kind']} ({run.path / s['dir']}, {s['wall_seconds'] / 60:.1f} min)" for s in summary["stages"]
            ),
            soft_wrap=True,
        )
    metrics = run.path / summary["metrics"]
    console.print(
        f"policy:  {run.path / summary['model']}\nmetrics: {metrics} (TensorBoard: "
        f"{metrics.parent / run.TENSORBOARD})\n"
        f"plots:   {', '.join(str(run.path / p) for p in summary['plots'])}\nsummary: {run.summary_file}\n"
        f"evaluate it: inspo evaluate --run {shlex.quote(str(run))} --limit 50",
        soft_wrap=True,
    )


train.__doc__ = (
    f"{train.__doc__}\n\nTraining algorithms: "  # from the registry, so a new one is listed with no edit
    f"{'; '.join(entry.describe(name) for name, entry in ALGORITHMS.items())}."
)
