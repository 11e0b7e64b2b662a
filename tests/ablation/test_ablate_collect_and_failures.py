"""`inspo ablate`'s table and the ablation directory: seeds grouped by variant, --collect of runs finished
elsewhere, a sweep file from the command line, a failed or interrupted run. The run API is a fake here; the real one
is in test_ablate_run.py."""

from __future__ import annotations

import json

import pytest
import yaml
from helpers.cli_helpers import assert_one_line_error, invoke
from helpers.run_dirs import fake_run_dir

from inspo_cli.ablation.directory import AblationDir
from inspo_cli.ablation.plan import plan_axes
from inspo_cli.ablation.table import collect
from inspo_cli.ablation.table_files import write_table
from inspo_cli.errors import InspoError

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
