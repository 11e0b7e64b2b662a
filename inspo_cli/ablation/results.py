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
question in predictions.jsonl, which the comparisons pair across variants; or, with `metric`, its F1, SubEM or the
LLM judge's verdicts (`evaluation.metrics`; a prediction without a parsed verdict counts in neither the cell nor
the per-question scores, as in results.json).
"""

from __future__ import annotations

import json
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
# the scores a table can report (`--metric`): the short name in its columns, and what its cells are
METRICS = {
    "em": ("EM", "Exact match"),
    "f1": ("F1", "Token F1"),
    "subem": ("SubEM", "SubEM (a gold answer inside the prediction)"),
    "judge": ("judge", "The LLM judge's verdict (1 correct, 0 not; predictions without a parsed verdict left out)"),
}
BINARY = ("em", "subem", "judge")  # scores of 0 or 1 per question, whose standard error is binomial


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
    em: dict[str, float]  # benchmark -> the table's metric (EM unless `metric` says otherwise)
    n: dict[str, int]  # benchmark -> questions scored (with a verdict, for the judge)
    questions: dict[str, dict[str, float]] | None  # benchmark -> {question id: score}; None without predictions
    file: Path | None = None  # the results.json it was read from
    metric: str = "em"  # which score `em` holds (METRICS)
    judge: str | None = None  # with metric "judge": the judge and prompt version that gave the verdicts

    def scores(self) -> RunScores:
        return RunScores(self.seed, self.em, self.questions)

    def se(self, benchmark: str | None = None) -> float:
        """The standard error of this run's score on `benchmark` (None: the average over benchmarks): how much the
        same policy's score would move on another sample of questions. sqrt(p (1 - p) / n) for a score of 0 or 1
        per question; for F1, the questions' own variance over n where they were kept, else sqrt(p (1 - p) / n),
        the most a score in [0, 1] with mean p can have."""
        names = list(self.em) if benchmark is None else [benchmark]
        variance = sum(self._variance(b) / max(self.n[b], 1) for b in names) / len(names) ** 2
        return math.sqrt(variance)

    def _variance(self, benchmark: str) -> float:
        p = self.em[benchmark]
        values = list((self.questions or {}).get(benchmark, {}).values())
        if self.metric in BINARY or not values:
            return p * (1 - p)
        mean = sum(values) / len(values)
        return sum((v - mean) ** 2 for v in values) / len(values)

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
            "metric": self.metric,
            "em": self.em,
            "se": {b: self.se(b) for b in self.em},
            "average": self.average(),
            "average_se": self.se(),
            "n": self.n,
            "per_question": self.questions is not None,
        }


class MissingMetric(InspoError):
    """An evaluation without the score a table asks for (the judge where evaluation.metrics did not name it)."""


def read_result(run: RunDir, seed: int, rule: str = "best", metric: str = "em") -> tuple[RunResult | None, str | None]:
    """The run's result under `rule`, in `metric` (METRICS), or (None, why it has none)."""
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
    try:
        results = read_results(file, fix)  # read once: the scores, and for the judge who gave them
        em, n, questions = read_scores(file, fix, metric, results)
    except MissingMetric as e:
        return None, str(e)
    judge = judge_of(results) if metric == "judge" else None
    return RunResult(
        run.path.name, seed, choice.step, choice.last_step, rule, choice.collapse, em, n, questions, file, metric, judge
    ), None


def judge_of(results: dict) -> str:
    """Who gave an evaluation's verdicts: results.json's judge identity and prompt version, as one string."""
    entry = results.get("judge")
    if not isinstance(entry, dict):
        return "unknown judge"
    identity, prompt = entry.get("identity"), entry.get("prompt_version", "?")
    try:  # evaluation.judge's identity: [provider, model, base_url, max_output_tokens] as JSON
        provider, model, base_url, tokens = json.loads(identity if isinstance(identity, str) else "")
    except (TypeError, ValueError, RecursionError):  # a damaged entry: shown as it is, compared as it is
        return f"{str(identity or 'unknown judge')[:200]} (prompt {str(prompt)[:40]})"
    where = f" at {base_url}" if base_url else ""
    return f"{provider} {model}{where} (at most {tokens} output tokens, prompt {prompt})"


