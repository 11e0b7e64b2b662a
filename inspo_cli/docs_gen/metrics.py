"""docs/reference/metrics.md: every name a run logs per step, from the one declared table `inspo_cli.metric_names`."""

from __future__ import annotations

from inspo_cli.docs_gen.markdown import code, generated_note, prose
from inspo_cli.metric_names import METRICS
from inspo_cli.runs import RunDir

PAGE = "reference/metrics.md"


def markdown() -> str:
    """The whole page: one table per group of names, in the table's order."""
    out = [
        "# Logged metrics",
        "",
        generated_note(),
        "",
        f"What each name in a run's `{RunDir.METRICS}` means: one JSON row per training step (or frozen-policy "
        f"step), the same scalars in `{RunDir.TENSORBOARD}/` and, with `run.report_to`, in W&B. A name in angle "
        "brackets stands for "
        "one path segment: `tools/search/calls` is `tools/<tool>/calls`. A row holds the names its run produces "
        "(no population, no `population/...`; SFT has no rewards); a value may be null. The names are declared in "
        "`inspo_cli/metric_names.py`, and the tests fail on a logged name that is not.",
        "",
    ]
    groups = list(dict.fromkeys(metric.group for metric in METRICS))
    for group in groups:
        out += [f"## {group}", "", "| name | what it is | written by |", "|---|---|---|"]
        for metric in METRICS:
            if metric.group == group:
                out.append(f"| {code(metric.name)} | {prose(metric.meaning)} | {metric.source} |")
        out.append("")
    return "\n".join(out)
