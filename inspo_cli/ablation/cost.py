"""What each run cost, beside what it scored: device-hours, optimizer calls, tokens and dollars, INSPO's share.

    run_cost(RunDir("runs/ablations/world/runs/inspo-s0"))
    # {"device": "cpu", "processes": 1, "hours": 0.12, "gpu_hours": None, "optimizer_calls": 4, "tokens": 3341,
    #  "cost_usd": 0.0, "evolution_share": 0.124}
    variant_cost([...run costs of its seeds...])          # means over the seeds that have each figure
    cost_sentence(comparison, variant_cost, reference_cost)   # "for +3% GPU-hours and $12 of optimizer calls"

Hours are the run's wall time (`summary.json` wall_seconds, summed over resumes) times its processes (one device
each under `accelerate launch`): GPU-hours on CUDA, CPU process-hours on a CPU. A vLLM server's GPUs in
`model.vllm_mode: server` are not the run's processes and are not counted. Runs finished before summaries recorded
their processes and device have no hours ("-"), never a guess. Optimizer figures come from the run's record
(optimizer_calls.jsonl, `call_record.summarize_record`): its calls, tokens and, where every answered call's price is
known, dollars; a run without a record gives its summary's call and token counts and no dollars. The evolution share
is App. C's: the wall time spent evolving instructions over the run's wall time.
"""

from __future__ import annotations

from collections.abc import Sequence

from inspo_cli.ablation.formatting import p_text, signed
from inspo_cli.instructions.providers.call_record import summarize_record
from inspo_cli.runs import RunDir

FIELDS = ("hours", "gpu_hours", "optimizer_calls", "tokens", "cost_usd", "evolution_share")


def never_evolved(overhead: dict) -> bool:
    """A population's overhead account (summary.json's `overhead`) of one that never evolved: no evolution, and no
    optimizer call was made, so its optimizer figures are 0, not unknown."""
    return overhead.get("evolutions") == 0 and not overhead.get("optimizer")


def run_cost(run: RunDir) -> dict:
    """One finished run's cost (see the module docstring); a figure the run cannot tell is None."""
    summary = run.summary() or {}
    compute = summary.get("compute") or {}
    wall, processes, device = summary.get("wall_seconds"), compute.get("processes"), compute.get("device")
    hours = wall * processes / 3600 if isinstance(wall, (int, float)) and isinstance(processes, int) else None
    overhead = summary.get("overhead") or {}
    optimizer = overhead.get("optimizer") or {}
    # no population, or one that never evolved (no optimizer was ever asked): nothing spent on the optimizer
    idle = bool(summary) and (not overhead or never_evolved(overhead))
    cost: dict = {
        "device": device,
        "processes": processes,
        "hours": hours,
        "gpu_hours": hours if hours is not None and str(device).startswith("cuda") else None,
        "optimizer_calls": optimizer.get("calls", 0 if idle else None),
        "tokens": optimizer.get("total_tokens", 0 if idle else None),
        "cost_usd": 0.0 if idle else None,
        "evolution_share": overhead.get("share_of_wall_time", 0.0 if idle else None),
    }
    records = [
        file
        for file in [
            run.optimizer_calls_file,
            *(run.path / s["dir"] / RunDir.OPTIMIZER_CALLS for s in summary.get("stages") or []),
        ]
        if file.is_file()
    ]  # a chained run's calls are its evolve stage's
    if records:
        totals = [summarize_record(file) for file in records]
        prices = [t["cost_usd"] for t in totals]
        cost.update(
            optimizer_calls=sum(t["answered_calls"] for t in totals),
            tokens=sum(t["total_tokens"] for t in totals),
            cost_usd=None if None in prices else sum(prices),
        )
    return cost


def variant_cost(costs: Sequence[dict]) -> dict:
    """Per figure, the mean over the seeds (runs) that have it, and how many do; the device kind when they agree."""
    out: dict = {"runs": len(costs)}
    for name in FIELDS:
        values = [c[name] for c in costs if c.get(name) is not None]
        out[name] = sum(values) / len(values) if values and len(values) == len(costs) else None
    devices = {c.get("device") for c in costs}
    out["device"] = devices.pop() if len(devices) == 1 else None
    return out


