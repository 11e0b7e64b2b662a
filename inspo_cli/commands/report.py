"""`inspo report`: a self-contained report (PNG figures, Table 1, lineages, overhead, index.md) from runs.

    inspo report runs/ablations/world                          # -> runs/ablations/world/report/
    inspo report runs/inspo-s0 runs/inspo-s1 runs/inspo-s2 runs/search-r1-s0 --out reports/fig2
    inspo report runs/ablations/world --decompose inspo        # + instruction x weights (evaluates what it needs)

Ablation directories give one variant per planned variant; loose run directories are grouped by recipe (runs
that differ only in their seed are seeds of one variant). Loads no model, except with --decompose: the cells no
earlier report evaluated (`ablation.decompose`) are evaluated into each run's decomposition/ and read from there
next time.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from inspo_cli.console import console, err_console, progress_bar, user_errors
from inspo_cli.errors import InspoError


@user_errors
def report(
    paths: Annotated[list[Path], typer.Argument(help="Run directories and/or ablation directories.")],
    out: Annotated[
        Path | None,
        typer.Option(
            help="The report directory (default: <ablation>/report, or report-<metric> with --metric, for one "
            "ablation, else reports/<timestamp>). An earlier report there is replaced whole; one in another "
            "--metric is refused."
        ),
    ] = None,
    checkpoint: Annotated[
        str,
        typer.Option(
            help="Which evaluation of each run the tables use: best (App. B: the "
            "final checkpoint before any reward collapse) or final."
        ),
    ] = "best",
    reference: Annotated[
        str | None,
        typer.Option(
            help="The variant every other is compared with (default: "
            "search-r1 when there is one, else the first variant with no "
            "instruction population, else the first)."
        ),
    ] = None,
    target_diff: Annotated[
        float, typer.Option(help="The EM difference whose needed number of seeds the power lines give.")
    ] = 0.05,
    metric: Annotated[
        str,
        typer.Option(
            help="The score Table 1 and bars.png report: em (the paper's), f1, subem, or judge (the LLM judge's "
            "verdicts; `inspo evaluate --judge DIR` adds them to an evaluation without); written as "
            "table1-<metric>.*. Curves and --decompose stay EM."
        ),
    ] = "em",
    decompose: Annotated[
        str | None,
        typer.Option(
            help="Take these variants apart into instruction × weights "
            "(comma-separated, or all: every variant with an "
            "instruction population): the initial and trained policy "
            "with the seed instruction and the evolved I*, and the "
            "static baseline's policy with I*, with effects, intervals "
            "and p. Evaluates the cells no earlier report did into "
            "each run's decomposition/ (loads the models)."
        ),
    ] = None,
    device: Annotated[
        str | None, typer.Option(help="--decompose: cpu or cuda for its evaluations (default: cuda when available).")
    ] = None,
    audit: Annotated[
        bool,
        typer.Option(
            "--audit",
            help="Audit every INSPO run's evolutions (audit.md, audit.json): each accepted candidate's "
            "diff to its parent, its verification per question type, and flags for verifier-sensitive "
            "behaviour in the rollouts before and after (docs/audit.md).",
        ),
    ] = False,
) -> None:
    """Figures over seeds (Fig. 2, 3/6, 5), Table 1 with differences, p-values and power, instruction lineages and
    App. C's overhead, with index.md."""
    from inspo_cli.ablation.directory import AblationDir
    from inspo_cli.commands.ablate import table_options
    from inspo_cli.reporting.report import write_report
    from inspo_cli.reporting.sources import load_groups

    options = table_options(checkpoint, reference, target_diff, metric)
    if device is not None and decompose is None:
        raise InspoError("--device sets where --decompose evaluates; add --decompose VARIANTS or drop --device")
    groups = load_groups(paths, options["rule"], metric)
    if out is None:
        single = len(paths) == 1 and (paths[0] / AblationDir.PLAN).is_file()
        name = "report" if metric == "em" else f"report-{metric}"  # beside the EM report, not over it
        out = paths[0] / name if single else Path("reports") / time.strftime("%Y%m%d-%H%M%S")
    check_out(out, paths, metric)
    decompositions = _decompose(groups, decompose, options, device) if decompose is not None else []
    audits = _audit(groups) if audit else []
    written = write_report(groups, out, **options, decompositions=decompositions, audits=audits)
    console.print(
        f"{len(groups)} variants, {sum(len(g.runs) for g in groups)} runs; {len(written)} files in {out}",
        soft_wrap=True,
    )
    console.print(f"open {out / 'index.md'}", soft_wrap=True)


