"""`inspo train`: multi-turn GRPO with search, from a recipe; `inspo train` alone runs the laptop demo.

    inspo train                                             # recipes/demo.yaml: SmolLM2-135M, the world, BM25
    inspo train --recipe recipes/qwen2.5-3b/search-r1.yaml --set retriever.url=http://10.0.0.5:8000/retrieve
    inspo train --resume runs/demo-20261122-101500          # continue an interrupted run from its last checkpoint
    accelerate launch --config_file recipes/accelerate/8gpu-zero3.yaml -m inspo_cli train --recipe ...

Writes a run directory (see `inspo_cli/training/run.py`) and prints where it is.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from inspo_cli.commands.recipe import SetOption
from inspo_cli.console import console, err_console, user_errors

DEMO_RECIPE = "recipes/demo.yaml"


@user_errors
def train(
    recipe: Annotated[Optional[Path], typer.Option(help=f"Recipe YAML (default: {DEMO_RECIPE}, the CPU demo).")] = None,
    overrides: SetOption = None,
    resume: Annotated[Optional[Path], typer.Option(help="A run directory to continue from its newest checkpoint; "
                                                        "its own recipe is used.")] = None,
    output_dir: Annotated[Optional[Path], typer.Option(help="Where new run directories go (default: run.output_dir, "
                                                            "i.e. runs/).")] = None,
    name: Annotated[Optional[str], typer.Option(help="Run directory name (default: recipe name + timestamp).")] = None,
    device: Annotated[Optional[str], typer.Option(help="cpu or cuda (default: cuda when available).")] = None,
) -> None:
    """Train a search agent with GRPO (Search-R1 protocol, observation tokens masked out of the loss)."""
    from accelerate import PartialState
    from accelerate.utils import broadcast_object_list

    from inspo_cli.config import PROJECT_ROOT, load_recipe
    from inspo_cli.runs import create_run_dir, unfinished_run_recipe
    from inspo_cli.training.run import run_training

    if resume is not None:
        config = unfinished_run_recipe(resume, {"--recipe": recipe, "--set": overrides, "--name": name,
                                                 "--output-dir": output_dir})
        run_dir = resume
    else:
        recipe_path = recipe if recipe is not None else PROJECT_ROOT / DEMO_RECIPE
        overrides = list(overrides or [])
        if name is not None:
            overrides.append(f"run.name={name}")
        config = load_recipe(recipe_path, overrides)
        state = PartialState()  # under `accelerate launch` only the main process creates the directory
        holder = [str(create_run_dir(config, recipe_path, sys.argv, output_dir)) if state.is_main_process else None]
        run_dir = Path(broadcast_object_list(holder)[0]) if state.num_processes > 1 else Path(holder[0])
    if PartialState().is_main_process:
        console.print(f"run directory: {run_dir}", soft_wrap=True)
    try:
        summary = run_training(config, run_dir, resume=resume is not None, device=device)
    except KeyboardInterrupt:
        err_console.print(f"interrupted; continue from the last checkpoint with: inspo train --resume {run_dir}")
        raise typer.Exit(130) from None
    if summary:
        _report(run_dir, summary)


def _report(run_dir: Path, summary: dict) -> None:
    def show(value) -> str:
        return "-" if value is None else f"{value:.3f}"

    console.print(f"trained {summary['steps']} steps in {summary['wall_seconds'] / 60:.1f} min; reward "
                  f"{show(summary['reward_first_quarter'])} (first quarter) -> {show(summary['reward_last_quarter'])} "
                  f"(last quarter), EM {show(summary['em_first_quarter'])} -> {show(summary['em_last_quarter'])}", soft_wrap=True)
    console.print(f"policy:  {run_dir}/checkpoints/final\nmetrics: {run_dir}/metrics.jsonl (TensorBoard: "
                  f"{run_dir}/tensorboard)\nplots:   {', '.join(str(run_dir / p) for p in summary['plots'])}\n"
                  f"summary: {run_dir}/summary.json\nevaluate it: inspo evaluate --run {run_dir} --limit 50", soft_wrap=True)
