"""What `inspo ablate` prints and how it runs a plan here: the plan (--dry-run), one command per unfinished run
(--print-commands), the runs one after another or in --workers processes, and the table with its comparisons."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from inspo_cli.console import console, err_console


def print_plan(plan, target: Path, as_json: bool, slurm: dict | None = None) -> None:
    """The plan; with `slurm` (--scheduler slurm) also the job array it would submit."""
    if as_json:
        typer.echo(json.dumps({**plan.as_dict(), "out": str(target), **({"slurm": slurm} if slurm else {})}, indent=2))
        return
    typer.echo(
        f"ablation {plan.name}: {len(plan.variants)} variants x {len(plan.seeds)} seeds "
        f"({', '.join(map(str, plan.seeds))}) = {len(plan.runs())} runs -> {target}"
    )
    width = max(len(v.name) for v in plan.variants)
    for v in plan.variants:
        settings = " ".join([v.recipe, *(f"--set {shlex.quote(o)}" for o in v.overrides)])
        typer.echo(
            f"  {v.name:<{width}}  stands for: {', '.join(v.bars) or '(base recipe)'}\n  {'':<{width}}  {settings}"
        )
    for name, into in plan.merged.items():
        typer.echo(f"  {name} resolves to the same recipe as {into}: not run twice; its bars join {into}'s")
    typer.echo(f"runs, in order: {' '.join(r.name for r in plan.runs())}")
    if slurm:
        typer.echo(f"\n{slurm['text']}")


def print_commands(ablation, launcher: str, device: str | None = None) -> None:
    """One shell line per unfinished run: a cut-off run resumes from its directory (a new `--name` would make
    <name>-2, which --collect never reads); one cut off before its first checkpoint is removed and started over."""
    from inspo_cli.ablation.directory import ABSENT, FINISHED
    from inspo_cli.ablation.runner import command_line
    from inspo_cli.training.stages import resume_possible

    pending = [r for r in ablation.plan.runs() if ablation.status(r) != FINISHED]
    lines = []
    on = ["--device", device] if device else []
    for run in pending:
        directory = ablation.run_dir(run)
        if ablation.status(run) == ABSENT:
            lines.append(shlex.join(command_line(ablation, run, launcher) + on))
        elif resume_possible(directory):
            lines.append(shlex.join(command_line(ablation, run, launcher, resume=True) + on))
        else:
            lines.append(
                f"rm -rf -- {shlex.quote(str(directory.path))} && "
                + shlex.join(command_line(ablation, run, launcher) + on)
            )
    for line in lines:
        typer.echo(line)
    err_console.print(
        f"{len(pending)} of {len(ablation.plan.runs())} runs to go; afterwards: inspo ablate "
        f"--collect {shlex.quote(str(ablation))}"
    )


def run_here(
    ablation,
    device: str | None,
    as_json: bool,
    options: dict,
    launcher: str = "inspo",
    workers: int = 1,
    gpus_per_run: int | None = None,
) -> None:
    from inspo_cli.ablation.runner import run_plan
    from inspo_cli.ablation.workers import run_parallel

    err_console.print(
        f"ablation {ablation.plan.name}: {len(ablation.plan.runs())} runs in {ablation}"
        + (f", {workers} at once" if workers > 1 else "")
    )
    on_event = lambda line: err_console.print(escape(line))  # noqa: E731
    try:
        if workers > 1:
            run_parallel(ablation, workers, gpus_per_run, device, on_event, options["rule"], launcher)
        else:
            run_plan(ablation, device, on_event=on_event, rule=options["rule"], launcher=launcher)
    except KeyboardInterrupt:
        err_console.print(f"interrupted; the same command continues it (finished runs are kept): {ablation}")
        raise typer.Exit(130) from None
    finish(ablation, as_json, options)


def finish(ablation, as_json: bool, options: dict) -> None:
    """Write and print the table. Exit 1 when a planned run has no result (failed, stopped, not run)."""
    from inspo_cli.ablation.table import collect
    from inspo_cli.ablation.table_files import write_table

    table = collect(ablation, **options)
    write_table(ablation, table)
    if as_json:
        typer.echo(json.dumps(table, indent=2))
    else:
        _print_table(table)
        console.print(f"table: {ablation.table_file('md', table['metric'])} (and .json, .csv)")
    missing = [m for row in table["rows"] for m in row["missing"]]
    if missing:
        err_console.print(
            f"{len(missing)} runs without a result: " + "; ".join(f"{m['run']} ({m['why']})" for m in missing[:5])
        )
        raise typer.Exit(1)


def _print_table(table: dict) -> None:
    from inspo_cli.ablation.formatting import cell, delta_cell
    from inspo_cli.ablation.table_files import comparison_of, steps_cell

    shown = Table(
        title=f"ablation {table['name']}: {table['metric_label']} at {table['rule_text']}, mean ± 95% interval "
        "over seeds and questions",
        title_justify="left",
    )
    for column in (
        "variant",
        "stands for",
        "n",
        "steps used",
        *table["benchmarks"],
        "avg.",
        f"Δ avg. vs {table['reference']}",
    ):
        shown.add_column(column)
    for row in table["rows"]:
        delta = (
            "(reference)"
            if row["variant"] == table["reference"]
            else delta_cell((comparison_of(table, row["variant"]) or {}).get("average"))
        )
        shown.add_row(
            row["variant"],
            ", ".join(row["bars"]) or "(base recipe)",
            str(row["n"]),
            steps_cell(row),
            *(cell(row["em"].get(b)) for b in table["benchmarks"]),
            cell(row["average"]),
            delta,
        )
    console.print(shown)
    for comparison in table["comparisons"]:
        console.print(escape(comparison["sentence"]), soft_wrap=True)
    for comparison in table["comparisons"]:
        console.print(escape(f"power: {comparison['power_sentence']}"), soft_wrap=True)
