"""`inspo train` end to end: the run directory, bad input, and a run killed for real then resumed."""

from __future__ import annotations

import json
import shutil
import signal
import time

import pytest
from helpers.cli_helpers import assert_one_line_error, invoke
from helpers.fake_providers import ScriptedOptimizer
from helpers.runs import (
    SCRIPTED_ANSWERS,
    TIMING_KEYS,
    launch_two_processes,
    metrics,
    resume_after_a_cut,
    train_process,
    write_inspo_recipe,
    write_recipe,
)

from inspo_cli.config.instruction_defaults import WORKED_EXAMPLE_INSTRUCTION
from inspo_cli.metric_names import undeclared

STEP_KEYS = {
    "step",
    "update",
    "reward",
    "reward_std",
    "em",
    "search/searches_per_trajectory",
    "search/valid_action_rate",
    "length/prompt",
    "length/response",
    "length/response_with_observations",
    "length/observation_share",
    "kl",
    "learning_rate",
    "time/generation",
    "time/retrieval",
    "time/scoring",
    "time/update",
}


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


def test_keep_checkpoints_below_zero_is_a_one_line_error(tmp_path, repo_root):
    recipe = write_recipe(tmp_path, repo_root, "x", training={"keep_checkpoints": -1})
    assert_one_line_error(invoke("train", "--recipe", recipe, "--output-dir", tmp_path / "runs"), "keep_checkpoints")


def test_evolution_without_the_optimizer_key_is_a_one_line_error(tmp_path, repo_root, monkeypatch):
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    recipe = write_recipe(tmp_path, repo_root, "x", population={"enabled": True, "evolve_until": 150})
    result = invoke("train", "--recipe", recipe, "--output-dir", tmp_path / "runs")
    assert_one_line_error(result, "GEMINI_API_KEY")


@pytest.mark.slow
def test_inspo_evolves_verifies_prunes_and_resumes(tmp_path, repo_root, tiny_model_dir, monkeypatch):
    """Alg. 1 end to end on the tiny model, with a scripted optimizer behind a real OpenAI-compatible client."""
    import shutil

    monkeypatch.setenv("SCRIPTED_KEY", "sk-test-not-a-secret")
    answers = SCRIPTED_ANSWERS
    optimizer = ScriptedOptimizer(answers)
    recipe = write_inspo_recipe(tmp_path, repo_root, str(tiny_model_dir), optimizer.url)
    runs = tmp_path / "runs"
    for name in ("straight", "resumed"):
        result = invoke("train", "--recipe", recipe, "--output-dir", runs, "--name", name)
        assert result.exit_code == 0, result.output
    run = runs / "straight"
    (evolution,) = json.loads((run / "evolutions.json").read_text())
    assert evolution["step"] == 2 and evolution["optimizer_calls"] >= 1
    # round 1: two distinct candidates (the third repeats the first), the better one accepted (accept_top_n 1);
    # round 2: the same answer again, so the accepted one is now a duplicate and the other fills the population
    assert [(c["round"], c["reason"]) for c in evolution["candidates"]] == [
        (1, "accepted"),
        (1, "not in top-n"),
        (2, "duplicate"),
        (2, "accepted"),
    ]
    # each verification rolls the parent out beside the candidates, on the same 2 questions
    assert (
        evolution["stop_reason"] == "population full"
        and evolution["verification_rollouts"] == (2 + 1) * 2 + (1 + 1) * 2
    )
    assert all(c["parent_score"] is not None for c in evolution["candidates"] if c["reason"] != "duplicate")
    records = [json.loads(line) for line in (run / "instructions.jsonl").read_text().splitlines()]
    assert [(r["id"], r["step_pruned"]) for r in records[:2]] == [("i0", None), ("i1", 1)]  # halved at step 1
    born = [r for r in records if r["proposer"] == "reflection"]
    assert born and all(r["parent"] is not None and r["verification_score"] is not None for r in born)
    assert "Look it up first" in " ".join(r["text"] for r in born)
    rows = metrics(run)
    assert [r.get("population/evolved", 0) for r in rows] == [0, 1, 0]
    summary = json.loads((run / "summary.json").read_text())
    overhead = summary["overhead"]
    assert overhead["evolutions"] == 1 and overhead["verification_rollouts"] > 0
    assert overhead["optimizer"]["calls"] >= 1 and "sk-test" not in (run / "summary.json").read_text()
    assert "reflect" in optimizer.prompts[0].lower() or "<example>" in optimizer.prompts[0]
    # every optimizer call is a line of the run's record: the prompt the server got, its answer, a hash; no key
    recorded = [json.loads(line) for line in (run / "optimizer_calls.jsonl").read_text().splitlines()]
    assert [r["prompt"] for r in recorded] == optimizer.prompts[: len(recorded)] and len(recorded) == 2
    assert all(r["answer"] == answers[0] and r["hash"].startswith("sha256:") for r in recorded)
    assert "sk-test" not in (run / "optimizer_calls.jsonl").read_text()

    # the second run, cut back to step 2 (after the evolution) and resumed, ends with the same population
    resumed = runs / "resumed"
    for later in ("checkpoint-3", "final"):
        shutil.rmtree(resumed / "checkpoints" / later)
    (resumed / "summary.json").unlink()
    result = invoke("train", "--resume", resumed)
    assert result.exit_code == 0, result.output
    assert (resumed / "instructions.jsonl").read_text() == (run / "instructions.jsonl").read_text()
    calls = [json.loads((r / "summary.json").read_text())["overhead"]["optimizer"]["calls"] for r in (run, resumed)]
    assert calls[0] == calls[1] == 2  # the resumed run's budget counts the calls made before the interruption
    strip = lambda rows: [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in rows]  # noqa: E731
    for have, want in zip(strip(metrics(resumed)), strip(metrics(run)), strict=True):
        assert have == pytest.approx(want)


