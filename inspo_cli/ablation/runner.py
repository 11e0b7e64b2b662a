"""Running an ablation's plan: every run through the run API, skipping finished ones and resuming cut-off ones.

    outcome = run_plan(ablation, device=None, on_event=print)
    outcome.failed        # names of runs that failed this time (the others went on)

For each planned run, in plan order (seed-major): a finished run (summary.json) is skipped; a run directory
without summary.json was cut off and is resumed (`experiment.run(..., resume=DIR)`: from its last checkpoint);
otherwise (or when it was cut before its first checkpoint, with nothing to continue from) the run starts fresh
from `recipes/<variant>.yaml` with its seed and name, in `runs/`. A finished run without an evaluation at the step
the table reports (`results.choose_step`: App. B's checkpoint before any reward collapse, or the final one with
rule "final") is evaluated here, that checkpoint's policy with its own best instruction on the recipe's evaluation
settings, into the run's evaluations/step-<N>/. A run that fails with an error is recorded in
failures.json and the next one starts; Ctrl-C stops the ablation (re-running the command continues it).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from inspo_cli import experiment
from inspo_cli.ablation.directory import ABSENT, FINISHED, AblationDir
from inspo_cli.ablation.plan import PlannedRun
from inspo_cli.ablation.results import METHOD, choose_step, results_file
from inspo_cli.ablation.status import local_job
from inspo_cli.config import load_recipe
from inspo_cli.errors import USER_ERRORS, InspoError
from inspo_cli.evaluation.checkpoints import run_policy
from inspo_cli.evaluation.runner import evaluation_questions
from inspo_cli.evaluation.session import run_evaluation
from inspo_cli.experiment import RunInterrupted
from inspo_cli.runs import RunDir
from inspo_cli.training.stages import resume_possible


@dataclass
class Outcome:
    finished: list[str] = field(default_factory=list)  # finished and evaluated
    skipped: list[str] = field(default_factory=list)  # already finished before this invocation
    failed: list[str] = field(default_factory=list)


def run_plan(
    ablation: AblationDir,
    device: str | None = None,
    on_event: Callable[[str], None] = lambda line: None,
    rule: str = "best",
    launcher: str = "inspo",
) -> Outcome:
    outcome = Outcome()
    runs = ablation.plan.runs()
    for index, run in enumerate(runs, 1):
        if ablation.status(run) != FINISHED:
            ablation.record_jobs({run.name: local_job()})  # what --status reads: running here
        result = run_one(
            ablation, run, device, on_event, rule, prefix=f"[{index}/{len(runs)}] {run.name}", launcher=launcher
        )
        getattr(outcome, result).append(run.name)
    return outcome


def run_one(
    ablation: AblationDir,
    run: PlannedRun,
    device: str | None = None,
    on_event: Callable[[str], None] = lambda line: None,
    rule: str = "best",
    prefix: str | None = None,
    launcher: str = "inspo",
) -> str:
    """One planned run to its result: train it (or resume it, or skip it when finished), then evaluate the step the
    table reports. "finished", "skipped" (finished before) or "failed" (recorded in failures.json; the error is
    not raised). With a `launcher` other than "inspo", training runs as that command (`accelerate launch ...`).
    What a local ablation does per run, and what a SLURM array task does."""
    prefix = prefix or run.name
    status = ablation.status(run)
    started = time.monotonic()
    try:
        if status != FINISHED:
            resume = status != ABSENT and resume_possible(ablation.run_dir(run))
            on_event(
                f"{prefix}: "
                + (
                    "resuming"
                    if resume
                    else "training"
                    if status == ABSENT
                    else "starting over (cut off before its first checkpoint)"
                )
            )
            _train(ablation, run, resume, device, launcher)
        evaluated = _evaluate_if_needed(ablation, run, device, rule)
        if evaluated:
            on_event(f"{prefix}: evaluated {evaluated}")
    except (KeyboardInterrupt, RunInterrupted):  # Ctrl-C stops the ablation, not just this run
        raise KeyboardInterrupt from None
    except USER_ERRORS as error:
        return _failed(ablation, run, str(error), on_event, prefix)
    except Exception as error:  # a bug in one variant must not stop the others; its traceback is printed
        import traceback

        traceback.print_exc(file=sys.stderr)
        return _failed(ablation, run, f"{type(error).__name__}: {error}", on_event, prefix)
    ablation.record_failure(run, None)
    if status == FINISHED:
        return "skipped"
    on_event(f"{prefix}: done in {(time.monotonic() - started) / 60:.1f} min")
    return "finished"


def _failed(ablation, run, message, on_event, prefix) -> str:
    message = " ".join(message.split())
    ablation.record_failure(run, message)
    on_event(f"{prefix}: failed: {message}")
    return "failed"


def _train(ablation: AblationDir, run: PlannedRun, resume: bool, device: str | None, launcher: str = "inspo") -> None:
    directory = ablation.run_dir(run)
    if launcher_words(launcher) != ["inspo"]:  # e.g. accelerate launch: the run is that command's processes
        if not resume:
            _clear_for_a_fresh_start(ablation, directory)
        command = training_command(ablation, run, resume, device, launcher)
        done = subprocess.run(command)
        if done.returncode != 0:
            raise InspoError(f"`{shlex.join(command)}` exited with code {done.returncode}; its output is above")
        return
    if resume:
        experiment.run("train", resume=directory.path, device=device)
        return
    _clear_for_a_fresh_start(ablation, directory)  # cut off before its first checkpoint: nothing to continue from
    recipe_file = ablation.recipe_file(run.variant)
    recipe = load_recipe(recipe_file, [f"run.seed={run.seed}", f"run.name={run.name}"])
    experiment.run(
        "train",
        recipe,
        recipe_path=recipe_file,
        output_dir=ablation.runs_dir,
        device=device,
        command=command_line(ablation, run),
    )


def _clear_for_a_fresh_start(ablation: AblationDir, directory: RunDir) -> None:
    """Remove what a run cut off before its first checkpoint left, so that it starts again under its planned name:
    a run directory (it has run.json), or what creating one leaves before run.json is written (recipe.yaml). Any
    other folder there (a run copied in part, without its run.json) is refused, never deleted."""
    path = directory.path
    if not os.path.lexists(path):
        return

    def creating(name: str) -> bool:  # what RunDir.create writes before run.json, or an atomic write's .tmp
        return name == RunDir.RECIPE or (name.startswith(".") and name.endswith(".tmp"))

    if (
        path.is_symlink()
        or not path.is_dir()
        or (not directory.info_file.is_file() and not all(creating(p.name) for p in path.iterdir()))
    ):
        raise InspoError(
            f"{path} holds files but no {RunDir.INFO}, so it is no run this ablation started and is not "
            f"deleted; move it out of {ablation.runs_dir} (or finish copying it), then run again"
        )
    shutil.rmtree(path)


def launcher_words(launcher: str) -> list[str]:
    """--launcher split by shell rules; an empty one, or one with an unclosed quote, is refused."""
    try:
        words = shlex.split(launcher)
    except ValueError as error:
        raise InspoError(f"--launcher {launcher!r}: {error}; quote it as a shell would") from None
    if not words:
        raise InspoError(
            "--launcher is empty; leave it out (inspo) or give the command that starts a run, e.g. "
            '"accelerate launch --config_file recipes/accelerate/8gpu-zero3.yaml"'
        )
    # A launcher starts Python, and `-m inspo_cli train ...` is added to it: an inspo of its own (a path to it, or
    # `python -m inspo_cli`) would make commands such as `inspo -m inspo_cli train`, which inspo refuses.
    if words != ["inspo"] and (
        Path(words[0]).name == "inspo"
        or Path(words[-1]).name == "inspo"
        or any(a == "-m" and b.split(".")[0] == "inspo_cli" for a, b in zip(words, words[1:]))
    ):
        raise InspoError(
            f"--launcher {launcher!r} is inspo itself, but a launcher is what starts Python (inspo adds "
            "`-m inspo_cli train ...`); leave --launcher out to run `inspo train`, or give e.g. "
            '"python" or "accelerate launch --config_file recipes/accelerate/8gpu-zero3.yaml"'
        )
    return words


def command_line(ablation: AblationDir, run: PlannedRun, launcher: str = "inspo", resume: bool = False) -> list[str]:
    """The `inspo train` command that makes this run (what --print-commands prints and run.json records), or with
    `resume` the one that continues it from its directory. `launcher` is split by shell rules, so a quoted path with
    spaces stays one word."""
    prefix = launcher_words(launcher)
    if prefix != ["inspo"]:
        prefix = [*prefix, "-m", "inspo_cli"]
    if resume:
        return [*prefix, "train", "--resume", str(ablation.run_dir(run).path)]
    return [
        *prefix,
        "train",
        "--recipe",
        str(ablation.recipe_file(run.variant)),
        "--set",
        f"run.seed={run.seed}",
        "--name",
        run.name,
        "--output-dir",
        str(ablation.runs_dir),
    ]


def training_command(
    ablation: AblationDir, run: PlannedRun, resume: bool, device: str | None, launcher: str
) -> list[str]:
    """What a run's training runs as a command of its own (with a launcher other than "inspo")."""
    return [*command_line(ablation, run, launcher, resume=resume), *(["--device", device] if device else [])]


