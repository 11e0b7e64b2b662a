"""Which of a run's evaluations a table reports, and what the run scored there, question by question.

    choice = choose_step(RunDir("runs/ablations/world/runs/inspo-s0"), "best")  # Choice(step=8, collapse=None, ...)
    result, why = read_result(RunDir(...), seed=0, rule="best")                  # RunResult, or None and the reason

Rules (`--checkpoint`): "best", the default, is App. B's "final checkpoint before any reward collapse": without a
collapse (`inspo_cli/collapse.py`: `evaluation.collapse_window`, `collapse_drop`) the run's final policy; after
one, the latest step at or before the collapse's peak on the run's evaluation interval (`training.eval_every`: the
paper evaluates every 100 steps, so a save in between, such as the paper recipes' 50-step saves, is never a
candidate) that has an evaluation or a checkpoint to evaluate (`inspo ablate` evaluates it into the run's
evaluations/step-N); the same candidates as `inspo evaluate --checkpoint best`. "final" is the evaluation
after the last step whatever happened. A run chained from stages or one with a frozen policy has one policy to
report, its final one. What a run scored is its policy's ("agent") EM per benchmark in results.json, and per
question in predictions.jsonl, which the comparisons pair across variants.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from shlex import quote

from inspo_cli.ablation.compare import RunScores
from inspo_cli.collapse import detect_collapse
from inspo_cli.errors import InspoError
from inspo_cli.evaluation.checkpoints import checkpoint_steps, evaluation_steps, interval_text
from inspo_cli.evaluation.report import iter_predictions, read_results
from inspo_cli.runs import RunDir

RULES = ("best", "final")
METHOD = "agent"  # the trained policy with its best instruction


@dataclass
class Choice:
    step: int | None  # the training step whose evaluation the table uses; None when there is none to use
    last_step: int | None
    collapse: dict | None  # the reward collapse that moved it back (inspo_cli.collapse.RewardCollapse.as_dict)
    why: str | None = None  # why there is no step


def results_file(run: RunDir, step: int) -> Path:
    return run.evaluation_dir(step) / "results.json"


def choose_step(run: RunDir, rule: str = "best") -> Choice:
    """The step a table reports for a finished run under `rule` (see the module docstring)."""
    summary = run.summary()
    if summary is None:
        return Choice(None, None, None, "unfinished")
    last = int(summary["steps"])
    if rule == "final" or summary.get("stages") or summary.get("frozen_policy"):
        return Choice(last, last, None)
    metrics = run.metrics()
    if not metrics:
        return Choice(last, last, None)
    recipe = run.recipe()
    e = recipe.evaluation
    collapse = detect_collapse(metrics, e.collapse_window, e.collapse_drop)
    if collapse is None:
        return Choice(last, last, None)
    steps = set(checkpoint_steps(run, recipe)) | {s for s in run.evaluated_steps() if results_file(run, s).is_file()}
    before = [step for step in evaluation_steps(steps, recipe) if step <= collapse.peak_step]
    if not before:
        return Choice(
            None,
            last,
            collapse.as_dict(),
            f"{collapse.describe()}, and the run kept no evaluation or checkpoint on its evaluation "
            f"interval ({interval_text(recipe)}) by step {collapse.peak_step}; report its final policy "
            "with --checkpoint final",
        )
    return Choice(max(before), last, collapse.as_dict())


@dataclass
class RunResult:
    """A run's evaluation at the step a table uses."""

    name: str
    seed: int
    step: int
    last_step: int
    rule: str
    collapse: dict | None
    em: dict[str, float]  # benchmark -> EM
    n: dict[str, int]  # benchmark -> questions scored
    questions: dict[str, dict[str, float]] | None  # benchmark -> {question id: EM}; None without predictions
    file: Path | None = None  # the results.json it was read from

    def scores(self) -> RunScores:
        return RunScores(self.seed, self.em, self.questions)

    def se(self, benchmark: str | None = None) -> float:
        """The binomial standard error of this run's EM on `benchmark` (None: the average over benchmarks),
        sqrt(p (1 - p) / n): how much the same policy's score would move on another sample of questions."""
        names = list(self.em) if benchmark is None else [benchmark]
        variance = sum(self.em[b] * (1 - self.em[b]) / max(self.n[b], 1) for b in names) / len(names) ** 2
        return math.sqrt(variance)

    def average(self) -> float:
        return sum(self.em.values()) / len(self.em)

    def as_dict(self) -> dict:
        return {
            "run": self.name,
            "seed": self.seed,
            "step": self.step,
            "last_step": self.last_step,
            "rule": self.rule,
            "collapsed": self.collapse is not None,
            "collapse": self.collapse,
            "em": self.em,
            "se": {b: self.se(b) for b in self.em},
            "average": self.average(),
            "average_se": self.se(),
            "n": self.n,
            "per_question": self.questions is not None,
        }


