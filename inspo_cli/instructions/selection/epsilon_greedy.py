"""epsilon-greedy: the best instruction by weight, or with probability epsilon one of all alive ones uniformly."""

from __future__ import annotations

from inspo_cli.instructions.selection.base import FixedDistribution, best_index


def build(arms, config, batch: int) -> FixedDistribution:
    epsilon, best = config.epsilon, best_index(arms)
    return FixedDistribution([epsilon / len(arms) + (1 - epsilon) * (i == best) for i in range(len(arms))])
