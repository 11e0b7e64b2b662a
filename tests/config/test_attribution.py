"""Issue 29's warnings: what the CLI says is attributed to where the value came from, plans say what they merged, a
sweep's recipe is found beside the sweep, hints paste into a shell, and libraries' redrawn bars stay off a log."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys

import pytest
import yaml
from helpers.cli_helpers import assert_one_line_error, invoke


def test_a_variant_with_the_same_recipe_as_another_is_named_in_the_plan(repo_root, monkeypatch, tmp_path):
    monkeypatch.chdir(repo_root)
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        "recipe: recipes/demo.yaml\nseeds: [0]\nvariants:\n  inspo: []\n  again: [population.enabled=true]\n"
    )  # the demo is INSPO already
    result = invoke("ablate", "--sweep", sweep, "--dry-run")
    assert result.exit_code == 0, result.output
    assert "again resolves to the same recipe as inspo: not run twice" in result.stdout
    plan = json.loads(invoke("ablate", "--sweep", sweep, "--dry-run", "--json").stdout)
    assert [v["name"] for v in plan["variants"]] == ["inspo"] and plan["merged"] == {"again": "inspo"}


def test_a_sweeps_recipe_is_found_beside_the_sweep_file_then_as_given(repo_root, tmp_path, monkeypatch):
    (tmp_path / "sweeps").mkdir()
    (tmp_path / "sweeps" / "base.yaml").write_text(f"extends: {repo_root}/recipes/demo.yaml\ntraining:\n  steps: 3\n")
    sweep = tmp_path / "sweeps" / "s.yaml"
    sweep.write_text(
        yaml.safe_dump(
            {
                "recipe": "base.yaml",
                "seeds": [0],
                "variants": {
                    "a": [],
                    "b": {"recipe": "base.yaml", "set": ["training.steps=2"]},
                    "c": {"recipe": "demo"},
                },
            }
        )
    )
    monkeypatch.chdir(tmp_path)  # neither base.yaml here nor a bundled one: only beside the sweep
    plan = json.loads(invoke("ablate", "--sweep", sweep, "--dry-run", "--json").stdout)
    recipes = {v["name"]: v["recipe"] for v in plan["variants"]}
    assert recipes == {"a": str(sweep.parent / "base.yaml"), "b": str(sweep.parent / "base.yaml"), "c": "demo"}


@pytest.mark.parametrize(
    "args, message",
    [
        (["train", "--name", "a/b"], "error: --name: must be a plain directory name"),
        (["evolve", "--recipe", "recipes/demo.yaml", "--name", "a/b"], "error: --name: must be a plain directory name"),
        (["evaluate", "--recipe", "recipes/demo.yaml", "--limit", "-3"], "error: --limit: must be > 0 (got -3)"),
        (["evaluate", "--recipe", "recipes/demo.yaml", "--temperature", "-1"], "error: --temperature: "),
        (
            ["evaluate", "--recipe", "recipes/demo.yaml", "--set", "evaluation.limit=-3"],
            "error: --set evaluation.limit",
        ),
    ],
)
def test_errors_name_the_option_the_value_came_from(repo_root, monkeypatch, args, message):
    monkeypatch.chdir(repo_root)
    result = invoke(*args)
    assert_one_line_error(result)
    assert result.stderr.startswith(message), result.stderr


def test_a_finished_run_without_its_final_model_is_not_called_unfinished(tmp_path, repo_root, monkeypatch):
    from inspo_cli.config import dump_recipe, load_recipe

    monkeypatch.chdir(repo_root)
    run = tmp_path / "my runs" / "done"
    run.mkdir(parents=True)
    (run / "recipe.yaml").write_text(dump_recipe(load_recipe("recipes/demo.yaml")))
    (run / "run.json").write_text(json.dumps({"seed": 0}))
    (run / "summary.json").write_text(json.dumps({"steps": 4, "best_instruction": "Answer."}))
    result = invoke("evaluate", "--run", run)
    assert_one_line_error(result, "finished, but its final model (checkpoints/final) is gone", "--checkpoint N")
    (run / "summary.json").unlink()
    result = invoke("evaluate", "--run", run)
    assert_one_line_error(result, "(unfinished)", f"inspo train --resume {shlex.quote(str(run))}")
    assert "'" in result.stderr  # the space in "my runs" is quoted, so the hint pastes into a shell


@pytest.mark.slow
def test_library_progress_bars_stay_off_a_log(tiny_model_dir, tmp_path):
    """transformers 5 draws a "Loading weights" bar with carriage returns on every model load; off a terminal the
    command's own plain lines are the progress."""
    qa = tmp_path / "qa" / "test.jsonl"
    qa.parent.mkdir()
    qa.write_text(json.dumps({"id": "1", "question": "Who?", "golden_answers": ["a"]}) + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TQDM_", "HF_HUB_DISABLE_PROGRESS"))}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "inspo_cli",
            "evaluate",
            "--model",
            str(tiny_model_dir),
            "--method",
            "direct",
            "--benchmarks",
            str(qa),
            "--out",
            str(tmp_path / "out"),
            "--device",
            "cpu",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert "\r" not in done.stderr and "Loading weights" not in done.stderr
    assert "evaluating: 1/1 (100%)" in done.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["train", "--resume", "{fifo}"], "run directory {fifo}: is a FIFO, a socket or a device, not a directory"),
        (["evaluate", "--run", "{file}"], "run directory {file}: is a file, not a directory"),
        (["report", "{fifo}"], "input {fifo}: is a FIFO"),
        (["ablate", "--collect", "{missing}"], "ablation directory {missing}: does not exist"),
        (["evaluate", "--recipe", "recipes/demo.yaml", "--benchmarks", "{fifo}"], "QA file {fifo}: not a regular file"),
    ],
)
def test_a_fifo_a_file_or_a_missing_path_is_named_for_what_it_is(repo_root, monkeypatch, tmp_path, args, message):
    monkeypatch.chdir(repo_root)
    paths = {"fifo": tmp_path / "fifo", "file": tmp_path / "file.txt", "missing": tmp_path / "missing"}
    os.mkfifo(paths["fifo"])
    paths["file"].write_text("x")
    assert_one_line_error(invoke(*[a.format(**paths) for a in args]), message.format(**paths))
