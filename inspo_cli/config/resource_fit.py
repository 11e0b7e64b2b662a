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
        else "nothing planned; shorten rollout.max_total_tokens, lower rollout.generation_batch_size, or use "
        "larger GPUs"
    )
    return f"the recipe {needs}; fits: {advice}"
