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
dominate, many when questions do; never fewer than the fewest of the terms that add), and the p-value is the
two-sided t test of no difference. The average over benchmarks adds each benchmark's question terms (their
questions are independent) over k^2.

Where seed term + question term - residual is not positive (both the seed and the question component estimate at or
below 0: seeds that agree exactly, a question term below the residual), the variance is the residual term alone,
sigma_e^2 / (S Q), with (S - 1)(Q - 1) degrees of freedom: what truncating each component at 0 leaves. Runs that
differ by chance question by question never get a zero-width interval; runs that do not differ anywhere (and seeds
without per-question results that agree exactly) get no interval at all, like one seed.

A variant's mean is always the mean of its runs' own EMs, and a difference always the difference of the two
variants' means (the cells of a table), whatever is paired. A comparison is paired wherever the plan makes it
possible: by seed when both variants ran the same seeds (the difference of each seed's pair is the seed unit), and
on a benchmark by question when every run of both answered the same set of questions (the question term is then that
of the per-question difference, so how hard a question is cancels). Where their question sets differ the two are
separate samples of questions: each variant's question term (less its residual) is added, and `notes` says so.
Otherwise the two variances add (Welch). A variant with one seed has no interval: its seed variance cannot be
estimated. Per-question results count only where all a variant's runs answered the same questions and each run's
average to its EM; else that benchmark's question-level error is left out (`notes`).

Why not a bootstrap: resampling seeds and questions cannot estimate this variance without bias (McCullagh 2000,
"Resampling and exchangeable arrays": no resampling scheme can for a crossed design). On simulated ablations
(`bench/comparison_calibration.py`) a hierarchical bootstrap's 95% interval covered the truth 86-97% of the time
with 3-10 seeds (3-16% false positives), this estimator 92-96% (4.5-7%): test_comparison_statistics.py holds it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

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

    def question_em(self, benchmark: str) -> dict[str, float]:  # empty: no per-question results kept there
        return self.questions.get(benchmark, {}) if self.questions is not None else {}


@dataclass(frozen=True)
class Term:
    value: float  # its part of the variance of the estimate (negative for the residual that is subtracted)
    df: float


def _satterthwaite(terms: Sequence[Term]) -> tuple[float, float]:
    """(variance, Welch-Satterthwaite degrees of freedom) of a sum of mean-square terms. A subtracted term can push
    the approximation below the fewest degrees of freedom of the terms that add; it is kept at least there."""
    variance = sum(t.value for t in terms)
    denominator = sum(t.value**2 / t.df for t in terms if t.df > 0)
    df = variance**2 / denominator if denominator > 0 else math.inf
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
        if self.se is None or self.df is None:
            return None
        return float(_t().ppf(1 - ALPHA / 2, self.df)) * self.se

    @property
    def low(self) -> float | None:
        return None if (half := self.half_width) is None else max(self.mean - half, self.bounds[0])

    @property
    def high(self) -> float | None:
        return None if (half := self.half_width) is None else min(self.mean + half, self.bounds[1])

    def as_dict(self) -> dict:
        return {
            "mean": self.mean,
            "ci95": self.half_width,
            "low": self.low,
            "high": self.high,
            "se": self.se,
            "df": self.df,
            "n": self.n_seeds,
            "questions": self.n_questions,
        }


@dataclass
class Comparison(Estimate):
    """variant - reference: `mean` is the difference; p the two-sided p-value; how the pairing went; the variance
    one seed adds (`seed_unit`, what power calculations rescale to other seed counts) and what the questions add
    (`question_part`, which more seeds do not reduce)."""

    bounds = (-1.0, 1.0)  # a difference of two rates
    p: float | None = None
    paired_seeds: bool = False
    paired_questions: bool = False  # on every benchmark (each question against itself)
    unpaired_questions: list[str] = field(default_factory=list)  # benchmarks whose question sets differ
    seeds: tuple[int, int] = (0, 0)  # seeds of the variant, of the reference
    seed_unit: float = 0.0  # variance of one seed's contribution: the term is seed_unit / S
    question_part: float = 0.0  # variance that more seeds do not reduce (the questions), truncated at 0
    notes: list[str] = field(default_factory=list)

    @property
    def diff(self) -> float:
        return self.mean

    @property
    def pairing(self) -> str:
        """What was paired, for a table: "seed, question", "seed", "question" or "none"."""
        return ", ".join(["seed"] * self.paired_seeds + ["question"] * self.paired_questions) or "none"

    def power(self, difference: float, seeds: int | None = None) -> float:
        """The chance a two-sided t test at ALPHA finds `difference`: as run, or with `seeds` seeds per variant
        (the same questions; see `variance_with`)."""
        from scipy import stats

        variance, df = self.variance_with(seeds)
        if variance <= 0 or df is None:  # df is None only with one seed, whose variance is 0
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

    def variance_with(self, seeds: int | None) -> tuple[float, float | None]:
        """(variance, degrees of freedom) of the difference with `seeds` seeds per variant (None: as run): the
        estimate as run with its seed term rescaled from the seeds run to `seeds`, never falling faster than
        1 / seeds; the degrees of freedom of that seed term and of what the questions add (None: one seed, as run)."""
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
        return {
            **super().as_dict(),
            "diff": self.mean,
            "p": self.p,
            "paired_seeds": self.paired_seeds,
            "paired_questions": self.paired_questions,
            "unpaired_questions": list(self.unpaired_questions),
            "pairing": self.pairing,
            "seeds": list(self.seeds),
            "seed_unit_variance": self.seed_unit,
            "question_variance": self.question_part,
            "detectable": self.detectable(),
            "notes": list(self.notes),
        }


def _benchmarks(runs: Sequence[RunScores], benchmark: str | None) -> list[str]:
    """[benchmark], or for the average the benchmarks every run has (in the first run's order)."""
    if benchmark is not AVERAGE:
        return [benchmark]
    return [b for b in runs[0].em if all(b in r.em for r in runs)] if runs else []


def _having(runs: Sequence[RunScores], benchmark: str | None) -> list[RunScores]:
    """The runs evaluated on `benchmark` (all of them for the average), as a table's cell for it counts them."""
    return list(runs) if benchmark is AVERAGE else [r for r in runs if benchmark in r.em]


def _run_mean(run: RunScores, benchmarks: Sequence[str]) -> float:
    """The run's EM averaged over `benchmarks`: always its own EM, so that a table's cells, the runs under them
    and the differences between them are the same numbers."""
    return sum(run.em[b] for b in benchmarks) / len(benchmarks)


def _question_ids(runs: Sequence[RunScores], benchmark: str) -> tuple[list[str] | None, str | None]:
    """(the question ids every run answered on `benchmark`, in the first run's order; None and why not). The
    question-level error needs one question set for all runs, whose per-question EM averages to each run's EM."""
    if not all(tables := [r.question_em(benchmark) for r in runs]):
        return None, "some run kept no per-question results"
    ids = list(tables[0])
    if len(ids) < 2:
        return None, "fewer than two questions"
    if any(set(table) != set(ids) for table in tables[1:]):
        return None, "its runs answered different questions"
    if any(abs(float(np.mean(list(t.values()))) - r.em[benchmark]) > 1e-6 for r, t in zip(runs, tables)):
        return None, "some run's per-question results do not average to its EM"
    return ids, None


def _matrix(runs: Sequence[RunScores], benchmark: str, ids: list[str]) -> np.ndarray:
    return np.array([[run.question_em(benchmark)[q] for q in ids] for run in runs], dtype=float)


def _residual_ms(x: np.ndarray) -> float:
    """The residual mean square of a seeds x questions table (the interaction: a run's luck on a question)."""
    s, q = x.shape
    fitted = x.mean(axis=1, keepdims=True) + x.mean(axis=0, keepdims=True) - x.mean()
    return float(((x - fitted) ** 2).sum() / ((s - 1) * (q - 1)))


ZERO = 1e-18  # a variance below this (a standard error below 1e-9 EM) is rounding error of an exact 0


@dataclass
class _Parts:
    """The variance of an estimate, by where it comes from."""

    seeds: list[np.ndarray]  # per side: its seed means (one side, of the differences, when paired by seed)
    questions: list[tuple[np.ndarray, list[np.ndarray]]]  # per benchmark and side: (question means, their tables)
    k: int  # benchmarks averaged

    def residual(self, table: np.ndarray) -> float:
        """A table's residual as a part of the variance of the estimate: sigma_e^2 / (S Q k^2)."""
        s, q = table.shape
        return _residual_ms(table) / (s * q) / self.k**2

    def combine(self) -> tuple[float, float, float, float]:
        """(variance, degrees of freedom, variance of one seed, variance more seeds do not reduce): the seed
        terms, plus per benchmark the question term less the residual both contain. Where that sum is not
        positive (both the seed and the question component estimate at or below 0), the variance is the residual
        term alone, sigma_e^2 / (S Q), with its (S - 1)(Q - 1) degrees of freedom: what each component truncated
        at 0 leaves, and never 0 for runs that differ by chance question by question. Without per-question tables
        it is the seed terms (possibly 0: the caller then gives no interval)."""
        seed_terms = [Term(float(np.var(means, ddof=1)) / len(means), len(means) - 1) for means in self.seeds]
        seed_unit = sum(t.value * len(means) for t, means in zip(seed_terms, self.seeds))
        terms, residuals, irreducible = list(seed_terms), [], 0.0
        for question_means, tables in self.questions:
            q = len(question_means)
            between = float(np.var(question_means, ddof=1)) / q / self.k**2
            subtracted = [Term(-self.residual(t), (t.shape[0] - 1) * (q - 1)) for t in tables]
            terms += [Term(between, q - 1), *subtracted]
            residuals += [Term(-t.value, t.df) for t in subtracted]
            irreducible += between + sum(t.value for t in subtracted)
        variance, df = _satterthwaite(terms)
        if variance <= ZERO:
            variance, df = _satterthwaite(residuals or seed_terms)
        if variance <= ZERO:
            variance, df = _satterthwaite(seed_terms)
        return variance, df, seed_unit, max(irreducible, 0.0)


def estimate(runs: Sequence[RunScores], benchmark: str | None = AVERAGE) -> Estimate:
    """A variant's mean EM on `benchmark` (default: the average over the benchmarks all its runs have) over its
    seeds (the runs evaluated on it) and questions. No interval with one seed, or where nothing varies."""
    runs = _having(runs, benchmark)
    benchmarks = _benchmarks(runs, benchmark)
    if not benchmarks:
        raise ValueError(f"no run evaluated on {benchmark!r}" if benchmark else "the runs share no benchmark")
    means = np.array([_run_mean(r, benchmarks) for r in runs])
    ids = {b: i for b in benchmarks if (i := _question_ids(runs, b)[0]) is not None} if len(runs) > 1 else {}
    n_questions = min(map(len, ids.values())) if ids else None
    if len(runs) < 2:
        return Estimate(float(means.mean()), None, None, len(runs), n_questions)
    tables = [_matrix(runs, b, i) for b, i in ids.items()]
    variance, df, _, _ = _Parts([means], [(t.mean(axis=0), [t]) for t in tables], len(benchmarks)).combine()
    if variance <= ZERO:
        return Estimate(float(means.mean()), None, None, len(runs), n_questions)
    return Estimate(float(means.mean()), math.sqrt(variance), df, len(runs), n_questions)


def compare(
    variant: Sequence[RunScores], reference: Sequence[RunScores], benchmark: str | None = AVERAGE
) -> Comparison:
    """`variant` - `reference` on `benchmark` (default: the average over the benchmarks of each; both must have the
    same ones, else the difference would not be that of their averages): always `estimate(variant).mean -
    estimate(reference).mean`. Paired by seed when both ran the same seeds, by question on a benchmark where all
    their runs answered the same questions; otherwise unpaired (the variances add) and said in `notes`."""
    variant, reference = _having(variant, benchmark), _having(reference, benchmark)
    benchmarks, other = _benchmarks(variant, benchmark), _benchmarks(reference, benchmark)
    if not variant or not reference or not benchmarks:
        raise ValueError(f"the two variants share no benchmark{f' (no run on {benchmark!r})' if benchmark else ''}")
    if set(benchmarks) != set(other):
        raise ValueError(
            f"the variant's average is over {', '.join(benchmarks)}, the reference's over "
            f"{', '.join(other)}: their difference is not a difference of averages"
        )
    seeds = (len(variant), len(reference))
    mean_v = np.array([_run_mean(r, benchmarks) for r in variant])
    mean_r = np.array([_run_mean(r, benchmarks) for r in reference])
    diff = float(mean_v.mean() - mean_r.mean())
    seeds_v, seeds_r = [r.seed for r in variant], [r.seed for r in reference]
    paired_seeds = len(variant) > 1 and len(set(seeds_v)) == len(seeds_v) and sorted(seeds_v) == sorted(seeds_r)
    order = [{s: i for i, s in enumerate(seeds_r)}[s] for s in seeds_v] if paired_seeds else []
    questions, counts, unpaired, notes = [], [], [], []
    for b in benchmarks:
        (ids_v, why_v), (ids_r, why_r) = _question_ids(variant, b), _question_ids(reference, b)
        if ids_v is None or ids_r is None:
            notes.append(f"question-level error left out on {b}: {why_v or why_r}")
            continue
        t_v = _matrix(variant, b, ids_v)
        if set(ids_v) == set(ids_r):  # each question against itself: how hard it is cancels
            t_r = _matrix(reference, b, ids_v)
            counts.append(len(ids_v))
            if paired_seeds:
                questions.append(((t_v - t_r[order]).mean(axis=0), [t_v - t_r[order]]))
            else:
                questions.append((t_v.mean(axis=0) - t_r.mean(axis=0), [t_v, t_r]))
        else:  # two samples of questions: each side's question error, added
            t_r = _matrix(reference, b, ids_r)
            counts.append(min(len(ids_v), len(ids_r)))
            unpaired.append(b)
            questions += [(t_v.mean(axis=0), [t_v]), (t_r.mean(axis=0), [t_r])]
    if unpaired:
        notes.append(f"questions not paired on {', '.join(unpaired)}: the variants answered different questions")
    result = Comparison(
        diff,
        None,
        None,
        min(seeds),
        min(counts) if counts else None,
        paired_seeds=paired_seeds,
        paired_questions=bool(counts) and not unpaired and len(counts) == len(benchmarks),
        seeds=seeds,
        notes=notes,
        unpaired_questions=unpaired,
    )
    if min(seeds) < 2:
        result.notes.append("one seed: no interval (seed variance cannot be estimated)")
        return result
    seed_means = [mean_v - mean_r[order]] if paired_seeds else [mean_v, mean_r]
    variance, df, seed_unit, question_part = _Parts(seed_means, questions, len(benchmarks)).combine()
    result.seed_unit, result.question_part = seed_unit, question_part  # seed_unit: one seed of each side
    if variance <= ZERO:
        result.notes.append("no interval: the differences do not vary over seeds or questions")
        return result
    result.se, result.df = math.sqrt(variance), df
    result.p = float(2 * _t().sf(abs(diff) / result.se, result.df))
    return result
