"""`inspo evolve`: evolve the instruction population against a frozen policy (no gradient updates).

    inspo evolve --recipe recipes/qwen2.5-3b/inspo.yaml --set training.steps=30            # pre-policy
    inspo evolve --recipe recipes/qwen2.5-3b/inspo.yaml --model runs/qwen3b/checkpoints/final  # post-policy
    inspo evolve --resume runs/inspo-20261122-101500

Writes a run directory like `inspo train` does (see `inspo_cli/training/frozen.py`) and prints where it is.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from inspo_cli.commands.recipe import SetOption
from inspo_cli.console import console, err_console, user_errors
from inspo_cli.errors import InspoError


@user_errors
def evolve(
    recipe: Annotated[Optional[Path], typer.Option(help="Recipe YAML with population.enabled: true.")] = None,
    overrides: SetOption = None,
    model: Annotated[Optional[str], typer.Option(help="The frozen policy (default: the recipe's model), e.g. a "
                                                      "trained run's checkpoints/final.")] = None,
    resume: Annotated[Optional[Path], typer.Option(help="A run directory to continue from its last step.")] = None,
    output_dir: Annotated[Optional[Path], typer.Option(help="Where new run directories go (default: runs/).")] = None,
    name: Annotated[Optional[str], typer.Option(help="Run directory name (default: recipe name + timestamp).")] = None,
    device: Annotated[Optional[str], typer.Option(help="cpu or cuda (default: cuda when available).")] = None,
) -> None:
    """Evolve instructions with INSPO's population / prune / evolve / verify loop and a frozen policy."""
    from inspo_cli.config import load_recipe
    from inspo_cli.runs import create_run_dir, unfinished_run_recipe
    from inspo_cli.training.frozen import run_evolve

    if resume is not None:
        config = unfinished_run_recipe(resume, {"--recipe": recipe, "--set": overrides, "--model": model,
                                                 "--name": name, "--output-dir": output_dir})
        run_dir = resume
    else:
        if recipe is None:
            raise InspoError("--recipe is required: a recipe with population.enabled: true and an optimizer, e.g. "
                             "recipes/qwen2.5-3b/inspo.yaml")
        overrides = list(overrides or [])
        if model is not None:
            overrides.append(f"model.name_or_path={json.dumps(model)}")
        if name is not None:
            overrides.append(f"run.name={name}")
        config = load_recipe(recipe, overrides)
        run_dir = create_run_dir(config, recipe, sys.argv, output_dir)
    console.print(f"run directory: {run_dir}", soft_wrap=True)
    try:
        summary = run_evolve(config, run_dir, resume=resume is not None, device=device)
    except KeyboardInterrupt:
        err_console.print(f"interrupted; continue from the last step with: inspo evolve --resume {run_dir}")
        raise typer.Exit(130) from None
    overhead = summary["overhead"]
    console.print(f"evolved for {summary['steps']} steps in {summary['wall_seconds'] / 60:.1f} min: "
                  f"{overhead['evolutions']} evolutions, {overhead['verification_rollouts']} verification rollouts; "
                  f"best instruction {summary['best_instruction_id']}", soft_wrap=True)
    console.print(f"best instruction: {run_dir}/best_instruction.txt\ninstructions: {run_dir}/instructions.jsonl\n"
                  f"evolutions: {run_dir}/evolutions.json\nsummary: {run_dir}/summary.json", soft_wrap=True)
