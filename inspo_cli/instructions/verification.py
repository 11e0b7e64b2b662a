"""Whether a verified candidate instruction is good enough to join (Alg. 1 line 21): a paired comparison with its
parent on the same verification questions D_B.

The policy is rolled out under the parent and under each candidate on the same questions, `population.
verify_rollouts` times each, in one batch. A question's difficulty is shared by the two instructions, so the
comparison is made question by question: d_q = (candidate's mean reward on q) - (parent's), and the candidate is
judged by the mean of d_q and its standard error, not by two means whose question-to-question spread would swamp
the difference. Under `accept: beat_parent` a candidate joins unless it is significantly worse than its parent:

    comparison = paired_comparison(candidate_rewards, parent_rewards)   # one value per D_B question each
    comparison.joins(margin=1.645)   # difference >= -1.645 x standard error: a one-sided 5% test of "worse"

`margin` (`population.accept_margin`) is in standard errors, so the rate at which an instruction exactly as good as
its parent is turned away stays near its one-sided tail (5% at 1.645) whatever D_B's size, the reward's spread or
the number of rollouts; margin 0 is "at least the parent's score" (an equally good candidate is then turned away
about half the time). bench/verification.py measures both rules; the README's faithfulness table gives the choice.
`population.verify_sequential` scores D_B in chunks and stops early where the answer is already clear
(sequential.py); a `Verdict` says at which look.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class PairedComparison:
    """A candidate against its parent on the same questions (means over questions of per-question mean rewards)."""

    candidate_score: float
    parent_score: float
    difference: float  # mean over questions of (candidate - parent)
    standard_error: float  # of `difference`: the per-question differences' sample deviation / sqrt(questions)
    questions: int

    def joins(self, margin: float) -> bool:
        """Not significantly worse than the parent: the difference is at least -margin standard errors."""
        # a hair of slack, so that exact ties survive the float sums of both sides
        return self.difference >= -margin * self.standard_error - 1e-12


@dataclass(frozen=True)
class Verdict:
    """A candidate's verification: its comparison with the parent and whether it passes accept=beat_parent's line."""

    comparison: PairedComparison  # on the questions it was scored on (all of D_B unless sequential stopped early)
    joins: bool
    look: int | None = None  # sequential verification: the 1-based look (chunk of D_B) that decided it
    looks: int | None = None  # sequential verification: the looks planned for this D_B


def paired_comparison(candidate: Sequence[float], parent: Sequence[float]) -> PairedComparison:
    """Compare per-question rewards of a candidate and its parent, given in the same question order."""
    if len(candidate) != len(parent) or not parent:
        raise ValueError(f"need the same non-empty questions for both sides, got {len(candidate)} and {len(parent)}")
    n = len(parent)
    differences = [c - p for c, p in zip(candidate, parent)]
    mean = math.fsum(differences) / n
    variance = math.fsum((d - mean) ** 2 for d in differences) / (n - 1) if n > 1 else 0.0
    return PairedComparison(
        candidate_score=math.fsum(candidate) / n,
        parent_score=math.fsum(parent) / n,
        difference=mean,
        standard_error=math.sqrt(variance / n),
        questions=n,
    )
