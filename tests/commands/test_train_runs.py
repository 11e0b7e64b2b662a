"""`inspo train` end to end: the run directory that `inspo evaluate` reads, LoRA adapters, the population
sampled, pruned, logged and restored, checkpoints kept, and a step whose numbers stop being finite."""

from __future__ import annotations

import json

import pytest
from helpers.cli_helpers import assert_one_line_error, invoke
from helpers.runs import (
    metrics,
    resume_after_a_cut,
    write_recipe,
)
from helpers.train_metrics import STEP_KEYS

from inspo_cli.config.instruction_defaults import WORKED_EXAMPLE_INSTRUCTION

# -- real runs ----------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_training_step_whose_numbers_stop_being_finite_stops_the_run_and_saves_nothing_after_it(
    tmp_path, repo_root, tiny_model_dir
):
    """Issue 29, class 6: a learning rate float32 cannot hold (1e39, finite in the recipe) turns the weights into
    inf/NaN at the first update; the run stops there with one line and writes no checkpoint or model after it."""
    recipe = write_recipe(tmp_path, repo_root, str(tiny_model_dir), training={"learning_rate": 1e39})
    result = invoke("train", "--recipe", recipe, "--output-dir", tmp_path / "runs", "--name", "blown")
    assert_one_line_error(
        result, "training step 1 (optimizer update 1)", "weights are not finite", "training.learning_rate 1e+39"
    )
    run = tmp_path / "runs" / "blown"
    assert not (run / "checkpoints/checkpoint-1").exists() and not (run / "checkpoints/final").exists()
    assert not (run / "summary.json").exists()
    assert_one_line_error(
        invoke("train", "--recipe", recipe, "--set", "training.learning_rate=.inf"),
        "training.learning_rate",
        "expected a finite number",
    )


