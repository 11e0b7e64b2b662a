"""What a selection strategy sees of the population (`Arm`), and what it gives back (`Selector`).

An arm is an alive instruction with the statistics of eq. 6's window (the steps its weight averages over): its
weight w (the mean of those step means), the question groups it was used for in them, and their summed mean rewards.
`batch` is how many question groups the population saw in its last step (the next step's likely size), which
batched strategies (UCB) spread their picks over.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from inspo_cli.config.sections import PopulationConfig


@dataclass(frozen=True)
class Arm:
    id: str
    weight: float  # w_j (eq. 6)
    groups: int  # question groups in the window
    reward_sum: float  # the sum of those groups' mean rewards

    @property
    def mean(self) -> float:
        """The mean group reward over the window (w weighs each step alike; this weighs each group alike)."""
        return self.reward_sum / self.groups if self.groups else 0.0


class Selector(Protocol):
    def probabilities(self) -> list[float]:
        """The chance each arm (in the order given) is drawn for one question group."""
        ...

    def draw(self, rng: random.Random) -> int:
        """The index of the arm one question group is rolled out with; uses `rng` alone."""
        ...


Build = Callable[[Sequence[Arm], "PopulationConfig", int], Selector]


class FixedDistribution:
    """A selector that draws from fixed probabilities: the draw eq. 4's sampling has always made (one uniform
    number, scaled by the total so rounding never falls off the end)."""

    def __init__(self, probabilities: Sequence[float]):
        total = math.fsum(probabilities)
        self._probabilities = [p / total for p in probabilities]
        self._cumulative, running = [], 0.0
        for p in self._probabilities:
            running += p
            self._cumulative.append(running)
        self._total = running

    def probabilities(self) -> list[float]:
        return list(self._probabilities)

    def draw(self, rng: random.Random) -> int:
        u = rng.random() * self._total
        return next((i for i, edge in enumerate(self._cumulative) if u < edge), len(self._cumulative) - 1)


def best_index(arms: Sequence[Arm]) -> int:
    """The arm of the highest weight; ties go to the older (earlier) one, as the population ranks."""
    return max(range(len(arms)), key=lambda i: (arms[i].weight, -i))
