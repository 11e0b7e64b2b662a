"""`inspo ablate` planning: the CI arithmetic, the paper's ablations and studies, and sweep files (their plans and
their one-line errors). No model is loaded here; the end-to-end run is in test_ablate_run.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from helpers.ablation_recipes import INSPO_3B
from helpers.cli_helpers import assert_one_line_error, invoke

from inspo_cli.ablation.plan import plan_axes, plan_study, resolve
from inspo_cli.ablation.stats import seed_band
from inspo_cli.ablation.sweep import plan_sweep
from inspo_cli.errors import InspoError

# -- the arithmetic ------------------------------------------------------------------------------------------------


def test_a_curve_band_is_a_bootstrap_interval_over_seeds_within_what_the_metric_can_be():
    band = seed_band([0.2, 0.3, 0.4], (0.0, 1.0))
    assert (band.mean, band.n) == (pytest.approx(0.3), 3)
    assert 0.2 - 1e-9 <= band.low < 0.3 < band.high <= 0.4 + 1e-9  # resampled means of three seeds stay within
    assert seed_band([0.2, 0.3, 0.4]) == band  # fixed random state: the same report twice
    near_one = seed_band([0.9, 1.0, 1.0, 1.0], (0.0, 1.0))
    assert near_one.high <= 1.0 and near_one.low >= 0.9
    assert seed_band([0.0, 0.0, 6.0], (0.0, None)).low == 0.0
    assert seed_band([1.5, -0.5], (0.0, None)).low >= 0.0  # clipped: a count is never negative
    same = seed_band([0.4, 0.4, 0.4])
    assert (same.low, same.high) == (pytest.approx(0.4), pytest.approx(0.4))
    one = seed_band([0.25])
    assert (one.mean, one.low, one.high, one.n) == (0.25, None, None, 1)
    with pytest.raises(ValueError):
        seed_band([])


def test_a_curve_band_is_the_95_percent_percentile_interval_of_the_resampled_seed_mean():
    """Five skewed seeds: the exact bootstrap distribution of their mean (all 5^5 resamples) has its 2.5% and 97.5%
    points at 0.118 and 0.420 (5% and 95%: 0.124 and 0.404); the band, from 2,000 resamples, finds them."""
    from itertools import product

    import numpy as np

    data = [0.10, 0.12, 0.15, 0.20, 0.60]
    means = [sum(resample) / 5 for resample in product(data, repeat=5)]
    band = seed_band(data)
    assert band.mean == pytest.approx(0.234)  # the mean, not the median (0.15)
    assert band.low == pytest.approx(np.percentile(means, 2.5), abs=0.003)
    assert band.high == pytest.approx(np.percentile(means, 97.5), abs=0.008)
    assert seed_band(data) == band and seed_band(list(reversed(data))).n == 5  # the same report twice


# -- plans ---------------------------------------------------------------------------------------------------------


def test_a_named_ablation_plans_the_base_and_each_value_over_seeds_seed_major(repo_root, monkeypatch):
    monkeypatch.chdir(repo_root)
    plan = plan_axes(INSPO_3B, [("proposer", ["paraphrase"])], seeds=[0, 1, 2])
    assert [(v.name, v.overrides, v.bars) for v in plan.variants] == [
        ("inspo", [], []),
        ("proposer-paraphrase", ["population.proposer=paraphrase"], ["proposer=paraphrase"]),
    ]
    assert [r.name for r in plan.runs()] == [
        "inspo-s0",
        "proposer-paraphrase-s0",
        "inspo-s1",
        "proposer-paraphrase-s1",
        "inspo-s2",
        "proposer-paraphrase-s2",
    ]


def test_fig3_plans_nine_bars_in_seven_variants_sharing_full_inspo(repo_root, monkeypatch):
    monkeypatch.chdir(repo_root)
    plan = plan_study(INSPO_3B, "fig3", seeds=[0])
    bars = {v.name: v.bars for v in plan.variants}
    assert bars == {
        "inspo": ["stage=online", "proposer=reflection", "components=full"],
        "stage-pre": ["stage=pre"],
        "stage-post": ["stage=post"],
        "proposer-paraphrase": ["proposer=paraphrase"],
        "proposer-history": ["proposer=history"],
        "components-constant": ["components=constant"],
        "components-no-verify": ["components=no-verify"],
    }
    assert sum(len(b) for b in bars.values()) == 9
    assert plan.variant("components-constant").overrides == ["population.prune=false", "population.evolve_until=0"]
    assert plan.variant("stage-pre").overrides == ["population.stage=pre-rl"]


def test_fig6_and_table1_compare_against_search_r1(repo_root, monkeypatch):
    monkeypatch.chdir(repo_root)
    fig6 = plan_study(INSPO_3B, "fig6", seeds=[0, 1, 2])
    assert [v.name for v in fig6.variants] == [
        "inspo",
        "n-parent-2",
        "n-parent-3",
        "temperature-0.05",
        "temperature-1.0",
        "search-r1",
    ]
    assert fig6.variant("inspo").bars == ["n-parent=1", "temperature=0.2"]  # the paper's values are the base's
    assert fig6.variant("search-r1").overrides == ["population.enabled=false"]
    table1 = plan_study(INSPO_3B, "table1", seeds=[0])
    assert [(v.name, Path(v.recipe).name) for v in table1.variants] == [
        ("inspo", "inspo.yaml"),
        ("search-r1", "search-r1.yaml"),
        ("rejection-sampling", "rejection-sampling.yaml"),
        ("sft", "sft.yaml"),
        ("grpo-no-search", "grpo-no-search.yaml"),
    ]
    demo = plan_study("recipes/demo.yaml", "table1", seeds=[0])  # no trained baselines beside it: the override
    assert [(v.name, v.overrides) for v in demo.variants] == [("demo", []), ("search-r1", ["population.enabled=false"])]


def test_the_static_baseline_of_a_recipe_with_several_instructions_per_question_has_one(repo_root, monkeypatch):
    monkeypatch.chdir(repo_root)
    split = ["population.instructions_per_question=2"]  # a static instruction cannot be split: refused alone
    for study in ("fig6", "table1"):
        plan = plan_study("recipes/demo.yaml", study, seeds=[0], common=split)
        static = plan.variant("search-r1")
        assert static.overrides == [*split, "population.enabled=false", "population.instructions_per_question=1"]
        assert resolve(static).population.instructions_per_question == 1
        assert resolve(plan.variant("demo")).population.instructions_per_question == 2


def test_the_selection_study_compares_every_selection_rule_with_the_papers_configuration(repo_root, monkeypatch):
    monkeypatch.chdir(repo_root)
    plan = plan_study(INSPO_3B, "selection", seeds=[0, 1])
    assert [(v.name, v.overrides) for v in plan.variants] == [
        ("inspo", []),
        ("selection-ucb", ["population.selection=ucb"]),
        ("selection-thompson", ["population.selection=thompson"]),
        ("selection-epsilon-greedy", ["population.selection=epsilon-greedy"]),
        ("parents-pareto", ["population.parents=pareto"]),
        ("proposer-merge", ["population.proposer=merge", "population.n_parent=2"]),
    ]  # merge needs two parents
    # the paper's choices are the base recipe's: one run, not three
    assert plan.variant("inspo").bars == ["selection=softmax", "parents=top", "proposer=reflection"]
    assert "search-r1" not in [v.name for v in plan.variants]  # the reference is the paper's configuration
    axis = invoke("ablate", "--recipe", INSPO_3B, "--selection", "thompson,ucb", "--seeds", "0", "--dry-run")
    assert axis.exit_code == 0 and "selection-thompson" in axis.stdout and "selection-ucb" in axis.stdout


def test_a_sweep_file_plans_named_variants_and_a_grid_with_common_overrides(repo_root, monkeypatch):
    monkeypatch.chdir(repo_root)
    sweep = {
        "recipe": "recipes/demo.yaml",
        "seeds": [3, 4],
        "set": ["training.steps=2"],
        "variants": {"static": ["population.enabled=false"], "sft": {"recipe": "recipes/world-table1/sft.yaml"}},
        "grid": {"population.n_parent": [1, 2], "population.temperature": [0.05, 1.0]},
    }
    plan = plan_sweep(sweep, "sweeps/small.yaml", common=["evaluation.limit=4"])
    assert plan.name == "small" and plan.seeds == [3, 4]
    assert [v.name for v in plan.variants] == [
        "static",
        "sft",
        "n_parent-1_temperature-0.05",
        "n_parent-1_temperature-1.0",
        "n_parent-2_temperature-0.05",
        "n_parent-2_temperature-1.0",
    ]
    assert plan.variant("static").overrides == ["training.steps=2", "evaluation.limit=4", "population.enabled=false"]
    assert plan.variant("sft").recipe == "recipes/world-table1/sft.yaml"
    assert plan.variant("n_parent-2_temperature-1.0").overrides[-2:] == [
        "population.n_parent=2",
        "population.temperature=1.0",
    ]
    assert plan_sweep(sweep, "s.yaml", seeds=[9]).seeds == [9]  # --seeds wins over the file


@pytest.mark.parametrize(
    "sweep, message",
    [
        ({"recipe": "recipes/demo.yaml", "variant": {}}, "unknown key 'variant'"),
        ({"variants": {"a": []}}, "name the base recipe"),
        ({"recipe": "recipes/demo.yaml", "grid": {"population.n_parent": 2}}, "grid must map"),
        ({"recipe": "recipes/demo.yaml", "variants": {"a": ["population.size"]}}, "KEY=VALUE"),
        ({"recipe": "recipes/demo.yaml", "variants": {"a": ["population.sise=3"]}}, "variant a"),
        ({"recipe": "recipes/demo.yaml", "variants": {"a b": []}}, "letters, digits"),
        ({"recipe": "recipes/demo.yaml"}, "plans no variant"),
    ],
)
def test_bad_sweep_files_fail_before_anything_runs(repo_root, monkeypatch, sweep, message):

    monkeypatch.chdir(repo_root)
    with pytest.raises(InspoError, match=message):
        plan_sweep(sweep, "s.yaml")


@pytest.mark.parametrize(
    "sweep,message",
    [
        ({"recipe": 5, "variants": {"a": []}}, "recipe: must be a recipe file or bundled name"),
        ({"recipe": "recipes/demo.yaml", "grid": {1: [1, 2]}}, "grid: key 1 (int) must be a recipe field"),
        ({"recipe": "recipes/demo.yaml", "variants": {"a": {"recipe": 5}}}, "variant a: recipe: must be a recipe file"),
        (
            {"recipe": "recipes/demo.yaml", "grid": {f"population.k{i}": list(range(10)) for i in range(6)}},
            "the sweep plans 1,000,000 variants (1,000,000 from the grid), more than the 500 allowed",
        ),
    ],
)
def test_sweep_files_with_wrong_types_or_too_many_variants_are_one_line_errors(
    repo_root, monkeypatch, tmp_path, sweep, message
):
    """Issue 29, class 2 and the grid cap of class 3: named by key, refused before anything is resolved."""
    monkeypatch.chdir(repo_root)
    file = tmp_path / "sweep.yaml"
    file.write_text(yaml.safe_dump(sweep))
    result = invoke("ablate", "--sweep", file, "--dry-run")
    assert_one_line_error(result, message)


def test_the_variant_cap_can_be_raised(repo_root, monkeypatch, tmp_path):
    monkeypatch.chdir(repo_root)
    file = tmp_path / "sweep.yaml"
    file.write_text(
        yaml.safe_dump({"recipe": "recipes/demo.yaml", "seeds": [0], "grid": {"population.n_parent": [1, 2, 3]}})
    )
    assert_one_line_error(
        invoke("ablate", "--sweep", file, "--dry-run", "--max-variants", "2"), "the sweep plans 3 variants"
    )
    assert invoke("ablate", "--sweep", file, "--dry-run", "--max-variants", "3").exit_code == 0