def hours_label(cost: dict) -> str:
    """What the hours column is: GPU-hours on CUDA, CPU process-hours on a CPU."""
    return "GPU-hours" if str(cost.get("device")).startswith("cuda") else "CPU process-hours"


def cost_sentence(variant: dict, reference: dict) -> str | None:
    """ "for +3% GPU-hours and $12.00 more of optimizer calls": what the variant's difference cost per run against the
    reference (means over seeds), or None when neither can be told."""
    parts = []
    if variant["hours"] is not None and reference["hours"]:
        parts.append(f"{(variant['hours'] / reference['hours'] - 1) * 100:+.0f}% {hours_label(variant)}")
    if variant["cost_usd"] is not None and reference["cost_usd"] is not None:
        more = variant["cost_usd"] - reference["cost_usd"]
        parts.append(f"${abs(more):,.2f} {'more' if more >= 0 else 'less'} of optimizer calls per run")
    elif variant["optimizer_calls"] is not None and variant["tokens"] is not None:
        parts.append(
            f"{variant['optimizer_calls']:.0f} optimizer calls and {variant['tokens']:,.0f} tokens per run "
            "(price unknown)"
        )
    return "for " + " and ".join(parts) if parts else None


def cost_cells(cost: dict) -> list[str]:
    """A variant's cost as table cells: hours, optimizer calls, tokens, dollars, evolution share."""

    def number(value, form: str) -> str:
        return "-" if value is None else format(value, form)

    return [
        number(cost["hours"], ".3f") + (f" ({hours_label(cost)})" if cost["hours"] is not None else ""),
        number(cost["optimizer_calls"], ".1f"),
        number(cost["tokens"], ",.0f"),
        "-" if cost["cost_usd"] is None else f"${cost['cost_usd']:,.2f}",
        "-" if cost["evolution_share"] is None else f"{cost['evolution_share'] * 100:.1f}%",
    ]


COST_HEADER = [
    "variant",
    "runs",
    "hours per run",
    "optimizer calls",
    "optimizer tokens",
    "optimizer $",
    "evolution share of wall",
]


def cost_line(
    variant: str, reference: str, difference: dict | None, cost: dict, reference_cost: dict, metric: str = "EM"
) -> str:
    """ "inspo vs search-r1: +0.040 EM [+0.010, +0.070] for +3% GPU-hours and $12.00 more of optimizer calls per
    run": a comparison on the average with what it cost."""
    what = cost_sentence(cost, reference_cost)
    if difference is None:
        em = "no difference of averages"
    elif difference.get("p") is None:
        em = f"{signed(difference['diff'])} {metric}"
    else:
        em = (
            f"{signed(difference['diff'])} {metric} [{signed(difference['low'])}, {signed(difference['high'])}], "
            f"{p_text(difference['p'])},"
        )
    return f"{variant} vs {reference}: {em}" + (f" {what}" if what else " (cost unknown)")


def cost_section(table: dict) -> list[str]:
    """Markdown: each variant's cost per run (means over its seeds with a result) and one line per comparison."""
    rows = [row for row in table["rows"] if row.get("cost")]
    if not rows:
        return []
    lines = [
        "## What each variant cost",
        "",
        "Per run, mean over the seeds with a result: hours = wall time x processes (GPU-hours on CUDA; CPU "
        "process-hours on a CPU); the optimizer's calls, tokens and dollars from the run's record "
        "(optimizer_calls.jsonl; - where a price is unknown); the evolution share is App. C's share of the wall "
        "time spent evolving instructions.",
        "",
        "| " + " | ".join(COST_HEADER) + " |",
        "|" + "---|" * len(COST_HEADER),
    ]
    for row in rows:
        lines.append("| " + " | ".join([row["variant"], str(row["cost"]["runs"]), *cost_cells(row["cost"])]) + " |")
    sentences = [c["cost_line"] for c in table["comparisons"] if c.get("cost_line")]
    return lines + ([""] + [f"- {s}." for s in sentences] if sentences else []) + [""]
