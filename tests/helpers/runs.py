"""Training runs of the tiny model through `inspo train`, as the end-to-end tests start them: a small recipe file,
the metrics a run wrote, a run cut back to a checkpoint and resumed, a training process to kill."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from helpers.cli_helpers import invoke
from inspo_cli.config.instruction_defaults import WORKED_EXAMPLE_INSTRUCTION

TIMING_KEYS = {
    "time",
    "step_seconds",
    "step_time",
    "time/generation",
    "time/retrieval",
    "time/scoring",
    "time/update",
    "time/evolution",
    "time/evaluation",
}


def write_recipe(tmp_path: Path, repo_root: Path, model_name: str, **sections) -> Path:
    recipe = {
        "data": {"train": "world", "world_dir": str(repo_root / "data/world")},
        "retriever": {"kind": "bm25", "corpus": str(repo_root / "data/world/corpus.jsonl"), "topk": 2},
        "model": {"name_or_path": model_name, "dtype": "float32", "chat_template": "off"},
        "rollout": {
            "max_turns": 1,
            "max_tokens_per_turn": 32,
            "max_observation_tokens": 64,
            "max_prompt_tokens": 256,
            "max_total_tokens": 384,
        },
        "reward": {"format_weight": 0.2},
        "training": {
            "steps": 3,
            "group_size": 2,
            "batch_size": 2,
            "mini_batch_trajectories": 4,
            "micro_batch_size": 4,
            "learning_rate": 1e-4,
            "kl_beta": 0.001,
            "warmup_ratio": 0.0,
            "save_every": 1,
        },
        "population": {"instructions": [WORKED_EXAMPLE_INSTRUCTION]},
        "evaluation": {"limit": 2, "batch_size": 2},  # evaluated after the last step (training.eval_every 100)
        "run": {"seed": 3},
    }
    for section, values in sections.items():
        recipe.setdefault(section, {}).update(values)
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return path


# The scripted optimizer's one answer: three candidates, the third a repeat of the first
SCRIPTED_ANSWERS = [
    "<ins_1>Look it up first. Question: {question}\n</ins_1><ins_2>Answer briefly. Question: "
    "{question}\n</ins_2><ins_3>Look it up first. Question: {question}\n</ins_3>"
]


def write_inspo_recipe(tmp_path: Path, repo_root: Path, model_name: str, optimizer_url: str) -> Path:
    """A tiny INSPO recipe (population of 3, evolution at step 2 of 3, D_B of 2) whose optimizer is the scripted
    OpenAI-compatible server at `optimizer_url`, its key in $SCRIPTED_KEY."""
    population = {
        "enabled": True,
        "instructions": [WORKED_EXAMPLE_INSTRUCTION, "Search, then answer. Question: {question}\n"],
        "size": 3,
        "n_parent": 1,
        "prune_every": 1,
        "evolve_every": 2,
        "evolve_until": 3,
        "candidates_per_call": 3,
        "failures_per_call": 2,
        "verify_size": 2,
        "accept_top_n": 1,
        "max_verify_rounds": 2,
    }
    recipe = write_recipe(
        tmp_path,
        repo_root,
        model_name,
        population=population,
        training={"steps": 3, "save_every": 1},
        optimizer={
            "provider": "openai",
            "model": "scripted",
            "base_url": optimizer_url,
            "api_key_env": "SCRIPTED_KEY",
            "max_retries": 0,
            "input_price_per_mtok": 0,
            "output_price_per_mtok": 0,
        },
    )
    return recipe


def metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def resume_after_a_cut(resumed: Path, straight: Path) -> None:
    """Cut `resumed` (a copy of `straight`, 3 steps, saved every step) back to its checkpoint at step 1 by dropping
    what it wrote later, as a kill would have; resume it; it must end with the same metrics as `straight`."""
    import shutil

    for later in ("checkpoint-2", "checkpoint-3", "final"):
        shutil.rmtree(resumed / "checkpoints" / later)
    (resumed / "summary.json").unlink()
    result = invoke("train", "--resume", resumed)
    assert result.exit_code == 0, result.output
    strip = lambda rows: [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in rows]  # noqa: E731
    for have, want in zip(strip(metrics(resumed)), strip(metrics(straight)), strict=True):
        assert have == pytest.approx(want)


def train_process(*args: str, cwd: Path) -> subprocess.Popen:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRL_EXPERIMENTAL_SILENCE": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "inspo_cli", "train", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def launch_two_processes(
    repo_root: Path, *args: str, timeout: int = 900, env: dict | None = None
) -> subprocess.CompletedProcess:
    """`accelerate launch --config_file recipes/accelerate/2cpu.yaml --num_processes 2 -m inspo_cli *args` on a free
    port of its own: two such launches on accelerate's default 29500 (xdist's two workers) fail with EADDRINUSE."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRL_EXPERIMENTAL_SILENCE": "1", **(env or {})}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "accelerate.commands.launch",
            "--config_file",
            str(repo_root / "recipes/accelerate/2cpu.yaml"),
            "--num_processes",
            "2",
            "--main_process_port",
            str(port),
            "-m",
            "inspo_cli",
            *args,
        ],
        cwd=repo_root,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
