"""Instruction optimisation before or after RL (Fig. 3's "stage" bars), chained inside one run directory.

`population.stage: pre-rl` runs
    stages/1-evolve/   `inspo evolve`: INSPO's loop with the initial policy frozen, `population.offline_steps` steps
    stages/2-train/    static-instruction GRPO (Search-R1) with stage 1's best instruction
and `post-rl` runs
    stages/1-train/    static-instruction GRPO with the recipe's first instruction
    stages/2-evolve/   `inspo evolve` with stage 1's trained policy frozen
Either way the trained policy is then evaluated with the evolved instruction (when `training.eval_every` > 0, as
an online run is after its last step), into the run's own evaluations/step-<steps>/.

It runs in one process (`inspo evolve` does). Each stage is a complete run directory of its own (metrics, plots,
summary); a finished stage is skipped and a cut-off one resumed (or started over when it saved nothing yet), so
`inspo train --resume RUN` continues the chain. The run's summary.json lists the stages and names the policy
(`model`) and the instruction (`best_instruction`) the run hands to `inspo evaluate --run`, and repeats the training
stage's curves and quarters.

    run_staged(recipe, run, resume=False, device=None)
"""

from __future__ import annotations

import copy
import shutil

from inspo_cli.config import Recipe
from inspo_cli.errors import InspoError
from inspo_cli.evaluation.report import read_results
from inspo_cli.evaluation.runner import averages, evaluation_questions
from inspo_cli.evaluation.session import run_evaluation
from inspo_cli.instructions.initial import initial_instructions
from inspo_cli.registry import ALGORITHMS
from inspo_cli.runs import RunDir
from inspo_cli.training.evolve import run_evolve
from inspo_cli.training.preflight import STAGED_ONE_PROCESS
from inspo_cli.training.run import run_training

STAGE_PLANS = {"pre-rl": ("evolve", "train"), "post-rl": ("train", "evolve")}


def stage_dirs(run: RunDir, stage: str) -> list[tuple[str, RunDir]]:
    """[(kind, directory)] of a staged run, in order."""
    return [(kind, RunDir(run.path / "stages" / f"{i}-{kind}")) for i, kind in enumerate(STAGE_PLANS[stage], 1)]


def run_staged(recipe: Recipe, run: RunDir, resume: bool = False, device: str | None = None) -> dict:
    from accelerate import PartialState

    if PartialState().num_processes > 1:
        raise InspoError(STAGED_ONE_PROCESS.format(stage=recipe.population.stage))
    stage = recipe.population.stage
    (first_kind, first), (second_kind, second) = stage_dirs(run, stage)
    summaries = {}
    for kind, directory in ((first_kind, first), (second_kind, second)):
        if kind == "train":
            sub = _static(recipe, _read_best(first) if stage == "pre-rl" else None)
        else:
            sub = _offline_evolve(recipe, first.final_dir if stage == "post-rl" else None)
        if not directory.summary_file.is_file():
            fresh = not resume_possible(directory, kind)
            if fresh:
                if directory.path.exists():  # cut off before it saved anything to resume from
                    shutil.rmtree(directory.path)
                _create(sub, directory)
            (run_training if kind == "train" else run_evolve)(sub, directory, resume=not fresh, device=device)
        summaries[kind] = directory.finished_summary()
    train, evolve = summaries["train"], summaries["evolve"]
    trained = first if stage == "post-rl" else second
    # pre-rl trains with stage 1's best instruction, post-rl hands over stage 2's: either way the evolve stage's
    best_dir = first if stage == "pre-rl" else second
    summary = {
        **train,
        "stage": stage,
        "stages": [
            {"kind": kind, "dir": run.relative(d.path), "wall_seconds": summaries[kind]["wall_seconds"]}
            for kind, d in ((first_kind, first), (second_kind, second))
        ],
        "wall_seconds": round(train["wall_seconds"] + evolve["wall_seconds"], 1),
        "model": run.relative(trained.final_dir),
        "best_instruction": evolve["best_instruction"],
        "best_instruction_id": evolve["best_instruction_id"],
        "instruction_source": run.relative(best_dir.path),
        "overhead": evolve.get("overhead"),
        "plots": [run.relative(trained.path / p) for p in train.get("plots", [])],
        "metrics": run.relative(trained.metrics_file),
        "evaluations": [],
        "selected_checkpoint": None,
    }
    if recipe.training.eval_every > 0:
        summary["evaluations"] = [_final_evaluation(recipe, run, trained, summary, device)]
    run.write_outcome(summary, summary["best_instruction"], None)
    return summary


def resume_possible(directory: RunDir, kind: str = "train") -> bool:
    """Whether an unfinished run directory ("train" or "evolve") holds progress to continue from; one cut off before
    its first checkpoint (or, evolving, its first step) has none and starts over."""
    if not directory.info_file.is_file():
        return False
    if kind == "evolve":
        return directory.coevolution_file.is_file()

    recipe = directory.recipe()
    if recipe.population.enabled and recipe.population.stage != "online":
        return True  # a chain of stages: each stage decides for itself
    return (
        directory.latest_checkpoint() is not None
        or ALGORITHMS.resolve(recipe.training.algorithm).progress_before_training
    )


def _create(recipe: Recipe, directory: RunDir) -> None:
    recipe.run.name = directory.path.name
    RunDir.create(recipe, output_dir=directory.path.parent)  # the directory does not exist: it gets that name


def _read_best(directory: RunDir) -> str:
    return directory.finished_summary()["best_instruction"]


def _static(recipe: Recipe, instruction: str | None) -> Recipe:
    """The training stage: GRPO with one static instruction (the given one, else the recipe's first)."""

    sub = copy.deepcopy(recipe)
    p = sub.population
    p.instructions = [instruction if instruction is not None else initial_instructions(recipe)[0]]
    p.instruction_file, p.enabled, p.stage = None, False, "online"
    p.instructions_per_question = 1  # one static instruction: nothing to split a question's rollouts over
    return sub


def _offline_evolve(recipe: Recipe, policy) -> Recipe:
    """The evolve stage: INSPO's loop for offline_steps with a frozen policy (the trained one, when given)."""
    sub = copy.deepcopy(recipe)
    sub.training.steps = recipe.population.evolve_steps
    sub.population.stage = "online"
    if policy is not None:
        sub.model.name_or_path, sub.model.lora = str(policy), False
    return sub


def _final_evaluation(recipe: Recipe, run: RunDir, trained: RunDir, summary: dict, device) -> dict:
    """The trained policy with the run's best instruction, as an online run's evaluation after its last step."""

    out = run.evaluation_dir(summary["steps"])
    results = out / "results.json"
    if not results.is_file():
        sub = copy.deepcopy(recipe)
        sub.model.name_or_path = str(trained.final_dir)
        e = sub.evaluation
        questions = evaluation_questions(e.benchmarks, sub.data, e.split, e.limit)
        run_evaluation(
            sub,
            ["agent"],
            questions,
            summary["best_instruction"],
            out,
            {"checkpoint": "final", "instruction_id": summary["best_instruction_id"], "step": summary["steps"]},
            device=device,
            seed=recipe.run.seed,
        )
    scores = read_results(results, f"delete {out} and resume; the run evaluates its policy again")["scores"]
    return {
        "step": summary["steps"],
        "em": averages(scores)["agent"]["em"],
        **{name: s["em"] for name, s in scores["agent"].items()},
    }