def _evaluate_if_needed(ablation: AblationDir, run: PlannedRun, device: str | None, rule: str) -> str | None:
    """Evaluate the step the table reports unless that evaluation exists; what it evaluated, or None."""
    directory = ablation.run_dir(run)
    choice = choose_step(directory, rule)
    if choice.step is None or results_file(directory, choice.step).is_file():
        return None
    final = choice.step == choice.last_step
    evaluate_step(directory, None if final else choice.step, directory.evaluation_dir(choice.step), device)
    return "its final policy" if final else f"step {choice.step} (App. B: the checkpoint before its reward collapse)"


def evaluate_step(directory: RunDir, step: int | None, out_dir, device: str | None) -> None:
    """Evaluate the run's policy after `step` (None: its final policy) with that checkpoint's best instruction."""
    recipe = directory.recipe()
    policy = run_policy(directory, recipe, None if step is None else str(step))
    recipe.model.name_or_path = policy.path
    e = recipe.evaluation
    questions = evaluation_questions(e.benchmarks, recipe.data, e.split, e.limit)
    run_evaluation(
        recipe,
        [METHOD],
        questions,
        policy.instruction,
        out_dir,
        {
            "checkpoint": policy.label,
            "instruction_id": policy.instruction_id,
            **({} if step is None else {"step": step}),
        },
        device=device,
        seed=recipe.run.seed,
    )
