"""Resume takes the newest whole checkpoint and totals cover the whole run, even after chaos kills; Weights &
Biases offline logs every step into the run directory; a killed index build's leftovers are removed."""

from __future__ import annotations

import json
import os

import pytest
from helpers.cli_helpers import assert_one_line_error, invoke

# -- class 4 and 5: resume takes the newest checkpoint that is whole; totals cover the whole run ----------------------


def fake_checkpoint(run_dir, update: int):
    """A checkpoint with the files HF and inspo write: weights, optimizer, RNG state, trainer state, INSPO's state."""
    import torch
    from safetensors.torch import save_file

    path = run_dir / "checkpoints" / f"checkpoint-{update}"
    path.mkdir(parents=True)
    save_file({"w": torch.arange(256, dtype=torch.float32)}, str(path / "model.safetensors"))
    torch.save({"state": {0: torch.zeros(64)}}, path / "optimizer.pt")
    torch.save({"python": 1}, path / "rng_state.pth")
    population = {"version": 1, "seed": 0, "next_id": 0, "last_step_ended": None, "pending": {}, "candidates": []}
    (path / "coevolution.json").write_text(
        json.dumps({"population": population, "replay": {"capacity": 8, "entries": []}, "step": update})
    )
    (path / "trainer_state.json").write_text(json.dumps({"global_step": update, "log_history": []}))
    return path


def cut(path, keep: float = 0.5):
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


@pytest.mark.parametrize(
    "damage, reason",
    [
        (lambda p: cut(p / "trainer_state.json"), "trainer_state.json is cut short"),
        (lambda p: (p / "trainer_state.json").unlink(), "no trainer_state.json"),
        (lambda p: cut(p / "coevolution.json"), "coevolution.json is cut short"),
        (lambda p: cut(p / "model.safetensors", 0.9), "model.safetensors is cut short"),
        (lambda p: cut(p / "model.safetensors", 0.001), "model.safetensors is cut short or corrupt"),
        (lambda p: (p / "model.safetensors").unlink(), "no model weights"),
        (lambda p: cut(p / "optimizer.pt", 0.8), "optimizer.pt is cut short"),
        (lambda p: cut(p / "rng_state.pth", 0.8), "rng_state.pth is cut short"),
    ],
)
def test_resume_takes_the_newest_whole_checkpoint_and_says_why_newer_ones_are_not(damage, reason, tmp_path):
    from inspo_cli.runs import RunDir, checkpoint_problem

    run = RunDir(tmp_path)
    older, newest = fake_checkpoint(tmp_path, 2), fake_checkpoint(tmp_path, 4)
    assert checkpoint_problem(newest) is None and run.latest_checkpoint() == newest
    damage(newest)
    assert reason in checkpoint_problem(newest)
    assert run.latest_checkpoint() == older and list(run.checkpoints()) == [2]
    checkpoint, skipped = run.resume_point()
    assert checkpoint == older and [(p.name, r) for p, r in skipped] == [("checkpoint-4", checkpoint_problem(newest))]


def test_a_run_whose_only_checkpoint_is_cut_short_is_refused_with_the_reason(tmp_path, repo_root):
    from helpers.runs import write_recipe

    from inspo_cli.config import load_recipe
    from inspo_cli.runs import RunDir

    run = RunDir.create(load_recipe(write_recipe(tmp_path, repo_root, "x")), output_dir=tmp_path / "runs")
    cut(fake_checkpoint(run.path, 2) / "trainer_state.json")
    assert_one_line_error(
        invoke("train", "--resume", run.path),
        "no complete checkpoint to resume from",
        "checkpoint-2: trainer_state.json is cut short",
        "start a new run",
    )


def test_a_run_another_process_is_running_in_is_not_resumed_over_it(tmp_path, repo_root):
    """Two `inspo train --resume` (or `inspo distill`, which resumes an unfinished distillation) of one run at once
    trained over each other: both wrote its checkpoints and metrics, and neither could be resumed afterwards."""
    from helpers.runs import write_recipe

    from inspo_cli.config import load_recipe
    from inspo_cli.files import lock_directory
    from inspo_cli.runs import RunDir

    run = RunDir.create(load_recipe(write_recipe(tmp_path, repo_root, "x")), output_dir=tmp_path / "runs")
    fake_checkpoint(run.path, 2)
    before = sorted((p.relative_to(run.path), p.stat().st_size) for p in run.path.rglob("*"))
    held = lock_directory(run.path)  # the running process's hold on it (another open file, as far as flock goes)
    try:
        for command in (("train", "--resume", run.path), ("evolve", "--resume", run.path)):
            assert_one_line_error(invoke(*command), "another inspo process", "is running in it now")
    finally:
        os.close(held)
    assert sorted((p.relative_to(run.path), p.stat().st_size) for p in run.path.rglob("*")) == before
    again = lock_directory(run.path)  # released by the refused commands too
    assert again is not None
    os.close(again)


