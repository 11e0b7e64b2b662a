"""`inspo report --decompose` with `inspo distill`'s runs: the "distilled weights" row, its two effects and the share
of the instruction effect that survives without I*, on fabricated runs whose every cell's per-question outcomes are
known; with no distilled run the decomposition is exactly what it was before distillation existed."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from helpers.decomposition import CELLS, SEEDS, fabricate_cells, make_distilled, make_runs, outcome, variants

from inspo_cli.ablation.cells import DISTILLED
from inspo_cli.ablation.compare import RunScores
from inspo_cli.ablation.decompose import build, choose
from inspo_cli.ablation.effects import effects, markdown
from inspo_cli.ablation.survival import UNDEFINED, against_zero
from inspo_cli.instructions.initial import initial_instructions
from inspo_cli.runs import RunDir

FIXTURES = Path(__file__).parents[1] / "fixtures" / "decomposition"
TS, TI = ("trained", "seed"), ("trained", "evolved")
# an instruction effect clearly above 0 on every seed (trained·I* 8 of 10 right against trained·S 5 or 6), and a
# student that keeps half of it (6 or 7 of 10)
TAUGHT = {
    **CELLS,
    TI: lambda s: outcome(7, s, 2),
    DISTILLED: lambda s: outcome(5, s, 1),
}


@pytest.fixture
def runs(tmp_path, repo_root, monkeypatch, tiny_model_dir):
    monkeypatch.chdir(repo_root)
    return make_runs(tmp_path / "runs", tiny_model_dir)


@pytest.fixture
def taught(tmp_path, repo_root, monkeypatch, tiny_model_dir):
    """The runs with an instruction effect distinguishable from 0 (`TAUGHT`)."""
    monkeypatch.chdir(repo_root)
    return make_runs(tmp_path / "runs", tiny_model_dir, TAUGHT[TI])


def decomposition(runs, cells=CELLS) -> dict:
    ((name, static, plans),) = build(choose(variants(runs)))
    fabricate_cells(plans, cells)
    return effects(plans, name, static)


def mean(key, seeds=SEEDS, cells=TAUGHT) -> float:
    return float(np.mean([np.mean(cells[key](s)) for s in seeds]))


def test_without_a_distilled_run_the_decomposition_is_exactly_as_before(runs):
    d = decomposition(runs)
    text = "\n".join(markdown(d, "the final step"))
    assert text == (FIXTURES / "without_distillation.md").read_text()  # written by the code before distillation
    assert json.loads(json.dumps(d)) == json.loads((FIXTURES / "without_distillation.json").read_text())
    assert "distilled" not in d and "distill" not in text


def test_every_seed_distilled_gives_the_row_its_effects_and_the_share_worked_out_by_hand(taught):
    for seed in SEEDS:
        make_distilled(taught[("inspo", seed)])
    d = decomposition(taught, TAUGHT)
    assert d["cells"]["distilled·seed"]["mean"] == pytest.approx(mean(DISTILLED))
    assert d["cells"]["distilled·seed"]["seeds"] == list(SEEDS)
    found = {e["effect"]: e for e in d["effects"]}
    assert found["distillation | S"]["diff"] == pytest.approx(mean(DISTILLED) - mean(TS))
    assert found["distilled vs teacher"]["diff"] == pytest.approx(mean(DISTILLED) - mean(TI))
    assert found["distillation | S"]["n"] == 3 and found["distillation | S"]["paired_questions"]
    assert len([e for e in d["effects"] if "p_holm" in e]) == 12  # the two join the Holm family

    s = d["distilled"]["share"]
    by_hand = (mean(DISTILLED) - mean(TS)) / (mean(TI) - mean(TS))  # (0.667 − 0.533) / (0.800 − 0.533) = 1/2
    assert by_hand == pytest.approx(1 / 2)
    assert s["defined"] and s["n"] == 3 and s["share"] == pytest.approx(by_hand)
    assert s["low"] < s["share"] < s["high"]
    # Fieller's bounds: the ratios rho where the paired test of (distilled·S − trained·S) − rho (trained·I* −
    # trained·S) = 0, over seeds and questions, sits exactly at its 95% critical value
    from scipy import stats

    for rho in (s["low"], s["high"]):
        runs = [
            RunScores(
                seed,
                {"world": float(np.mean(row))},
                {"world": {f"q{q}": float(v) for q, v in enumerate(row)}},
            )
            for seed in SEEDS
            for row in [
                np.subtract(TAUGHT[DISTILLED](seed), TAUGHT[TS](seed))
                - rho * np.subtract(TAUGHT[TI](seed), TAUGHT[TS](seed))
            ]
        ]
        c = against_zero(runs)
        assert abs(c.diff) / c.se == pytest.approx(stats.t.ppf(0.975, c.df), rel=1e-6)
    assert d["distilled"]["not_measured"] == [] and d["distilled"]["of"] == 3

    text = "\n".join(markdown(d, "the final step"))
    assert "| distilled weights (3 of 3 seeds) |" in text
    assert f"**+0.500 [{s['low']:+.3f}, {s['high']:+.3f}]**".replace("-", "−") in text
    assert "Holm-adjusted over the 12 effects" in text
    assert "| distilled vs teacher | distilled·S − trained·I*" in text
    assert "| seed | run | step | initial · S |" in text and "| static · I* | distilled · S |" in text


def test_some_seeds_distilled_the_row_says_for_how_many_and_every_effect_is_over_those(taught):
    make_distilled(taught[("inspo", 0)])
    make_distilled(taught[("inspo", 2)])
    d = decomposition(taught, TAUGHT)
    assert d["cells"]["distilled·seed"]["seeds"] == [0, 2]
    assert d["distilled"]["not_measured"] == [
        {"seed": 1, "run": "inspo-s1", "why": "no distilled run (`inspo distill inspo-s1` makes one)"}
    ]
    found = {e["effect"]: e for e in d["effects"]}
    assert found["distillation | S"]["n"] == 2 and found["instruction | trained"]["n"] == 3
    s = d["distilled"]["share"]
    # over seeds 0 and 2 only, numerator and denominator alike (never a 2-seed numerator over a 3-seed denominator)
    assert s["n"] == 2 and s["numerator"] == pytest.approx(mean(DISTILLED, (0, 2)) - mean(TS, (0, 2)))
    assert s["denominator"] == pytest.approx(mean(TI, (0, 2)) - mean(TS, (0, 2)))  # +0.250, not the 3 seeds' +0.267
    text = "\n".join(markdown(d, "the final step"))
    assert "| distilled weights (2 of 3 seeds) |" in text and "measured for 2 of 3 seeds" in text
    assert "over the 2 seeds with a distilled run" in text
    assert "Not measured: seed 1: no distilled run" in text
    per_seed = [line for line in text.splitlines() if line.startswith("| 1 | inspo-s1 |")]
    assert per_seed[0].endswith("| - |")  # its distilled column is empty, not another seed's value


@pytest.mark.parametrize(
    "damage, why",
    [
        ({"finished": False}, "not finished (no summary.json); resume it with `inspo distill`"),
        ({"teacher_step": 2}, "taught by step 2's policy, and this decomposition reports step 3"),
        ({"teacher_instruction": "Another I*. {question}"}, "another instruction than the I* reported here"),
    ],
)
def test_a_distillation_of_another_policy_or_unfinished_is_not_measured_and_says_why(taught, damage, why):
    make_distilled(taught[("inspo", 0)])
    make_distilled(taught[("inspo", 1)], **damage)
    d = decomposition(taught, TAUGHT)
    assert d["cells"]["distilled·seed"]["seeds"] == [0]
    ((seed, reason),) = [(m["seed"], m["why"]) for m in d["distilled"]["not_measured"] if m["seed"] == 1]
    assert reason.startswith("inspo-s1/distill: ") and why in reason
    assert why in "\n".join(markdown(d, "the final step"))


def test_a_distilled_run_that_is_not_one_or_kept_no_policy_is_named_with_the_fix(taught):
    make_distilled(taught[("inspo", 0)])
    RunDir(make_distilled(taught[("inspo", 1)])).distill_info_file.unlink()
    (RunDir(make_distilled(taught[("inspo", 2)])).final_dir / "config.json").unlink()
    d = decomposition(taught, TAUGHT)
    reasons = {m["seed"]: m["why"] for m in d["distilled"]["not_measured"]}
    assert "no distill.json, so not a run `inspo distill` made" in reasons[1]
    assert "kept no final policy (checkpoints/final); distil again" in reasons[2]


def test_the_share_is_undefined_when_the_instruction_effect_is_not_distinguishable_from_zero(runs):
    for seed in SEEDS:
        make_distilled(runs[("inspo", seed)])
    d = decomposition(runs, {**CELLS, DISTILLED: TAUGHT[DISTILLED]})
    effect = {e["effect"]: e for e in d["effects"]}["instruction | trained"]
    assert effect["low"] < 0 < effect["high"]  # +0.133 [−0.170, +0.437]
    s = d["distilled"]["share"]
    assert not s["defined"] and s["share"] is None and s["low"] is None and s["why"] == UNDEFINED
    text = "\n".join(markdown(d, "the final step"))
    line = next(line for line in text.splitlines() if line.startswith("Share of the instruction effect"))
    assert line.endswith(f"**{UNDEFINED}**.") and "+0.133 [−0.170, +0.437]" in line


def test_a_student_taught_under_another_instruction_is_evaluated_with_it_and_said(taught):
    make_distilled(taught[("inspo", 0)], student="")  # --instruction none: the bare question
    make_distilled(taught[("inspo", 1)])
    ((_, _, plans),) = build(choose(variants(taught)))
    seed_text = initial_instructions(RunDir(taught[("inspo", 0)]).recipe())[0]
    assert [p.cells[DISTILLED].text for p in plans[:2]] == ["{question}", seed_text]
    assert DISTILLED not in plans[2].cells
    fabricate_cells(plans, TAUGHT)
    text = "\n".join(markdown(effects(plans, "inspo", "static"), "the final step"))
    assert "Taught under another instruction than S (their cell is evaluated with it): seed 0 (none)." in text


def test_the_distilled_cell_is_its_own_runs_policy_cached_in_it_with_the_source_runs_settings(taught):
    make_distilled(taught[("inspo", 1)])
    ((_, _, plans),) = build(choose(variants(taught)))
    spec = plans[1].cells[DISTILLED]
    assert spec.model == "inspo-s1/distill@final" and spec.run.path == taught[("inspo", 1)] / "distill"
    assert spec.settings.path == taught[("inspo", 1)]  # the source's evaluation settings, whatever distill's recipe
    assert spec.directory.parent == taught[("inspo", 1)] / "distill" / "decomposition"
    assert spec.name == "distilled-seed" and not spec.cached
    trained = plans[1].cells[TS]
    assert spec.key != trained.key  # the same instruction, another policy: another evaluation


def test_fiellers_interval_is_the_closed_form_worked_out_by_hand():
    """Differences that do not vary within a seed: the estimator is then the seeds' sample variance over S with
    S − 1 degrees of freedom, and Fieller's interval the roots of (N − rho D)^2 = t^2 (vN − 2 rho c + rho^2 vD)."""
    from scipy import stats

    from inspo_cli.ablation.survival import share

    numerator, denominator = [0.10, 0.20, 0.15, 0.12], [0.30, 0.32, 0.25, 0.28]

    def runs(values):
        return [RunScores(s, {"world": v}, {"world": {f"q{q}": v for q in range(5)}}) for s, v in enumerate(values)]

    s = share(runs(numerator), runs(denominator))
    n, d, k = np.mean(numerator), np.mean(denominator), len(numerator)
    vn, vd = np.var(numerator, ddof=1) / k, np.var(denominator, ddof=1) / k
    c = np.cov(numerator, denominator, ddof=1)[0, 1] / k
    t = stats.t.ppf(0.975, k - 1)
    a, b, e = d * d - t * t * vd, -2 * (n * d - t * t * c), n * n - t * t * vn
    low, high = sorted(((-b - math.sqrt(b * b - 4 * a * e)) / (2 * a), (-b + math.sqrt(b * b - 4 * a * e)) / (2 * a)))
    assert s["share"] == pytest.approx(0.1425 / 0.2875)  # 0.4957
    assert (s["low"], s["high"]) == (pytest.approx(low, abs=1e-9), pytest.approx(high, abs=1e-9))
    assert (round(low, 3), round(high, 3)) == (0.265, 0.729)  # asymmetric about 0.496: a ratio's interval

    flat = share(runs(numerator), runs([0.30, -0.30, 0.25, -0.28]))  # an instruction effect of about 0
    assert not flat["defined"] and flat["why"] == UNDEFINED and flat["share"] is None
    one = share(runs(numerator[:1]), runs(denominator[:1]))
    assert one["share"] == pytest.approx(0.10 / 0.30) and one["low"] is None and "one seed" in one["why"]
    none = share(runs([0.1, 0.2]), runs([0.0, 0.0]))  # no instruction effect at all: nothing to divide by
    assert not none["defined"] and none["share"] is None


