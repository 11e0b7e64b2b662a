"""`inspo ablate`: planning (paper ablations, studies, sweep files), the CI arithmetic, grouping by variant, the
ablation directory, --print-commands and --collect. No model is loaded here; the end-to-end run is in
test_ablate_run.py."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import yaml
from helpers.cli_helpers import assert_one_line_error, invoke
from helpers.run_dirs import fake_run_dir

from inspo_cli.ablation.directory import AblationDir
from inspo_cli.ablation.plan import plan_axes, plan_study
from inspo_cli.ablation.stats import seed_band
from inspo_cli.ablation.sweep import plan_sweep
from inspo_cli.ablation.table import collect
from inspo_cli.ablation.table_files import write_table
from inspo_cli.errors import InspoError

INSPO_3B = "recipes/qwen2.5-3b/inspo.yaml"


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


# -- the command ---------------------------------------------------------------------------------------------------


def test_dry_run_prints_the_plan_and_writes_nothing(repo_root, monkeypatch, tmp_path):
    monkeypatch.chdir(repo_root)
    result = invoke("ablate", "--recipe", INSPO_3B, "--proposer", "paraphrase", "--dry-run", "--out", tmp_path / "a")
    assert result.exit_code == 0, result.output
    assert "2 variants x 3 seeds (0, 1, 2) = 6 runs" in result.output
    assert "--set population.proposer=paraphrase" in result.output and not (tmp_path / "a").exists()
    result = invoke("ablate", "--recipe", INSPO_3B, "--study", "fig3", "--dry-run", "--json", "--seeds", "0,1")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    assert len(plan["variants"]) == 7 and len(plan["runs"]) == 14
    assert sum(len(v["bars"]) for v in plan["variants"]) == 9 and plan["out"] == "runs/ablations/inspo-fig3"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--recipe", INSPO_3B, "--proposer", "bogus"], "--proposer 'bogus': must be one of reflection, paraphrase"),
        (["--recipe", INSPO_3B, "--n-parent", "0"], "--n-parent '0': must be a number >= 1"),
        (["--recipe", "recipes/qwen2.5-3b/search-r1.yaml", "--proposer", "paraphrase"], "population.enabled: false"),
        (["--recipe", INSPO_3B], "name one ablation"),
        (["--recipe", INSPO_3B, "--study", "fig3", "--proposer", "history"], "--study and an axis flag"),
        (["--recipe", INSPO_3B, "--study", "fig9"], "unknown study 'fig9'"),
        (["--recipe", INSPO_3B, "--study", "fig3", "--seeds", "0,0"], "distinct"),
        (["--recipe", INSPO_3B, "--study", "fig3", "--seeds", "one"], "--seeds 'one'"),
    ],
)
def test_bad_ablation_arguments_are_one_line_errors(repo_root, monkeypatch, args, message):
    monkeypatch.chdir(repo_root)
    assert_one_line_error(invoke("ablate", *args, "--dry-run"), message)


def test_print_commands_writes_the_plan_and_one_train_command_per_run(repo_root, monkeypatch, tmp_path):
    monkeypatch.chdir(repo_root)
    out = tmp_path / "abl"
    result = invoke(
        "ablate",
        "--recipe",
        INSPO_3B,
        "--n-parent",
        "2",
        "--seeds",
        "0,1",
        "--out",
        out,
        "--print-commands",
        "--launcher",
        "accelerate launch --config_file recipes/accelerate/8gpu-zero3.yaml",
    )
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert len(lines) == 4
    first = shlex.split(lines[0])
    assert first[:6] == [
        "accelerate",
        "launch",
        "--config_file",
        "recipes/accelerate/8gpu-zero3.yaml",
        "-m",
        "inspo_cli",
    ]
    assert first[6:] == [
        "train",
        "--recipe",
        str(out / "recipes/inspo.yaml"),
        "--set",
        "run.seed=0",
        "--name",
        "inspo-s0",
        "--output-dir",
        str(out / "runs"),
    ]
    assert json.loads((out / "plan.json").read_text())["seeds"] == [0, 1]
    check = invoke("recipe", "check", out / "recipes/n-parent-2.yaml", "--json")
    assert check.exit_code == 0 and json.loads(check.stdout)["population"]["n_parent"] == 2
    # the same arguments continue the ablation; another plan in the same directory is refused
    assert (
        invoke(
            "ablate", "--recipe", INSPO_3B, "--n-parent", "2", "--seeds", "0,1", "--out", out, "--print-commands"
        ).exit_code
        == 0
    )
    assert_one_line_error(
        invoke("ablate", "--recipe", INSPO_3B, "--n-parent", "3", "--seeds", "0,1", "--out", out, "--print-commands"),
        "holds another ablation",
    )


def test_printed_commands_run_as_printed(repo_root, monkeypatch, tmp_path):
    """Issue 29, class 5: the launcher is split by shell rules; an empty one is refused; a cut-off run is resumed
    from its own directory (a new --name would make <name>-2, which --collect never reads), one cut off before its
    first checkpoint is removed and started over; booleans are not seeds."""
    monkeypatch.chdir(repo_root)
    out = tmp_path / "abl"
    args = [
        "ablate",
        "--recipe",
        "recipes/demo.yaml",
        "--components",
        "constant",
        "--seeds",
        "0",
        "--out",
        out,
        "--print-commands",
    ]
    assert_one_line_error(invoke(*args, "--launcher", ""), "--launcher is empty")
    assert_one_line_error(invoke(*args, "--launcher", "accelerate launch --config_file 'my cfg"), "--launcher")
    assert not out.exists()  # refused before anything was written
    result = invoke(*args, "--launcher", "accelerate launch --config_file 'my cfg/x.yaml'")
    assert result.exit_code == 0, result.output
    first = shlex.split(result.stdout.splitlines()[0])
    assert first[:4] == ["accelerate", "launch", "--config_file", "my cfg/x.yaml"]

    ablation = AblationDir.open(out)
    cut = ablation.runs_dir / "demo-s0"  # run.json and a checkpoint: resumable
    (cut / "checkpoints/checkpoint-2/global_step2").mkdir(parents=True)
    (cut / "checkpoints/checkpoint-2/trainer_state.json").write_text("{}")
    (cut / "recipe.yaml").write_text((out / "recipes/demo.yaml").read_text())
    (cut / "run.json").write_text("{}")
    early = ablation.runs_dir / "components-constant-s0"  # cut off before its first checkpoint
    early.mkdir(parents=True)
    (early / "recipe.yaml").write_text((out / "recipes/components-constant.yaml").read_text())
    (early / "run.json").write_text("{}")
    lines = invoke(*args).stdout.splitlines()
    assert shlex.split(lines[0]) == ["inspo", "train", "--resume", str(cut)]
    assert lines[1].startswith(f"rm -rf -- {shlex.quote(str(early))} && inspo train --recipe ")
    assert "--name components-constant-s0" in lines[1]

    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump({"recipe": "recipes/demo.yaml", "seeds": [True, False], "variants": {"a": []}}))
    assert_one_line_error(invoke("ablate", "--sweep", sweep, "--dry-run"), "seeds must be a list of integers")


# -- the table -----------------------------------------------------------------------------------------------------


def test_the_table_groups_seeds_by_variant_and_averages_benchmarks_per_seed_first(repo_root, monkeypatch, tmp_path):
    monkeypatch.chdir(repo_root)
    plan = plan_axes("recipes/demo.yaml", [("n-parent", ["2"])], seeds=[0, 1, 2])
    ablation = AblationDir.start(tmp_path / "abl", plan)
    # demo: nq 0.2, 0.3, 0.4 and hotpotqa 0.6, 0.6, 0.9 over seeds 0, 1, 2
    for seed, nq, hotpot in ((0, 0.2, 0.6), (1, 0.3, 0.6), (2, 0.4, 0.9)):
        fake_run_dir(ablation, f"demo-s{seed}", {"nq": nq, "hotpotqa": hotpot})
    # n-parent-2: seeds 0 and 1 only (seed 2 failed); seed 1's values are far from seed 0's
    fake_run_dir(ablation, "n-parent-2-s0", {"nq": 0.5, "hotpotqa": 0.1})
    fake_run_dir(ablation, "n-parent-2-s1", {"nq": 0.7, "hotpotqa": 0.3})
    ablation.record_failure(plan.runs()[-1], "out of memory")

    table = collect(ablation)
    assert table["benchmarks"] == ["nq", "hotpotqa"]
    demo, varied = table["rows"]
    assert demo["n"] == 3 and demo["em"]["nq"]["mean"] == pytest.approx(0.3)
    assert demo["em"]["nq"]["ci95"] == pytest.approx(0.248414, abs=1e-6)
    # avg. per seed: 0.4, 0.45, 0.65 -> mean 0.5, s = 0.132288, t(2) = 4.3027 -> 4.3027 * 0.132288 / sqrt(3) = 0.328621
    assert demo["average"]["mean"] == pytest.approx(0.5)
    assert demo["average"]["ci95"] == pytest.approx(0.328621, abs=1e-6)
    # n-parent-2: nq 0.5, 0.7 -> 0.6 ± 1.270620; avg per seed 0.3, 0.5 -> 0.4 ± 1.270620
    assert varied["n"] == 2 and varied["seeds"] == [0, 1]
    assert (varied["em"]["nq"]["mean"], varied["average"]["mean"]) == (pytest.approx(0.6), pytest.approx(0.4))
    assert varied["average"]["ci95"] == pytest.approx(1.270620, abs=1e-6)
    assert varied["missing"] == [{"run": "n-parent-2-s2", "seed": 2, "why": "failed: out of memory"}]

    write_table(ablation, table)
    md = (tmp_path / "abl/ablation.md").read_text()
    # without per-question predictions the intervals are over seeds alone (Student's t, as above); one that
    # leaves [0, 1] is clipped to it and shown as its ends
    assert (
        "| demo | (base recipe) | 3 | 4, 4, 4 | 0.300 ± 0.248 | 0.700 [0.270, 1.000] | **0.500 ± 0.329** | "
        "(reference) |"
    ) in md
    # n-parent-2 - demo, unpaired (seeds 0, 1 against 0, 1, 2): -0.1, Welch's t
    assert (
        "| n-parent-2 | n-parent=2 | 2 | 4, 4 | 0.600 [0.000, 1.000] | 0.200 [0.000, 1.000] | "
        "**0.400 [0.000, 1.000]** | −0.100 [−0.608, +0.408] p = 0.51 |"
    ) in md
    assert (
        "- n-parent-2 − demo on the average over 2 benchmarks: −0.100 [−0.608, +0.408], p = 0.51: not "
        "significant at 0.05 with 2 and 3 seeds (question-level error unknown) (seeds not paired)."
    ) in md
    assert "| demo-s2 | 2 | 4 of 4 | no | 0.400 ± 0.155 | 0.900 ± 0.095 | 0.650 ± 0.091 |" in md  # binomial SE, n 10
    assert "- n-parent-2-s2: failed: out of memory" in md
    rows = (tmp_path / "abl/ablation.csv").read_text().splitlines()
    assert rows[0].startswith(
        "variant,stands_for,n,seeds,steps,collapsed_seeds,nq_mean,nq_ci95,hotpotqa_mean,"
        "hotpotqa_ci95,avg_mean,avg_ci95,delta_nq_diff,delta_nq_low,delta_nq_high,delta_nq_p,"
    )
    assert rows[2].startswith("n-parent-2,n-parent=2,2,0 1,4 4,,0.6000,1.2706,0.2000,1.2706,0.4000,1.2706,0.3000,")
    assert table["comparisons"][0]["average"]["p"] == pytest.approx(0.5053, abs=1e-4)


def test_collect_builds_the_table_of_runs_finished_elsewhere_and_exits_1_while_some_are_missing(
    repo_root, monkeypatch, tmp_path
):
    monkeypatch.chdir(repo_root)
    out = tmp_path / "abl"
    assert (
        invoke(
            "ablate",
            "--recipe",
            "recipes/demo.yaml",
            "--components",
            "no-verify",
            "--seeds",
            "0",
            "--out",
            out,
            "--print-commands",
        ).exit_code
        == 0
    )
    ablation = AblationDir.open(out)
    fake_run_dir(ablation, "demo-s0", {"world": 0.35})
    result = invoke("ablate", "--collect", out)
    assert result.exit_code == 1
    assert "components-no-verify-s0 (not run)" in result.output
    fake_run_dir(ablation, "components-no-verify-s0", {"world": 0.25})
    result = invoke("ablate", "--collect", out, "--json")
    assert result.exit_code == 0, result.output
    table = json.loads(result.stdout)
    assert [(r["variant"], r["average"]["mean"], r["average"]["ci95"]) for r in table["rows"]] == [
        ("demo", 0.35, None),
        ("components-no-verify", 0.25, None),
    ]
    assert (out / "ablation.md").is_file() and (out / "ablation.csv").is_file()
    assert_one_line_error(invoke("ablate", "--collect", tmp_path), "not an ablation directory")


def test_a_sweep_file_from_the_command_line(repo_root, monkeypatch, tmp_path):
    monkeypatch.chdir(repo_root)
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        yaml.safe_dump(
            {
                "recipe": "recipes/demo.yaml",
                "seeds": [0, 1],
                "variants": {"inspo": [], "static": ["population.enabled=false"]},
            }
        )
    )
    result = invoke("ablate", "--sweep", sweep, "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    assert [r["name"] for r in json.loads(result.stdout)["runs"]] == ["inspo-s0", "static-s0", "inspo-s1", "static-s1"]
    sweep.write_text("recipe: [unclosed")
    assert_one_line_error(invoke("ablate", "--sweep", sweep, "--dry-run"), "not valid YAML")


# -- running (the run API replaced by a fake that writes finished runs; the real one is in test_ablate_run.py) ------


def test_a_failed_run_is_recorded_the_others_go_on_and_ctrl_c_stops_everything(repo_root, monkeypatch, tmp_path):
    from inspo_cli import experiment
    from inspo_cli.runs import RunDir

    monkeypatch.chdir(repo_root)
    started = []

    def fake_run(kind, recipe=None, *, output_dir=None, resume=None, **kwargs):
        started.append(recipe.run.name)
        if recipe.run.name == "n-parent-2-s0":
            raise InspoError("population.n_parent: the optimizer refused")
        if recipe.run.name == "demo-s1":
            raise experiment.RunInterrupted(RunDir(output_dir / recipe.run.name))
        fake_run_dir(AblationDir.open(out), recipe.run.name, {"world": 0.3})

    monkeypatch.setattr(experiment, "run", fake_run)
    out = tmp_path / "abl"
    result = invoke("ablate", "--recipe", "recipes/demo.yaml", "--n-parent", "2", "--seeds", "0,1", "--out", out)
    assert result.exit_code == 130, result.output
    assert started == ["demo-s0", "n-parent-2-s0", "demo-s1"]  # the failure did not stop it; Ctrl-C did
    assert "[2/4] n-parent-2-s0: failed: population.n_parent: the optimizer refused" in result.output
    assert json.loads((out / "failures.json").read_text()) == {
        "n-parent-2-s0": "population.n_parent: the optimizer refused"
    }

    monkeypatch.setattr(
        experiment,
        "run",
        lambda kind, recipe=None, **kw: fake_run_dir(AblationDir.open(out), recipe.run.name, {"world": 0.5}),
    )
    result = invoke("ablate", "--recipe", "recipes/demo.yaml", "--n-parent", "2", "--seeds", "0,1", "--out", out)
    assert result.exit_code == 0, result.output  # the rest ran; the failure is cleared
    assert "[1/4] demo-s0" not in result.output and json.loads((out / "failures.json").read_text()) == {}
    table = json.loads((out / "ablation.json").read_text())
    assert [(r["variant"], [(run["seed"], run["em"]) for run in r["runs"]]) for r in table["rows"]] == [
        ("demo", [(0, {"world": 0.3}), (1, {"world": 0.5})]),
        ("n-parent-2", [(0, {"world": 0.5}), (1, {"world": 0.5})]),
    ]


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


def test_an_ablation_interrupted_while_planning_is_planned_again_by_the_same_command(repo_root, monkeypatch, tmp_path):
    """Issue 29, class 4: Ctrl-C while the variants' recipes are written left recipe files and no plan.json, and the
    same command then refused the directory."""
    from inspo_cli.ablation import directory

    monkeypatch.chdir(repo_root)
    plan = plan_axes("recipes/demo.yaml", [("n-parent", ["2", "3"])], seeds=[0])
    written = []
    real = directory.atomic_write_text

    def interrupted(path, text):
        if len(written) == 2:
            raise KeyboardInterrupt
        written.append(path)
        real(path, text)

    monkeypatch.setattr(directory, "atomic_write_text", interrupted)
    with pytest.raises(KeyboardInterrupt):
        AblationDir.start(tmp_path / "abl", plan)
    assert not (tmp_path / "abl/plan.json").exists() and not (tmp_path / "abl/recipes").exists()
    monkeypatch.setattr(directory, "atomic_write_text", real)
    ablation = AblationDir.start(tmp_path / "abl", plan)
    assert (tmp_path / "abl/plan.json").is_file()
    assert sorted(p.name for p in ablation.recipes_dir.iterdir()) == ["demo.yaml", "n-parent-2.yaml", "n-parent-3.yaml"]
    # nothing of the cut-off planning is left; .lock is the ablation's own lock, which planning holds too
    assert sorted(p.name for p in (tmp_path / "abl").iterdir()) == [".lock", "plan.json", "recipes"]
    (tmp_path / "other").mkdir()
    (tmp_path / "other/notes.txt").write_text("mine")
    with pytest.raises(InspoError, match="already holds files"):  # anything else in the way is still refused
        AblationDir.start(tmp_path / "other", plan)
