"""Run directories record what is needed to reproduce a run, and never overwrite an earlier one."""

from __future__ import annotations

import json

from inspo_cli.config import load_recipe
from inspo_cli.runs import RunDir


def test_run_dir_holds_resolved_recipe_seed_versions_and_git(tmp_path, repo_root):
    recipe = load_recipe(repo_root / "recipes/demo.yaml", ["run.seed=7", "training.steps=2"])
    run = RunDir.create(recipe, "recipes/demo.yaml", command=["inspo", "train"], output_dir=tmp_path)
    run_dir = run.path
    assert run_dir.parent == tmp_path and run_dir.name.startswith("demo-")
    assert load_recipe(run_dir / "recipe.yaml") == recipe == run.recipe()  # the resolved recipe reloads the same
    info = run.info()
    assert info["seed"] == 7 and info["command"] == ["inspo", "train"]
    assert {"python", "inspo", "torch", "trl", "transformers"} <= set(info["versions"])
    assert len(info["git"].get("revision", "x" * 40)) == 40
    assert not list(run_dir.glob(".*.tmp"))  # atomic writes leave no temporaries


def test_named_runs_never_reuse_a_directory(tmp_path, repo_root):
    recipe = load_recipe(repo_root / "recipes/demo.yaml", ["run.name=exp"])
    first = RunDir.create(recipe, output_dir=tmp_path).path
    (first / "metrics.jsonl").write_text("{}\n")
    second = RunDir.create(recipe, output_dir=tmp_path).path
    assert (first.name, second.name) == ("exp", "exp-2")
    assert (first / "metrics.jsonl").read_text() == "{}\n"


def test_default_output_dir_comes_from_the_recipe(tmp_path, repo_root):
    recipe = load_recipe(repo_root / "recipes/demo.yaml", [f"run.output_dir={tmp_path / 'out'}"])
    run_dir = RunDir.create(recipe).path
    assert run_dir.parent == tmp_path / "out"
    assert json.loads((run_dir / "run.json").read_text())["recipe_source"] is None
