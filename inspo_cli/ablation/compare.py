"""How sure a table can be: a variant's EM, and its difference to a reference, over seeds and questions.

    runs = [RunScores(seed=0, em={"world": 0.31}, questions={"world": {"q1": 1.0, "q2": 0.0, ...}}), ...]
    estimate(runs)                       # the variant's EM on the average over benchmarks, with its 95% interval
    c = compare(inspo_runs, search_r1_runs, "world")
    c.diff, c.low, c.high, c.p           # +0.08, -0.05, +0.21, 0.23
    c.detectable()                       # the difference this design finds with 80% power at alpha 0.05
    c.seeds_needed(0.05)                 # how many seeds per variant a difference of 0.05 needs

Two things make an EM uncertain: the seeds (training is random, so another seed gives another policy) and the
questions (the benchmark is a sample of the questions the variant could be asked). Every run of an ablation answers
the same questions, so seeds and questions are *crossed*: the EM of run s on question q is
`mu + a_s + b_q + e_sq`. The variance of a mean over S seeds and Q questions is then
`sigma_a^2 / S + sigma_b^2 / Q + sigma_e^2 / (S Q)`, estimated by the method of moments from the seed x question
table (a two-way random-effects ANOVA: the seed term is the variance of the S seed means over S, the question term
the variance of the Q question means over Q, less the residual mean square over S Q, which both of them contain).
The 95% interval is the mean ± Student's t quantile with Welch-Satterthwaite degrees of freedom (S - 1 when seeds
dominate, many when questions do), and the p-value is the two-sided t test of no difference. The average over
benchmarks adds each benchmark's question terms (their questions are independent) over k^2.

A comparison is paired wherever the plan makes it possible: by seed when both variants ran the same seeds (the
difference of each seed's pair is the seed unit), and by question when both answered the same questions (the
question term is then that of the per-question difference, so how hard a question is cancels). Otherwise the two
variances add (Welch). A variant with one seed has no interval: its seed variance cannot be estimated.

Why not a bootstrap: resampling seeds and questions cannot estimate this variance without bias (McCullagh 2000,
"Resampling and exchangeable arrays": no resampling scheme can for a crossed design). On simulated ablations
(`bench/comparison_calibration.py`) a hierarchical bootstrap's 95% interval covered the truth 86-97% of the time
with 3-10 seeds (3-16% false positives), this estimator 92-96% (4.5-7%); tests/test_compare.py holds it there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

ALPHA = 0.05
POWER = 0.8
AVERAGE = None  # the benchmark argument that means "the average over benchmarks" (the paper's Avg. column)


@dataclass
class RunScores:
    """One run's evaluation: EM per benchmark and, when its predictions were kept, EM per question."""

    seed: int
    em: dict[str, float]
    questions: dict[str, dict[str, float]] | None = None  # benchmark -> {question id: EM}


@dataclass(frozen=True)
class Term:
    value: float  # its part of the variance of the estimate (negative for the residual that is subtracted)
    df: float


def _satterthwaite(terms: Sequence[Term]) -> tuple[float, float]:
    """(variance, Welch-Satterthwaite degrees of freedom) of a sum of mean-square terms. A subtracted term can push
    the approximation below the fewest degrees of freedom of the terms that add; it is kept at least there."""
    variance = sum(t.value for t in terms)
    denominator = sum(t.value ** 2 / t.df for t in terms if t.df > 0)
    df = variance ** 2 / denominator if denominator > 0 else math.inf
    return variance, max(df, min((t.df for t in terms if t.value > 0), default=1.0), 1.0)


def _t():
    from scipy import stats

    return stats.t