@pytest.mark.slow
def test_report_evaluates_the_distilled_cell_in_the_distilled_run_with_the_source_settings_once(
    taught, tmp_path, tiny_model_dir
):
    from helpers.cli_helpers import invoke

    from inspo_cli.config import dump_recipe, load_recipe

    ((_, _, plans),) = build(choose(variants(taught)))
    fabricate_cells(plans, TAUGHT)  # every other cell was evaluated by an earlier report
    distilled = make_distilled(taught[("inspo", 1)], model=tiny_model_dir)
    own = RunDir(distilled).recipe_file  # the distillation's own recipe evaluates 2 questions, its source's 4
    own.write_text(dump_recipe(load_recipe(own, ["evaluation.limit=2"], written_by_run=True)))
    roots = [str(taught[(v, s)]) for v in ("inspo", "static") for s in SEEDS]
    report = tmp_path / "report"
    result = invoke("report", *roots, "--out", str(report), "--decompose", "inspo", "--device", "cpu")
    assert result.exit_code == 0, result.output
    assert "1 evaluations to run (distilled-seed)" in result.output
    ((cell_file,),) = [list((distilled / "decomposition").glob("distilled-seed-*/cell.json"))]
    seed_text = initial_instructions(RunDir(taught[("inspo", 1)]).recipe())[0]
    cell = json.loads(cell_file.read_text())
    assert (cell["model"], cell["instruction_text"]) == ("inspo-s1/distill@final", seed_text)
    scores = json.loads((cell_file.parent / "results.json").read_text())
    assert scores["instruction"] == seed_text and {s["n"] for s in scores["scores"]["agent"].values()} == {4}
    md = (report / "decomposition.md").read_text()
    assert "| distilled weights (1 of 3 seeds) |" in md and "Not measured: seed 0: no distilled run" in md
    assert (report / "decomposition-inspo.png").stat().st_size > 5000
    assert json.loads((report / "decomposition.json").read_text())[0]["distilled"]["of"] == 3

    stamp = (cell_file.parent / "results.json").stat().st_mtime_ns
    again = invoke("report", *roots, "--out", str(report), "--decompose", "inspo")
    assert again.exit_code == 0, again.output
    assert "evaluations to run" not in again.output and (cell_file.parent / "results.json").stat().st_mtime_ns == stamp


