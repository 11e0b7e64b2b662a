"""One candidate instruction and what a run learns about it: its rewards per step and per category, and its weights.

The rewards per step are eq. 6's input; those per question category are what `population.parents: pareto` compares.

    candidate.weight             # w_j of eq. 6: the mean of its last `weight_window` step means
    candidate.category_means()   # mean group reward per question category over that window

Rows are lists (saved, compared and read back as the JSON rows they are) with their columns by name.
`InstructionPopulation` (population.py) creates, updates and saves candidates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

CANDIDATE_SHAPE = {
    "id": str,
    "text": str,
    "parent?": (str, None),
    "proposer": str,
    "step_born": int,
    "verification_score?": (float, None),
    "step_rewards?": [[float]],
    "recent_means?": [float],
    "weight_history?": [[float, float]],
    "step_pruned?": (int, None),
    "step_categories?": [[int, str, float, int]],
}  # a candidate as saved (jsonio)


def normalize_text(text: str) -> str:
    """The form two instructions are compared in: whitespace runs collapsed, ends stripped."""
    return " ".join(text.split())


class StepReward(list):
    """A row of `Candidate.step_rewards`: [step, mean group reward, groups] for a step the instruction was used in.
    A list (so it is saved, compared and read back as the JSON row it is), with its columns by name."""

    @property
    def step(self) -> int:
        return int(self[0])

    @property
    def mean(self) -> float:
        return float(self[1])

    @property
    def groups(self) -> int:
        return int(self[2])


class WeightPoint(list):
    """A row of `Candidate.weight_history`: [step, weight after that step] (a list, as StepReward)."""

    @property
    def step(self) -> int:
        return int(self[0])

    @property
    def weight(self) -> float:
        return float(self[1])


class CategoryReward(list):
    """A row of `Candidate.step_categories`: [step, question category, summed group mean reward, groups] (a list,
    as StepReward): what `population.parents: pareto` compares instructions on."""

    @property
    def step(self) -> int:
        return int(self[0])

    @property
    def category(self) -> str:
        return str(self[1])

    @property
    def reward_sum(self) -> float:
        return float(self[2])

    @property
    def groups(self) -> int:
        return int(self[3])


@dataclass
class Candidate:
    """One instruction and everything the run learned about it."""

    id: str
    text: str
    parent: str | None  # the id it was evolved from; None for the initial population
    proposer: str  # one of population.ORIGINS or a registered proposer (proposers.PROPOSERS)
    step_born: int
    verification_score: float | None = None
    step_rewards: list[StepReward] = field(default_factory=list)  # per step it was used in
    recent_means: list[float] = field(default_factory=list)  # the last <= weight_window step means: eq. 6's window
    weight_history: list[WeightPoint] = field(default_factory=list)  # after every step it was alive
    step_pruned: int | None = None
    # per used step and question category (a benchmark, or a question type)
    step_categories: list[CategoryReward] = field(default_factory=list)

    @property
    def weight(self) -> float:
        """w_j of eq. 6; 0 for an instruction not used since it was born or since the last reset."""
        return math.fsum(self.recent_means) / len(self.recent_means) if self.recent_means else 0.0

    @property
    def alive(self) -> bool:
        return self.step_pruned is None

    def window(self) -> list[StepReward]:
        """The `step_rewards` rows of eq. 6's window: the steps its weight averages ([] since a reset)."""
        return self.step_rewards[-len(self.recent_means) :] if self.recent_means else []

    def category_means(self) -> dict[str, float]:
        """The mean group reward per question category over eq. 6's window."""
        window = {row.step for row in self.window()}
        totals: dict[str, list[float]] = {}
        for row in self.step_categories:
            if row.step in window:
                total = totals.setdefault(row.category, [0.0, 0])
                total[0] += row.reward_sum
                total[1] += row.groups
        return {category: reward_sum / groups for category, (reward_sum, groups) in totals.items() if groups}