@dataclass
class Estimate:
    """A mean with its standard error, degrees of freedom and 95% interval (None when one seed)."""

    mean: float
    se: float | None
    df: float | None
    n_seeds: int
    n_questions: int | None  # per benchmark (the smallest), None without per-question results
    bounds = (0.0, 1.0)  # what the quantity can be: the interval is clipped to it (EM is a rate)

    @property
    def half_width(self) -> float | None:
        """t(0.975, df) x SE; the interval is mean ± this, clipped to `bounds` (`low`, `high`)."""
        if self.se is None:
            return None
        return float(_t().ppf(1 - ALPHA / 2, self.df)) * self.se

    @property
    def low(self) -> float | None:
        return None if self.se is None else max(self.mean - self.half_width, self.bounds[0])

    @property
    def high(self) -> float | None:
        return None if self.se is None else min(self.mean + self.half_width, self.bounds[1])

    def as_dict(self) -> dict:
        return {"mean": self.mean, "ci95": self.half_width, "low": self.low, "high": self.high, "se": self.se,
                "df": self.df, "n": self.n_seeds, "questions": self.n_questions}


@dataclass
class Comparison(Estimate):
    """variant - reference: `mean` is the difference; p the two-sided p-value; how the pairing went; the variance
    one seed adds (`seed_unit`, what power calculations rescale to other seed counts) and what the questions add
    (`question_part`, which more seeds do not reduce)."""

    bounds = (-1.0, 1.0)  # a difference of two rates
    p: float | None = None
    paired_seeds: bool = False
    paired_questions: bool = False
    seeds: tuple[int, int] = (0, 0)  # seeds of the variant, of the reference
    seed_unit: float = 0.0  # variance of one seed's contribution: the term is seed_unit / S
    question_part: float = 0.0  # variance that more seeds do not reduce (the questions), truncated at 0
    notes: list[str] = field(default_factory=list)

    @property
    def diff(self) -> float:
        return self.mean

    def power(self, difference: float, seeds: int | None = None) -> float:
        """The chance a two-sided t test at ALPHA finds `difference`: as run, or with `seeds` seeds per variant
        (the same questions; see `variance_with`)."""
        from scipy import stats

        variance, df = self.variance_with(seeds)
        if variance <= 0:
            return 1.0 if difference else ALPHA
        shift = abs(difference) / math.sqrt(variance)
        if shift > 50:  # beyond what the noncentral t evaluates; certain
            return 1.0
        critical = stats.t.ppf(1 - ALPHA / 2, df)
        upper, lower = stats.nct.sf(critical, df, shift), stats.nct.cdf(-critical, df, shift)
        if not math.isfinite(upper):  # very many degrees of freedom: the normal limit
            z = stats.norm.ppf(1 - ALPHA / 2)
            upper, lower = stats.norm.sf(z - shift), stats.norm.cdf(-z - shift)
        return float(upper + (lower if math.isfinite(lower) else 0.0))  # the wrong-sided tail is ~0 where it fails

    def variance_with(self, seeds: int | None) -> tuple[float, float]:
        """(variance, degrees of freedom) of the difference with `seeds` seeds per variant (None: as run): the
        estimate as run with its seed term rescaled from the seeds run to `seeds`, never falling faster than
        1 / seeds; the degrees of freedom of that seed term and of what the questions add."""
        now = min(self.seeds)
        variance_now = (self.se or 0.0) ** 2
        if seeds is None or seeds == now:
            return variance_now, self.df
        variance = max(variance_now + self.seed_unit * (1 / seeds - 1 / now), variance_now * now / seeds)
        seed_term = min(self.seed_unit / seeds, variance)
        terms = [Term(seed_term, seeds - 1), Term(variance - seed_term, max((self.n_questions or 2) - 1, 1))]
        return variance, _satterthwaite([t for t in terms if t.value > 0] or terms[:1])[1]

    def detectable(self) -> float | None:
        """The smallest difference found with POWER (80%) at ALPHA (0.05) by this design; None with one seed, or
        when not even a difference of 1 (all questions against none) would be."""
        from scipy.optimize import brentq

        if self.se is None or self.power(self.bounds[1]) < POWER:
            return None
        if self.se == 0:
            return 0.0
        return float(brentq(lambda d: self.power(d) - POWER, 0.0, self.bounds[1]))

    def seeds_needed(self, difference: float, most: int = 1000) -> int | None:
        """The fewest seeds per variant that find `difference` with POWER at ALPHA (the questions as now), or
        None when no number of seeds can (the questions limit it) or one seed left nothing to extrapolate from."""
        if self.se is None or difference == 0:
            return None
        if self.power(difference, most) < POWER:
            return None
        low, high = 2, most  # power grows with seeds: bisect
        while low < high:
            middle = (low + high) // 2
            if self.power(difference, middle) >= POWER:
                high = middle
            else:
                low = middle + 1
        return low

    def as_dict(self) -> dict:
        return {**super().as_dict(), "diff": self.mean, "p": self.p, "paired_seeds": self.paired_seeds,
                "paired_questions": self.paired_questions, "seeds": list(self.seeds),
                "seed_unit_variance": self.seed_unit, "question_variance": self.question_part,
                "detectable": self.detectable(), "notes": list(self.notes)}