def test_a_seed_whose_i_star_is_s_is_left_out_as_nothing_to_distil_not_as_a_run_to_make(tmp_path):
    """`inspo distill` refuses such a seed, so the row must not tell the user to run it (seeds 1 and 3 of the world
    ablation, whose runs ended with S as their best instruction)."""
    from inspo_cli.ablation.cells import CellSpec, SeedCells
    from inspo_cli.ablation.effects import TI, TS, _no_distilled_run

    def seed_cells(evolved_text):
        plan = SeedCells(1, "inspo-s1", 8, "search-r1-s1")
        for (weights, instruction), text in ((TS, "S"), (TI, evolved_text)):
            plan.cells[(weights, instruction)] = CellSpec(weights, instruction, RunDir(tmp_path), "m", text, "k")
        return plan

    assert _no_distilled_run(seed_cells("S")).startswith("its I* is the seed instruction S: nothing to distil")
    assert _no_distilled_run(seed_cells("I*")) == "no distilled run (`inspo distill inspo-s1` makes one)"


def test_the_share_is_undefined_exactly_when_the_instruction_effects_own_interval_includes_zero():
    """What the table prints beside the share (the instruction effect D and its 95% interval) and whether the share is
    given must agree, also for effects whose t lies between the one- and two-sided 5% critical values."""
    import numpy as np

    from inspo_cli.ablation.compare import RunScores
    from inspo_cli.ablation.survival import share

    rng = np.random.default_rng(0)
    noise = rng.normal(0.0, 0.3, (3, 12))
    seen = set()
    for scale in np.linspace(0.02, 0.4, 60):
        table = noise + scale
        runs = [
            RunScores(s, {"world": float(row.mean())}, {"world": {f"q{q}": float(x) for q, x in enumerate(row)}})
            for s, row in enumerate(table)
        ]
        found = share(runs, runs)
        includes_zero = found["denominator_low"] <= 0 <= found["denominator_high"]
        assert found["defined"] is not includes_zero, (scale, found)
        seen.add(includes_zero)
    assert seen == {True, False}  # both sides of the line were crossed
