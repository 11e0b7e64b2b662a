"""Training runs of the tiny model through `inspo train`, as the end-to-end tests start them: a small recipe file,
the metrics a run wrote, a run cut back to a checkpoint and resumed, a training process to kill."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from helpers.cli_helpers import invoke
from inspo_cli.config.instruction_defaults import WORKED_EXAMPLE_INSTRUCTION


TIMING_KEYS = {"time", "step_seconds", "step_time", "time/generation", "time/retrieval", "time/scoring", "time/update",
               "time/evolution", "time/evaluation"}


def write_recipe(tmp_path: Path, repo_root: Path, model_name: str, **sections) -> Path:
    recipe = {
        "data": {"train": "world", "world_dir": str(repo_root / "data/world")},
        "retriever": {"kind": "bm25", "corpus": str(repo_root / "data/world/corpus.jsonl"), "topk": 2},
        "model": {"name_or_path": model_name, "dtype": "float32", "chat_template": "off"},
        "rollout": {"max_turns": 1, "max_tokens_per_turn": 32, "max_observation_tokens": 64,
                    "max_prompt_tokens": 256, "max_total_tokens": 384},
        "reward": {"format_weight": 0.2},
        "training": {"steps": 3, "group_size": 2, "batch_size": 2, "mini_batch_trajectories": 4, "micro_batch_size": 4,
                     "learning_rate": 1e-4, "kl_beta": 0.001, "warmup_ratio": 0.0, "save_every": 1},
        "population": {"instructions": [WORKED_EXAMPLE_INSTRUCTION]},
        "evaluation": {"limit": 2, "batch_size": 2},  # evaluated after the last step (training.eval_every 100)
        "run": {"seed": 3},
    }
    for section, values in sections.items():
        recipe.setdefault(section, {}).update(values)
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return path


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
    return subprocess.Popen([sys.executable, "-m", "inspo_cli", "train", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
