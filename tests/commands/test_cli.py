"""The `inspo` command line as users and CI scripts drive it: help, version, exit codes and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml
from helpers.cli_helpers import assert_one_line_error, invoke

from inspo_cli import __version__
from inspo_cli.cli import app


def test_version():
    result = invoke("--version")
    assert result.exit_code == 0 and result.stdout.strip() == f"inspo {__version__}"


@pytest.mark.parametrize(
    "command",
    [
        [],
        ["recipe"],
        ["recipe", "check"],
        ["data"],
        ["data", "world"],
        ["data", "fetch"],
        ["data", "list"],
        ["index"],
        ["serve-retriever"],
        ["evaluate"],
        ["distill"],
        ["ablate"],
        ["report"],
    ],
)
def test_every_command_explains_itself(command):
    result = invoke(*command, "--help")
    assert result.exit_code == 0
    assert "Usage:" in result.stdout and len(result.stdout.splitlines()) > 5


def test_only_working_commands_are_registered():
    # A command appears only once it works: no placeholders.
    names = {command.name for command in app.registered_groups} | {c.name for c in app.registered_commands}
    assert names == {
        "recipe",
        "data",
        "index",
        "serve-retriever",
        "train",
        "evolve",
        "distill",
        "evaluate",
        "ablate",
        "view",
        "report",
        "env",
    }


def test_recipe_check_prints_the_resolved_recipe(repo_root):
    result = invoke(
        "recipe", "check", repo_root / "recipes/demo.yaml", "--set", "training.steps=3", "--set", "run.name=ci"
    )
    assert result.exit_code == 0, result.output
    resolved = yaml.safe_load(result.stdout)
    assert resolved["training"]["steps"] == 3 and resolved["run"]["name"] == "ci"
    assert resolved["retriever"]["corpus"] == str(repo_root / "data/world/corpus.jsonl")


def test_recipe_check_json(repo_root):
    result = invoke("recipe", "check", repo_root / "recipes/demo.yaml", "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["model"]["name_or_path"].endswith("data/warm-start/smollm2-135m-world")


def test_recipe_check_trl_shows_what_trl_receives_next_to_app_b(repo_root):
    recipe = repo_root / "recipes/qwen2.5-3b/inspo.yaml"
    result = invoke("recipe", "check", recipe, "--trl", "--json", "--processes", "8", "--device", "cuda")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["grpo_config"]["loss_type"] == "grpo" and report["grpo_config"]["gradient_accumulation_steps"] == 4
    assert "loss_type" in report["set_by_inspo"] and "adam_beta1" not in report["set_by_inspo"]
    assert report["population"]["size"] == 7 and report["population"]["accept"] == "beat_parent"
    assert all(row["matches"] in (True, "equivalent") for row in report["appendix_b"])
    text = invoke("recipe", "check", recipe, "--trl")
    assert text.exit_code == 0, text.output
    assert "learning_rate: 5e-07" in text.stdout and "adam_beta1: 0.9  # TRL default" in text.stdout
    assert "generation_batch_size: 2560  # derived by TRL: per-device batch x processes" in text.stdout
    assert "INSPO population" in text.stdout and "differs" not in text.stdout and "equivalent" not in text.stdout
    assert "training steps: 3000 optimizer updates, 10 per step" in text.stdout  # Search-R1's schedule
    assert "optimizer updates per step (Search-R1 code): 512 x 5 / 256; 3000 in all" in text.stdout
    assert_one_line_error(
        invoke("recipe", "check", recipe, "--trl", "--processes", "3"), "micro_batch_size=8", "3 process(es)"
    )


def test_recipe_check_bad_recipe(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("training:\n  stepz: 3\n")
    assert_one_line_error(invoke("recipe", "check", bad), str(bad), "training.stepz: unknown key", "'steps'")


def test_recipe_check_bad_set(repo_root):
    result = invoke("recipe", "check", repo_root / "recipes/demo.yaml", "--set", "training.steps=many")
    assert_one_line_error(result, "--set training.steps: expected an integer, got 'many'")


def test_recipe_check_missing_corpus(repo_root, tmp_path):
    result = invoke("recipe", "check", repo_root / "recipes/demo.yaml", "--set", f"retriever.corpus={tmp_path}/c.jsonl")
    assert_one_line_error(result, "--set retriever.corpus: path", "does not exist")


def test_recipe_check_missing_file(tmp_path):
    assert_one_line_error(
        invoke("recipe", "check", tmp_path / "none.yaml"), f"recipe {tmp_path / 'none.yaml'} not found"
    )


def test_data_world_writes_a_world_and_refuses_to_replace_another(tmp_path):
    out = tmp_path / "world"
    result = invoke("data", "world", "--size", "tiny", "--seed", "3", "--out", out)
    assert result.exit_code == 0, result.output
    assert {p.name for p in out.iterdir()} == {"corpus.jsonl", "train.jsonl", "dev.jsonl", "test.jsonl", "world.json"}
    assert "passages" in result.stdout
    before = (out / "corpus.jsonl").read_bytes()
    assert invoke("data", "world", "--size", "tiny", "--seed", "3", "--out", out).exit_code == 0  # same world: fine
    assert_one_line_error(
        invoke("data", "world", "--size", "tiny", "--seed", "4", "--out", out), "another world", "--force"
    )
    assert (out / "corpus.jsonl").read_bytes() == before  # nothing lost
    assert invoke("data", "world", "--size", "tiny", "--seed", "4", "--out", out, "--force").exit_code == 0
    assert (out / "corpus.jsonl").read_bytes() != before


def test_data_world_refuses_a_foreign_directory_and_bad_size(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    assert_one_line_error(invoke("data", "world", "--size", "tiny", "--out", tmp_path), "not empty")
    assert_one_line_error(invoke("data", "world", "--size", "huge", "--out", tmp_path / "w"), "tiny", "large")
    assert_one_line_error(invoke("data", "world", "--seed", "-1", "--out", tmp_path / "w"), "--seed -1")  # was seed 1
    assert not (tmp_path / "w").exists()


def test_data_list_shows_the_bundled_world(repo_root):
    result = invoke("data", "list", "--data-dir", repo_root / "tests/fixtures/benchmarks")
    assert result.exit_code == 0, result.output
    assert "NQ" in result.stdout and "world" in result.stdout.lower()


def test_data_fetch_offline_is_a_clear_error(tmp_path):
    assert_one_line_error(invoke("data", "fetch", "nq", "--out", tmp_path), "nq")


def test_the_installed_entry_point_exits_2_without_traceback(tmp_path):
    """The real console path (`python -m inspo_cli`), not the test runner, prints one line and exits 2."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("model:\n  lora: sometimes\n")
    proc = subprocess.run(
        [sys.executable, "-m", "inspo_cli", "recipe", "check", str(bad)], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f"error: {bad}: model.lora: expected true or false, got 'sometimes' (str); fix the value"
    )
    assert proc.stdout == ""


def test_env_reports_versions_devices_and_slurm_without_secrets(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret-123")
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    result = invoke("env", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["inspo"] == __version__ and report["python"]
    assert report["torch build"] == "CPU" or report["torch build"].startswith(("CUDA", "ROCm"))
    assert {"torch", "trl", "transformers"} <= set(report["libraries"])
    assert report["api keys"]["ANTHROPIC_API_KEY"] == "set" and report["api keys"]["GEMINI_API_KEY"] == "unset"
    assert "sbatch" in report and "secret" not in result.stdout
    text = invoke("env")
    assert text.exit_code == 0 and "secret" not in text.stdout and "torch build" in text.stdout
