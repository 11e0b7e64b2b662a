"""`inspo train` with INSPO: evolution, verification and pruning across a resume, a run killed for real then
resumed to the same metrics, and two processes under `accelerate launch`."""

from __future__ import annotations

import json
import shutil
import signal
import time

import pytest
from helpers.cli_helpers import invoke
from helpers.fake_providers import ScriptedOptimizer
from helpers.runs import (
    SCRIPTED_ANSWERS,
    TIMING_KEYS,
    launch_two_processes,
    metrics,
    train_process,
    write_inspo_recipe,
    write_recipe,
)
from helpers.train_metrics import STEP_KEYS


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
