"""`inspo train` and `inspo evolve` on bad input: one line, exit 2, nothing trained."""

from __future__ import annotations

from helpers.cli_helpers import assert_one_line_error, invoke
from helpers.runs import (
    write_recipe,
)

# -- bad input: one line, exit 2, nothing trained ----------------------------------------------------------------


def test_resume_of_a_directory_that_is_not_a_run_is_refused(tmp_path):
    assert_one_line_error(invoke("train", "--resume", tmp_path), str(tmp_path), "not a run directory")


def test_resume_takes_the_runs_own_recipe(tmp_path, repo_root):
    result = invoke("train", "--resume", tmp_path, "--set", "training.steps=3")
    assert_one_line_error(result, "--resume continues a run with its own recipe")


def test_micro_batch_that_does_not_divide_is_refused_before_any_model_loads(tmp_path, repo_root):
    recipe = write_recipe(tmp_path, repo_root, "no-such-model")
    result = invoke(
        "train", "--recipe", recipe, "--set", "training.micro_batch_size=3", "--output-dir", tmp_path / "runs"
    )
    assert_one_line_error(result, "training.micro_batch_size=3", "must divide training.mini_batch_trajectories")


def test_vllm_server_mode_on_cpu_is_refused_with_the_reason(tmp_path, repo_root):
    recipe = write_recipe(tmp_path, repo_root, "no-such-model", model={"backend": "vllm", "vllm_mode": "server"})
    result = invoke("train", "--recipe", recipe, "--device", "cpu", "--output-dir", tmp_path / "runs")
    assert_one_line_error(result, "model.vllm_mode=server needs a GPU", "NCCL", "model.vllm_mode=colocate")


def test_a_run_without_checkpoints_cannot_be_resumed(tmp_path, repo_root):
    from inspo_cli.config import load_recipe
    from inspo_cli.runs import RunDir

    run = RunDir.create(load_recipe(write_recipe(tmp_path, repo_root, "x")), output_dir=tmp_path / "runs").path
    assert_one_line_error(invoke("train", "--resume", run), "no complete checkpoint to resume from")


def test_keep_checkpoints_below_zero_is_a_one_line_error(tmp_path, repo_root):
    recipe = write_recipe(tmp_path, repo_root, "x", training={"keep_checkpoints": -1})
    assert_one_line_error(invoke("train", "--recipe", recipe, "--output-dir", tmp_path / "runs"), "keep_checkpoints")


def test_evolution_without_the_optimizer_key_is_a_one_line_error(tmp_path, repo_root, monkeypatch):
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    recipe = write_recipe(tmp_path, repo_root, "x", population={"enabled": True, "evolve_until": 150})
    result = invoke("train", "--recipe", recipe, "--output-dir", tmp_path / "runs")
    assert_one_line_error(result, "GEMINI_API_KEY")


def test_inspo_evolve_needs_a_population(tmp_path, repo_root):
    recipe = write_recipe(tmp_path, repo_root, "x")
    result = invoke("evolve", "--recipe", recipe, "--output-dir", tmp_path / "runs")
    assert_one_line_error(result, "population.enabled=true")