def test_logged_seconds_add_up_the_steps_a_resumed_run_keeps(tmp_path):
    from inspo_cli.runs import RunDir

    run = RunDir(tmp_path)
    assert run.logged_seconds() == 0.0
    for step, seconds in ((1, 60.0), (2, 30.5), (3, 40.0)):
        run.append_metrics({"step": step, "update": step, "step_seconds": seconds})
    run.truncate_metrics(2)  # resumed from update 2: step 3 is done again and counted by the new session
    assert run.logged_seconds() == 90.5


class HeldOptimizer:
    """An OpenAI-compatible server on loopback that answers `answer`, holding the first request until released, so
    that a test can kill the run in the middle of an evolution."""

    def __init__(self, answer: str):
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.requested, self.released, self.calls = threading.Event(), threading.Event(), 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                outer.calls += 1
                if outer.calls == 1:
                    outer.requested.set()
                    outer.released.wait(60)
                body = json.dumps(
                    {
                        "choices": [{"message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
                    }
                ).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass  # the run was killed while it waited

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"


@pytest.mark.slow
def test_chaos_kills_and_a_corrupt_checkpoint_resume_to_the_same_metrics(
    tmp_path, repo_root, tiny_model_dir, monkeypatch
):
    """INSPO on the tiny model (evolution at step 2, a checkpoint every step), run straight through, then again
    killed with SIGKILL during generation and during the evolution, and once with its newest checkpoint cut short
    as a kill during its write leaves it: every `--resume` ends with the straight run's metrics rows, and says which
    checkpoint it used."""
    import shutil
    import signal
    import time

    from helpers.runs import TIMING_KEYS, metrics, train_process, write_recipe

    monkeypatch.setenv("SCRIPTED_KEY", "sk-test-not-a-secret")
    optimizer = HeldOptimizer("<ins_1>Look it up first. Question: {question}\n</ins_1>")
    population = {
        "enabled": True,
        "instructions": ["Search, then answer. Question: {question}\n"],
        "size": 2,
        "n_parent": 1,
        "prune_every": 100,
        "evolve_every": 2,
        "evolve_until": 3,
        "candidates_per_call": 1,
        "failures_per_call": 1,
        "verify_size": 2,
        "accept": "top_n",
        "accept_top_n": 1,
        "max_verify_rounds": 1,
    }
    recipe = write_recipe(
        tmp_path,
        repo_root,
        str(tiny_model_dir),
        population=population,
        training={"steps": 3, "save_every": 1, "eval_every": 0},
    )
    recipe.write_text(
        recipe.read_text() + f"optimizer:\n  provider: openai\n  model: scripted\n  base_url: "
        f"{optimizer.url}\n  api_key_env: SCRIPTED_KEY\n  max_retries: 0\n"
    )
    runs = tmp_path / "runs"

    def start(name):
        return train_process("--recipe", str(recipe), "--output-dir", str(runs), "--name", name, cwd=repo_root)

    def kill(process):
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=60)
        assert process.returncode == -signal.SIGKILL

    def resume_and_compare(name, expected_checkpoint):
        resumed = train_process("--resume", str(runs / name), cwd=repo_root)
        output, _ = resumed.communicate(timeout=600)
        assert resumed.returncode == 0, output
        assert f"resuming from {expected_checkpoint}" in output
        strip = lambda rows: [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in rows]  # noqa: E731
        assert [r["step"] for r in metrics(runs / name)] == [1, 2, 3]
        for have, want in zip(strip(metrics(runs / name)), strip(metrics(runs / "straight")), strict=True):
            assert have == pytest.approx(want, rel=1e-5, abs=1e-7), (name, want["step"])
        summary = json.loads((runs / name / "summary.json").read_text())
        assert summary["wall_seconds"] >= sum(r["step_seconds"] for r in metrics(runs / name))  # across resumes
        return output

    # killed during the evolution at the end of step 2 (the optimizer holds its answer), then the straight run
    held = start("during-evolution")
    assert optimizer.requested.wait(600), held.communicate(timeout=5)[0]
    kill(held)
    optimizer.released.set()
    straight = start("straight")
    output, _ = straight.communicate(timeout=600)
    assert straight.returncode == 0, output
    resume_and_compare("during-evolution", "checkpoint-1")  # step 2 (and its evolution) are done again

    # killed during generation: as soon as step 1's checkpoint is whole, step 2's rollouts begin
    generating = start("during-generation")
    first = runs / "during-generation/checkpoints/checkpoint-1/trainer_state.json"
    deadline = time.time() + 600
    while not first.is_file() and generating.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    kill(generating)
    resume_and_compare("during-generation", "checkpoint-1")

    # a kill while checkpoint-3 was being written: its trainer state and weights cut short, no summary
    shutil.copytree(runs / "straight", runs / "cut-checkpoint")
    newest = runs / "cut-checkpoint/checkpoints/checkpoint-3"
    for name in ("trainer_state.json", "model.safetensors"):
        data = (newest / name).read_bytes()
        (newest / name).write_bytes(data[: len(data) // 2])
    shutil.rmtree(runs / "cut-checkpoint/checkpoints/final")
    (runs / "cut-checkpoint/summary.json").unlink()
    output = resume_and_compare("cut-checkpoint", "checkpoint-2")
    assert "checkpoint-3: trainer_state.json is cut short" in output


# -- Weights & Biases (run.report_to), offline: no key, no network ---------------------------------------------------


def wandb_records(path) -> list[bytes]:
    """The records of a .wandb file: W&B's LevelDB-style log (a 7-byte header, 32 KiB blocks, records with a
    7-byte header of CRC, length and FULL/FIRST/MIDDLE/LAST), read here since wandb ships no Python reader."""
    import struct

    data, block = path.read_bytes(), 32768
    assert data[:4] == b":W&B"
    records, pending, pos = [], b"", 7
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        chunk, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        if kind == 0:
            continue
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):
            records.append(pending)
    return records


def wandb_history(run_dir) -> list[dict]:
    """The rows an offline W&B run logged, read back from the .wandb file in the run directory."""
    from wandb.proto import wandb_internal_pb2

    (offline,) = (run_dir / "wandb").glob("offline-run-*")
    (path,) = offline.glob("*.wandb")
    rows = []
    for data in wandb_records(path):
        record = wandb_internal_pb2.Record()
        record.ParseFromString(data)
        if record.WhichOneof("record_type") == "history":
            rows.append(
                {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
            )
    return rows


@pytest.mark.parametrize("command", ["train", "evolve"])
def test_wandb_offline_logs_every_step_into_the_run_directory(
    command, tmp_path, repo_root, tiny_model_dir, monkeypatch
):
    pytest.importorskip("wandb")
    from helpers.runs import metrics, write_recipe

    for name in ("WANDB_API_KEY", "WANDB_DIR", "WANDB_RUN_ID", "WANDB_PROJECT", "WANDB_RESUME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "wandb-config"))
    population = {
        "enabled": True,
        "instructions": ["Search, then answer. Question: {question}\n"],
        "size": 2,
        "evolve_until": 0,
    }
    recipe = write_recipe(
        tmp_path,
        repo_root,
        str(tiny_model_dir),
        population=population,
        training={"steps": 2, "save_every": 2},
        run={"report_to": ["wandb"]},
    )
    result = invoke(
        command,
        "--recipe",
        recipe,
        "--output-dir",
        tmp_path / "runs",
        "--name",
        "tracked",
        *(["--device", "cpu"] if command == "evolve" else []),
    )
    assert result.exit_code == 0, result.output
    run = tmp_path / "runs" / "tracked"
    reward_key = "train/reward" if command == "train" else "reward"
    rows = [row for row in wandb_history(run) if reward_key in row]
    assert len(rows) == 2  # one per step, as metrics.jsonl
    assert [row[reward_key] for row in rows] == pytest.approx([r["reward"] for r in metrics(run)])
    assert any(key.endswith("population/size") for key in rows[0])


def test_wandb_online_without_a_key_is_refused_before_the_run_starts(tmp_path, repo_root, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    monkeypatch.setenv("HOME", str(tmp_path))
    result = invoke("train", "--recipe", "demo", "--set", "run.report_to=[wandb]", "--output-dir", tmp_path / "runs")
    assert_one_line_error(result, "run.report_to lists wandb but no W&B key", "WANDB_MODE=offline")
    assert not (tmp_path / "runs").exists()


def test_the_next_index_build_removes_what_killed_builds_left_and_nothing_else(tmp_path, repo_root):
    import socket
    import subprocess
    import sys

    from retriever.index import BUILDER, build_index

    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(finished.stdout)  # a process that has exited
    out = tmp_path / "idx"
    left = {name: tmp_path / f".idx.partial-{name}" for name in ("killed", "running", "old", "new")}
    for path in left.values():
        path.mkdir()
        (path / "part.bin").write_bytes(b"\0" * 1024)
    (left["killed"] / BUILDER).write_text(f"{socket.gethostname()} {dead_pid}\n")
    (left["running"] / BUILDER).write_text(f"{socket.gethostname()} {os.getpid()}\n")  # a build in progress
    os.utime(left["old"], (0, 0))  # killed before it named its builder, long ago
    build_index(repo_root / "data/world/corpus.jsonl", out, "bm25")
    assert (out / "index.json").is_file() and not (out / BUILDER).exists()
    assert {name for name, path in left.items() if path.exists()} == {"running", "new"}
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([".idx.partial-running", ".idx.partial-new", "idx"])
