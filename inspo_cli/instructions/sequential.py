"""Sequential verification (`population.verify_sequential`; beyond the paper, which scores every candidate on all of
D_B): D_B is scored in `verify_looks` equal chunks, one batched call each, and a candidate stops being rolled out
once it is clearly above or below `accept: beat_parent`'s line. The parent is rolled out on every chunk that some
candidate still needs.

The fixed rule (verification.py) turns a candidate away when z = difference / standard error over all of D_B is
below -accept_margin: a one-sided test that turns away a candidate exactly as good as its parent with probability
alpha = Phi(-accept_margin) (5% at 1.645). Here z_k is the same statistic on the questions scored by look k (a
fraction t_k of D_B), and a candidate

- is turned away early when z_k < reject_below[k]: a Lan-DeMets O'Brien-Fleming-type alpha-spending boundary that
  spends a quarter of alpha before the last look (`REJECT_SHARE`; spent(t) = 2 - 2 Phi(z_{1-a/2} / sqrt(t)) with
  a = alpha / 4), so only a candidate far below its parent stops early;
- joins early when z_k > accept_above[k] = -margin sqrt(t_k) + z_{1-g} sqrt((1 - t_k) / t_k): past it, a candidate
  whose true difference lies on the acceptance line (the fixed rule turns it away half the time) would still be
  turned away at the end with probability below g = 5% (`ACCEPT_CURTAIL`; stochastic curtailment);
- at the last look joins when its difference is at least -final_margin standard errors, final_margin solved so that
  a candidate exactly as good as its parent is turned away with probability alpha, as by the fixed rule.

Probabilities are those of the z statistic's Brownian-motion approximation, integrated numerically on a grid
(Jennison & Turnbull, Group Sequential Methods, 2000, ch. 19). In it, for margins 0 to 3 and 2 to 8 looks, the rule
admits at most 0.3 percentage points more of the worse candidates than the fixed rule does, while a copy of the parent
is scored on about 74% of D_B and a candidate better by 1.2 standard errors on about 59% (4 looks, margin 1.645).
A look holds at least `MIN_LOOK_QUESTIONS` questions, so a smaller D_B gets fewer looks (one: the fixed rule).
bench/verification.py measures the rates with Bernoulli rewards and on the world.

Candidates that join are ranked (`accept_top_n`, the population's room). A candidate that joined early stopped
because its difference was high, so that difference overstates it; where more can join than there is room for, the
ones that joined are scored on to the end of D_B (`verify_in_chunks`'s `room`) and every candidate ranked is ranked
by its difference over all of D_B, as under the fixed rule. Only rejected candidates, and joined ones whose rank
cannot matter, save their rollouts then: six copies of their parent (|D_B| 200, 4 looks, Bernoulli rewards at 0.45)
use 77% of the fixed rule's rollouts when all six may join, and all of them when only four may.

    design = sequential_design(questions=200, looks=4, margin=1.645)   # looks after 50, 100, 150 and 200 questions
    design.decide(1, paired_comparison(candidate[:50], parent[:50]))    # True joins, False is turned away, None: go on
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from inspo_cli.config.inspo_sections import MIN_LOOK_QUESTIONS
from inspo_cli.instructions.replay import ReplayQuestion
from inspo_cli.instructions.verification import PairedComparison, Verdict, paired_comparison

REJECT_SHARE = 0.25  # of alpha, spent by the early looks' rejections (the rest by the last look)
ACCEPT_CURTAIL = 0.05  # g: the chance of a rejection at the end, on the acceptance line, below which a candidate joins
GRID = 601  # points per look of the numerical integration (its probabilities are good to about 1e-5)
SPAN = 10.0  # the continuation region's cap above (a Brownian motion's value, in units of its final deviation)


@dataclass(frozen=True)
class SequentialDesign:
    """Where each look falls in D_B and the z boundaries that stop a candidate there."""

    ends: tuple[int, ...]  # questions scored by each look, cumulative; the last is |D_B|
    reject_below: tuple[float, ...]  # each look but the last: turned away when z is below this
    accept_above: tuple[float, ...]  # each look but the last: joins when z is above this
    final_margin: float  # the last look: joins when the difference is at least -final_margin standard errors

    @property
    def looks(self) -> int:
        return len(self.ends)

    def decide(self, look: int, comparison: PairedComparison) -> bool | None:
        """At the 1-based `look`, on the questions scored so far: True joins, False is turned away, None goes on."""
        if look >= self.looks:
            return comparison.joins(self.final_margin)
        z = z_score(comparison)
        if z < self.reject_below[look - 1]:
            return False
        if z > self.accept_above[look - 1]:
            return True
        return None


def z_score(comparison: PairedComparison) -> float:
    """difference / standard error; with no spread at all (every question's difference the same), its sign."""
    if comparison.standard_error > 0:
        return comparison.difference / comparison.standard_error
    return math.copysign(math.inf, comparison.difference) if comparison.difference else 0.0


def chunk_ends(questions: int, looks: int) -> tuple[int, ...]:
    """The cumulative question counts of `looks` equal chunks of D_B, fewer looks where a chunk would hold fewer than
    MIN_LOOK_QUESTIONS (the z statistic of a few questions is too far from normal to stop on)."""
    looks = max(1, min(looks, questions // MIN_LOOK_QUESTIONS))
    return tuple(round(k * questions / looks) for k in range(1, looks + 1))


@functools.lru_cache(maxsize=64)
def sequential_design(questions: int, looks: int, margin: float) -> SequentialDesign:
    """The design for a D_B of `questions` scored in (at most) `looks` chunks, for accept_margin `margin`."""
    if questions < 1 or looks < 1 or not margin >= 0:
        raise ValueError(f"need questions >= 1, looks >= 1 and margin >= 0; got {questions}, {looks}, {margin}")
    ends = chunk_ends(questions, looks)
    reject, accept, final = boundaries(tuple(end / questions for end in ends), margin)
    return SequentialDesign(ends, reject, accept, final)


@functools.lru_cache(maxsize=64)
def boundaries(fractions: tuple[float, ...], margin: float) -> tuple[tuple[float, ...], tuple[float, ...], float]:
    """(reject_below, accept_above, final_margin) in z for looks at these fractions of D_B (the last is 1)."""
    from scipy.optimize import brentq
    from scipy.stats import norm

    alpha = float(norm.cdf(-margin))
    if len(fractions) == 1:
        return (), (), margin
    z_share = float(norm.isf(REJECT_SHARE * alpha / 2))

    def spent(t: float) -> float:
        return float(2 * norm.sf(z_share / math.sqrt(t))) if t > 0 else 0.0

    # rejection: each look spends its increment of spent(t) among the paths not yet turned away (acceptances ignored,
    # the usual non-binding convention, so the boundary does not depend on the acceptance rule)
    state, before, reject_b = _start(), 0.0, []
    for t, dt in _steps(fractions[:-1]):
        target = spent(t) - spent(before)
        b = brentq(lambda b: _below(state, dt, b) - target, -50.0, 50.0, xtol=1e-10)
        reject_b.append(b)
        state = _advance(state, dt, b, SPAN)[2]
        before = t
    # acceptance (binding) at -margin t + z_{1-g} sqrt(1 - t) in B = z sqrt(t); then the last look's margin
    accept_b = [-margin * t + float(norm.isf(ACCEPT_CURTAIL)) * math.sqrt(1 - t) for t in fractions[:-1]]
    if any(a <= r for a, r in zip(accept_b, reject_b)):
        raise ValueError(f"the acceptance boundary crosses the rejection boundary for looks at {fractions}")
    state, rejected = _start(), 0.0
    for (_, dt), low, high in zip(_steps(fractions[:-1]), reject_b, accept_b):
        below, _, state = _advance(state, dt, low, high)
        rejected += below
    dt = 1.0 - fractions[-2]
    final = brentq(lambda c: rejected + _below(state, dt, c) - alpha, -50.0, 50.0, xtol=1e-10)
    return (
        tuple(b / math.sqrt(t) for b, t in zip(reject_b, fractions)),
        tuple(a / math.sqrt(t) for a, t in zip(accept_b, fractions)),
        -final,
    )


# The paths still going on, as B-values (z sqrt(t), a Brownian motion under "exactly as good as the parent") and the
# probability each grid point carries; the start is one point at 0.
_State = tuple  # (points, masses), numpy arrays


def _start() -> _State:
    import numpy as np

    return np.zeros(1), np.ones(1)


def _steps(fractions: Sequence[float]) -> list[tuple[float, float]]:
    return [(t, t - (fractions[k - 1] if k else 0.0)) for k, t in enumerate(fractions)]


def _below(state: _State, dt: float, b: float) -> float:
    from scipy.stats import norm

    points, masses = state
    return float(masses @ norm.cdf((b - points) / math.sqrt(dt)))


def _advance(state: _State, dt: float, low: float, high: float) -> tuple[float, float, _State]:
    """One look on: (probability below `low`, above `high`, the paths in between on a grid)."""
    import numpy as np
    from scipy.stats import norm

    points, masses = state
    sd = math.sqrt(dt)
    below = float(masses @ norm.cdf((low - points) / sd))
    above = float(masses @ norm.sf((high - points) / sd))
    grid = np.linspace(low, high, GRID)
    weights = np.full(GRID, grid[1] - grid[0])
    weights[[0, -1]] /= 2  # the trapezoid rule
    density = masses @ norm.pdf((grid[None, :] - points[:, None]) / sd) / sd
    return below, above, (grid, weights * density)


def verify_in_chunks(
    score: Callable[[Sequence[str], Sequence[ReplayQuestion]], list[list[float]]],
    parent: str,
    candidates: Sequence[str],
    questions: Sequence[ReplayQuestion],
    margin: float,
    looks: int,
    room: int | None = None,
) -> list[Verdict]:
    """Each candidate's verdict, scoring D_B (`questions`, in a random order) chunk by chunk: `score([parent,
    *scored], chunk)` returns per-question rewards, the parent's first; a rejected candidate is left out of later
    chunks, and once none is left to score no chunk is scored.

    `room`: how many of the candidates can join (None: all). A candidate that joins early stopped on a high point,
    so its difference so far is biased upward, and ranking it against candidates scored to the end would favour it.
    While more candidates have joined or are undecided than `room`, the joined ones are therefore scored on to the
    end of D_B, and the ranking (the caller's, by `comparison.difference`) is over all of D_B for every candidate it
    matters for: the fixed rule's ranking on the same rollouts. Once no more than `room` can join, all of them join
    whatever their order, and a candidate that joined is no longer scored."""
    design = sequential_design(len(questions), looks, margin)
    room = len(candidates) if room is None else room
    parent_rewards: list[float] = []
    rewards: list[list[float]] = [[] for _ in candidates]
    verdicts: dict[int, Verdict] = {}
    start = 0
    for look, end in enumerate(design.ends, start=1):
        pending = [i for i in range(len(candidates)) if i not in verdicts]
        joined = [i for i, v in verdicts.items() if v.joins]
        ranked = sorted(joined) if len(joined) + len(pending) > room else []  # whose rank still matters
        scored = sorted([*pending, *ranked])  # (joined+undecided only shrinks: a ranked one was scored at every look)
        if not scored:
            break
        table = score([parent, *(candidates[i] for i in scored)], questions[start:end])
        parent_rewards += table[0]
        for i, row in zip(scored, table[1:]):
            rewards[i] += row
            comparison = paired_comparison(rewards[i], parent_rewards)
            if i in verdicts:  # joined at an earlier look: its comparison grows, its decision stands
                verdicts[i] = Verdict(comparison, True, look=verdicts[i].look, looks=design.looks)
                continue
            decision = design.decide(look, comparison)
            if decision is not None:
                verdicts[i] = Verdict(comparison, decision, look=look, looks=design.looks)
        start = end
    return [verdicts[i] for i in range(len(candidates))]
