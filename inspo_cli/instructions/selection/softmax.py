"""The paper's selection (eq. 4): softmax(w / tau_s) over the alive instructions' weights."""

from __future__ import annotations

import math

from inspo_cli.instructions.selection.base import FixedDistribution


def build(arms, config, batch: int) -> FixedDistribution:
    # Shifted by the largest weight before dividing: every exponent is then (w - max) / tau_s <= 0, and the best
    # arm's is exactly 0, so no tau_s > 0 overflows (w / 1e-310 is inf, and inf - inf is NaN) or leaves all zeros.
    top = max(arm.weight for arm in arms)
    return FixedDistribution([math.exp((arm.weight - top) / config.temperature) for arm in arms])