def _benchmarks(runs: Sequence[RunScores], benchmark: str | None) -> list[str]:
    """[benchmark], or for the average the benchmarks every run has (in the first run's order)."""
    if benchmark is not AVERAGE:
        return [benchmark]
    return [b for b in runs[0].em if all(b in r.em for r in runs)] if runs else []


def _run_mean(run: RunScores, benchmarks: Sequence[str], ids: dict[str, list[str]] | None) -> float:
    """The run's EM on `benchmarks` averaged (on the shared questions when `ids` names them)."""
    if ids is None:
        return sum(run.em[b] for b in benchmarks) / len(benchmarks)
    return sum(float(np.mean([run.questions[b][q] for q in ids[b]])) for b in benchmarks) / len(benchmarks)


def _shared_ids(runs: Sequence[RunScores], benchmarks: Sequence[str]) -> dict[str, list[str]] | None:
    """Per benchmark, the question ids every run answered (in the first run's order); None when some run has no
    per-question results or some benchmark has fewer than two shared questions."""
    if any(r.questions is None or any(b not in r.questions for b in benchmarks) for r in runs):
        return None
    shared = {}
    for b in benchmarks:
        common = set(runs[0].questions[b])
        for run in runs[1:]:
            common &= set(run.questions[b])
        if len(common) < 2:
            return None
        shared[b] = [q for q in runs[0].questions[b] if q in common]
    return shared


def _matrix(runs: Sequence[RunScores], benchmark: str, ids: list[str]) -> np.ndarray:
    return np.array([[run.questions[benchmark][q] for q in ids] for run in runs], dtype=float)


def _residual_ms(x: np.ndarray) -> float:
    """The residual mean square of a seeds x questions table (the interaction: a run's luck on a question)."""
    s, q = x.shape
    fitted = x.mean(axis=1, keepdims=True) + x.mean(axis=0, keepdims=True) - x.mean()
    return float(((x - fitted) ** 2).sum() / ((s - 1) * (q - 1)))


@dataclass
class _Parts:
    """The variance of an estimate, by where it comes from."""

    seeds: list[tuple[np.ndarray, list[np.ndarray]]]  # per side: (its seed means, its seed x question tables)
    questions: list[tuple[np.ndarray, list[np.ndarray]]]  # per benchmark: (question means, the tables they average)
    k: int  # benchmarks averaged

    def residual(self, table: np.ndarray) -> float:
        """A table's residual as a part of the variance of the estimate: sigma_e^2 / (S Q k^2)."""
        s, q = table.shape
        return _residual_ms(table) / (s * q) / self.k ** 2

    def combine(self) -> tuple[float, float, float, float]:
        """(variance, degrees of freedom, variance of one seed, variance more seeds do not reduce): the seed
        terms, plus per benchmark the question term less the residual both contain. In the rare sample where that
        sum is not positive, the variance falls back to the seed terms (S - 1 degrees of freedom)."""
        seed_terms = [Term(float(np.var(means, ddof=1)) / len(means), len(means) - 1) for means, _ in self.seeds]
        seed_unit = sum(t.value * len(means) for t, (means, _) in zip(seed_terms, self.seeds))
        terms, irreducible = list(seed_terms), 0.0
        for question_means, tables in self.questions:
            q = len(question_means)
            between = float(np.var(question_means, ddof=1)) / q / self.k ** 2
            residuals = [Term(-self.residual(t), (t.shape[0] - 1) * (q - 1)) for t in tables]
            terms += [Term(between, q - 1), *residuals]
            irreducible += between + sum(r.value for r in residuals)
        variance, df = _satterthwaite(terms)
        if variance <= 0:
            variance, df = _satterthwaite(seed_terms)
        return variance, df, seed_unit, max(irreducible, 0.0)


