"""A self-contained report directory from runs and ablations: figures, tables, lineages, overhead, index.md.

written = write_report(load_groups(["runs/ablations/world"]), Path("runs/ablations/world/report"))

index.md                    everything below, put together (figures embedded, tables inline)
fig2_training.png           Fig. 2: reward, tool calls, prompt and response length per step, 95% CI bands
fig5_test_em.png            Fig. 5: held-out EM at the periodic evaluations over steps
bars.png                    Fig. 3 / 6: EM per variant, its 95% interval and every seed's point
table1.md, .csv, .tex, .json  Table 1: variants x benchmarks EM and the average, mean ± 95% interval, n, and the
                            difference to the reference (Δ, interval, p); the .md adds one sentence per
                            comparison, the power lines and every run's EM ± binomial SE at the step used;
                            table1-<metric>.* with --metric f1, subem or judge (bars.png then shows that score)
overhead.md, .csv           App. C: optimizer calls and tokens, verification vs training rollouts, wall share
tools.md, .csv              only where some run had a tool besides search: calls per question by tool per
                            variant (and benchmark), calls and errors per trajectory in training (`tools`)
lineage/<run>.md, .png      each INSPO run's instruction tree, as text and as a picture
decomposition.md, .json, decomposition-<variant>.png   with --decompose: instruction x weights
                            (`ablation.decompose`): the cells, the effects with intervals and p, the figure
.inspo-report.json          written last: every file above with its size and SHA-256 (see `marker`)
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Sequence
from pathlib import Path

from inspo_cli.ablation.cost import never_evolved, run_cost
from inspo_cli.ablation.effects import markdown as decomposition_markdown
from inspo_cli.ablation.formatting import cell, delta_cell
from inspo_cli.ablation.table import TARGET_DIFF, summarize
from inspo_cli.ablation.table_files import (
    comparison_of,
    csv_columns,
    csv_values,
    delta_columns,
    delta_values,
    steps_cell,
    uncertainty_sections,
)
from inspo_cli.errors import InspoError
from inspo_cli.files import replaced_dir
from inspo_cli.jsonio import atomic_write_json, atomic_write_text
from inspo_cli.reporting import figures
from inspo_cli.reporting.lineage import lineage_png, lineage_text
from inspo_cli.reporting.marker import check_replaceable, seal
from inspo_cli.reporting.sources import Group
from inspo_cli.reporting.tools import tool_section


def table1(
    groups: Sequence[Group],
    rule: str = "best",
    reference: str | None = None,
    target_diff: float = TARGET_DIFF,
    metric: str = "em",
) -> dict:
    """Table 1's numbers: per group, each seed's result at the step `rule` picks, summarised over seeds and
    questions, and every group compared with `reference` (default: search-r1 when there is one, else the first
    variant without an instruction population, else the first; `table.default_reference`)."""
    rows = [
        {
            "variant": g.label,
            "name": g.name,
            "bars": g.bars,
            "static": is_static(g),
            "results": [r.result for r in g.runs if r.result],
            "missing": [{"run": r.name, "seed": r.seed, "why": r.why} for r in g.runs if not r.result],
            "costs": [run_cost(r.run) for r in g.runs if r.result],
        }
        for g in groups
    ]
    return summarize(rows, rule, reference, target_diff, metric)


def is_static(group: Group) -> bool:
    """Whether the group's runs train with one fixed instruction (no population)."""
    try:
        return not group.runs[0].run.recipe().population.enabled
    except (InspoError, OSError):
        return False


