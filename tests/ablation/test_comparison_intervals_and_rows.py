"""Issue 37: no interval that cannot be right (Welch-Satterthwaite degrees of freedom, a constant difference,
runs that never differ), and a difference that is always the difference of the rows it compares."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.comparison_runs import runs_of

from inspo_cli.ablation.compare import RunScores, compare, estimate

# -- issue 37: no interval that cannot be right, and a Δ that is always the difference of the rows -----------------


def test_the_degrees_of_freedom_are_welch_satterthwaites_kept_at_least_at_the_fewest_of_the_terms_that_add():
    from scipy import stats

    from inspo_cli.ablation.compare import Term, _satterthwaite

    # two terms that add: (a + b)^2 / (a^2 / d_a + b^2 / d_b)
    assert _satterthwaite([Term(0.004, 2), Term(0.001, 199)]) == pytest.approx(
        (0.005, 0.005**2 / (0.004**2 / 2 + 0.001**2 / 199))
    )
    # a subtracted term counts in the denominator too
    variance, df = _satterthwaite([Term(0.004, 2), Term(0.003, 199), Term(-0.002, 398)])
    assert (variance, df) == pytest.approx((0.005, 0.005**2 / (0.004**2 / 2 + 0.003**2 / 199 + 0.002**2 / 398)))
    # ... and where it pulls the approximation below the fewest degrees of freedom of the terms that add, it is
    # kept there (10, not 0.06); a zero term is not one that adds; never below 1
    assert _satterthwaite([Term(1.0, 10), Term(-0.9, 30)])[1] == pytest.approx(10)
    assert _satterthwaite([Term(0.0, 2), Term(1.0, 50), Term(-0.99, 100)])[1] == pytest.approx(50)
    assert _satterthwaite([Term(1.0, 0.5)])[1] == 1.0
    # the tables' terms: seed means over S (S - 1 df), question means over Q (Q - 1), less the residual over S Q
    # ((S - 1)(Q - 1)); the interval is t(0.975, that df) x SE
    rng = np.random.default_rng(11)
    x = (rng.random((3, 40)) < np.linspace(0.1, 0.9, 40)).astype(float) + 0.0
    s, q = x.shape
    fitted = x.mean(1, keepdims=True) + x.mean(0, keepdims=True) - x.mean()
    terms = [
        (x.mean(1).var(ddof=1) / s, s - 1),
        (x.mean(0).var(ddof=1) / q, q - 1),
        (-((x - fitted) ** 2).sum() / ((s - 1) * (q - 1)) / (s * q), (s - 1) * (q - 1)),
    ]
    variance = sum(v for v, _ in terms)
    df = max(variance**2 / sum(v**2 / d for v, d in terms), min(d for v, d in terms if v > 0))
    interval = estimate(runs_of(dict(enumerate(x))))
    assert (interval.se**2, interval.df) == pytest.approx((variance, df))
    assert interval.half_width == pytest.approx(stats.t.ppf(0.975, df) * np.sqrt(variance))


def flipped(base: dict[int, np.ndarray], which: dict[int, int]) -> dict[int, np.ndarray]:
    """Each seed's answers with one more question right: the `which[seed]`-th of those every seed got wrong."""
    wrong = np.flatnonzero(np.all([a == 0 for a in base.values()], axis=0))
    out = {}
    for seed, answers in base.items():
        out[seed] = answers.copy()
        out[seed][wrong[which[seed]]] = 1.0
    return out


def test_a_constant_difference_on_every_seed_keeps_the_error_of_the_questions_it_came_from():
    """Issue 37: a variant one question better on every seed (another question each time) was reported
    "+0.010 [+0.010, +0.010] p < 0.001": the seed term is 0 and the question term below the residual, and the
    variance fell back to the seed term alone. Truncating both components at 0 leaves the residual term."""
    rng = np.random.default_rng(0)
    base = {s: (rng.random(100) < 0.4).astype(float) for s in (0, 1, 2)}
    better = flipped(base, {0: 0, 1: 1, 2: 2})
    c = compare(runs_of(better), runs_of(base), "world")
    assert c.diff == pytest.approx(0.01)
    d = np.array([better[s] - base[s] for s in (0, 1, 2)])
    fitted = d.mean(1, keepdims=True) + d.mean(0, keepdims=True) - d.mean()
    residual = ((d - fitted) ** 2).sum() / (2 * 99) / 300  # sigma_e^2 / (S Q)
    assert c.se == pytest.approx(np.sqrt(residual)) and c.df == pytest.approx(198)
    assert c.low < 0 < 0.01 < c.high and c.p > 0.05
    # the same question on every seed: a question effect, with its own (non-zero) error
    same = compare(runs_of(flipped(base, {0: 0, 1: 0, 2: 0})), runs_of(base), "world")
    assert same.se == pytest.approx(0.01) and same.low < 0


def test_runs_that_do_not_differ_anywhere_get_no_interval_rather_than_a_zero_width_one():
    rng = np.random.default_rng(1)
    base = runs_of({s: (rng.random(50) < 0.4).astype(float) for s in (0, 1, 2)})
    c = compare(base, base, "world")
    assert c.diff == 0 and c.p is None and c.low is None and "do not vary" in c.notes[-1]
    # without per-question results, three seeds with the same EM: no "0.320 ± 0.000"
    same = [RunScores(s, {"world": 0.32}) for s in (0, 1, 2)]
    assert estimate(same).half_width is None and compare(same, same).p is None
    assert estimate(runs_of({s: np.zeros(20) for s in (0, 1)})).half_width is None