def read_result(run: RunDir, seed: int, rule: str = "best") -> tuple[RunResult | None, str | None]:
    """The run's result under `rule`, or (None, why it has none)."""
    choice = choose_step(run, rule)
    if choice.step is None or choice.last_step is None:  # the last step is None only with the step
        return None, choice.why
    file = results_file(run, choice.step)
    checkpoint = "" if choice.step == choice.last_step else f" --checkpoint {choice.step}"
    again = f"`inspo evaluate --run {quote(str(run))}{checkpoint} --out {quote(str(file.parent))}`"
    if not os.path.lexists(file):  # anything else there (a FIFO, a folder) is refused by read_results below
        if choice.collapse is not None:  # the step was moved back from the last one
            return None, (
                f"App. B's checkpoint is step {choice.step} (reward collapse at step "
                f"{choice.collapse['detected_at']}), not evaluated yet: `inspo ablate` evaluates it, or {again}"
            )
        return None, (
            "finished, no evaluation after its last step (training.eval_every is 0): `inspo ablate` "
            f"evaluates it, or {again}"
        )
    fix = f"copy it again from where the run ran, or delete {quote(str(file.parent))} and evaluate again: {again}"
    em, n, questions = read_scores(file, fix)
    return RunResult(
        run.path.name, seed, choice.step, choice.last_step, rule, choice.collapse, em, n, questions, file
    ), None


def read_scores(file: Path, fix: str) -> tuple[dict[str, float], dict[str, int], dict[str, dict[str, float]] | None]:
    """(EM per benchmark, questions per benchmark, EM per question or None) of the policy ("agent") in an
    evaluation's results.json and the predictions.jsonl beside it; `fix` says what to do about a damaged one."""
    scores = read_results(file, fix)["scores"]
    if METHOD not in scores:
        raise InspoError(f"{file}: no scores of the trained policy (method {METHOD!r}); {fix}")
    em = {b: float(s["em"]) for b, s in scores[METHOD].items()}
    n = {b: int(s["n"]) for b, s in scores[METHOD].items()}
    return em, n, _per_question(file.parent / "predictions.jsonl", set(em), fix)


def check_same_benchmarks(variant: str, results: list[RunResult]) -> None:
    """The seeds of a variant are averaged benchmark by benchmark and over benchmarks: seeds evaluated on different
    benchmarks would give cells and an average over different seeds. One line naming the run that differs."""
    for result in results[1:]:
        first = results[0]
        if set(result.em) != set(first.em):
            raise InspoError(
                f"{result.file or result.name}: seed {result.seed} of {variant!r} was evaluated on "
                f"{', '.join(sorted(result.em))}, seed {first.seed} on {', '.join(sorted(first.em))} "
                f"({first.file or first.name}); evaluate every seed on the same benchmarks"
            )


def _per_question(file: Path, benchmarks: set[str], fix: str) -> dict[str, dict[str, float]] | None:
    """{benchmark: {question id: EM}} of the policy's predictions; None when they were not kept."""
    if not os.path.lexists(file):  # anything else there (a FIFO, a folder) is refused by iter_predictions
        return None
    found: dict[str, dict[str, float]] = {b: {} for b in benchmarks}
    for row in iter_predictions(file, fix):
        if row["method"] == METHOD and row["benchmark"] in found:
            questions = found[row["benchmark"]]
            key = str(row["id"])
            if key in questions:  # two questions with one id: keep both, in order
                key = f"{key}#{len(questions)}"
            questions[key] = float(row["em"])
    return found if all(found.values()) else None
