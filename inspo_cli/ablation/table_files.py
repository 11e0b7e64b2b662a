"""How the ablation table is written: ablation.md, ablation.json and ablation.csv.

ablation.md holds the table, the differences to the reference with their power, and every run's result;
ablation.json the table as `table.collect` returns it; ablation.csv one row per variant. A table of another score
than EM (`inspo ablate --metric judge`) is written beside it as ablation-judge.md/.json/.csv.

    write_table(ablation, collect(ablation))
"""

from __future__ import annotations

import csv
import io

from inspo_cli.ablation.cost import cost_section
from inspo_cli.ablation.directory import AblationDir
from inspo_cli.ablation.effects import markdown as decomposition_markdown
from inspo_cli.ablation.formatting import cell, delta_cell
from inspo_cli.jsonio import atomic_write_json, atomic_write_text


def pairing_cell(comparison: dict) -> str:
    """What the difference on the average pairs ("seed, question", "seed", "question", "none"), and where the
    variants answered different questions."""
    c = comparison["average"]
    if c is None:
        return "-"
    unpaired = c.get("unpaired_questions") or []
    return c["pairing"] + (f" (different questions on {', '.join(unpaired)})" if unpaired else "")


def steps_cell(row: dict) -> str:
    """Which step each seed's result is from, e.g. "8, 8, 4 (s2: reward collapse)"."""
    runs = row["runs"]
    if not runs:
        return "-"
    collapsed = [f"s{r['seed']}" for r in runs if r["collapsed"]]
    return ", ".join(str(r["step"]) for r in runs) + (
        f" ({', '.join(collapsed)}: reward collapse)" if collapsed else ""
    )


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


def delta_columns(benchmarks: list[str]) -> list[str]:
    return [f"delta_{c}_{part}" for c in [*benchmarks, "avg"] for part in ("diff", "low", "high", "p")]


def delta_values(comparison: dict | None, benchmarks: list[str]) -> list[str]:
    values = []
    for c in [*((comparison or {}).get("em", {}).get(b) for b in benchmarks), (comparison or {}).get("average")]:
        values += ["" if c is None or c.get(k) is None else f"{c[k]:.4f}" for k in ("diff", "low", "high", "p")]
    return values


def label(table: dict) -> str:
    """The table's score in a column or a sentence: "EM", "F1", "SubEM", "judge"."""
    return str(table.get("metric_label", "EM"))


def se_text(table: dict) -> str:
    """What the runs' ± is, for the table's score."""
    if table.get("metric") == "f1":
        return (
            "± its standard error over the questions (their F1's variance over n where predictions were kept, else "
            "sqrt(p(1 − p)/n), the most an F1 of mean p can have)"
        )
    return "± its binomial standard error sqrt(p(1 − p)/n) over the questions"


def comparison_of(table: dict, variant: str) -> dict | None:
    return next((c for c in table["comparisons"] if c["variant"] == variant), None)


def uncertainty_sections(table: dict) -> list[str]:
    """Markdown: the differences to the reference, one sentence each, the power lines, and every run's result."""
    benchmarks, reference = table["benchmarks"], table["reference"]
    lines = []
    if table["comparisons"]:
        header = ["variant", *(f"Δ {b}" for b in benchmarks), "Δ avg.", "paired by"]
        lines += [
            f"## Differences to {reference}",
            "",
            f"Δ {label(table)} = variant − {reference}, the difference of the two rows' means: 95% interval and "
            "two-sided p-value (t test over seeds and questions; paired by seed where both ran the same seeds, by "
            "question where all their runs answered the same questions, else unpaired).",
            "",
            "| " + " | ".join(header) + " |",
            "|" + "---|" * len(header),
        ]
        for c in table["comparisons"]:
            lines.append(
                "| "
                + " | ".join(
                    [
                        c["variant"],
                        *(delta_cell(c["em"].get(b)) for b in benchmarks),
                        f"**{delta_cell(c['average'])}**",
                        pairing_cell(c),
                    ]
                )
                + " |"
            )
        lines += [""] + [f"- {c['sentence']}." for c in table["comparisons"]]
        lines += ["", "Power (80%, α = 0.05, from the seed-level and question-level variance observed):", ""]
        lines += [f"- {c['power_sentence']}." for c in table["comparisons"]]
        lines.append("")
    lines += cost_section(table)
    header = [
        "run",
        "seed",
        "step used",
        "reward collapse",
        *(f"{b} {label(table)} ± SE" for b in benchmarks),
        "avg. ± SE",
    ]
    lines += [
        "## Runs",
        "",
        f"Each run's {label(table)} at the step used, {se_text(table)}.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for row in table["rows"]:
        for r in row["runs"]:
            collapse = (
                f"at step {r['collapse']['detected_at']} (peak {r['collapse']['peak_step']})"
                if r["collapsed"]
                else "no"
            )
            cells = [
                r["run"],
                str(r["seed"]),
                f"{r['step']} of {r['last_step']}",
                collapse,
                *(f"{r['em'][b]:.3f} ± {r['se'][b]:.3f}" if b in r["em"] else "-" for b in benchmarks),
                f"{r['average']:.3f} ± {r['average_se']:.3f}",
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def markdown(table: dict) -> str:
    benchmarks = table["benchmarks"]
    header = ["variant", "stands for", "n", "steps used", *benchmarks, "avg.", f"Δ avg. vs {table['reference']}"]
    lines = [
        f"# Ablation {table['name']}",
        "",
        f"{table.get('metric_text', 'Exact match')} at {table['rule_text']}: mean ± 95% interval over seeds and "
        "questions (t, Welch-Satterthwaite df; n = seeds with a result; one seed: no interval).",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for row in table["rows"]:
        cells = [
            row["variant"],
            ", ".join(row["bars"]) or "(base recipe)",
            str(row["n"]),
            steps_cell(row),
            *(cell(row["em"].get(b)) for b in benchmarks),
            f"**{cell(row['average'])}**",
            "(reference)"
            if row["variant"] == table["reference"]
            else delta_cell((comparison_of(table, row["variant"]) or {}).get("average")),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", *uncertainty_sections(table)]
    missing = [m for row in table["rows"] for m in row["missing"]]
    if missing:
        lines += ["", "Runs without a result:", ""] + [f"- {m['run']}: {m['why']}" for m in missing]
    for d in table.get("decompositions", []):
        lines += [""] + (
            [f"Instruction × weights of {d['variant']}: {d['error']}"]
            if "error" in d
            else decomposition_markdown(d, table["rule_text"])
        )
    return "\n".join(lines) + "\n"


def write_table(ablation: AblationDir, table: dict) -> None:
    metric = table.get("metric", "em")
    atomic_write_json(ablation.table_file("json", metric), table)
    atomic_write_text(ablation.table_file("md", metric), markdown(table))
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    benchmarks = table["benchmarks"]
    writer.writerow(
        [
            "variant",
            "stands_for",
            "n",
            "seeds",
            "steps",
            "collapsed_seeds",
            *csv_columns(benchmarks),
            *delta_columns(benchmarks),
        ]
    )
    for row in table["rows"]:
        writer.writerow(
            [
                row["variant"],
                "; ".join(row["bars"]),
                row["n"],
                " ".join(map(str, row["seeds"])),
                " ".join(str(r["step"]) for r in row["runs"]),
                " ".join(str(r["seed"]) for r in row["runs"] if r["collapsed"]),
                *csv_values(row, benchmarks),
                *delta_values(comparison_of(table, row["variant"]), benchmarks),
            ]
        )
    atomic_write_text(ablation.table_file("csv", metric), buffer.getvalue())
