"""`inspo ablate` end to end on the tiny model and the world: 2 variants x 2 seeds, killed mid-run, re-run and
reported (`inspo report`); and the pre-RL / post-RL stages chained in one run directory (Fig. 3's stage bars)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml
from helpers.ablation import population, tiny_sweep
from helpers.cli_helpers import invoke
from helpers.runs import metrics, write_recipe

from inspo_cli.config.instruction_defaults import WORKED_EXAMPLE_INSTRUCTION
from inspo_cli.runs import checkpoint_problem


@pytest.mark.slow
def test_a_tiny_ablation_survives_a_kill_and_a_rerun_and_tabulates_by_variant(tmp_path, repo_root, tiny_model_dir):
    sweep = tiny_sweep(tmp_path, repo_root, tiny_model_dir)
    out = tmp_path / "ablation"
    args = ["ablate", "--sweep", str(sweep), "--out", str(out), "--device", "cpu"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRL_EXPERIMENTAL_SILENCE": "1"}
    killed = subprocess.Popen(
        [sys.executable, "-m", "inspo_cli", *args],
        cwd=repo_root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    cut = out / "runs/static-s0/checkpoints/checkpoint-1"  # the second run, after its step 1
    deadline = time.time() + 600
    # complete, not merely begun: a kill the moment trainer_state.json appears can leave it empty, and the rerun
    # rightly trains that run again instead of resuming it
    while not (cut.is_dir() and checkpoint_problem(cut) is None) and killed.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    killed.send_signal(signal.SIGKILL)
    output, _ = killed.communicate(timeout=60)
    assert killed.returncode == -signal.SIGKILL, output
    assert (out / "runs/inspo-s0/summary.json").is_file() and not (out / "runs/static-s0/summary.json").exists()
    first_summary = (out / "runs/inspo-s0/summary.json").stat().st_mtime_ns

    result = invoke(*args)  # the same command continues the ablation
    assert result.exit_code == 0, result.output
    assert "[1/4] inspo-s0" not in result.output  # finished: skipped, not retrained
    assert "[2/4] static-s0: resuming" in result.output and "[4/4] static-s1: training" in result.output
    assert (out / "runs/inspo-s0/summary.json").stat().st_mtime_ns == first_summary
    resumed = json.loads((out / "runs/static-s0/summary.json").read_text())
    assert resumed["resumed_from"] is not None and [r["step"] for r in metrics(out / "runs/static-s0")] == [1, 2, 3]
    assert json.loads((out / "runs/inspo-s1/run.json").read_text())["seed"] == 1

    table = json.loads((out / "ablation.json").read_text())
    assert [(row["variant"], row["n"], row["seeds"]) for row in table["rows"]] == [
        ("inspo", 2, [0, 1]),
        ("static", 2, [0, 1]),
    ]
    for row in table["rows"]:  # each cell is that variant's own seeds, read from their final evaluations
        ems = [
            json.loads((out / f"runs/{row['variant']}-s{s}/evaluations/step-3/results.json").read_text())["scores"][
                "agent"
            ]["world"]["em"]
            for s in (0, 1)
        ]
        assert row["em"]["world"]["mean"] == pytest.approx(sum(ems) / 2)
        # two seeds give an interval; where no answer differs (the tiny model's EM is 0 on every question) none,
        # never a zero-width one
        assert (row["average"]["ci95"] is None) == (set(ems) in ({0.0}, {1.0}))
        assert row["average"]["ci95"] != 0
    assert "| inspo |" in (out / "ablation.md").read_text()
    # a finished ablation re-run trains nothing and exits 0
    again = invoke(*args)
    assert again.exit_code == 0 and "training" not in again.output

    # and its report: curves over both seeds, Table 1, a lineage per INSPO run
    reported = invoke("report", out)
    assert reported.exit_code == 0, reported.output
    report = out / "report"
    assert {"fig2_training.png", "fig5_test_em.png", "bars.png", "table1.md", "index.md"} <= {
        p.name for p in report.iterdir()
    }
    assert sorted(p.name for p in (report / "lineage").glob("*.png")) == ["inspo-s0.png", "inspo-s1.png"]
    table = (report / "table1.md").read_text()
    assert "| inspo | 2 |" in table and "| static | 2 |" in table


@pytest.mark.slow
def test_a_run_without_evaluation_during_training_is_evaluated_by_ablate(tmp_path, repo_root, tiny_model_dir):
    recipe = write_recipe(
        tmp_path,
        repo_root,
        str(tiny_model_dir),
        population=population(),
        training={"steps": 1, "save_every": 1, "eval_every": 0},
    )
    out = tmp_path / "ablation"
    args = ["ablate", "--recipe", recipe, "--components", "constant", "--seeds", "0", "--out", out, "--device", "cpu"]
    assert invoke(*args, "--print-commands").exit_code == 0
    cut = out / "runs/recipe-s0"  # a run killed before its first checkpoint: run.json, nothing to resume from
    cut.mkdir(parents=True)
    (cut / "recipe.yaml").write_text((out / "recipes/recipe.yaml").read_text())
    (cut / "run.json").write_text("{}")
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    assert "[1/2] recipe-s0: starting over (cut off before its first checkpoint)" in result.output
    assert "[1/2] recipe-s0: evaluated" in result.output
    results = json.loads((out / "runs/recipe-s0/evaluations/step-1/results.json").read_text())
    assert results["checkpoint"] == "final" and results["limit"] == 2
    constant = yaml.safe_load((out / "recipes/components-constant.yaml").read_text())["population"]
    assert (constant["prune"], constant["evolve_until"]) == (False, 0)


@pytest.mark.slow
@pytest.mark.parametrize("stage", ["pre-rl", "post-rl"])
def test_offline_stages_chain_evolve_and_train_in_one_run_directory(tmp_path, repo_root, tiny_model_dir, stage):
    recipe = write_recipe(
        tmp_path,
        repo_root,
        str(tiny_model_dir),
        population=population(stage=stage, offline_steps=2, prune_every=1),
        training={"steps": 2, "save_every": 1},
    )
    runs = tmp_path / "runs"
    result = invoke("train", "--recipe", recipe, "--output-dir", runs, "--name", stage, "--device", "cpu")
    assert result.exit_code == 0, result.output
    run = runs / stage
    summary = json.loads((run / "summary.json").read_text())
    kinds = ["evolve", "train"] if stage == "pre-rl" else ["train", "evolve"]
    assert [s["kind"] for s in summary["stages"]] == kinds
    evolve_dir, train_dir = (
        run / f"stages/{kinds.index('evolve') + 1}-evolve",
        run / f"stages/{kinds.index('train') + 1}-train",
    )
    evolved = json.loads((evolve_dir / "summary.json").read_text())
    assert evolved["frozen_policy"] and evolved["steps"] == 2 and len(metrics(evolve_dir)) == 2
    trained_recipe = yaml.safe_load((train_dir / "recipe.yaml").read_text())["population"]
    assert trained_recipe["enabled"] is False  # static-instruction GRPO
    if stage == "pre-rl":  # trained with the instruction evolved before RL
        assert trained_recipe["instructions"] == [evolved["best_instruction"]]
    else:  # evolved with the trained policy, starting from the recipe's instructions
        assert trained_recipe["instructions"] == [WORKED_EXAMPLE_INSTRUCTION]
        model = yaml.safe_load((evolve_dir / "recipe.yaml").read_text())["model"]["name_or_path"]
        assert model == str(train_dir / "checkpoints/final")
    assert summary["best_instruction"] == evolved["best_instruction"]
    assert summary["model"] == f"{train_dir.relative_to(run)}/checkpoints/final"
    assert summary["evaluations"][0]["step"] == 2 and (run / "evaluations/step-2/results.json").is_file()
    assert (
        json.loads((run / "evaluations/step-2/results.json").read_text())["instruction"] == evolved["best_instruction"]
    )

    # `inspo evaluate --run` takes the trained policy and the evolved instruction
    evaluated = invoke(
        "evaluate", "--run", run, "--method", "agent", "--limit", "1", "--out", tmp_path / "eval", "--device", "cpu"
    )
    assert evaluated.exit_code == 0, evaluated.output
    info = json.loads((tmp_path / "eval/results.json").read_text())
    assert info["model"] == str(train_dir / "checkpoints/final") and info["instruction"] == evolved["best_instruction"]

    # resuming a chain cut after its stages re-runs neither stage
    stamps = {p: p.stat().st_mtime_ns for p in (evolve_dir / "summary.json", train_dir / "summary.json")}
    (run / "summary.json").unlink()
    resumed = invoke("train", "--resume", run, "--device", "cpu")
    assert resumed.exit_code == 0, resumed.output
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps and (run / "summary.json").is_file()
