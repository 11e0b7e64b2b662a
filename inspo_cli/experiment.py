"""The run API below the CLI: a recipe in, a finished run directory out. `inspo train`, `inspo evolve` (and
`inspo ablate`, which runs many) call it; the commands only parse flags, call it, and print.

    run = experiment.run("train", recipe, recipe_path="recipes/demo.yaml", command=sys.argv)
    run = experiment.run("evolve", resume="runs/inspo-20261122-101500")
    run.summary()
    run = experiment.distill("runs/inspo-20261122-101500", DistillOptions(keep="all"))   # its I* into its weights

A fresh run gets a new directory (`RunDir.create`); under `accelerate launch` the main process creates it and
the others wait for its name. `resume=` continues an unfinished run with the recipe stored in it. An interrupt
(Ctrl-C) becomes `RunInterrupted`, which names the directory to resume.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

from inspo_cli.config import Recipe
from inspo_cli.config.training_section import loss_warnings
from inspo_cli.errors import InspoError
from inspo_cli.files import first_missing, lock_directory, remove_empty_dirs
from inspo_cli.jsonio import atomic_write_json
from inspo_cli.main_process import broadcast_from_main
from inspo_cli.policy.models import check_device
from inspo_cli.progress import err_console
from inspo_cli.runs import RunDir
from inspo_cli.training.distill_plan import DistillOptions, plan_distillation
from inspo_cli.training.evolve import run_evolve
from inspo_cli.training.preflight import check_run, rollouts_size_warning
from inspo_cli.training.run import run_training
from inspo_cli.training.stages import run_staged

KINDS = ("train", "evolve")  # train: GRPO with the instruction source; evolve: INSPO with a frozen policy


class RunInterrupted(Exception):
    """Ctrl-C. `kept`: False when the run had written nothing worth keeping (it was still starting: loading models,
    say), so its directory was removed as a failed start's is, and a new run is the way on, not a resume."""

    def __init__(self, run: RunDir, kept: bool = True):
        super().__init__(f"interrupted: {run}")
        self.run, self.kept = run, kept