def test_variants_that_answered_different_questions_are_compared_unpaired_and_the_difference_is_the_rows():
    """Issue 37: pairing on the shared questions only gave a difference that was not the difference of the rows'
    own means (+0.027 against +0.237)."""
    rng = np.random.default_rng(2)

    def runs(ids, p, seeds=(0, 1, 2)):
        return [
            RunScores(s, {"world": float(a.mean())}, {"world": dict(zip(ids, a))})
            for s, a in ((s, (rng.random(len(ids)) < p).astype(float)) for s in seeds)
        ]

    everything = [f"q{i}" for i in range(200)]
    variant, reference = runs(everything, 0.5), runs(everything[:60] + [f"x{i}" for i in range(40)], 0.25)
    c = compare(variant, reference, "world")
    assert c.diff == pytest.approx(estimate(variant).mean - estimate(reference).mean)
    assert c.paired_seeds and not c.paired_questions and c.unpaired_questions == ["world"]
    assert c.pairing == "seed" and any("answered different questions" in n for n in c.notes)
    # the seed term of the paired differences, and each side's question term less its residual
    tables = [np.array([list(r.questions["world"].values()) for r in side]) for side in (variant, reference)]
    parts = np.var(tables[0].mean(1) - tables[1].mean(1), ddof=1) / 3
    for x in tables:
        fitted = x.mean(1, keepdims=True) + x.mean(0, keepdims=True) - x.mean()
        parts += x.mean(0).var(ddof=1) / x.shape[1] - ((x - fitted) ** 2).sum() / (2 * (x.shape[1] - 1)) / x.size
    assert c.se**2 == pytest.approx(parts)
    # the same questions, other seeds: paired by question only; the difference is still the rows'
    other_seeds = runs(everything, 0.25, seeds=(5, 6, 7, 8))
    c = compare(variant, other_seeds, "world")
    assert c.pairing == "question" and c.diff == pytest.approx(estimate(variant).mean - estimate(other_seeds).mean)
    # seeds of one variant on different questions: its mean is that of its runs' EMs, at the seed level
    mixed = [*runs(everything[:100], 0.5, seeds=(0,)), *runs(everything[100:], 0.5, seeds=(1, 2))]
    assert estimate(mixed).mean == pytest.approx(np.mean([r.em["world"] for r in mixed]))
    assert estimate(mixed).df == pytest.approx(2) and compare(mixed, variant, "world").pairing == "seed"
    # per-question results that do not average to the run's EM are not used for its question error
    bad = [RunScores(r.seed, {"world": r.em["world"] + 0.1}, r.questions) for r in variant]
    assert not compare(bad, variant, "world").paired_questions


def test_the_paired_by_column_names_the_benchmarks_answered_on_different_questions():
    from inspo_cli.ablation.table_files import pairing_cell

    rng = np.random.default_rng(3)

    def runs(ids):
        tables = [(s, (rng.random(len(ids)) < 0.5).astype(float)) for s in (0, 1, 2)]
        return [RunScores(s, {"world": float(a.mean())}, {"world": dict(zip(ids, a))}) for s, a in tables]

    same = [f"q{i}" for i in range(50)]
    apart = compare(runs(same), runs(same[:30] + [f"x{i}" for i in range(20)]), "world")
    assert pairing_cell({"average": apart.as_dict()}) == "seed (different questions on world)"
    assert pairing_cell({"average": compare(runs(same), runs(same), "world").as_dict()}) == "seed, question"
    assert pairing_cell({"average": None}) == "-"  # rows averaged over other benchmarks: no difference to pair


def test_a_table_never_shows_one_variants_difference_for_another():
    from inspo_cli.ablation.results import RunResult
    from inspo_cli.ablation.table import summarize
    from inspo_cli.errors import InspoError

    def row(name, ems, benchmarks=("world",)):
        results = [
            RunResult(
                f"{name}-s{s}", s, 4, 4, "best", None, {b: e for b in benchmarks}, {b: 20 for b in benchmarks}, None
            )
            for s, e in enumerate(ems)
        ]
        return {"variant": name, "bars": [], "results": results, "missing": []}

    table = summarize(
        [row("search-r1", [0.35, 0.3, 0.4]), row("inspo", [0.9, 0.85, 0.95]), row("other", [0.5, 0.45, 0.55])], "best"
    )
    means = {r["variant"]: r["average"]["mean"] for r in table["rows"]}
    for c in table["comparisons"]:
        assert c["average"]["diff"] == pytest.approx(means[c["variant"]] - means["search-r1"])
    with pytest.raises(InspoError, match="both named 'inspo'"):
        summarize([row("search-r1", [0.35, 0.3]), row("inspo", [0.9, 0.8]), row("inspo", [0.35, 0.3])], "best")
    # rows averaged over different benchmarks: a difference per shared benchmark, none of the averages
    table = summarize([row("search-r1", [0.35, 0.3], ("world", "nq")), row("inspo", [0.9, 0.8])], "best")
    c = table["comparisons"][0]
    assert c["average"] is None and "no difference of averages" in c["sentence"]
    assert c["em"]["world"]["diff"] == pytest.approx(0.85 - 0.325)
