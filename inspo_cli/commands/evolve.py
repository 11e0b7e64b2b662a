"""`inspo evolve`: evolve the instruction population against a frozen policy (no gradient updates).

    inspo evolve --recipe recipes/qwen2.5-3b/inspo.yaml --set training.steps=30            # pre-policy
    inspo evolve --recipe recipes/qwen2.5-3b/inspo.yaml --model runs/qwen3b/checkpoints/final  # post-policy
    inspo evolve --resume runs/inspo-20261122-101500

The run itself is `inspo_cli.experiment.run("evolve", ...)` (the loop: `inspo_cli/training/evolve.py`);
this command parses flags and prints.
"""

from __future__ import annotations

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
from inspo_cli.errors import InspoError
from inspo_cli.runs import RunDir


@user_errors
def evolve(
    recipe: Annotated[
        Path | None,
        typer.Option(
            help="Recipe YAML, or a bundled recipe's name (inspo recipe list), with population.enabled: true."
        ),
    ] = None,
    overrides: SetOption = None,
    model: Annotated[
        str | None,
        typer.Option(
            help="The frozen policy (default: the recipe's model), e.g. a "
            f"trained run's {RunDir.CHECKPOINTS}/{RunDir.FINAL}."
        ),
    ] = None,
    resume: Annotated[Path | None, typer.Option(help="A run directory to continue from its last step.")] = None,
    output_dir: OutputDirOption = None,
    name: RunNameOption = None,
    device: DeviceOption = None,
    replay_optimizer: ReplayOptimizerOption = None,
) -> None:
    """Evolve instructions with INSPO's population / prune / evolve / verify loop and a frozen policy."""
    from inspo_cli.config import load_recipe

    config = None
    if resume is not None:
        refuse_with_resume(
            {
                "--recipe": recipe,
                "--set": overrides,
                "--model": model,
                "--name": name,
                "--output-dir": output_dir,
                "--replay-optimizer": replay_optimizer,
            }
        )
    else:
        if recipe is None:
            raise InspoError(
                "--recipe is required: a recipe with population.enabled: true and an optimizer, e.g. "
                "recipes/qwen2.5-3b/inspo.yaml"
            )
        if replay_optimizer is not None:  # whether or not this recipe's evolution reaches the optimizer
            from inspo_cli.training.preflight import check_replay_source

            check_replay_source(replay_optimizer, "--replay-optimizer")
        config = load_recipe(
            recipe,
            overrides or [],
            flags={"--model": ("model.name_or_path", model), **run_flags(name, replay_optimizer)},
        )
    run = start_run("evolve", config, recipe, resume, output_dir, device)
    summary = run.summary()
    overhead = summary["overhead"]
    console.print(
        f"evolved for {summary['steps']} steps in {summary['wall_seconds'] / 60:.1f} min: "
        f"{overhead['evolutions']} evolutions, {overhead['verification_rollouts']} verification rollouts; "
        f"best instruction {summary['best_instruction_id']}",
        soft_wrap=True,
    )
    console.print(
        f"best instruction: {run.best_instruction_file}\ninstructions: {run.instructions_file}\n"
        f"evolutions: {run.evolutions_file}\nsummary: {run.summary_file}",
        soft_wrap=True,
    )
