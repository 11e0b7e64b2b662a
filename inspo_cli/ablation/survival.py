"""How much of the instruction effect survives without I* once it is distilled into the weights, with its interval.

    s = share(numerator, denominator)   # per seed: distilled·S − trained·S, and trained·I* − trained·S
    s["share"], s["low"], s["high"]     # e.g. 0.62, 0.31, 0.95; or s["defined"] False and s["why"]

The share is a ratio of two paired differences over the same seeds and questions, N / D with N = distilled·S −
trained·S (what the student gained without I*) and D = trained·I* − trained·S (the instruction effect it was taught):
1 when the student answers as well without I* as the teacher with it, 0 when it gained nothing. Its point estimate
is the ratio of the two means; its 95% interval is Fieller's: the ratios rho that the paired test of N − rho·D = 0
does not reject, each tested exactly as every effect of the decomposition is (`compare.compare` against 0 over seeds
and questions, the same variance estimate and degrees of freedom). Where the instruction effect D is itself not
distinguishable from 0 (its own interval includes 0) the set of such rho is unbounded, and the share is undefined:
dividing by a difference that may be 0 gives a number of any size, and saying so is the only honest answer. A
bootstrap is not used for the reason `compare` gives (no resampling scheme estimates a crossed seeds x questions
design's variance without bias); the delta method would give a symmetric interval where a ratio's is not.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from inspo_cli.ablation.compare import ALPHA, Comparison, RunScores, _t, compare

UNDEFINED = "undefined (the instruction effect is not distinguishable from 0)"
FARTHEST = 1e6  # a bound beyond this many instruction effects is no bound: the interval is unbounded


def share(numerator: Sequence[RunScores], denominator: Sequence[RunScores]) -> dict:
    """N / D over the seeds (and questions) both have, with Fieller's 95% interval; `defined` False (and `why`)
    where the instruction effect D is not distinguishable from 0. `numerator` and `denominator` are per seed, in
    the same order."""
    found: dict = {"n": len(numerator), "share": None, "low": None, "high": None, "defined": False, "why": None}
    if not numerator:
        return found | {"why": "no seed with a distilled cell evaluated"}
    d, n = against_zero(denominator), against_zero(numerator)
    found |= {"numerator": n.diff, "denominator": d.diff, "denominator_low": d.low, "denominator_high": d.high}
    if _includes_zero(d):
        return found | {"why": UNDEFINED}
    found |= {"share": n.diff / d.diff, "defined": True}
    if len(numerator) < 2:
        return found | {"why": "one seed: no interval (seed variance cannot be estimated)"}

    from scipy.optimize import brentq

    def rejected(rho: float) -> float:  # > 0 where the paired test rejects N − rho·D = 0
        return _distance(against_zero(_minus(numerator, denominator, rho)))

    bounds = []
    for direction in (-1.0, 1.0):
        step = max(1.0, abs(found["share"]))
        edge = found["share"] + direction * step
        while rejected(edge) <= 0:
            step *= 2
            if step > FARTHEST:
                return found | {"share": None, "defined": False, "why": UNDEFINED}
            edge = found["share"] + direction * step
        bounds.append(brentq(rejected, found["share"], edge, xtol=1e-12, rtol=1e-12))
    return found | {"low": bounds[0], "high": bounds[1]}


def _includes_zero(d: Comparison) -> bool:
    """Whether the instruction effect's own 95% interval includes 0 (without an interval: whether it is 0)."""
    if d.se is None:
        return abs(d.diff) < 1e-12
    return abs(d.diff) <= float(_t().ppf(1 - ALPHA / 2, d.df)) * d.se


def _distance(c: Comparison) -> float:
    """|t| less its two-sided 95% critical value: > 0 where the difference is distinguishable from 0."""
    if c.se is None:  # nothing varies: the difference is exactly what it is
        return 1.0 if abs(c.diff) > 1e-12 else -1.0
    return abs(c.diff) / c.se - float(_t().ppf(1 - ALPHA / 2, c.df))


def _minus(numerator: Sequence[RunScores], denominator: Sequence[RunScores], rho: float) -> list[RunScores]:
    """Per seed, numerator − rho · denominator, per benchmark and (where both kept them) per question."""
    runs = []
    for n, d in zip(numerator, denominator):
        em = {b: n.em[b] - rho * d.em[b] for b in n.em if b in d.em}
        questions = None
        if n.questions is not None and d.questions is not None:
            questions = {
                b: {q: n.questions[b][q] - rho * d.questions[b][q] for q in n.questions[b]}
                for b in em
                if b in n.questions and b in d.questions and set(n.questions[b]) == set(d.questions[b])
            }
        runs.append(RunScores(n.seed, em, questions))
    return runs


def against_zero(runs: Sequence[RunScores]) -> Comparison:
    """Per-seed (and per-question) differences tested against 0: compared, paired, with runs that score 0 everywhere
    on the same questions."""
    zero = [
        RunScores(
            r.seed,
            dict.fromkeys(r.em, 0.0),
            None if r.questions is None else {b: dict.fromkeys(q, 0.0) for b, q in r.questions.items()},
        )
        for r in runs
    ]
    return compare(runs, zero)


def text(s: dict) -> str:
    """The share as a sentence's value: "+0.620 [+0.310, +0.950]", without an interval for one seed, or why none."""
    from inspo_cli.ablation.formatting import signed

    if not s["defined"]:
        return s["why"] or UNDEFINED
    if s["low"] is None or not math.isfinite(s["low"]):
        return f"{signed(s['share'])} ({s['why']})"
    return f"{signed(s['share'])} [{signed(s['low'])}, {signed(s['high'])}]"
