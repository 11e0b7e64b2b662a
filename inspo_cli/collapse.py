"""Reward collapse: the training reward falling far below its best, the signal App. B reports around.

The paper evaluates every 100 steps "and we report the final checkpoint before any reward collapse" (App. B),
without defining a collapse. The rule here: take the mean training reward over the last `window` steps; a
collapse is the first step at which that mean falls below (1 - drop) x its best value so far. The collapse
begins after the step where that best window ended (`peak_step`), so "before any reward collapse" means a
checkpoint at or before `peak_step`. Short runs (fewer than `window` steps) never collapse, and `drop` 0 turns the
check off.

    collapse = detect_collapse(RunDir(path).metrics(), window=10, drop=0.5)
    if collapse: print(collapse.describe())
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class RewardCollapse:
    detected_at: int  # the step whose window mean first fell below the threshold
    peak_step: int  # the last step of the best window before it
    peak_reward: float  # that best window mean
    reward: float  # the window mean at detection
    window: int
    drop: float

    def as_dict(self) -> dict:
        return asdict(self)

    def describe(self) -> str:
        return (
            f"reward collapse at step {self.detected_at}: the mean reward over {self.window} steps fell to "
            f"{self.reward:.3f}, below {1 - self.drop:.0%} of its peak {self.peak_reward:.3f} (steps up to "
            f"{self.peak_step})"
        )


def detect_collapse(rows: Sequence[dict], window: int, drop: float) -> RewardCollapse | None:
    """The first collapse in metrics rows (each with "step" and "reward"), or None."""
    if drop <= 0 or window < 1:
        return None
    steps = [
        (row["step"], row["reward"])
        for row in rows
        if isinstance(row.get("reward"), (int, float)) and math.isfinite(row["reward"])
    ]
    peak, peak_step = -math.inf, None
    for end in range(window, len(steps) + 1):
        mean = math.fsum(r for _, r in steps[end - window : end]) / window
        step = steps[end - 1][0]
        if peak_step is not None and peak > 0 and mean < (1 - drop) * peak:
            return RewardCollapse(step, peak_step, peak, mean, window, drop)
        if mean > peak:
            peak, peak_step = mean, step
    return None