def _markdown_table(table: dict) -> str:
    header = ["method", "n", "steps used", *table["benchmarks"], "avg.", f"Δ avg. vs {table['reference']}"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in table["rows"]:
        delta = (
            "(reference)"
            if row["variant"] == table["reference"]
            else delta_cell((comparison_of(table, row["variant"]) or {}).get("average"))
        )
        lines.append(
            "| "
            + " | ".join(
                [
                    row["variant"],
                    str(row["n"]),
                    steps_cell(row),
                    *(cell(row["em"].get(b)) for b in table["benchmarks"]),
                    f"**{cell(row['average'])}**",
                    delta,
                ]
            )
            + " |"
        )
    return "\n".join(lines) + "\n"


def _latex_table(table: dict) -> str:
    def tex(interval: dict | None) -> str:
        return cell(interval, plus=r"$\pm$", missing="--")

    def delta(row: dict) -> str:
        c = (comparison_of(table, row["variant"]) or {}).get("average")
        if row["variant"] == table["reference"] or c is None:
            return "--"
        if c["p"] is None:
            return f"${c['diff']:+.3f}$"
        return f"${c['diff']:+.3f}$ [${c['low']:+.3f}$, ${c['high']:+.3f}$]"

    columns = ["Method", *(b.replace("_", r"\_") for b in table["benchmarks"]), "Avg.", r"$\Delta$ Avg."]
    lines = [
        r"\begin{tabular}{l" + "c" * (len(columns) - 1) + "}",
        r"\toprule",
        " & ".join(columns) + r" \\",
        r"\midrule",
    ]
    for row in table["rows"]:
        cells = [
            row["variant"].replace("_", r"\_"),
            *(tex(row["em"].get(b)) for b in table["benchmarks"]),
            tex(row["average"]),
            delta(row),
        ]
        lines.append(" & ".join(cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


def _csv(header: list[str], rows: list[list]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()


def _table_csv(table: dict) -> str:
    benchmarks = table["benchmarks"]
    return _csv(
        ["method", "n", "steps", *csv_columns(benchmarks), *delta_columns(benchmarks)],
        [
            [
                row["variant"],
                row["n"],
                " ".join(str(r["step"]) for r in row["runs"]),
                *csv_values(row, benchmarks),
                *delta_values(comparison_of(table, row["variant"]), benchmarks),
            ]
            for row in table["rows"]
        ],
    )


OVERHEAD_COLUMNS = (
    "evolutions",
    "optimizer calls",
    "optimizer tokens",
    "verification rollouts",
    "training rollouts",
    "verification / training",
    "evolution share of wall time",
    "leaked candidates",
)


def overhead_rows(groups: Sequence[Group]) -> list[list]:
    """App. C per run that has a population: what evolving cost next to training."""
    rows = []
    for group in groups:
        for run in group.runs:
            account = (run.summary or {}).get("overhead")
            if not account:
                continue
            optimizer = account.get("optimizer") or {}
            idle = never_evolved(account)
            tokens = optimizer.get("total_tokens", 0 if idle else None)
            training = account.get("training_rollouts") or 0
            share = account.get("share_of_wall_time")
            rows.append(
                [
                    group.label,
                    run.name,
                    account["evolutions"],
                    optimizer.get("calls", 0 if idle else "-"),
                    "-" if tokens is None else tokens,
                    account["verification_rollouts"],
                    training,
                    f"{account['verification_rollouts'] / training:.3f}" if training else "-",
                    f"{share:.3f}" if share is not None else "-",
                    account.get("leaked_candidates", "-"),
                ]
            )  # "-": a run from before the leak check
    return rows


def write_report(
    groups: Sequence[Group],
    out: Path,
    rule: str = "best",
    reference: str | None = None,
    target_diff: float = TARGET_DIFF,
    decompositions: Sequence[dict] = (),
    audits: Sequence = (),
    metric: str = "em",
) -> list[Path]:
    """Write the report as the directory `out`, replacing an earlier report there as a whole (it is built beside
    `out` and renamed into place, so a failure or Ctrl-C leaves the earlier one); the files written. Only a new or
    empty `out`, or a report holding nothing but what it wrote (`marker`), is replaced; anything else is refused."""
    table = table1(groups, rule, reference, target_diff, metric)  # first: a bad --reference fails before writing
    with replaced_dir(out, "--out", check=check_replaceable) as building:
        written = _write(groups, table, building, decompositions)
        if audits:  # `inspo report --audit` (reporting.audit): its own page, linked from the index
            from inspo_cli.reporting.audit_markdown import link_audit

            written += link_audit(audits, building)
        seal(building)  # last: what it lists is all this report wrote
    return [out / path.relative_to(building) for path in written]


def _write(groups: Sequence[Group], table: dict, out: Path, decompositions: Sequence[dict] = ()) -> list[Path]:
    written: list[Path] = []
    sections = [
        f"# Report: {', '.join(g.label for g in groups)}",
        "",
        "Curves are means over seeds with 95% bootstrap percentile bands over seeds (n in the legend). "
        "Tables give each variant's mean with a 95% interval over seeds and questions, and its difference "
        "to the reference with an interval and p-value (t test, Welch-Satterthwaite degrees of freedom). "
        "Runs: " + "; ".join(f"{g.label}: {', '.join(r.name for r in g.runs)}" for g in groups),
        "",
    ]

    for name, draw, title in (
        ("fig2_training.png", figures.fig2, "Training metrics (Fig. 2)"),
        ("fig5_test_em.png", figures.fig5, "Test EM over training (Fig. 5)"),
    ):
        if draw(groups, out / name):
            written.append(out / name)
            sections += [f"## {title}", "", f"![{title}]({name})", ""]

    label = table["metric_label"]
    table_name = "table1" if table["metric"] == "em" else f"table1-{table['metric']}"  # never read as EM
    full = _markdown_table(table) + "\n" + "\n".join(uncertainty_sections(table)) + "\n"
    for suffix, text in (
        ("md", full),
        ("csv", _table_csv(table)),
        ("tex", _latex_table(table)),
        ("json", json.dumps(table, indent=2) + "\n"),
    ):
        atomic_write_text(out / f"{table_name}.{suffix}", text)
        written.append(out / f"{table_name}.{suffix}")
    sections += [
        f"## {label} (Table 1 layout)",
        "",
        f"{table['metric_text']} at {table['rule_text']} (its policy with its best instruction, greedy); steps used "
        "per seed, in seed order.",
        "",
        _markdown_table(table).rstrip(),
        "",
    ]
    missing = [m for row in table["rows"] for m in row["missing"]]
    if missing:
        sections += ["Without a result: " + "; ".join(f"{m['run']} ({m['why']})" for m in missing), ""]
    sections += [
        line.replace("## ", "### ", 1) if line.startswith("## ") else line for line in uncertainty_sections(table)
    ] + [""]
    if figures.bars(table, out / "bars.png"):
        written.append(out / "bars.png")
        sections += [f"![Final {label} per variant](bars.png)", ""]
    sections += tool_section(groups, out, written, table["rule_text"])

    if decompositions:
        sections += _decomposition(decompositions, table["rule_text"], out, written)

    overhead = overhead_rows(groups)
    if overhead:
        header = ["variant", "run", *OVERHEAD_COLUMNS]
        text = (
            "\n".join(
                ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
                + ["| " + " | ".join(map(str, row)) + " |" for row in overhead]
            )
            + "\n"
        )
        atomic_write_text(out / "overhead.md", text)
        atomic_write_text(out / "overhead.csv", _csv(header, overhead))
        written += [out / "overhead.md", out / "overhead.csv"]
        sections += ["## What evolving cost (App. C)", "", text.rstrip(), ""]

    lineages = []
    for group in groups:
        for run in group.runs:
            if not run.instructions:
                continue
            stem = out / "lineage" / run.name
            stem.parent.mkdir(exist_ok=True)
            atomic_write_text(
                stem.with_suffix(".md"), f"# Instructions of {run.name}\n\n```\n{lineage_text(run.instructions)}```\n"
            )
            written.append(stem.with_suffix(".md"))
            if lineage_png(run.instructions, stem.with_suffix(".png"), f"Instruction lineage: {run.name}"):
                written.append(stem.with_suffix(".png"))
            lineages.append(run.name)
    if lineages:
        sections += ["## Instruction lineages", ""]
        for name in lineages:
            sections += [
                f"### {name}",
                "",
                f"![lineage of {name}](lineage/{name}.png)",
                "",
                (out / "lineage" / f"{name}.md").read_text(encoding="utf-8").split("\n", 2)[2].rstrip(),
                "",
            ]
    atomic_write_text(out / "index.md", "\n".join(sections) + "\n")
    written.append(out / "index.md")
    return written


def _decomposition(decompositions: Sequence[dict], rule_text: str, out: Path, written: list[Path]) -> list[str]:
    """decomposition.md/.json and a figure per variant; the index's section."""
    sections: list[str] = []
    for d in decompositions:
        lines = decomposition_markdown(d, rule_text)
        figure = "decomposition-" + re.sub(r"[^A-Za-z0-9._-]+", "-", d["variant"]) + ".png"
        if figures.decomposition(d, out / figure):
            written.append(out / figure)
            lines[2:2] = [f"![instruction × weights: {d['variant']}]({figure})", ""]
        sections += lines
    atomic_write_text(out / "decomposition.md", "# Instruction × weights\n\n" + "\n".join(sections))
    atomic_write_json(out / "decomposition.json", list(decompositions))
    written += [out / "decomposition.md", out / "decomposition.json"]
    return sections
