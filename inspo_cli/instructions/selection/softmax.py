"""The paper's selection (eq. 4): softmax(w / tau_s) over the alive instructions' weights."""

from __future__ import annotations

import math

from inspo_cli.instructions.selection.base import FixedDistribution


def build(arms, config, batch: int) -> FixedDistribution:
    scaled = [arm.weight / config.temperature for arm in arms]
    top = max(scaled)  # subtracting the max keeps exp() from overflowing at low temperatures
    return FixedDistribution([math.exp(s - top) for s in scaled])
