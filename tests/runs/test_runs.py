"""Run directories record what is needed to reproduce a run, and never overwrite an earlier one."""

from __future__ import annotations

import json
import subprocess

from inspo_cli.config import load_recipe
from inspo_cli.runs import RunDir, git_state


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


def test_git_state_says_whether_tracked_files_have_local_changes(tmp_path):
    def git(*args: str) -> None:
        subprocess.run(
            ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", *args],
            check=True,
            capture_output=True,
        )

    assert git_state(tmp_path / "nowhere") == {}
    git("init", "-q")
    (tmp_path / "a.txt").write_text("one\n")
    git("add", "a.txt")
    git("commit", "-q", "-m", "one")
    (tmp_path / "untracked.txt").write_text("ignored: not tracked\n")
    clean = git_state(tmp_path)
    assert len(clean["revision"]) == 40 and clean["dirty"] is False
    (tmp_path / "a.txt").write_text("two\n")
    assert git_state(tmp_path)["dirty"] is True


def test_resume_point_lists_the_newer_unusable_checkpoints_oldest_first(tmp_path):
    import torch
    from safetensors.torch import save_file

    run = RunDir(tmp_path)
    whole = run.checkpoints_dir / RunDir.checkpoint_name(1)
    whole.mkdir(parents=True)
    save_file({"w": torch.zeros(4)}, str(whole / "model.safetensors"))
    (whole / RunDir.CHECKPOINT_COMPLETE).write_text(json.dumps({"global_step": 1, "log_history": []}))
    for update in (2, 3):  # cut off before HF wrote its trainer state
        (run.checkpoints_dir / RunDir.checkpoint_name(update)).mkdir()
    checkpoint, skipped = run.resume_point()
    assert checkpoint == whole and [path.name for path, _ in skipped] == ["checkpoint-2", "checkpoint-3"]
    assert list(run.unusable_checkpoints()) == [2, 3] and run.latest_checkpoint() == whole
