"""`inspo distill RUN`: context distillation of a run's evolved instruction I* into its weights (docs/distill.md).

    inspo distill runs/inspo-3b                                   # into runs/inspo-3b/distill/; student: seed
    inspo distill runs/inspo-3b --instruction none --keep correct --steps 200 --out runs/inspo-3b-distill-none
    inspo distill runs/inspo-3b                                   # again: resumes an unfinished one, or is done
    inspo evaluate --run runs/inspo-3b/distill                    # the student, with its own instruction

The run itself is `inspo_cli.experiment.distill` (the algorithm: `inspo_cli/training/distill.py`); this command
parses flags and prints.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated

import typer

from inspo_cli.commands.options import DeviceOption, SetOption
from inspo_cli.console import console, err_console, user_errors


@user_errors
def distill(
    run: Annotated[Path, typer.Argument(help="The INSPO run whose evolved instruction I* is distilled.")],
    out: Annotated[
        Path | None, typer.Option(help="The distilled run's directory (default: RUN/distill); resumed if unfinished.")
    ] = None,
    instruction: Annotated[
        str,
        typer.Option(
            help="The student's instruction: seed (RUN's first, the static baseline's), none (the bare question), "
            "the text, or @FILE."
        ),
    ] = "seed",
    step: Annotated[
        str | None,
        typer.Option(
            help="The teacher: a training step of RUN, final or best (default: what `inspo evaluate --run RUN` "
            "takes, App. B's choice for a finished run)."
        ),
    ] = None,
    keep: Annotated[
        str,
        typer.Option(help="The teacher's trajectories the student learns: all (context distillation) or correct."),
    ] = "all",
    form: Annotated[str, typer.Option(help="off-policy: SFT on the teacher's trajectories (the only form).")] = (
        "off-policy"
    ),
    samples: Annotated[
        int | None, typer.Option(help="Teacher trajectories per training question (default: RUN's sampling.samples).")
    ] = None,
    steps: Annotated[
        int | None,
        typer.Option(help="Optimizer updates (default: one epoch over the trajectories, questions x samples / batch)."),
    ] = None,
    learning_rate: Annotated[
        float | None, typer.Option(help="The student's learning rate (default: RUN's training.learning_rate).")
    ] = None,
    overrides: SetOption = None,
    device: DeviceOption = None,
) -> None:
    """Distil a run's evolved instruction into its weights: the trained policy prompted with I* (the teacher)
    samples trajectories with search, and the same weights (the student) are fine-tuned on them under the seed
    instruction, observations masked; a run directory of its own that `inspo evaluate --run` reads."""
    from inspo_cli import experiment
    from inspo_cli.training.distill_plan import DistillOptions

    options = DistillOptions(instruction, step, keep, form, samples, steps, learning_rate, tuple(overrides or ()))
    started = []

    def say_where(directory) -> None:
        started.append(directory)
        info = directory.distill_info()
        console.print(
            f"run directory: {directory}\nteacher: {info['teacher_model']} (checkpoint {info['teacher_checkpoint']}) "
            f"with {info['teacher_instruction_id']}; student: the same weights with the "
            f"{info['student_instruction_source']} instruction; keep {info['keep']}",
            soft_wrap=True,
            markup=False,
        )

    try:
        result = experiment.distill(run, options, out=out, command=sys.argv, device=device, on_start=say_where)
    except experiment.RunInterrupted as stop:
        again = f"inspo distill {shlex.quote(str(run))}"
        if out is not None:
            again += f" --out {shlex.quote(str(out))}"
        err_console.print(
            f"interrupted; continue from the last checkpoint (or sampled batch) of {stop.run} with: {again}"
            if stop.kept
            else f"interrupted; it had written nothing to continue from, so {stop.run} was removed; start it again: "
            + again,
            markup=False,
            soft_wrap=True,
        )
        raise typer.Exit(130) from None
    if not _main_process():
        return
    summary = result.finished_summary()
    evaluate = f"inspo evaluate --run {shlex.quote(str(result))}"
    if not started:
        console.print(
            f"{result} is distilled already (it has {result.summary_file.name}); evaluate it: {evaluate}",
            soft_wrap=True,
            markup=False,
        )
        return
    sampling = summary.get("sampling") or {}
    console.print(
        f"distilled in {summary['steps']} steps ({summary['wall_seconds'] / 60:.1f} min) on "
        f"{sampling.get('kept', '?')} of {sampling.get('trajectories', '?')} teacher trajectories; loss "
        f"{_show(summary['loss_first_quarter'])} (first quarter) -> {_show(summary['loss_last_quarter'])} (last)\n"
        f"policy:  {result.path / summary['model']}\nsummary: {result.summary_file}\nevaluate it: {evaluate}",
        soft_wrap=True,
        markup=False,
    )


def _show(value) -> str:
    return "-" if value is None else f"{value:.3f}"


def _main_process() -> bool:
    from accelerate import PartialState

    return PartialState().is_main_process