def estimate(runs: Sequence[RunScores], benchmark: str | None = AVERAGE) -> Estimate:
    """A variant's mean EM on `benchmark` (default: the average over its benchmarks) over its seeds and questions."""
    benchmarks = _benchmarks(runs, benchmark)
    ids = _shared_ids(runs, benchmarks) if len(runs) > 1 else None
    means = np.array([_run_mean(r, benchmarks, ids) for r in runs])
    n_questions = min(len(v) for v in ids.values()) if ids else None
    if len(runs) < 2:
        return Estimate(float(means.mean()), None, None, len(runs), n_questions)
    tables = [_matrix(runs, b, ids[b]) for b in benchmarks] if ids else []
    parts = _Parts([(means, tables)], [(t.mean(axis=0), [t]) for t in tables], len(benchmarks))
    variance, df, _, _ = parts.combine()
    return Estimate(float(means.mean()), math.sqrt(variance), df, len(runs), n_questions)


def compare(variant: Sequence[RunScores], reference: Sequence[RunScores],
            benchmark: str | None = AVERAGE) -> Comparison:
    """`variant` - `reference` on `benchmark` (default: the average over the benchmarks both have)."""
    benchmarks = [b for b in _benchmarks([*variant, *reference], benchmark)
                  if all(b in r.em for r in [*variant, *reference])]
    if not benchmarks:
        raise ValueError("the two variants share no benchmark")
    seeds = (len(variant), len(reference))
    ids = _shared_ids([*variant, *reference], benchmarks)
    mean_v = np.array([_run_mean(r, benchmarks, ids) for r in variant])
    mean_r = np.array([_run_mean(r, benchmarks, ids) for r in reference])
    diff = float(mean_v.mean() - mean_r.mean())
    notes = [] if ids else ["question-level error left out: some run kept no per-question results, or the runs "
                            "answered different questions"]
    paired_seeds = len(variant) > 1 and sorted(r.seed for r in variant) == sorted(r.seed for r in reference)
    result = Comparison(diff, None, None, min(seeds), min(len(v) for v in ids.values()) if ids else None,
                        paired_seeds=paired_seeds, paired_questions=ids is not None, seeds=seeds, notes=notes)
    if min(seeds) < 2:
        result.notes.append("one seed: no interval (seed variance cannot be estimated)")
        return result
    tables_v = [_matrix(variant, b, ids[b]) for b in benchmarks] if ids else []
    tables_r = [_matrix(reference, b, ids[b]) for b in benchmarks] if ids else []
    if paired_seeds:  # each seed's difference is one unit; so is each question's difference
        order = [{r.seed: i for i, r in enumerate(reference)}[r.seed] for r in variant]
        differences = [t_v - t_r[order] for t_v, t_r in zip(tables_v, tables_r)]
        parts = _Parts([(mean_v - mean_r[order], differences)], [(d.mean(axis=0), [d]) for d in differences],
                       len(benchmarks))
    else:
        parts = _Parts([(mean_v, tables_v), (mean_r, tables_r)],
                       [(t_v.mean(axis=0) - t_r.mean(axis=0), [t_v, t_r]) for t_v, t_r in zip(tables_v, tables_r)],
                       len(benchmarks))
    variance, result.df, seed_unit, result.question_part = parts.combine()
    result.se = math.sqrt(variance)
    result.seed_unit = seed_unit  # one seed of each side
    if result.se == 0:
        result.p = 1.0 if diff == 0 else 0.0
    else:
        result.p = float(2 * _t().sf(abs(diff) / result.se, result.df))
    return result
