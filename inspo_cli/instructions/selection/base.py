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


def draw_distinct(selector: Selector, rng: random.Random, count: int) -> list[int]:
    """`count` different arms for one question's blocks (`population.instructions_per_question`), from `rng` alone.
    A selector with a `draw_distinct(rng, count)` of its own decides (Thompson: the best `count` of one posterior
    draw); any other draws the first arm exactly as `draw` does, then each next one from its `probabilities()` over
    the arms not yet drawn, renormalised (sampling without replacement). If those arms all have chance 0 (epsilon-greedy
    at epsilon 0, an arm UCB gives no share), the next is one of them uniformly: a question still gets `count`."""
    if count == 1:
        return [selector.draw(rng)]  # the one draw the paper's sampling has always made
    own = getattr(selector, "draw_distinct", None)
    if callable(own):
        return list(own(rng, count))
    chosen = [selector.draw(rng)]
    chances = selector.probabilities()
    while len(chosen) < count:
        remaining = [i for i in range(len(chances)) if i not in chosen]
        total = math.fsum(chances[i] for i in remaining)
        if total > 0:
            u, running = rng.random() * total, 0.0
            positive = [i for i in remaining if chances[i] > 0]
            picked = positive[-1]  # where rounding leaves u at the very top
            for i in positive:
                running += chances[i]
                if u < running:
                    picked = i
                    break
        else:
            picked = remaining[rng.randrange(len(remaining))]
        chosen.append(picked)
    return chosen


def best_index(arms: Sequence[Arm]) -> int:
    """The arm of the highest weight; ties go to the older (earlier) one, as the population ranks."""
    return max(range(len(arms)), key=lambda i: (arms[i].weight, -i))
