"""A self-contained report directory from runs and ablations: figures, tables, lineages, overhead, index.md.

    written = write_report(load_groups(["runs/ablations/world"]), Path("runs/ablations/world/report"))

    index.md                    everything below, put together (figures embedded, tables inline)
    fig2_training.png           Fig. 2: reward, tool calls, prompt and response length per step, 95% CI bands
    fig5_test_em.png            Fig. 5: held-out EM at the periodic evaluations over steps
    bars.png                    Fig. 3 / 6: final EM per variant with 95% CI whiskers
    table1.md, .csv, .tex       Table 1: variants x benchmarks EM and the average, mean ± 95% CI, n
    overhead.md, .csv           App. C: optimizer calls and tokens, verification vs training rollouts, wall share
    lineage/<run>.md, .png      each INSPO run's instruction tree, as text and as a picture
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Sequence

from inspo_cli.ablation.table import cell, csv_columns, csv_values, summarize
from inspo_cli.files import make_dir
from inspo_cli.jsonio import atomic_write_text
from inspo_cli.reporting import figures
from inspo_cli.reporting.lineage import lineage_png, lineage_text
from inspo_cli.reporting.sources import Group


def table1(groups: Sequence[Group]) -> dict:
    """Table 1's numbers: per group, the final EM of each seed that has one, summarised over seeds."""
    rows = [{"variant": g.label, "bars": g.bars, "per_seed": {r.seed: r.final_em for r in g.runs if r.final_em},
             "missing": [{"run": r.name, "seed": r.seed, "why": "no evaluation after its last step"}
                         for r in g.runs if not r.final_em]} for g in groups]
    return summarize(rows)


def _markdown_table(table: dict) -> str:
    header = ["method", "n", *table["benchmarks"], "avg."]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in table["rows"]:
        lines.append("| " + " | ".join([row["variant"], str(row["n"]), *(cell(row["em"].get(b))
                                        for b in table["benchmarks"]), f"**{cell(row['average'])}**"]) + " |")
    return "\n".join(lines) + "\n"


def _latex_table(table: dict) -> str:
    def tex(interval: dict | None) -> str:
        return cell(interval, plus=r"$\pm$", missing="--")

    columns = ["Method", *(b.replace("_", r"\_") for b in table["benchmarks"]), "Avg."]
    lines = [r"\begin{tabular}{l" + "c" * (len(columns) - 1) + "}", r"\toprule", " & ".join(columns) + r" \\",
             r"\midrule"]
    for row in table["rows"]:
        cells = [row["variant"].replace("_", r"\_"), *(tex(row["em"].get(b)) for b in table["benchmarks"]),
                 tex(row["average"])]
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
    return _csv(["method", "n", *csv_columns(table["benchmarks"])],
                [[row["variant"], row["n"], *csv_values(row, table["benchmarks"])] for row in table["rows"]])


OVERHEAD_COLUMNS = ("evolutions", "optimizer calls", "optimizer tokens", "verification rollouts",
                    "training rollouts", "verification / training", "evolution share of wall time")


def overhead_rows(groups: Sequence[Group]) -> list[list]:
    """App. C per run that has a population: what evolving cost next to training."""
    rows = []
    for group in groups:
        for run in group.runs:
            account = (run.summary or {}).get("overhead")
            if not account:
                continue
            optimizer = account.get("optimizer") or {}
            tokens = optimizer.get("total_tokens")
            training = account.get("training_rollouts") or 0
            share = account.get("share_of_wall_time")
            rows.append([group.label, run.name, account["evolutions"], optimizer.get("calls", "-"),
                         "-" if tokens is None else tokens,
                         account["verification_rollouts"], training,
                         f"{account['verification_rollouts'] / training:.3f}" if training else "-",
                         f"{share:.3f}" if share is not None else "-"])
    return rows


def write_report(groups: Sequence[Group], out: Path) -> list[Path]:
    """Write the report into `out` (created; existing files of the same names are replaced); the files written."""
    make_dir(out, "--out")
    written: list[Path] = []
    sections = [f"# Report: {', '.join(g.label for g in groups)}", "",
                "Curves and tables are means over seeds with 95% confidence intervals (Student's t; n = seeds). "
                "Runs: " + "; ".join(f"{g.label}: {', '.join(r.name for r in g.runs)}" for g in groups), ""]

    for name, draw, title in (("fig2_training.png", figures.fig2, "Training metrics (Fig. 2)"),
                              ("fig5_test_em.png", figures.fig5, "Test EM over training (Fig. 5)")):
        if draw(groups, out / name):
            written.append(out / name)
            sections += [f"## {title}", "", f"![{title}]({name})", ""]

    table = table1(groups)
    for suffix, text in (("md", _markdown_table(table)), ("csv", _table_csv(table)), ("tex", _latex_table(table))):
        atomic_write_text(out / f"table1.{suffix}", text)
        written.append(out / f"table1.{suffix}")
    sections += ["## Final EM (Table 1 layout)", "",
                 "EM after each run's last step (its final policy with its best instruction, greedy).", "",
                 _markdown_table(table).rstrip(), ""]
    missing = [m for row in table["rows"] for m in row["missing"]]
    if missing:
        sections += ["Without a final evaluation: " + ", ".join(m["run"] for m in missing), ""]
    if figures.bars(table, out / "bars.png"):
        written.append(out / "bars.png")
        sections += ["![Final EM per variant](bars.png)", ""]

    overhead = overhead_rows(groups)
    if overhead:
        header = ["variant", "run", *OVERHEAD_COLUMNS]
        text = "\n".join(["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] +
                         ["| " + " | ".join(map(str, row)) + " |" for row in overhead]) + "\n"
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
            atomic_write_text(stem.with_suffix(".md"), f"# Instructions of {run.name}\n\n```\n"
                              f"{lineage_text(run.instructions)}```\n")
            written.append(stem.with_suffix(".md"))
            if lineage_png(run.instructions, stem.with_suffix(".png"), f"Instruction lineage: {run.name}"):
                written.append(stem.with_suffix(".png"))
            lineages.append(run.name)
    if lineages:
        sections += ["## Instruction lineages", ""]
        for name in lineages:
            sections += [f"### {name}", "", f"![lineage of {name}](lineage/{name}.png)", "",
                         (out / "lineage" / f"{name}.md").read_text(encoding="utf-8").split("\n", 2)[2].rstrip(), ""]
    atomic_write_text(out / "index.md", "\n".join(sections) + "\n")
    written.append(out / "index.md")
    return written
