"""The judge in an evaluation: verdicts into the prediction rows and the scores, agreement with EM, the tables.

    judge = open_judge(recipe.judge)                       # before generating: a missing key fails at once
    report = judge_evaluation(judge, rows, scores)          # rows gain judge/judge_source; scores gain judge
    write_judge_files(out_dir, rows)                        # judge_disagreements.jsonl
    markdown_lines = judge_section(rows)                    # results.md's "LLM judge beside EM"

A cell's judge score is the mean verdict over the predictions that got one; the ones that did not (an unparsed
verdict, a failed call, a spent budget) are counted beside it and never scored either way. Agreement with EM is over
the same judged predictions: the share where both say the same, and Cohen's kappa (agreement beyond what the two
rates give by chance; None where chance already explains everything, as when every EM is 0).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

from inspo_cli.evaluation.judge import Judge
from inspo_cli.jsonio import atomic_write_jsonl

DISAGREEMENTS = "judge_disagreements.jsonl"  # beside predictions.jsonl: the predictions where judge and EM differ
NOT_JUDGED = ("unparsed", "failed", "budget")
Z95 = 1.959964


def agreement(em: Sequence[float], verdicts: Sequence[float | None]) -> dict:
    """{n, agree, kappa} over the pairs with a verdict: the share where the judge says what EM says, and Cohen's
    kappa (None when there are no pairs, or when chance agreement is 1, which leaves kappa undefined)."""
    pairs = [(float(e), float(v)) for e, v in zip(em, verdicts, strict=True) if v is not None]
    if not pairs:
        return {"n": 0, "agree": None, "kappa": None}
    n = len(pairs)
    observed = sum(e == v for e, v in pairs) / n
    em_rate, judge_rate = sum(e for e, _ in pairs) / n, sum(v for _, v in pairs) / n
    chance = em_rate * judge_rate + (1 - em_rate) * (1 - judge_rate)
    kappa = None if chance >= 1 else (observed - chance) / (1 - chance)
    return {"n": n, "agree": observed, "kappa": kappa}


def interval(values: Sequence[float]) -> tuple[float, float] | None:
    """The 95% interval of a mean over questions (normal, clipped to [0, 1]); None for fewer than two values."""
    if len(values) < 2:
        return None
    mean = sum(values) / len(values)
    variance = sum((x - mean) ** 2 for x in values) / (len(values) - 1)
    half = Z95 * math.sqrt(variance / len(values))
    return max(mean - half, 0.0), min(mean + half, 1.0)


def judge_evaluation(
    judge: Judge,
    rows: list[dict],
    scores: dict[str, dict[str, dict]],
    on_graded: Callable[[int], None] = lambda n: None,
) -> dict:
    """Grade `rows` (predictions.jsonl's rows, changed in place: judge, judge_source, judge_text) and add each
    cell's judge score and counts to `scores`; returns results.json's "judge" entry: the judge, its prompt version,
    its accounting, the agreement with EM per method and benchmark, and why calls failed."""
    from inspo_cli.evaluation.judge import PROMPT_VERSION

    verdicts = judge.grade(rows, on_graded)
    cells: dict[tuple[str, str], list[dict]] = {}
    for row, verdict in zip(rows, verdicts, strict=True):
        row["judge"], row["judge_source"] = verdict.score, verdict.source
        row.pop("judge_text", None)  # an earlier judge's words (`inspo evaluate --judge` judging again)
        if verdict.text is not None:
            row["judge_text"] = verdict.text
        cells.setdefault((row["method"], row["benchmark"]), []).append(row)
    agreements: dict[str, dict[str, dict]] = {}
    for method, per_benchmark in scores.items():
        for benchmark, cell in per_benchmark.items():
            mine = cells.get((method, benchmark), [])
            judged = [row["judge"] for row in mine if row["judge"] is not None]
            cell["judge"] = sum(judged) / len(judged) if judged else None
            cell["judge_n"] = len(judged)
            for source in NOT_JUDGED:
                cell[f"judge_{source}"] = sum(row["judge_source"] == source for row in mine)
            agreements.setdefault(method, {})[benchmark] = agreement(
                [row["em"] for row in mine], [row["judge"] for row in mine]
            )
    return {
        "identity": judge.identity,
        "prompt_version": PROMPT_VERSION,
        "accounting": judge.lm.accounting(),
        "agreement": agreements,
        "errors": judge.errors[:3],
        "failed_calls": len(judge.errors),
        "cache_problem": None if judge.cache is None else judge.cache.problem,  # verdicts kept, not all cached
    }


def disagreements(rows: Sequence[dict]) -> list[dict]:
    """The judged predictions where the judge and EM differ, with what a reader needs to see why."""
    keep = ("method", "benchmark", "id", "question", "golden_answers", "prediction", "em", "judge", "judge_source")
    return [
        {key: row.get(key) for key in (*keep, "judge_text")}
        for row in rows
        if row.get("judge") is not None and row["judge"] != row["em"]
    ]


def write_judge_files(out_dir: Path, rows: Sequence[dict]) -> None:
    atomic_write_jsonl(out_dir / DISAGREEMENTS, disagreements(rows))


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def _with_interval(values: Sequence[float]) -> str:
    if not values:
        return "-"
    bounds = interval(values)
    mean = _percent(sum(values) / len(values))
    return mean if bounds is None else f"{mean} [{_percent(bounds[0])}, {_percent(bounds[1])}]"


def judge_section(rows: Sequence[dict], report: dict) -> list[str]:
    """results.md's table of the judge beside EM, per method and benchmark, each with its 95% interval over
    questions; the judged count, the predictions left unjudged and why, and the agreement."""
    lines = [
        "## LLM judge beside EM (%)",
        "",
        f"Judge {report['identity']}, prompt {report['prompt_version']}. Intervals: 95% over questions. Judge: the "
        "mean verdict of the judged predictions; EM over all. Unjudged predictions are never scored either way.",
        "",
        "| Method | Benchmark | EM | Judge | Judged | Unparsed | Failed | Over budget | Agreement | Kappa |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    cells: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        cells.setdefault((row["method"], row["benchmark"]), []).append(row)
    for (method, benchmark), mine in cells.items():
        judged = [row["judge"] for row in mine if row["judge"] is not None]
        stats = report["agreement"][method][benchmark]
        kappa = "-" if stats["kappa"] is None else f"{stats['kappa']:.2f}"
        counts = [sum(row["judge_source"] == source for row in mine) for source in NOT_JUDGED]
        lines.append(
            f"| {method} | {benchmark} | {_with_interval([row['em'] for row in mine])} | {_with_interval(judged)} | "
            f"{len(judged)} of {len(mine)} | {' | '.join(map(str, counts))} | {_percent(stats['agree'])} | {kappa} |"
        )
    if report["errors"]:
        lines += ["", f"{report['failed_calls']} judge calls failed; the first: {report['errors'][0]}"]
    if report.get("cache_problem"):
        lines += ["", f"Some verdicts were not cached (judging again will ask for them): {report['cache_problem']}"]
    return [*lines, ""]
