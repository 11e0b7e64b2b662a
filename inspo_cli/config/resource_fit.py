"""Whether a recipe fits the machine asked for, and if not, where it would: the one-line refusal of `inspo recipe plan`.

plan = resource_plan(recipe, architecture, hardware)                      # resource_plan.py
refused = refusal(plan, ("one-gpu",))                                     # None when a requested launch fits
refused = refusal(plan, requested, fitting_elsewhere(recipe, architecture, hardware, lengths, timing))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from inspo_cli.config.architecture import Architecture
from inspo_cli.config.resource_plan import (
    DEFAULT_GPUS,
    GiB,
    Hardware,
    LaunchPlan,
    Lengths,
    ResourcePlan,
    Timing,
    resource_plan,
)


def fitting_elsewhere(
    recipe, arch: Architecture, hardware: Hardware, lengths: Lengths, timing: Timing
) -> list[tuple[LaunchPlan, str]]:
    """Launches that fit when the requested ones do not, each with what it changes: more GPUs of the same memory (a
    node of 8), else a smaller micro-batch on the widest node (halved until one fits)."""
    wider = replace(hardware, gpus=max(hardware.gpus, DEFAULT_GPUS))
    found = [(p, "") for p in resource_plan(recipe, arch, wider, lengths, timing).launches.values() if p.fits]
    micro = recipe.training.micro_batch_size
    while not found and micro > 1:
        micro //= 2
        smaller = replace(recipe, training=replace(recipe.training, micro_batch_size=micro))
        found = [
            (p, f" with training.micro_batch_size={micro}")
            for p in resource_plan(smaller, arch, wider, lengths, timing).launches.values()
            if p.fits
        ]
    return found


# What can still lower the peak once no launch fits at a micro-batch of 1, by the phase the peak is in (the load
# and the optimizer step: weights and optimizer state, which only sharding or memory changes)
NOTHING_FITS = {
    "generation": "shorten rollout.max_total_tokens, lower rollout.generation_batch_size (transformers backend) or "
    "model.vllm_gpu_memory_utilization (vLLM), or use larger GPUs",
    "update": "shorten rollout.max_total_tokens, or use larger GPUs",
}
WEIGHTS_BOUND = "use more GPUs (ZeRO-3, FSDP2 shard the weights and optimizer) or larger ones"
NOTHING_ELSE = (  # the launch asked for cannot run at all (its problem is named before this)
    "shorten rollout.max_total_tokens, lower rollout.generation_batch_size, or use more or larger GPUs"
)


def refusal(
    plan: ResourcePlan, requested: tuple[str, ...], elsewhere: Sequence[tuple[LaunchPlan, str]] = ()
) -> str | None:
    """None when a requested launch fits; else one line: the peak, the memory, and what fits (among the planned
    launches, else `elsewhere`: `fitting_elsewhere`'s)."""
    asked = [plan.launches[name] for name in requested if name in plan.launches]
    if any(p.fits for p in asked):
        return None
    smallest = min(asked, key=lambda p: p.peak_gib)
    fitting = [(p, "") for p in plan.launches.values() if p.fits] or list(elsewhere)
    hw = plan.hardware
    where = f"{smallest.processes} GPU{'s' if smallest.processes > 1 else ''} of {hw.gpu_gib:g} GiB"
    needs = (
        f"cannot run as {smallest.label}: {smallest.problem}"
        if smallest.problem
        else f"needs {smallest.peak_gib:.0f} GiB per process as {smallest.label} ({smallest.peak_phase}) on {where}"
    )
    advice = (
        ", or ".join(f"{p.label}{change} ({p.peak_gib:.0f} GiB)" for p, change in fitting)
        if fitting
        else "nothing planned; "
        + (NOTHING_FITS.get(smallest.peak_phase, WEIGHTS_BOUND) if smallest.problem is None else NOTHING_ELSE)
    )
    return f"the recipe {needs}; fits: {advice}"


def _terms_gib(plan: LaunchPlan) -> dict[str, float]:
    """The terms of the plan's peak phase, in GiB."""
    return {k: v / GiB for k, v in plan.phases[plan.peak_phase].items()}


def one_gpu_fit(recipe, arch: Architecture, gpu_gib: float) -> tuple[str | None, str | None]:
    """For a run in one process on one GPU of `gpu_gib`: (refusal, warning), each one line or None.

    Refused when the one-GPU launch does not fit even with every trajectory one token long: what no length setting
    changes (weights, gradients, Adam's state, the KL reference, vLLM's share of the card) is already over the card,
    so the run would stop by its first optimizer step. Warned when it fits only below the recipe's bound (every
    trajectory as long as `rollout.max_total_tokens` allows): a batch of long trajectories may run out of memory."""
    hardware = Hardware(1, gpu_gib)
    planned = resource_plan(recipe, arch, hardware)
    bound = planned.launches["one-gpu"]
    if bound.problem is not None or bound.fits:
        return None, None
    plan_command = f"inspo recipe plan RECIPE --gpus 1 --gpu-memory {gpu_gib:.1f} --launch one-gpu"
    shortest = resource_plan(recipe, arch, hardware, Lengths(prompt=1, observation=1, trajectory=1))
    one = shortest.launches["one-gpu"]
    if not one.fits:
        terms = _terms_gib(one)
        largest = ", ".join(f"{k} {v:.0f}" for k, v in sorted(terms.items(), key=lambda kv: -kv[1]) if v >= 1)[:200]
        advice = []
        if terms.get("vLLM share", 0) >= 1:
            advice.append(
                "model.vllm_enable_sleep_mode=true, a lower model.vllm_gpu_memory_utilization or "
                "model.backend=transformers"
            )
        lora = shortest.launches.get("one-gpu+lora")
        if not recipe.model.lora and lora is not None and lora.fits:
            advice.append("model.lora=true")
        advice.append(
            "a launch over several GPUs (accelerate launch --config_file recipes/accelerate/8gpu-zero3.yaml "
            "-m inspo_cli train ...)"
        )
        return (
            f"the recipe needs {one.peak_gib:.1f} GiB on {bound.label} ({one.peak_phase}: {largest} GiB) whatever the "
            f"trajectories' lengths and this GPU has {gpu_gib:.1f} GiB; use {', or '.join(advice)} ({plan_command})"
        ), None
    return None, (
        f"at the recipe's length bound (trajectories of {planned.lengths['trajectory']:,} tokens) {bound.label} needs "
        f"{bound.peak_gib:.1f} GiB ({bound.peak_phase}) on this {gpu_gib:.1f} GiB GPU: a batch of long trajectories "
        f"may run out of memory ({plan_command} --trajectory-tokens N says what fits)"
    )
