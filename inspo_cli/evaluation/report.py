"""Evaluation results in the paper's Table 1 layout: methods as rows, benchmarks as columns, then the average.

Writes `results.json` (everything), `results.csv` (one row per method and benchmark), `results.md` (EM table,
then F1, SubEM and searches per question) and shows the EM table in the terminal.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path

from rich.table import Table

from inspo_cli.benchmarks import BENCHMARKS
from inspo_cli.evaluation.runner import CALLS, SCORE_FIELDS, TABLE_WORDS, averages
from inspo_cli.jsonio import POSITIVE, UNIT, NonEmpty, Range, atomic_write_json, atomic_write_text, iter_rows, read_json

# results.json and a predictions.jsonl row, read back: scores are proportions over at least one question; every other
# figure (searches, calls/<tool> per question, seconds) a count or a time, never negative or NaN, or null
RESULTS_SHAPE = {
    "scores": NonEmpty(
        {
            str: NonEmpty(
                {
                    str: {
                        "em": UNIT,
                        "f1?": UNIT,
                        "subem?": UNIT,
                        "judge?": (UNIT, None),  # None: the judge read no verdict in the cell
                        "n": POSITIVE,
                        "*": (Range(0.0), None),
                    }
                }
            )
        }
    )
}
PREDICTION_SHAPE = {"method": str, "benchmark": str, "id": (str, int), "em": UNIT}
METRIC_TITLES = {"em": "Exact match", "f1": "F1", "subem": "SubEM", "searches": "Searches per question"}


def display_name(benchmark: str) -> str:
    spec = BENCHMARKS.get(benchmark)
    return spec.display_name if spec else ("World" if benchmark == "world" else benchmark)


def _cell(value: float, metric: str) -> str:
    return f"{value:.2f}" if metric == "searches" else f"{100 * value:.1f}"


def column_names(benchmarks: list[str]) -> list[str]:
    """Each benchmark's column header: its display name ("HotpotQA"), or its own name where that would read as
    another column (results written before QA files were kept off the built-in names, e.g. a file NQ.jsonl)."""
    shown = [display_name(b) for b in benchmarks]
    names = [
        name if shown.count(name) == 1 and name.lower() not in TABLE_WORDS else benchmark
        for benchmark, name in zip(benchmarks, shown)
    ]
    return [f"{name} (QA file)" if names.count(name) > 1 or name.lower() in TABLE_WORDS else name for name in names]


def table_rows(scores: dict, metric: str) -> tuple[list[str], list[list[str]]]:
    benchmarks = list(next(iter(scores.values()), {}))
    header = ["Method", *column_names(benchmarks), "Avg."]
    avg = averages(scores)
    rows = [
        [method, *(_cell(scores[method][b][metric], metric) for b in benchmarks), _cell(avg[method][metric], metric)]
        for method in scores
    ]
    return header, rows


def rich_table(scores: dict, metric: str = "em", title: str | None = None) -> Table:
    header, rows = table_rows(scores, metric)
    unit = "" if metric == "searches" else " (%)"
    table = Table(title=title or f"{METRIC_TITLES[metric]}{unit}")
    for i, name in enumerate(header):
        table.add_column(name, justify="left" if i == 0 else "right")
    for row in rows:
        table.add_row(*row)
    return table


def markdown(scores: dict, info: dict, extra: Sequence[str] = ()) -> str:
    lines = [f"# Evaluation: {info.get('model', '')}", ""]
    for key in ("retriever", "split", "limit", "temperature"):
        if info.get(key) is not None:
            lines.append(f"- {key}: {info[key]}")
    lines.append("")
    for metric in SCORE_FIELDS:
        header, rows = table_rows(scores, metric)
        unit = "" if metric == "searches" else " (%)"
        lines += (
            [f"## {METRIC_TITLES[metric]}{unit}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            + ["| " + " | ".join(r) + " |" for r in rows]
            + [""]
        )
    lines += _tool_tables(scores)
    lines += extra  # the judge beside EM (judging.judge_section), when evaluation.metrics names it
    return "\n".join(lines)


def _tool_tables(scores: dict) -> list[str]:
    """Calls per question of each tool (agent.tools beyond [search]): a table per tool, '-' where a method or a
    benchmark had none of its calls counted."""
    benchmarks = list(next(iter(scores.values()), {}))
    tools = sorted(
        {
            key.removeprefix(CALLS)
            for per_benchmark in scores.values()
            for score in per_benchmark.values()
            for key in score
            if key.startswith(CALLS)
        }
    )
    lines: list[str] = []
    for tool in tools:
        header = ["Method", *column_names(benchmarks)]
        lines += [f"## Calls per question: {tool}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for method, per_benchmark in scores.items():
            cells = [
                f"{per_benchmark[b][CALLS + tool]:.2f}" if CALLS + tool in per_benchmark[b] else "-" for b in benchmarks
            ]
            lines.append("| " + " | ".join([method, *cells]) + " |")
        lines.append("")
    return lines


def read_results(file: Path, fix: str) -> dict:
    """results.json as `write_results` wrote it (checked); `fix` says what to do about a damaged one."""
    return read_json(file, RESULTS_SHAPE, fix)


def iter_predictions(file: Path, fix: str):
    """The rows of predictions.jsonl (checked: method, benchmark, id, em), streamed."""
    return iter_rows(file, PREDICTION_SHAPE, fix)


def write_results(out_dir: Path, scores: dict, info: dict, extra: Sequence[str] = ()) -> None:
    atomic_write_json(out_dir / "results.json", {**info, "scores": scores, "average": averages(scores)})
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["method", "benchmark", *SCORE_FIELDS, "n", "seconds", "retrieval_seconds"])
    for method, per_benchmark in scores.items():
        for benchmark, s in per_benchmark.items():
            writer.writerow(
                [
                    method,
                    benchmark,
                    *(f"{s[f]:.4f}" for f in SCORE_FIELDS),
                    s["n"],
                    s["seconds"],
                    s["retrieval_seconds"],
                ]
            )
    atomic_write_text(out_dir / "results.csv", buffer.getvalue())
    atomic_write_text(out_dir / "results.md", markdown(scores, info, extra))