def check_one_judge(results: list[RunResult]) -> None:
    """The judge's scores of runs graded by different judges (or prompt versions) are not one measurement: one line
    naming a run of each and the command that grades it again."""
    judges: dict[str, RunResult] = {}
    for result in results:
        if result.judge is not None:
            judges.setdefault(result.judge, result)
    if len(judges) > 1:
        shown = "; ".join(f"{r.file or r.name}: {judge}" for judge, r in judges.items())
        raise InspoError(
            f"the runs were judged by {len(judges)} different judges ({shown}); grade them all with one judge: "
            "`inspo evaluate --judge DIR --set judge.provider=... --set judge.model=...` for each"
        )


def read_scores(
    file: Path, fix: str, metric: str = "em", results: dict | None = None
) -> tuple[dict[str, float], dict[str, int], dict[str, dict[str, float]] | None]:
    """(`metric` per benchmark, questions scored per benchmark, `metric` per question or None) of the policy
    ("agent") in an evaluation's results.json and the predictions.jsonl beside it; `fix` says what to do about a
    damaged one (`results`: the file as `read_results` read it already). MissingMetric when the evaluation has no
    such score (or the judge graded none of a cell)."""
    scores = (results if results is not None else read_results(file, fix))["scores"]
    if METHOD not in scores:
        raise InspoError(f"{file}: no scores of the trained policy (method {METHOD!r}); {fix}")
    cells = scores[METHOD]
    lacking = sorted(b for b, s in cells.items() if not isinstance(s.get(metric), (int, float)))
    if metric == "judge" and not lacking:  # a failed call or a spent budget: the cell is scored on part of it
        unanswered = {b: int(s.get("judge_failed") or 0) + int(s.get("judge_budget") or 0) for b, s in cells.items()}
        if any(unanswered.values()):
            shown = ", ".join(f"{count} on {b}" for b, count in sorted(unanswered.items()) if count)
            raise MissingMetric(
                f"{file}: predictions without a verdict (judge calls failed or over budget: {shown}); judge it "
                f"again, the verdicts already given come from the cache: `inspo evaluate --judge "
                f"{quote(str(file.parent))}`"
            )
    if lacking:
        raise MissingMetric(_missing_text(file, metric, lacking, cells))
    em = {b: float(s[metric]) for b, s in cells.items()}
    counted = "judge_n" if metric == "judge" else "n"  # the judge's cell is over the predictions it judged
    if any(not isinstance(s.get(counted), int) or s[counted] < 1 for s in cells.values()):
        raise InspoError(f"{file}: a cell with a {metric} score has no count of what it scored ({counted}); {fix}")
    n = {b: int(s[counted]) for b, s in cells.items()}
    return em, n, _per_question(file.parent / "predictions.jsonl", set(em), fix, metric)


def _missing_text(file: Path, metric: str, lacking: list[str], cells: dict) -> str:
    if metric != "judge":
        return f"{file}: no {metric} score on {', '.join(lacking)}; evaluate the run again"
    if any("judge_n" in cells[b] for b in lacking):  # judged, but no verdict parsed on a benchmark
        return (
            f"{file}: the judge gave no verdict it could read on {', '.join(lacking)} (see results.md's judge "
            f"table); judge it again: `inspo evaluate --judge {quote(str(file.parent))}`"
        )
    return (
        f"evaluated without the judge; add its verdicts (no generation): "
        f"`inspo evaluate --judge {quote(str(file.parent))}`"
    )


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


def _per_question(file: Path, benchmarks: set[str], fix: str, metric: str = "em") -> dict[str, dict[str, float]] | None:
    """{benchmark: {question id: `metric`}} of the policy's predictions (those the judge gave a verdict, for the
    judge); None when they were not kept."""
    if not os.path.lexists(file):  # anything else there (a FIFO, a folder) is refused by iter_predictions
        return None
    found: dict[str, dict[str, float]] = {b: {} for b in benchmarks}
    for row in iter_predictions(file, fix):
        if row["method"] == METHOD and row["benchmark"] in found:
            value = row.get(metric)
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                if metric == "judge" and value is None:  # no verdict parsed: left out, as in the cell
                    continue
                return None  # a file from before the metric, or damaged: no per-question scores
            if not 0.0 <= value <= 1.0:  # NaN fails this too
                raise InspoError(f"{file}: a prediction's {metric} is {value!r}, not a score in [0, 1]; {fix}")
            questions = found[row["benchmark"]]
            key = str(row["id"])
            if key in questions:  # two questions with one id: keep both, in order
                key = f"{key}#{len(questions)}"
            questions[key] = float(value)
    return found if all(found.values()) else None