@pytest.mark.slow
def test_a_killed_run_resumes_and_ends_with_the_same_metrics(tmp_path, repo_root):
    """SmolLM2 (real weights, so the policy really moves), killed with SIGKILL after its checkpoint at step 1,
    resumed, compared with the same seed run straight through (2 steps, to keep CI short: the resume restores the
    same state after any step)."""
    recipe = write_recipe(
        tmp_path,
        repo_root,
        "smollm2-135m-instruct",
        training={"steps": 2, "save_every": 1, "keep_checkpoints": 1, "eval_every": 0},
    )
    runs = tmp_path / "runs"
    straight = train_process("--recipe", str(recipe), "--output-dir", str(runs), "--name", "straight", cwd=repo_root)
    output, _ = straight.communicate(timeout=900)
    assert straight.returncode == 0, output
    # only its metrics are compared: its weights and optimizer state (about 2 GB) go now, so that the test's peak disk
    # use stays one run's checkpoints
    shutil.rmtree(runs / "straight/checkpoints")

    killed = train_process("--recipe", str(recipe), "--output-dir", str(runs), "--name", "killed", cwd=repo_root)
    first = runs / "killed/checkpoints/checkpoint-1/trainer_state.json"
    deadline = time.time() + 900
    while not first.is_file() and killed.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    killed.send_signal(signal.SIGKILL)
    killed.communicate(timeout=60)
    assert killed.returncode == -signal.SIGKILL and not (runs / "killed/summary.json").exists()

    resumed = train_process("--resume", str(runs / "killed"), cwd=repo_root)
    output, _ = resumed.communicate(timeout=900)
    assert resumed.returncode == 0, output
    expected, got = metrics(runs / "straight"), metrics(runs / "killed")
    assert [r["step"] for r in got] == [1, 2]
    assert any(r["grad_norm"] > 0 for r in expected)  # the policy did change: resuming had state to restore
    for want, have in zip(expected, got):
        want = {k: v for k, v in want.items() if k not in TIMING_KEYS}
        have = {k: v for k, v in have.items() if k not in TIMING_KEYS}
        assert have == pytest.approx(want, rel=1e-5, abs=1e-7), want["step"]
    assert json.loads((runs / "killed/summary.json").read_text())["resumed_from"] == "checkpoints/checkpoint-1"


@pytest.mark.slow
def test_two_processes_with_accelerate_launch(tmp_path, repo_root, tiny_model_dir):
    """`accelerate launch --num_processes 2` on CPU (gloo): one run directory, one writer, the same schedule."""
    recipe = write_recipe(
        tmp_path, repo_root, str(tiny_model_dir), training={"steps": 2, "save_every": 2, "micro_batch_size": 2}
    )
    runs = tmp_path / "runs"
    done = launch_two_processes(repo_root, "train", "--recipe", str(recipe), "--output-dir", str(runs))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run,) = runs.iterdir()  # rank 1 did not make a directory of its own
    rows = metrics(run)
    assert [r["step"] for r in rows] == [1, 2]  # written once, by the main process
    assert all(STEP_KEYS <= set(r) for r in rows)
    # 2 questions x 2 rollouts per step, split over 2 processes (2 trajectories each): TRL's token count is gathered
    # over both, and our per-process means are averaged over both, so they agree on all 4 trajectories
    first = rows[0]
    assert first["num_tokens"] == pytest.approx(4 * (first["length/prompt"] + first["length/response"]))
    assert (run / "checkpoints/final/model.safetensors").is_file() and (run / "checkpoints/checkpoint-2").is_dir()
    assert json.loads((run / "summary.json").read_text())["steps"] == 2


