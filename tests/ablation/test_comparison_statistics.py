"""Comparisons a reader can trust: calibrated on simulated ablations (false positives, coverage, power) and
paired the way the plan is (seed with seed, question with question), never pooled."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.comparison_runs import runs_of

from inspo_cli.ablation.compare import RunScores, compare, estimate


def simulate(rng, seeds: int, questions: int, difference: float, seed_spread: float, question_spread: float):
    """Two variants' runs on one benchmark. P(correct) = p_q + effect + a_(variant, seed) + g_(variant, q): every
    run answers the same questions (p_q: how hard a question is), each seed trains another policy (a), and each
    variant is better on some questions than on others (g). All terms are bounded, so every probability is in
    [0, 1] and the true difference over new seeds and questions is exactly `difference`."""
    hardness = rng.uniform(0.2, 0.8, questions)
    runs = []
    for effect in (difference, 0.0):
        g = rng.uniform(-question_spread, question_spread, questions)
        variant = []
        for seed in range(seeds):
            p = hardness + effect + rng.uniform(-seed_spread, seed_spread) + g
            answers = (rng.random(questions) < p).astype(float)
            variant.append(
                RunScores(
                    seed, {"world": float(answers.mean())}, {"world": {f"q{i}": a for i, a in enumerate(answers)}}
                )
            )
        runs.append(variant)
    return runs


REGIMES = [(3, 0.15, 0.05), (3, 0.0, 0.15), (5, 0.08, 0.1)]  # seeds dominate; questions dominate; both


@pytest.mark.parametrize("seeds,seed_spread,question_spread", REGIMES)
def test_no_difference_is_found_about_5_percent_of_the_time(seeds, seed_spread, question_spread):
    rng = np.random.default_rng(seeds * 100 + int(seed_spread * 1000))
    trials = 400
    found = sum(compare(*simulate(rng, seeds, 200, 0.0, seed_spread, question_spread)).p < 0.05 for _ in range(trials))
    assert 0.02 <= found / trials <= 0.085, found / trials


@pytest.mark.parametrize("seeds,seed_spread,question_spread", REGIMES)
def test_the_interval_covers_a_known_difference_about_95_percent_of_the_time(seeds, seed_spread, question_spread):
    rng = np.random.default_rng(7 + seeds)
    trials, covered = 400, 0
    for _ in range(trials):
        c = compare(*simulate(rng, seeds, 200, 0.05, seed_spread, question_spread))
        covered += c.low <= 0.05 <= c.high
    assert 0.915 <= covered / trials <= 0.985, covered / trials


def test_a_difference_the_design_can_detect_is_found_as_often_as_its_power_says():
    """The detectable difference is estimated from one dataset's variances; over datasets its median is where the
    test finds a true difference about 80% of the time."""
    rng = np.random.default_rng(3)
    difference = float(np.median([compare(*simulate(rng, 5, 200, 0.0, 0.08, 0.1)).detectable() for _ in range(40)]))
    assert 0.03 < difference < 0.3
    found = sum(compare(*simulate(rng, 5, 200, difference, 0.08, 0.1)).p < 0.05 for _ in range(300))
    assert 0.65 <= found / 300 <= 0.92, found / 300


def test_the_difference_pairs_each_seed_with_the_same_seed_and_each_question_with_itself():
    rng = np.random.default_rng(0)
    base = {s: (rng.random(50) < 0.4).astype(float) for s in (0, 1, 2)}
    better = {s: np.maximum(a, (rng.random(50) < 0.2).astype(float)) for s, a in base.items()}
    c = compare(runs_of(better), runs_of(base), "world")
    assert c.paired_seeds and c.paired_questions and c.seeds == (3, 3) and c.n_questions == 50
    assert c.diff == pytest.approx(np.mean([better[s].mean() - base[s].mean() for s in base]))
    # seed-by-seed pairing: shuffling which reference seed is which changes nothing only if seeds are matched by
    # their number, not by their position
    shuffled = list(reversed(runs_of(base)))
    assert compare(runs_of(better), shuffled, "world").se == pytest.approx(c.se)
    assert c.df < 200  # the seed term counts with its 2 degrees of freedom


def test_pooling_two_variants_or_splitting_one_is_not_what_the_comparison_computes():
    """The interval of one variant over its own three seeds; a variant split in two, or two variants pooled, give
    other numbers (so a table that mixed runs up would fail here)."""
    rng = np.random.default_rng(1)
    a = runs_of({s: (rng.random(80) < p).astype(float) for s, p in zip((0, 1, 2), (0.2, 0.5, 0.35))})
    b = runs_of({s: (rng.random(80) < p).astype(float) for s, p in zip((0, 1, 2), (0.3, 0.3, 0.3))})
    whole = estimate(a)
    assert whole.n_seeds == 3 and whole.mean == pytest.approx(np.mean([r.em["world"] for r in a]))
    assert estimate(a[:2]).half_width != pytest.approx(whole.half_width)
    assert estimate([*a, *[RunScores(r.seed + 10, r.em, r.questions) for r in b]]).mean != pytest.approx(whole.mean)
    c = compare(a, b)
    assert c.seeds == (3, 3) and c.diff == pytest.approx(whole.mean - estimate(b).mean)


def test_one_seed_has_no_interval_and_other_seeds_are_compared_unpaired():
    rng = np.random.default_rng(2)
    one = runs_of({0: (rng.random(40) < 0.3).astype(float)})
    three = runs_of({s: (rng.random(40) < 0.3).astype(float) for s in (0, 1, 2)})
    assert estimate(one).half_width is None
    c = compare(one, three)
    assert c.p is None and c.low is None and "one seed" in c.notes[-1]
    other_seeds = runs_of({s: (rng.random(40) < 0.3).astype(float) for s in (5, 6, 7)})
    assert not compare(three, other_seeds).paired_seeds and compare(three, other_seeds).p is not None


def test_identical_seeds_still_carry_the_question_level_error():
    """The committed laptop table once read "0.320 ± 0.000" for three seeds with the same EM: the questions are a
    sample too."""
    answers = (np.arange(200) % 3 == 0).astype(float)
    same = runs_of({s: answers for s in (0, 1, 2)})
    interval = estimate(same)
    assert interval.mean == pytest.approx(answers.mean()) and interval.half_width > 0.05


def test_without_per_question_results_the_comparison_says_the_question_error_is_missing():
    a = [RunScores(s, {"world": v}) for s, v in zip((0, 1, 2), (0.3, 0.35, 0.32))]
    b = [RunScores(s, {"world": v}) for s, v in zip((0, 1, 2), (0.2, 0.25, 0.21))]
    c = compare(a, b)
    assert not c.paired_questions and "question-level error left out" in c.notes[0] and c.df == pytest.approx(2)


def test_more_seeds_are_needed_for_smaller_differences_and_none_can_beat_the_question_limit():
    rng = np.random.default_rng(4)
    c = compare(*simulate(rng, 3, 200, 0.0, 0.1, 0.1))
    needed = [c.seeds_needed(d) for d in (0.2, 0.1, 0.06)]
    assert all(n is not None for n in needed[:2]) and needed[0] <= needed[1]
    assert c.seeds_needed(0.001) is None  # the questions' own error is larger than that, whatever the seeds
    # the power line agrees with itself: what 3 seeds detect needs at most 3 seeds, anything smaller more
    assert c.seeds_needed(c.detectable() * 1.01) <= 3 < c.seeds_needed(c.detectable() * 0.9)


def test_intervals_stay_within_what_em_can_be():
    """Two seeds far apart: t(1) makes the interval ±12.7 SE, which is clipped to [0, 1] (and differences to
    [-1, 1]); the power line then says no difference is detectable rather than a number above 1."""
    rng = np.random.default_rng(5)
    wide = runs_of({0: (rng.random(30) < 0.05).astype(float), 1: (rng.random(30) < 0.9).astype(float)})
    narrow = runs_of({0: (rng.random(30) < 0.4).astype(float), 1: (rng.random(30) < 0.45).astype(float)})
    interval = estimate(wide)
    assert interval.mean - interval.half_width < 0 and (interval.low, interval.high) == (0.0, 1.0)
    c = compare(wide, narrow)
    assert -1.0 <= c.low < c.high <= 1.0 and c.detectable() is None


def _two_benchmarks(nq: list[list[float]], hotpot: list[list[float]]) -> list[RunScores]:
    return [
        RunScores(
            seed,
            {"nq": float(np.mean(a)), "hotpotqa": float(np.mean(b))},
            {
                "nq": {f"n{i}": x for i, x in enumerate(a)},
                "hotpotqa": {f"h{i}": x for i, x in enumerate(b)},
            },
        )
        for seed, (a, b) in enumerate(zip(nq, hotpot))
    ]


def test_the_average_over_benchmarks_has_the_variance_of_an_average_of_independent_means():
    """Every seed scores the same on each benchmark (no seed variance), so the Avg. column's variance is that of the
    mean of k independent benchmark means: the sum of each benchmark's variance over k squared."""
    nq = [[1, 1, 0, 0, 1, 0, 1, 0], [1, 0, 1, 0, 0, 1, 1, 0], [0, 1, 1, 1, 0, 0, 1, 0]]  # each seed 0.5
    hotpot = [[1, 0, 0, 1, 0, 0], [0, 1, 0, 0, 0, 1], [1, 0, 1, 0, 0, 0]]  # each seed 1/3
    runs = _two_benchmarks(nq, hotpot)
    one = [estimate(runs, benchmark) for benchmark in ("nq", "hotpotqa")]
    both = estimate(runs)
    assert both.mean == pytest.approx((0.5 + 1 / 3) / 2)
    assert both.se**2 == pytest.approx(sum(e.se**2 for e in one) / 4)


def test_variants_that_answered_different_questions_count_the_smaller_set():
    variant = runs_of({seed: [float((seed + i) % 2) for i in range(60)] for seed in range(3)})
    answers = {f"other{i}": float(i % 3 == 0) for i in range(400)}
    reference = [
        RunScores(r.seed, {"world": float(np.mean(list(answers.values())))}, {"world": answers}) for r in variant
    ]
    result = compare(variant, reference)
    assert result.unpaired_questions == ["world"] and result.n_questions == 60