def run(
    kind: str,
    recipe: Recipe | None = None,
    *,
    recipe_path: str | Path | None = None,
    resume: str | Path | None = None,
    output_dir: str | Path | None = None,
    command: Sequence[str] = (),
    device: str | None = None,
    on_start: Callable[[RunDir], None] | None = None,
) -> RunDir:
    """Run `kind` ("train" or "evolve") to the end and return its directory (summary.json written).

    Either `recipe` (a fresh run; `recipe_path` names its file in run.json) or `resume` (an unfinished run
    directory). `on_start(run)` is called on the main process once the directory exists, before any model
    loads (the CLI prints where the run is)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    if (recipe is None) == (resume is None):
        raise ValueError("pass a recipe for a fresh run or resume= for an unfinished one, not both")
    from accelerate import PartialState

    check_device(device)  # before a run directory exists
    state = PartialState()
    created_root = None  # the first folder a fresh run's directory needed made
    if resume is not None:
        directory = RunDir(resume)
        recipe = directory.resumable_recipe()
    else:
        assert recipe is not None  # exactly one of recipe and resume, checked above
        check_run(kind, recipe, state.num_processes, device)  # a start that would fail creates nothing
        if kind == "train" and state.is_main_process:  # settings that run but measure something else, as recipe check
            lines = [*loss_warnings(recipe.training, recipe.rollout.max_total_tokens), rollouts_size_warning(recipe)]
            for line in filter(None, lines):
                err_console.print(f"warning: {line}", markup=False, highlight=False, soft_wrap=True)
        created_root = first_missing(output_dir if output_dir is not None else recipe.run.output_dir)
        directory = _create(recipe, recipe_path, command, output_dir, state)
    lock = broadcast_from_main(state, lambda: _lock(directory))  # every process refuses, none waits at a barrier
    try:
        try:
            if on_start is not None and state.is_main_process:
                on_start(directory)  # inspo distill writes distill.json here
            _run(kind, recipe, directory, resume, device)
        except KeyboardInterrupt:
            # before anything worth keeping, nothing is kept: a resume of it would find no checkpoint to start from
            kept = not _discard_unstarted(directory, resume, state, created_root)
            raise RunInterrupted(directory, kept) from None
        except Exception:
            _discard_unstarted(directory, resume, state, created_root)  # a failed start leaves nothing behind
            raise
    finally:
        if lock is not None and state.is_main_process:
            os.close(lock)
    return directory


def _discard_unstarted(directory: RunDir, resume, state, created_root) -> bool:
    """A fresh run that wrote nothing worth keeping removed, with the folders above it this call made; whether it was
    (only the main process removes; the others say what it does)."""
    if resume is not None or started(directory):
        return False
    if state.is_main_process:
        shutil.rmtree(directory.path, ignore_errors=True)
        remove_empty_dirs(directory.path.parent, created_root)
    return True


def _lock(directory: RunDir) -> int:
    """The run directory held for this process while it runs: a second `inspo train --resume` or `inspo distill` of
    it at the same time would train over the first (two writers of its checkpoints and metrics)."""
    fd = lock_directory(directory.path)
    if fd is None:
        raise InspoError(
            f"{directory}: another inspo process (train, evolve or distill) is running in it now; wait for it to "
            "finish or stop it, then run this again to resume"
        )
    return fd


def distill(
    source: str | Path,
    options: DistillOptions | None = None,
    *,
    out: str | Path | None = None,
    command: Sequence[str] = (),
    device: str | None = None,
    on_start: Callable[[RunDir], None] | None = None,
) -> RunDir:
    """`inspo distill`: the run `source`'s evolved instruction distilled into its weights (`training.distill`), a
    training run of its own in `out` (default `source/distill`). The same call on an unfinished distillation resumes
    it, and on a finished one returns it as it is (without calling `on_start`)."""
    plan = plan_distillation(source, out, options)  # every refusal comes before anything is written
    if plan.status == "done":
        return plan.out
    if plan.status == "resume":
        return run("train", resume=plan.out.path, command=command, device=device, on_start=on_start)

    def record(directory: RunDir) -> None:  # before any model loads, so the trainer's builder finds it
        if directory.path != plan.out.path:  # another `inspo distill` created --out since it was planned
            shutil.rmtree(directory.path)  # made a moment ago, by this call: nothing else is in it
            raise InspoError(
                f"--out {plan.out}: another inspo distill started there while this one was starting; let it run, "
                "or pass --out with a new directory"
            )
        atomic_write_json(directory.distill_info_file, plan.info)
        if on_start is not None:
            on_start(directory)

    return run("train", plan.recipe, output_dir=plan.out.path.parent, command=command, device=device, on_start=record)


def started(run: RunDir) -> bool:
    """Whether a run wrote anything worth keeping: a metrics row, a checkpoint, or sampled trajectories (in its
    own directory or a stage's)."""
    path = run.path
    return (
        any(f.stat().st_size > 0 for f in path.rglob(RunDir.METRICS))
        or any(path.rglob(f"{RunDir.CHECKPOINT_PREFIX}*"))
        or any(any(d.iterdir()) for d in path.rglob(RunDir.SAMPLING) if d.is_dir())
    )


def _run(kind: str, recipe: Recipe, directory: RunDir, resume, device: str | None) -> None:
    if kind == "train" and recipe.population.enabled and recipe.population.stage != "online":
        # Fig. 3's pre-RL / post-RL: evolve and train chained
        run_staged(recipe, directory, resume=resume is not None, device=device)
    elif kind == "train":
        run_training(recipe, directory, resume=resume is not None, device=device)
    else:
        run_evolve(recipe, directory, resume=resume is not None, device=device)


def _create(recipe: Recipe, recipe_path, command, output_dir, state) -> RunDir:
    """A new run directory, made once: under `accelerate launch` by the main process, the others get its name."""
    if state.num_processes == 1:
        return RunDir.create(recipe, recipe_path, command, output_dir)
    # every process fails the same way (an InspoError) instead of the others waiting
    return RunDir(broadcast_from_main(state, lambda: str(RunDir.create(recipe, recipe_path, command, output_dir).path)))