@pytest.mark.slow
def test_inspo_train_without_a_recipe_runs_the_demo(tmp_path, repo_root, monkeypatch):
    """The README's first command: `inspo train` trains recipes/demo.yaml (SmolLM2, the world, BM25, INSPO with the
    packaged SmolLM2 as the local optimizer) to the end, and the whole co-evolution loop shows, then the policy is
    evaluated on held-out questions. 2 of the demo's 8 steps, to keep CI short, with its one evolution at step 1
    instead of 2: evolution (step 1), pruning (step 2) and the evaluation after the last step all happen within
    them."""
    monkeypatch.chdir(tmp_path)  # run directories go under ./runs, as for a user
    result = invoke(
        "train", "--set", "training.steps=2", "--set", "population.evolve_every=1", "--set", "population.evolve_until=2"
    )
    assert result.exit_code == 0, result.output
    (run,) = (tmp_path / "runs").iterdir()
    assert run.name.startswith("demo-")
    rows = metrics(run)
    assert [r["step"] for r in rows] == [1, 2]
    assert undeclared({key for row in rows for key in row}) == []  # docs/reference/metrics.md names every one
    summary = json.loads((run / "summary.json").read_text())
    assert summary["steps"] == 2 and (run / "checkpoints/final/model.safetensors").is_file()
    assert f"policy:  runs/{run.name}/checkpoints/final" in result.output
    # one instruction; at step 1 the local optimizer wrote candidates (its answer opened with <ins_1>, so the 135M
    # model's text parses), each verified by 8 rollouts before it could join; pruned again at step 2
    sizes = [r["population/size"] for r in rows]
    assert sizes[0] > 1 and sizes[1] < sizes[0]
    records = [json.loads(line) for line in (run / "instructions.jsonl").read_text().splitlines()]
    assert records[0]["proposer"] == "initial" and records[0]["step_born"] == 0  # the one instruction before
    assert "eval/em" in rows[-1] and (run / "evaluations/step-2/results.json").is_file()  # after the last step
    # the optimizer may be asked again (max_verify_rounds 5) when a 135M model's answer holds no finished candidate
    (evolution,) = json.loads((run / "evolutions.json").read_text())
    assert evolution["step"] == 1 and 1 <= evolution["optimizer_calls"] <= 5 and evolution["candidates"]
    # a 135M model mostly runs into its 160-token limit: the unfinished last block is on record, never verified
    verified = [c for c in evolution["candidates"] if c["reason"] not in ("cut off", "leaked")]
    assert all(c["verification_score"] is not None and c["parent_score"] is not None for c in verified)
    assert all(c["verification_score"] is None for c in evolution["candidates"] if c["reason"] == "cut off")
    assert evolution["truncated_answers"] <= evolution["optimizer_calls"]
    # up to 8 replayed questions per verification (those the optimizer was shown are left out: leak_check), for the
    # parent and each candidate
    rolled_out = len(verified) + evolution["verification_calls"]
    assert rolled_out <= evolution["verification_rollouts"] <= 8 * rolled_out
    assert {r["proposer"] for r in records[1:]} == {"reflection"}
    assert any(r["step_pruned"] for r in records)
    overhead = summary["overhead"]
    assert (
        overhead["optimizer"]["provider"] == "local" and overhead["optimizer"]["calls"] == evolution["optimizer_calls"]
    )
    assert 0 < overhead["share_of_wall_time"] < 1 and overhead["training_rollouts"] == 2 * 16
    assert (run / "best_instruction.txt").read_text().strip() in {r["text"].strip() for r in records}


