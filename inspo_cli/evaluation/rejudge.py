"""`inspo evaluate --judge DIR`: the LLM judge's verdicts added to an evaluation made without them (or judged again
by another judge), from its predictions.jsonl: no model, no retriever, no generation.

    directory = Path("runs/x/evaluations/step-8")
    config = judge_recipe(directory, recipe=None, overrides=["judge.provider=openai"])
    evaluation = read_evaluation(directory)            # checked before the judge is opened
    report, markdown_lines = add_verdicts(directory, open_judge(config.judge), evaluation=evaluation)
    # `inspo evaluate --judge` does both inside `with judging(directory):`, so two at once cannot mix

The judge is the recipe's judge section: `--recipe`'s, else the recipe of the run the directory belongs to
(<run>/evaluations/step-N), else the defaults (the packaged local model), with `--set judge.*` on top. The rows gain
judge/judge_source (as an evaluation with `evaluation.metrics: [..., judge]` writes them), results.json's cells
their judge score and counts and its "judge" entry the judge, prompt version, accounting and agreement, results.md
the judge table, and judge_disagreements.jsonl is written beside. Nothing is written until every verdict is in
(predictions.jsonl first, results.json last, each atomically): a stop part-way, or a prediction left without a
verdict (a failed call, a spent budget), leaves the evaluation as it was, and the verdicts already given are in the
cache, so the next try asks only for the rest. What it writes back is checked before the judge is opened: every
cell has what results.json's writer needs and as many predictions as it scored, and every row's text can be written.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from inspo_cli.errors import InspoError
from inspo_cli.evaluation.runner import SCORE_FIELDS
from inspo_cli.files import lock_directory, not_a_directory
from inspo_cli.jsonio import dumps_jsonl

PREDICTIONS, RESULTS = "predictions.jsonl", "results.json"
NEEDED: dict[str, type | tuple[type, ...]] = {"question": str, "golden_answers": list, "prediction": (str, type(None))}
WRITTEN = (*SCORE_FIELDS, "n", "seconds", "retrieval_seconds")  # of each cell, by report.write_results


def evaluation_run(directory: Path):
    """The run an evaluation directory belongs to (<run>/evaluations/<name>), or None."""
    from inspo_cli.runs import RunDir

    parent = directory.resolve().parent
    if parent.name != RunDir.EVALUATIONS:
        return None
    run = RunDir(parent.parent)
    return run if run.info_file.is_file() and run.recipe_file.is_file() else None


def judge_recipe(directory: Path, recipe: Path | None, overrides: Sequence[str]):
    """The recipe whose judge section grades `directory` (see the module docstring)."""
    from inspo_cli.config import load_recipe

    if recipe is None and (run := evaluation_run(directory)) is not None:
        recipe = run.recipe_file
    return load_recipe(recipe, list(overrides))


@contextlib.contextmanager
def judging(directory: Path) -> Iterator[None]:
    """Held while a directory is judged: a second `inspo evaluate --judge` of it at the same time is refused (its
    predictions.jsonl and results.json could otherwise come from two judges). An flock on the directory itself,
    released when the process ends however it ends."""
    if (problem := not_a_directory(directory, "--judge")) is not None:
        raise InspoError(problem)
    fd = lock_directory(directory)
    if fd is None:
        raise InspoError(
            f"--judge {directory}: another `inspo evaluate --judge` is judging it now; wait for it to finish"
        )
    try:
        yield
    finally:
        os.close(fd)


def read_evaluation(directory: Path) -> tuple[dict, list[dict]]:
    """(results.json, predictions.jsonl's rows) of an evaluation directory, checked: every row has what the judge
    reads (question, golden answers, prediction). One-line errors naming the file and the fix."""
    from inspo_cli.evaluation.report import iter_predictions, read_results

    if (problem := not_a_directory(directory, "--judge")) is not None:
        raise InspoError(problem)
    results_file, predictions_file = directory / RESULTS, directory / PREDICTIONS
    for file in (results_file, predictions_file):
        if not file.is_file():
            raise InspoError(
                f"--judge {directory}: no {file.name}; give an evaluation directory (`inspo evaluate` writes "
                f"{RESULTS} and {PREDICTIONS} into its --out)"
            )
    fix = f"evaluate again into another directory; {directory} cannot be judged as it is"
    results = read_results(results_file, fix)
    rows = list(iter_predictions(predictions_file, fix))
    if not rows:
        raise InspoError(f"{predictions_file}: no predictions to judge; {fix}")
    for number, row in enumerate(rows, 1):
        for key, kind in NEEDED.items():
            if not isinstance(row.get(key), kind):
                raise InspoError(
                    f"{predictions_file}: line {number} has no {key} the judge can read "
                    f"({type(row.get(key)).__name__}); {fix}"
                )
        if not all(isinstance(g, str) for g in row["golden_answers"]):
            raise InspoError(f"{predictions_file}: line {number}'s golden_answers are not all text; {fix}")
        try:  # as predictions.jsonl is written back: a lone surrogate fails there, after the judge was paid
            dumps_jsonl([row]).encode("utf-8")
        except UnicodeEncodeError:
            raise InspoError(f"{predictions_file}: line {number} holds text that is not valid Unicode; {fix}") from None
    scores = results["scores"]
    counts: dict[tuple[str, str], int] = {}
    for number, row in enumerate(rows, 1):
        if row["benchmark"] not in scores.get(row["method"], {}):
            raise InspoError(
                f"{predictions_file}: line {number} is a prediction of {row['method']} on {row['benchmark']}, "
                f"which {RESULTS} has no score for; {fix}"
            )
        counts[row["method"], row["benchmark"]] = counts.get((row["method"], row["benchmark"]), 0) + 1
    for method, per_benchmark in scores.items():
        for benchmark, cell in per_benchmark.items():
            # what write_results writes back: a cell without it would fail after predictions.jsonl was rewritten
            missing = [k for k in WRITTEN if k not in cell or (k in SCORE_FIELDS and cell[k] is None)]
            if missing:
                raise InspoError(
                    f"{results_file}: {method} on {benchmark} has no {', '.join(missing)} (written by an older "
                    f"inspo or by hand); {fix}"
                )
            if counts.get((method, benchmark), 0) != cell["n"]:
                raise InspoError(
                    f"{predictions_file}: {counts.get((method, benchmark), 0)} predictions of {method} on "
                    f"{benchmark}, where {RESULTS} scored {cell['n']}; {fix}"
                )
    return results, rows


def add_verdicts(
    directory: Path,
    judge,
    on_judged: Callable[[int], None] = lambda n: None,
    evaluation: tuple[dict, list[dict]] | None = None,
) -> tuple[dict, list[str]]:
    """Grade the evaluation in `directory` (`evaluation`: what `read_evaluation` read of it, else read here) with
    `judge` (`open_judge`; its cache is closed here) and write the verdicts into it (see the module docstring);
    returns results.json's new "judge" entry and results.md's judge table (markdown lines)."""
    from inspo_cli.evaluation.judging import judge_evaluation, judge_section, write_judge_files
    from inspo_cli.evaluation.report import write_results
    from inspo_cli.jsonio import atomic_write_jsonl

    results, rows = evaluation if evaluation is not None else read_evaluation(directory)
    results = dict(results)
    scores = results.pop("scores")
    results.pop("average", None)  # written again from the scores
    try:
        report = judge_evaluation(judge, rows, scores, on_judged)
    finally:
        if judge.cache is not None:
            judge.cache.close()
    unanswered = [row for row in rows if row["judge_source"] in ("failed", "budget")]
    if unanswered:  # the evaluation keeps its earlier verdicts (or none): never a cell scored on part of its rows
        first = report["errors"][0] if report["errors"] else "the judge's budget (judge.max_calls) was spent"
        raise InspoError(
            f"--judge {directory}: {len(unanswered)} of {len(rows)} predictions got no verdict ({first}); nothing "
            "was written, the evaluation is as it was; the verdicts that came in are cached (judge.cache), so "
            "running again asks only for the rest"
        )
    report["added_by"] = "inspo evaluate --judge"  # after the predictions were made, from predictions.jsonl
    atomic_write_jsonl(directory / PREDICTIONS, rows)
    write_judge_files(directory, rows)
    section = judge_section(rows, report)
    write_results(directory, scores, {**results, "judge": report}, section)
    return report, section