def _audit(groups) -> list:
    """Every INSPO run's audit, with a table of what it found on the terminal."""
    from rich.table import Table

    from inspo_cli.reporting.audit import audit_run, is_inspo

    audits = [audit_run(r.run, r.name) for g in groups for r in g.runs if is_inspo(r.run)]
    if not audits:
        raise InspoError("--audit: no run with an instruction population among the inputs; audit INSPO runs")
    table = Table(title="Audit (audit.md)")
    for column in ("run", "step", "accepted", "flags fired", "not measured"):
        table.add_column(column)
    for a in audits:
        for e in a.evolutions:
            checks = [*e.flags, *(f for c in e.candidates for f in c.flags)]
            fired = sorted({f.name for f in checks if f.state == "fired"})
            unmeasured = sorted({f.name for f in checks if f.state == "too few rollouts"})
            accepted = ", ".join(f"{c.candidate_id} <- {c.parent_id}" for c in e.candidates) or "none"
            table.add_row(a.name, str(e.step), accepted, ", ".join(fired) or "none", ", ".join(unmeasured) or "-")
        if not a.evolutions:
            table.add_row(a.name, "-", "-", "-", "; ".join(a.notes) or "no evolution")
    console.print(table)
    return audits


def check_out(out: Path, inputs: list[Path], metric: str = "em") -> None:
    """The report replaces `out` as a whole: refuse one that holds an input, that lies in an input run (or an
    ablation's runs/ or recipes/), or in the checkout's shipped data/, and anything but a new or empty directory or
    an earlier report holding only what it wrote (`reporting.marker`), before any work; and an earlier report in
    another --metric (a judge report never replaces the EM one)."""
    import re

    from inspo_cli.ablation.directory import AblationDir
    from inspo_cli.config import PROJECT_ROOT
    from inspo_cli.files import check_can_create
    from inspo_cli.reporting.marker import check_replaceable, report_files

    check_can_create(out, "--out")
    target = out.resolve()
    if target == (PROJECT_ROOT / "data").resolve() or (PROJECT_ROOT / "data").resolve() in target.parents:
        raise InspoError(
            f"--out {out} is inside the checkout's data/, which holds shipped files; choose a directory under reports/"
        )
    here = Path.cwd().resolve()
    if target == here or target in here.parents:
        raise InspoError(
            f"--out {out} holds the current directory, and a report replaces its --out whole; choose "
            "a directory beside or below it"
        )
    for path in inputs:
        source = path.resolve()
        if target == source or target in source.parents:
            raise InspoError(
                f"--out {out} holds the input {path}, and a report replaces its --out whole; choose another directory"
            )
        if source in target.parents:
            ablation = (path / AblationDir.PLAN).is_file()
            if not ablation or target.relative_to(source).parts[0] in (AblationDir.RUNS, AblationDir.RECIPES):
                raise InspoError(
                    f"--out {out} is inside the input {path}; choose a directory outside it"
                    + (f" (or {path / 'report'})" if ablation else "")
                )
    check_replaceable(out)  # a folder of the user's (an index.md is no proof of a report) is never replaced
    tables = [name for name in report_files(out) if re.fullmatch(r"table1(-[a-z]+)?\.md", name)]
    wanted = "table1.md" if metric == "em" else f"table1-{metric}.md"
    if tables and wanted not in tables:
        default = "report" if metric == "em" else f"report-{metric}"
        raise InspoError(
            f"--out {out} holds a report in another metric ({', '.join(tables)}), which a --metric {metric} report "
            f"would replace whole; choose another --out (an ablation's default is {default}/ beside it)"
        )


def _decompose(groups, which: str, options: dict, device: str | None) -> list[dict]:
    """Plan the decomposition of the variants `which` names, evaluate the cells missing, and compute it."""
    from inspo_cli.ablation.decompose import Variant, build, choose, evaluate_cells, missing
    from inspo_cli.ablation.effects import effects
    from inspo_cli.ablation.table import check_reference, default_reference
    from inspo_cli.policy.models import check_device
    from inspo_cli.reporting.report import is_static

    check_device(device)
    names = None if which.strip().lower() == "all" else [n.strip() for n in which.split(",") if n.strip()]
    if names == []:
        raise InspoError("--decompose is empty; name variants (comma-separated) or all")
    variants = [Variant(g.label, is_static(g), [(r.run, r.result) for r in g.runs if r.result]) for g in groups]
    check_reference(options["reference"], [g.label for g in groups])  # before any evaluation
    reference = options["reference"] or default_reference(
        [{"variant": g.label, "name": g.name, "bars": g.bars, "static": v.static} for g, v in zip(groups, variants)]
    )
    plans = build(choose(variants, names, reference))
    if not plans:
        raise InspoError(
            "--decompose: no variant with an instruction population among the inputs; decompose "
            "INSPO runs (and give a static baseline beside them)"
        )
    every = [seed for _, _, cells in plans for seed in cells]  # one pass: variants share cells (initial · S)
    todo = missing(every)
    if todo:
        err_console.print(
            f"--decompose: {len(todo)} evaluations to run ({', '.join(sorted({s.name for s in todo}))}"
            "); cached in each run's decomposition/ for the next report",
            soft_wrap=True,
        )
        with progress_bar() as progress:
            task = progress.add_task("decomposition cells", total=len(todo))

            def on_cell(spec, how: str) -> None:
                progress.update(
                    task,
                    completed=sum(1 for s in todo if s.cached),
                    description=f"{how} {spec.run.path.name}: {spec.name}",
                )

            evaluate_cells(every, device, on_cell=on_cell)
            progress.update(task, completed=len(todo))
    return [effects(cells, variant, static) for variant, static, cells in plans]