@pytest.mark.slow
def test_inspo_evolve_with_a_frozen_policy_writes_the_same_outputs_and_resumes(
    tmp_path, repo_root, tiny_model_dir, monkeypatch
):
    monkeypatch.setenv("SCRIPTED_KEY", "sk-test-not-a-secret")
    optimizer = ScriptedOptimizer(
        ["<ins_1>Look it up first. Question: {question}\n</ins_1><ins_2>Answer briefly. Question: {question}\n</ins_2>"]
    )
    population = {
        "enabled": True,
        "instructions": [WORKED_EXAMPLE_INSTRUCTION, "Search, then answer. Question: {question}\n"],
        "size": 3,
        "n_parent": 1,
        "prune_every": 1,
        "evolve_every": 2,
        "evolve_until": 3,
        "candidates_per_call": 2,
        "failures_per_call": 2,
        "verify_size": 2,
        "accept_top_n": 1,
    }
    recipe = write_recipe(tmp_path, repo_root, str(tiny_model_dir), population=population, training={"steps": 3})
    recipe.write_text(
        recipe.read_text() + f"optimizer:\n  provider: openai\n  model: scripted\n  base_url: "
        f"{optimizer.url}\n  api_key_env: SCRIPTED_KEY\n  max_retries: 0\n"
    )
    runs = tmp_path / "runs"
    result = invoke("evolve", "--recipe", recipe, "--output-dir", runs, "--name", "straight", "--device", "cpu")
    assert result.exit_code == 0, result.output
    run = runs / "straight"
    rows = metrics(run)
    assert [r["step"] for r in rows] == [1, 2, 3] and [r.get("population/evolved", 0) for r in rows] == [0, 1, 0]
    assert {"reward", "em", "search/searches_per_trajectory", "population/size"} <= set(rows[0])
    (evolution,) = json.loads((run / "evolutions.json").read_text())
    assert any(c["reason"] == "accepted" for c in evolution["candidates"])
    summary = json.loads((run / "summary.json").read_text())
    assert summary["frozen_policy"] and summary["overhead"]["verification_rollouts"] > 0
    assert (run / "best_instruction.txt").read_text().strip() == summary["best_instruction"].strip()
    assert not (run / "checkpoints").exists()  # the policy never changes

    # a run stopped after step 2 (its recipe said 2 steps), then told to go on to 3 and resumed
    result = invoke(
        "evolve",
        "--recipe",
        recipe,
        "--output-dir",
        runs,
        "--name",
        "resumed",
        "--device",
        "cpu",
        "--set",
        "training.steps=2",
    )
    assert result.exit_code == 0, result.output
    resumed = runs / "resumed"
    (resumed / "summary.json").unlink()
    (resumed / "recipe.yaml").write_text((resumed / "recipe.yaml").read_text().replace("steps: 2", "steps: 3"))
    result = invoke("evolve", "--resume", resumed, "--device", "cpu")
    assert result.exit_code == 0, result.output
    assert (resumed / "instructions.jsonl").read_text() == (run / "instructions.jsonl").read_text()
    strip = lambda rows: [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in rows]  # noqa: E731
    for have, want in zip(strip(metrics(resumed)), strip(metrics(run)), strict=True):
        assert have == pytest.approx(want)


def test_inspo_evolve_needs_a_population(tmp_path, repo_root):
    recipe = write_recipe(tmp_path, repo_root, "x")
    result = invoke("evolve", "--recipe", recipe, "--output-dir", tmp_path / "runs")
    assert_one_line_error(result, "population.enabled=true")


@pytest.mark.slow
def test_inspo_with_two_processes_calls_the_optimizer_once_per_proposal(tmp_path, repo_root, tiny_model_dir):
    """Under `accelerate launch` only the main process calls the optimizer; every rank accepts the same candidates
    (or the ranks would disagree on the population and the run would fail or diverge)."""
    optimizer = ScriptedOptimizer(
        ["<ins_1>Look it up first. Question: {question}\n</ins_1><ins_2>Answer briefly. Question: {question}\n</ins_2>"]
    )
    population = {
        "enabled": True,
        "instructions": [WORKED_EXAMPLE_INSTRUCTION, "Search, then answer. Question: {question}\n"],
        "size": 3,
        "n_parent": 1,
        "prune_every": 1,
        "evolve_every": 2,
        "evolve_until": 3,
        "candidates_per_call": 2,
        "failures_per_call": 2,
        "verify_size": 4,
        "accept_top_n": 1,
    }
    recipe = write_recipe(
        tmp_path,
        repo_root,
        str(tiny_model_dir),
        population=population,
        training={"steps": 3, "save_every": 1, "micro_batch_size": 2},
    )
    recipe.write_text(
        recipe.read_text() + f"optimizer:\n  provider: openai\n  model: scripted\n  base_url: "
        f"{optimizer.url}\n  api_key_env: SCRIPTED_KEY\n  max_retries: 0\n"
    )
    done = launch_two_processes(
        repo_root,
        "train",
        "--recipe",
        str(recipe),
        "--output-dir",
        str(tmp_path / "runs"),
        "--name",
        "mp",
        env={"SCRIPTED_KEY": "k"},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run = tmp_path / "runs/mp"
    (evolution,) = json.loads((run / "evolutions.json").read_text())
    assert len(optimizer.prompts) == evolution["optimizer_calls"] == 2  # one per proposal, not one per rank
    assert [r["population/size"] for r in metrics(run)] == [1, 3, 2]
