"""The retriever sweep over several runs, the seeds of one recipe (`inspo evaluate --run A --run B ... --sweep`):
each run's policy under every retriever setting, and per setting the mean over the runs with its 95% interval over
runs and questions, and the difference to the reference setting.

    table = compare_over_runs([(0, setting, rows), (1, setting, rows), ...], reference, "em")
    text = markdown(table, command)

A run here plays the part a seed plays in an ablation (`compare`): the crossed run x question design, its variance
`sigma_run^2 / R + sigma_question^2 / Q + sigma_e^2 / (R Q)`, Student's t with Welch-Satterthwaite degrees of
freedom. Every run answers the same questions under every setting, so a setting's difference to the reference is
paired twice over: by run (the same policy under both settings, so how good a seed happened to be cancels) and by
question (so how hard a question is cancels). What is left is how much the setting's effect varies over runs and
questions: the interval says whether the recipe, not one checkpoint of it, is robust to the retriever. With one run
`inspo evaluate --sweep` pairs by question alone (`evaluation.sweep`).
"""

from __future__ import annotations

from collections.abc import Sequence

from inspo_cli.ablation.compare import AVERAGE, RunScores, compare, estimate
from inspo_cli.evaluation.sweep import METRIC_NAMES, Setting, pct, question_scores

NO_DIFFERENCE: dict = {"diff": 0.0, "low": 0.0, "high": 0.0, "p": None, "pairing": "reference", "notes": []}


def run_scores(index: int, rows: Sequence[dict], metric: str) -> dict[str, RunScores]:
    """{method: RunScores} of one run's evaluation under one setting; the run's index stands for its seed, so that
    the same run is paired with itself across settings whatever seeds the runs had."""
    out = {}
    for method, per_benchmark in question_scores(rows, metric).items():
        means = {b: sum(q.values()) / len(q) for b, q in per_benchmark.items() if q}
        out[method] = RunScores(index, means, {b: q for b, q in per_benchmark.items() if q})
    return out


def compare_over_runs(
    results: Sequence[tuple[int, Setting, Sequence[dict]]], reference: Setting, metric: str = "em"
) -> dict:
    """Per setting and method: the mean over runs per benchmark and on average with its interval, and the paired
    difference to `reference` (`results`: (run index, setting, that evaluation's prediction rows))."""
    cells: dict[tuple[Setting, str], list[RunScores]] = {}
    order: list[Setting] = []
    for index, setting, rows in results:
        if setting not in order:
            order.append(setting)
        for method, scores in run_scores(index, rows, metric).items():
            cells.setdefault((setting, method), []).append(scores)
    table = []
    for setting in order:
        for (where, method), runs in cells.items():
            if where != setting or not _shared(runs):
                continue
            base = cells.get((reference, method), [])
            benchmarks, overall = _shared(runs), estimate(runs, AVERAGE)
            row = {
                "setting": setting.label,
                "values": dict(setting.values),
                "reference": setting == reference,
                "method": method,
                "runs": len(runs),
                "scores": {b: estimate(runs, b).mean for b in benchmarks},
                "average": overall.mean,
                "interval": overall.as_dict(),
            }
            if setting == reference:
                row["average_difference"] = {**NO_DIFFERENCE, "n": len(runs)}
            elif base and _shared(base) == benchmarks:
                c = compare(runs, base, AVERAGE)
                row["average_difference"] = {**c.as_dict(), "n": len(runs)}
            else:
                row["average_difference"] = {
                    **NO_DIFFERENCE,
                    "diff": None,
                    "low": None,
                    "high": None,
                    "pairing": "none",
                    "n": len(runs),
                    "notes": [f"the reference setting has no result of {method} on {', '.join(benchmarks)}"],
                }
            table.append(row)
    return {"metric": metric, "reference": reference.label, "runs": len({i for i, _, _ in results}), "rows": table}


def _shared(runs: Sequence[RunScores]) -> list[str]:
    """The benchmarks every run has a score on, sorted."""
    return sorted(b for b in runs[0].em if all(b in r.em for r in runs)) if runs else []


def markdown(table: dict, command: str | None, level: int = 1) -> str:
    """The table as Markdown under a heading of `level`, with the command that made it when given."""
    benchmarks = sorted({b for row in table["rows"] for b in row["scores"]})
    header = ["Setting", "Method", *benchmarks, "Avg. [95% CI]", "Avg. - reference [95% CI]", "p", "Paired by"]
    lines = [
        f"{'#' * level} Retriever sweep over {table['runs']} runs "
        f"({METRIC_NAMES.get(table['metric'], table['metric'])}, %)",
        "",
        *([f"`{command}`", ""] if command else []),
        f"Each run's policy and instruction under each retriever setting; the reference is `{table['reference']}`. "
        "Means over the runs; intervals over runs and questions (crossed design, t with Welch-Satterthwaite df); "
        "differences paired by run and by question where every run answered the same questions.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for row in table["rows"]:
        i, d = row["interval"], row["average_difference"]
        average = pct(row["average"]) + (f" [{pct(i['low'])}, {pct(i['high'])}]" if i["low"] is not None else "")
        if row["reference"]:
            difference, p, pairing = "reference", "-", "-"
        else:
            bounds = f" [{pct(d['low'], True)}, {pct(d['high'], True)}]" if d["low"] is not None else ""
            difference = pct(d["diff"], True) + bounds
            p = "-" if d["p"] is None else f"{d['p']:.3f}"
            pairing = d["pairing"].replace("seed", "run")  # a run here is what a seed is in an ablation
        cells = [row["setting"], row["method"], *(pct(row["scores"].get(b)) for b in benchmarks), average]
        lines.append("| " + " | ".join([*cells, difference, p, pairing]) + " |")
    notes = sorted({note for row in table["rows"] for note in row["average_difference"].get("notes", [])})
    if notes:
        lines += ["", *(f"- {note}" for note in notes)]
    return "\n".join(lines) + "\n"
