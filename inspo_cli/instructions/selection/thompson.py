"""Thompson sampling: each question group draws a success rate for every instruction from its posterior and takes
the instruction with the highest draw.

A group's mean reward r (in [0, 1]: EM, plus the format reward) counts as r successes and 1 - r failures, so an
instruction's posterior after its window's groups is Beta(1 + sum r, 1 + sum (1 - r)), the uniform prior updated.
The draws come from the group's own generator, so each question's pick is the same on every process.
"""

from __future__ import annotations

import random

from inspo_cli.instructions.selection.base import Arm

MONTE_CARLO_DRAWS = 4000  # for `probabilities` (plots) only; the picks themselves are exact draws


class ThompsonSelector:
    def __init__(self, arms: list[Arm]):
        successes = [min(max(arm.reward_sum, 0.0), float(arm.groups)) for arm in arms]
        self._posteriors = [(1 + s, 1 + arm.groups - s) for arm, s in zip(arms, successes)]

    def draw(self, rng: random.Random) -> int:
        return self.draw_distinct(rng, 1)[0]

    def draw_distinct(self, rng: random.Random, count: int) -> list[int]:
        """The `count` instructions of the highest draws from one sample of every posterior (the first is `draw`'s):
        each of a question's blocks gets an instruction that could be the best."""
        samples = [rng.betavariate(a, b) for a, b in self._posteriors]
        return sorted(range(len(samples)), key=lambda i: (-samples[i], i))[:count]

    def probabilities(self) -> list[float]:
        rng = random.Random(0)  # the same estimate every time, so the plots do not jitter
        counts = [0] * len(self._posteriors)
        for _ in range(MONTE_CARLO_DRAWS):
            counts[self.draw(rng)] += 1
        return [c / MONTE_CARLO_DRAWS for c in counts]


def build(arms, config, batch: int) -> ThompsonSelector:
    return ThompsonSelector(list(arms))
