"""Comparisons a reader can trust: calibrated on simulated ablations, paired the way the plan is, never pooled, each
variant under a name of its own and each difference the difference of the rows it compares."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

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


def runs_of(ems: dict[int, list[float]]) -> list[RunScores]:
    return [
        RunScores(seed, {"world": float(np.mean(a))}, {"world": {f"q{i}": x for i, x in enumerate(a)}})
        for seed, a in ems.items()
    ]


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


def fake_ablation(root, ems: dict[str, float], questions: int = 40, static: str = "search-r1"):
    """An ablation directory (inspo and `static`, without a population, seeds 0-2), each run finished and evaluated
    on `questions` world questions with about `ems[variant]` right (a seed's luck on each question)."""
    import json

    from inspo_cli.ablation.directory import AblationDir
    from inspo_cli.ablation.sweep import plan_sweep

    plan = plan_sweep(
        {
            "recipe": "recipes/demo.yaml",
            "seeds": [0, 1, 2],
            "variants": {"inspo": [], static: ["population.enabled=false"]},
        },
        "world.yaml",
    )
    ablation = AblationDir.start(root, plan)
    rng = np.random.default_rng(sum(Path(root).parent.name.encode()))  # by the folder's name: not the tmp path's
    for variant, em in ems.items():
        for seed in (0, 1, 2):
            run = ablation.runs_dir / f"{variant}-s{seed}"
            (run / "evaluations/step-4").mkdir(parents=True)
            (run / "run.json").write_text("{}")
            (run / "summary.json").write_text(json.dumps({"steps": 4, "best_instruction": "Answer."}))
            answers = (rng.random(questions) < em).astype(float)
            (run / "evaluations/step-4/results.json").write_text(
                json.dumps(
                    {
                        "scores": {
                            "agent": {
                                "world": {
                                    "em": float(answers.mean()),
                                    "f1": 0.0,
                                    "subem": 0.0,
                                    "searches": 1.0,
                                    "n": questions,
                                }
                            }
                        }
                    }
                )
            )
            (run / "evaluations/step-4/predictions.jsonl").write_text(
                "".join(
                    json.dumps({"method": "agent", "benchmark": "world", "id": f"w{i}", "em": a}) + "\n"
                    for i, a in enumerate(answers)
                )
            )
    return root


def test_the_default_reference_is_the_variant_without_a_population_whatever_its_name(tmp_path, repo_root, monkeypatch):
    from inspo_cli.ablation.directory import AblationDir
    from inspo_cli.ablation.table import collect

    monkeypatch.chdir(repo_root)
    ablation = AblationDir.open(fake_ablation(tmp_path / "abl/world", {"inspo": 0.9, "fixed": 0.35}, static="fixed"))
    table = collect(ablation)
    assert {row["variant"]: row["static"] for row in table["rows"]} == {"inspo": False, "fixed": True}
    assert table["reference"] == "fixed" and [c["variant"] for c in table["comparisons"]] == ["inspo"]


def test_report_tells_apart_variants_of_the_same_name_and_refuses_runs_given_twice(tmp_path, repo_root, monkeypatch):
    """Issue 37: two ablation folders of one name (copied from two clusters) gave two rows "inspo (world)", and
    the second showed the first's difference (EM 0.90 against 0.35 read as +0.000, p = 1.00)."""
    import json

    from helpers.cli_helpers import assert_one_line_error, invoke

    monkeypatch.chdir(repo_root)
    first = fake_ablation(tmp_path / "cluster-a/world", {"inspo": 0.9, "search-r1": 0.35})
    second = fake_ablation(tmp_path / "cluster-b/world", {"inspo": 0.35, "search-r1": 0.35})
    result = invoke("report", first, second, "--out", tmp_path / "report")
    assert result.exit_code == 0, result.output
    table = json.loads((tmp_path / "report/table1.json").read_text())
    means = {r["variant"]: r["average"]["mean"] for r in table["rows"]}
    assert sorted(means) == [
        "inspo (cluster-a/world)",
        "inspo (cluster-b/world)",
        "search-r1 (cluster-a/world)",
        "search-r1 (cluster-b/world)",
    ]
    assert table["reference"] == "search-r1 (cluster-a/world)"
    for c in table["comparisons"]:
        assert c["average"]["diff"] == pytest.approx(means[c["variant"]] - means[table["reference"]])
    best = next(c for c in table["comparisons"] if c["variant"] == "inspo (cluster-a/world)")["average"]
    assert best["diff"] > 0.4 and best["p"] < 0.05  # before: +0.000, p = 1.00
    names = [r["run"] for row in table["rows"] for r in row["runs"]]
    assert len(set(names)) == 12 and "cluster-a_world_runs_inspo-s0" in names
    md = (tmp_path / "report/table1.md").read_text()
    assert "| inspo (cluster-b/world) |" in md and "| seed, question |" in md
    # the same ablation twice, or with one of its own runs: its runs would be counted twice
    assert_one_line_error(
        invoke("report", first, tmp_path / "cluster-a/../cluster-a/world", "--out", tmp_path / "r2"), "given twice"
    )
    assert_one_line_error(
        invoke("report", first, first / "runs/inspo-s0", "--out", tmp_path / "r3"),
        "inspo-s0 lies inside",
        "give one of them",
    )
    (tmp_path / "link").symlink_to(first / "runs/inspo-s0")
    assert_one_line_error(invoke("report", first, tmp_path / "link", "--out", tmp_path / "r4"), "lies inside")


def test_qa_files_never_go_by_a_name_a_table_already_shows(tmp_path, monkeypatch):
    """Issue 37 (after issue 29's fix): a file NQ.jsonl was a column "NQ" beside the built-in nq's "NQ"; a file
    whose stem needed its path could be named like another's stem; "Avg." read as the average column."""
    from inspo_cli.evaluation.report import table_rows
    from inspo_cli.evaluation.runner import benchmark_file_labels

    monkeypatch.chdir(tmp_path)
    labels = benchmark_file_labels(["qa/NQ.jsonl", "qa/Hotpot_QA.jsonl", "qa/b/Avg..jsonl", "x/q.jsonl"])
    assert labels == {
        "qa/NQ.jsonl": "qa/NQ",
        "qa/Hotpot_QA.jsonl": "qa/Hotpot_QA",
        "qa/b/Avg..jsonl": "b/Avg.",
        "x/q.jsonl": "q",
    }
    # a.jsonl's stem is taken by c/a.json, so it went by its path "a.jsonl" -- the stem of b/a.jsonl.jsonl
    labels = benchmark_file_labels(["a.jsonl", "c/a.json", "b/a.jsonl.jsonl"])
    assert len(set(labels.values())) == 3 and labels["c/a.json"] == "c/a"
    assert labels["a.jsonl"] == str(tmp_path / "a.jsonl")
    # results written before: the columns still tell the file from the built-in benchmark
    score = {"em": 0.5, "f1": 0.5, "subem": 0.5, "searches": 1.0, "n": 2}
    header, _ = table_rows({"agent": {"nq": score, "NQ": score, "Avg.": score}}, "em")
    assert len(set(header)) == len(header) == 5
