"""How `inspo recipe plan` shows a `ResourcePlan`: one table per launch, the step's tokens and time, and JSON."""

from __future__ import annotations

import math

from rich.table import Table

from inspo_cli.config.resource_plan import (
    CUDA_CONTEXT_GIB,
    DECODE_MS,
    EFFECTIVE_TFLOPS,
    FRAGMENTATION,
    GiB,
    LaunchPlan,
    ResourcePlan,
)

PHASES = ("load", "generation", "update", "optimizer step")


def launch_table(plan: LaunchPlan) -> Table:
    table = Table(title=f"{plan.label}: GiB per process", title_justify="left")
    table.add_column("term")
    phases = [phase for phase in PHASES if phase in plan.phases]  # SFT has no generation
    for phase in phases:
        table.add_column(phase, justify="right")
    terms = sorted(
        dict.fromkeys(term for phase in reversed(phases) for term in plan.phases[phase]),
        key=lambda term: term.startswith("overhead"),
    )  # the update's order, the overhead last
    for term in terms:
        values = [plan.phases[phase].get(term, 0.0) for phase in phases]
        if any(values):
            table.add_row(term, *(f"{value / GiB:.2f}" if value else "-" for value in values))
    peak = plan.peak_phase
    table.add_row("[bold]total[/]", *(f"[bold]{plan.total(phase) / GiB:.2f}[/]" for phase in phases))
    verdict = "[green]yes[/]" if plan.fits else "[red]no[/]"
    table.add_row("fits", *(f"{verdict} ({plan.gpu_gib:g})" if phase == peak else "" for phase in phases))
    return table


def summary_lines(plan: ResourcePlan) -> list[str]:
    a, lengths = plan.architecture, plan.lengths
    return [
        f"model: {plan.parameters / 1e9:.3f}B parameters ({a.layers} layers, hidden {a.hidden}, {a.kv_heads} kv heads "
        f"of {a.head_dim}, vocabulary {a.vocab}, embeddings {'tied' if a.tied_embeddings else 'untied'}; "
        f"{a.source})",
        f"lengths: prompt {lengths['prompt']}, {lengths['turns']} turns of {lengths['turn']}, observations "
        f"{lengths['observation']}, trajectory {lengths['trajectory']} tokens (an upper bound unless narrowed with "
        "--prompt-tokens / --observation-tokens / --trajectory-tokens)",
        *_step_lines(plan),
        f"constants: decode {DECODE_MS:g} ms per step (plain HF generate, Qwen2.5-3B, batch 8, H100; the rollout of "
        "a real 3B step decoded at 80-120 on an H200: likely cuDNN attention's builds per shape, which decoding now "
        "avoids; not yet measured), update at "
        f"{EFFECTIVE_TFLOPS:g} TFLOP/s per GPU, {CUDA_CONTEXT_GIB:g} GiB CUDA context and {FRAGMENTATION:.0%} "
        "allocator reserve per process; override the times with --decode-ms and --update-tokens-per-s",
        "predicted, not measured: memory anchored on four GPU measurements and one CPU run "
        "(tests/config/test_resource_plan.py)",
    ]


def _step_lines(plan: ResourcePlan) -> list[str]:
    """A step's generation batch, policy tokens and time; for training that does not generate (SFT, rejection
    sampling's updates: no plan has a generation phase), its update time alone."""
    lengths, update = (
        plan.lengths,
        f"update {_seconds(plan.seconds['update'])} ({plan.update_tokens_per_s:,.0f} tokens/s per GPU)",
    )
    if not any("generation" in p.phases for p in plan.launches.values()):
        return [
            "no generation while training (SFT, or rejection sampling's updates; its sampling phase, which generates "
            "with sampling.generation_batch_size, is not planned here)",
            f"time per step on {plan.timed}: {update}",
        ]
    capped = lengths["decode_steps"] < lengths["turns"] * lengths["turn"]
    return [
        "generation batch per process: "
        + ", ".join(f"{p.label} {p.generation_batch}" for p in plan.launches.values() if p.problem is None),
        f"policy tokens per step: at most {plan.policy_tokens_per_step:,} ("
        + (
            f"every trajectory decoding {lengths['decode_steps']:,} tokens: the response cap, or the trajectory's "
            "room after its prompt)"
            if capped
            else "every trajectory's every turn at its limit)"
        ),
        f"time per step on {plan.timed}: generation {_seconds(plan.seconds['generation'])} "
        f"({plan.timing.decode_ms:g} ms per decode step), {update}",
    ]


def _seconds(value: float) -> str:
    if math.isnan(value):
        return "-"
    return f"{value:.0f} s" if value < 600 else f"{value / 60:.0f} min"


def plan_json(plan: ResourcePlan, refusal: str | None) -> dict:
    a = plan.architecture
    return {
        "model": {
            "parameters": plan.parameters,
            "source": a.source,
            "layers": a.layers,
            "hidden": a.hidden,
            "intermediate": a.intermediate,
            "heads": a.heads,
            "kv_heads": a.kv_heads,
            "head_dim": a.head_dim,
            "vocab": a.vocab,
            "tied_embeddings": a.tied_embeddings,
        },
        "hardware": {"gpus": plan.hardware.gpus, "gpu_gib": plan.hardware.gpu_gib, "device": plan.hardware.device},
        "lengths": plan.lengths,
        "launches": {
            name: {
                "label": p.label,
                "processes": p.processes,
                "lora": p.lora,
                "generation_batch": p.generation_batch,
                "problem": p.problem,
                "phases_gib": {
                    phase: {term: value / GiB for term, value in terms.items()} for phase, terms in p.phases.items()
                },
                "totals_gib": {phase: p.total(phase) / GiB for phase in p.phases},
                "activations_other_checkpointing_gib": p.activations_other / GiB,
                "peak_phase": p.peak_phase if p.phases else None,
                "peak_gib": p.peak_gib if p.phases else None,
                "fits": p.fits,
            }
            for name, p in plan.launches.items()
        },
        "policy_tokens_per_step": plan.policy_tokens_per_step,
        "seconds_per_step": {k: (None if math.isnan(v) else v) for k, v in plan.seconds.items()},
        "decode_ms": plan.timing.decode_ms,
        "update_tokens_per_s": plan.update_tokens_per_s,
        "timed_launch": plan.timed,
        "refusal": refusal,
    }
