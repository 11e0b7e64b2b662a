"""`inspo report`: a self-contained report (PNG figures, Table 1, lineages, overhead, index.md) from runs.

    inspo report runs/ablations/world                          # -> runs/ablations/world/report/
    inspo report runs/inspo-s0 runs/inspo-s1 runs/inspo-s2 runs/search-r1-s0 --out reports/fig2

Ablation directories give one variant per planned variant; loose run directories are grouped by recipe (runs
that differ only in their seed are seeds of one variant). Loads no model.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from inspo_cli.console import console, user_errors


@user_errors
def report(
    paths: Annotated[list[Path], typer.Argument(help="Run directories and/or ablation directories.")],
    out: Annotated[Optional[Path], typer.Option(help="The report directory (default: <ablation>/report for one "
                                                     "ablation, else reports/<timestamp>).")] = None,
    checkpoint: Annotated[str, typer.Option(help="Which evaluation of each run the tables use: best (App. B: the "
                                                 "final checkpoint before any reward collapse) or final.")] = "best",
    reference: Annotated[Optional[str], typer.Option(help="The variant every other is compared with (default: "
                                                          "search-r1 when there is one, else the first).")] = None,
    target_diff: Annotated[float, typer.Option(help="The EM difference whose needed number of seeds the power "
                                                    "lines give.")] = 0.05,
) -> None:
    """Figures over seeds (Fig. 2, 3/6, 5), Table 1 with differences, p-values and power, instruction lineages and
    App. C's overhead, with index.md."""
    from inspo_cli.commands.ablate import table_options
    from inspo_cli.reporting.report import write_report
    from inspo_cli.reporting.sources import load_groups

    options = table_options(checkpoint, reference, target_diff)
    groups = load_groups(paths, options["rule"])
    if out is None:
        single = len(paths) == 1 and (paths[0] / "plan.json").is_file()
        out = paths[0] / "report" if single else Path("reports") / time.strftime("%Y%m%d-%H%M%S")
    written = write_report(groups, out, **options)
    console.print(f"{len(groups)} variants, {sum(len(g.runs) for g in groups)} runs; "
                  f"{len(written)} files in {out}", soft_wrap=True)
    console.print(f"open {out / 'index.md'}", soft_wrap=True)
