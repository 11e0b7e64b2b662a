"""The ablation table: one row per variant, EM per benchmark and their average, mean ± 95% CI over seeds.

    table = collect(ablation)          # reads each run's final evaluation; never loads a model
    write_table(ablation, table)       # ablation.md, ablation.json, ablation.csv

A run's result is its evaluation after its last step (`evaluations/step-<last>/results.json`: the final policy
with its best instruction, greedy, on the recipe's `evaluation.benchmarks`), written by the run itself when
`training.eval_every` > 0 and by `inspo ablate` otherwise. Seeds are grouped by variant: a cell is the mean of
that variant's seeds and the half-width of its 95% t interval; "avg." is each seed's mean over benchmarks (the
paper's Avg. column), then the mean and interval of those. Runs without a result are listed with the reason.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from inspo_cli.ablation.directory import ABSENT, PARTIAL, AblationDir
from inspo_cli.ablation.plan import PlannedRun, run_name
from inspo_cli.ablation.stats import mean_ci
from inspo_cli.jsonio import atomic_write_json, atomic_write_text
from inspo_cli.runs import RunDir

METHOD = "agent"  # the trained policy with its best instruction


def final_results_file(run: RunDir) -> Path | None:
    """Where a finished run's final evaluation is (or would be); None while the run is unfinished."""
    summary = run.summary()
    return None if summary is None else run.evaluation_dir(summary["steps"]) / "results.json"


def run_em(run: RunDir) -> dict[str, float] | None:
    """{benchmark: EM} of a run's final evaluation, or None when it has none."""
    file = final_results_file(run)
    if file is None or not file.is_file():
        return None
    scores = json.loads(file.read_text(encoding="utf-8"))["scores"][METHOD]
    return {benchmark: score["em"] for benchmark, score in scores.items()}


def collect(ablation: AblationDir) -> dict:
    plan, failures = ablation.plan, ablation.failures()
    rows = []
    for variant in plan.variants:
        by_seed: dict[int, dict[str, float]] = {}
        missing = []
        for seed in plan.seeds:
            run = PlannedRun(run_name(variant.name, seed), variant.name, seed)
            em = run_em(ablation.run_dir(run))
            if em is None:
                missing.append({"run": run.name, "seed": seed, "why": _why(ablation, run, failures)})
            else:
                by_seed[seed] = em
        rows.append({"variant": variant.name, "bars": variant.bars, "recipe": variant.recipe,
                     "overrides": variant.overrides, "per_seed": by_seed, "missing": missing})
    return {"name": plan.name, "seeds": plan.seeds, **summarize(rows)}


def summarize(rows: list[dict]) -> dict:
    """Fill each row (a variant: "per_seed" = {seed: {benchmark: EM}}) with "em" per benchmark, "average" and "n"
    (mean ± 95% CI over its own seeds; a seed's average is its mean over benchmarks) and return
    {"benchmarks": [...], "rows": rows}."""
    benchmarks: list[str] = []
    for row in rows:
        for em in row["per_seed"].values():
            benchmarks.extend(b for b in em if b not in benchmarks)
    for row in rows:
        by_seed = row["per_seed"]
        row["seeds"] = sorted(by_seed)
        row["em"] = {b: mean_ci([em[b] for em in by_seed.values() if b in em]).as_dict()
                     for b in benchmarks if any(b in em for em in by_seed.values())}
        averages = [sum(em.values()) / len(em) for em in by_seed.values()]
        row["average"] = mean_ci(averages).as_dict() if averages else None
        row["n"] = len(by_seed)
    return {"benchmarks": benchmarks, "rows": rows}


def _why(ablation: AblationDir, run: PlannedRun, failures: dict[str, str]) -> str:
    if run.name in failures:
        return f"failed: {failures[run.name]}"
    status = ablation.status(run)
    if status == ABSENT:
        return "not run"
    if status == PARTIAL:
        return "unfinished"
    return "finished, not evaluated (training.eval_every is 0): `inspo ablate` evaluates it"


def cell(interval: dict | None, plus: str = "±", missing: str = "-") -> str:
    """An interval as a table cell, e.g. "0.300 ± 0.248"; one seed's value alone; `missing` when there is none
    (LaTeX: plus="$\\pm$", missing="--")."""
    if interval is None:
        return missing
    if interval["ci95"] is None:
        return f"{interval['mean']:.3f}"
    return f"{interval['mean']:.3f} {plus} {interval['ci95']:.3f}"


def csv_columns(benchmarks: list[str]) -> list[str]:
    return [f"{c}_{part}" for c in [*benchmarks, "avg"] for part in ("mean", "ci95")]


def csv_values(row: dict, benchmarks: list[str]) -> list[str]:
    """A row's mean and CI half-width per benchmark and for the average, as `csv_columns` names them."""
    values = []
    for interval in [*(row["em"].get(b) for b in benchmarks), row["average"]]:
        if interval is None:
            values += ["", ""]
        else:
            values += [f"{interval['mean']:.4f}", "" if interval["ci95"] is None else f"{interval['ci95']:.4f}"]
    return values


def markdown(table: dict) -> str:
    benchmarks = table["benchmarks"]
    header = ["variant", "stands for", "n", *benchmarks, "avg."]
    lines = [f"# Ablation {table['name']}", "",
             "Exact match, mean ± 95% CI over seeds (Student's t; n = seeds with a result; one seed: no interval).",
             "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in table["rows"]:
        cells = [row["variant"], ", ".join(row["bars"]) or "(base recipe)", str(row["n"]),
                 *(cell(row["em"].get(b)) for b in benchmarks), f"**{cell(row['average'])}**"]
        lines.append("| " + " | ".join(cells) + " |")
    missing = [m for row in table["rows"] for m in row["missing"]]
    if missing:
        lines += ["", "Runs without a result:", ""] + [f"- {m['run']}: {m['why']}" for m in missing]
    return "\n".join(lines) + "\n"


def write_table(ablation: AblationDir, table: dict) -> None:
    atomic_write_json(ablation.table_file("json"), table)
    atomic_write_text(ablation.table_file("md"), markdown(table))
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["variant", "stands_for", "n", "seeds", *csv_columns(table["benchmarks"])])
    for row in table["rows"]:
        writer.writerow([row["variant"], "; ".join(row["bars"]), row["n"], " ".join(map(str, row["seeds"])),
                         *csv_values(row, table["benchmarks"])])
    atomic_write_text(ablation.table_file("csv"), buffer.getvalue())
