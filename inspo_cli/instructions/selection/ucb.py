"""UCB1 (Auer et al., 2002), batched: each instruction's weight plus an exploration bonus c * sqrt(ln N / n).

A step draws hundreds of question groups at once, before any of their rewards are known, and each process draws
its own; so the step's groups are spread as sequential UCB1 would spread `batch` pulls whose rewards it cannot see
yet (each pull raises its arm's count and leaves its mean: "hallucinated" observations, as in batched bandits),
and each group draws from those shares. An instruction never tried in the window is tried first. The mean is the
instruction's weight w (eq. 6's window, so the statistics follow the policy as it changes), n its groups in the
window, N everyone's.
"""

from __future__ import annotations

import math

from inspo_cli.instructions.selection.base import FixedDistribution


def build(arms, config, batch: int) -> FixedDistribution:
    counts = [arm.groups for arm in arms]
    shares = [0] * len(arms)
    pulls = max(batch, len(arms))
    total = sum(counts)
    for _ in range(pulls):
        total += 1
        scores = [
            math.inf if n == 0 else arm.weight + config.ucb_exploration * math.sqrt(math.log(total) / n)
            for arm, n in zip(arms, counts)
        ]
        chosen = max(range(len(arms)), key=lambda i: (scores[i], -i))
        counts[chosen] += 1
        shares[chosen] += 1
    return FixedDistribution(shares)