@pytest.mark.slow
def test_train_writes_a_run_that_evaluate_can_read(tmp_path, repo_root, tiny_model_dir):
    recipe = write_recipe(
        tmp_path, repo_root, str(tiny_model_dir), training={"steps": 2, "save_every": 1, "eval_every": 1}
    )
    result = invoke("train", "--recipe", recipe, "--output-dir", tmp_path / "runs", "--name", "tiny")
    assert result.exit_code == 0, result.output
    run = tmp_path / "runs" / "tiny"
    rows = metrics(run)
    assert [r["step"] for r in rows] == [1, 2]
    assert all(STEP_KEYS <= set(r) for r in rows), STEP_KEYS - set(rows[0])
    # App. B: evaluated every training.eval_every steps, greedily, with the best instruction, on held-out questions
    assert all({"eval/em", "eval/world/em", "time/evaluation"} <= set(r) for r in rows)
    for step in (1, 2):
        evaluation = json.loads((run / f"evaluations/step-{step}/results.json").read_text())
        assert evaluation["scores"]["agent"]["world"]["n"] == 2 and evaluation["temperature"] == 0.0
        assert evaluation["instruction"] == WORKED_EXAMPLE_INSTRUCTION and evaluation["step"] == step
        assert len((run / f"evaluations/step-{step}/predictions.jsonl").read_text().splitlines()) == 2
    assert list((run / "tensorboard").glob("events.out.tfevents.*"))
    for png in ("reward.png", "search.png"):
        assert (run / "plots" / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["steps"] == 2 and summary["best_instruction"] == WORKED_EXAMPLE_INSTRUCTION
    assert [e["step"] for e in summary["evaluations"]] == [1, 2] and "world" in summary["evaluations"][0]
    assert (summary["reward_collapse"], summary["selected_checkpoint"]) == (None, "final")
    assert (run / "checkpoints/final/model.safetensors").is_file() and (run / "checkpoints/checkpoint-2").is_dir()
    assert "checkpoints/final" in result.output

    evaluated = invoke(
        "evaluate", "--run", run, "--method", "agent", "--limit", "2", "--out", tmp_path / "eval", "--device", "cpu"
    )
    assert evaluated.exit_code == 0, evaluated.output
    info = json.loads((tmp_path / "eval/results.json").read_text())
    assert info["model"].endswith("checkpoints/final") and info["instruction"] == WORKED_EXAMPLE_INSTRUCTION
    # the periodic evaluation of step 1 and `inspo evaluate --checkpoint 1` score the same policy the same way
    evaluated = invoke(
        "evaluate",
        "--run",
        run,
        "--checkpoint",
        "1",
        "--method",
        "agent",
        "--limit",
        "2",
        "--out",
        tmp_path / "eval-1",
        "--device",
        "cpu",
    )
    assert evaluated.exit_code == 0, evaluated.output
    again = json.loads((tmp_path / "eval-1/results.json").read_text())
    during = json.loads((run / "evaluations/step-1/results.json").read_text())
    assert again["checkpoint"] == "step 1 (checkpoint-1)"
    assert again["scores"]["agent"]["world"]["em"] == during["scores"]["agent"]["world"]["em"]
    assert [json.loads(line)["response"] for line in (tmp_path / "eval-1/predictions.jsonl").open()] == [
        json.loads(line)["response"] for line in (run / "evaluations/step-1/predictions.jsonl").open()
    ]


@pytest.mark.slow
def test_lora_run_trains_adapters_and_saves_a_merged_policy(tmp_path, repo_root, tiny_model_dir):
    from safetensors.torch import load_file

    recipe = write_recipe(
        tmp_path,
        repo_root,
        str(tiny_model_dir),
        model={"lora": True, "lora_rank": 4},
        training={"steps": 1, "save_every": 1},
    )
    result = invoke("train", "--recipe", recipe, "--output-dir", tmp_path / "runs", "--name", "lora")
    assert result.exit_code == 0, result.output
    run = tmp_path / "runs/lora"
    assert (run / "checkpoints/checkpoint-1/adapter_model.safetensors").is_file()  # checkpoints hold the adapter
    merged = load_file(run / "checkpoints/final/model.safetensors")  # the final policy is a plain model
    assert not any("lora" in name for name in merged) and "model.embed_tokens.weight" in merged
    assert "kl" in metrics(run)[0]  # the reference is the base model with the adapter switched off
    # an adapter-only checkpoint is merged into its base once to be evaluated
    evaluated = invoke(
        "evaluate",
        "--run",
        run,
        "--checkpoint",
        "1",
        "--method",
        "agent",
        "--limit",
        "1",
        "--out",
        tmp_path / "eval",
        "--device",
        "cpu",
    )
    assert evaluated.exit_code == 0, evaluated.output
    assert json.loads((tmp_path / "eval/results.json").read_text())["model"].endswith("checkpoint-1/merged")
    assert (run / "checkpoints/checkpoint-1/merged/config.json").is_file()


@pytest.mark.slow
def test_population_is_sampled_pruned_logged_and_restored_on_resume(tmp_path, repo_root, tiny_model_dir):
    population = {
        "enabled": True,
        "instructions": [WORKED_EXAMPLE_INSTRUCTION, "Search, then answer. Question: {question}\n"],
        "size": 2,
        "n_parent": 1,
        "prune_every": 2,
        "evolve_until": 0,
    }
    recipe = write_recipe(
        tmp_path, repo_root, str(tiny_model_dir), population=population, training={"steps": 3, "save_every": 1}
    )
    runs = tmp_path / "runs"
    for name in ("straight", "resumed"):
        result = invoke("train", "--recipe", recipe, "--output-dir", runs, "--name", name)
        assert result.exit_code == 0, result.output
    straight, resumed = runs / "straight", runs / "resumed"
    assert [r["population/size"] for r in metrics(straight)] == [2, 1, 1]  # halved at step 2 (prune_every)
    records = [json.loads(line) for line in (straight / "instructions.jsonl").read_text().splitlines()]
    assert [(r["id"], r["step_pruned"]) for r in records] == [("i0", None), ("i1", 2)]  # equal weights: older kept
    assert all(len(r["weight_history"]) >= 2 for r in records)
    assert (straight / "best_instruction.txt").read_text().strip() == WORKED_EXAMPLE_INSTRUCTION.strip()
    assert (straight / "checkpoints/checkpoint-1/coevolution.json").is_file()

    resume_after_a_cut(resumed, straight)
    assert (resumed / "instructions.jsonl").read_text() == (straight / "instructions.jsonl").read_text()


@pytest.mark.slow
def test_keep_checkpoints_deletes_all_but_the_newest(tmp_path, repo_root, tiny_model_dir):
    recipe = write_recipe(tmp_path, repo_root, str(tiny_model_dir), training={"steps": 3, "keep_checkpoints": 2})
    result = invoke("train", "--recipe", recipe, "--output-dir", tmp_path / "runs", "--name", "kept")
    assert result.exit_code == 0, result.output
    checkpoints = tmp_path / "runs/kept/checkpoints"
    assert sorted(p.name for p in checkpoints.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-3"]
    assert (checkpoints / "checkpoint-3/trainer_state.json").is_file() and (checkpoints / "final").is_dir()
