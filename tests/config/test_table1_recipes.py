"""Slow: Table 1's trained-baseline recipes for Qwen2.5-3B run as shipped on a laptop, shrunk by `--set` only: the
packaged SmolLM2-135M for the model, the world for the data and the retriever, one small step."""

from __future__ import annotations

import json

import pytest
from helpers.cli_helpers import invoke

from inspo_cli.config.instruction_defaults import WORKED_EXAMPLE_INSTRUCTION

pytestmark = pytest.mark.slow

SHRINK = [
    "model.name_or_path=smollm2-135m-instruct",
    "model.dtype=float32",
    "model.chat_template=off",
    "model.backend=transformers",
    "model.gradient_checkpointing=false",
    "data.train=world",
    "data.max_train_questions=4",
    "retriever.kind=bm25",
    "retriever.url=null",
    "retriever.corpus=data/world/corpus.jsonl",
    "rollout.max_tokens_per_turn=32",
    "rollout.max_observation_tokens=64",
    "rollout.max_prompt_tokens=512",
    "rollout.max_total_tokens=640",
    "training.steps=1",
    "training.batch_size=2",
    "training.mini_batch_trajectories=10",
    "training.micro_batch_size=2",
    "training.save_every=1",
    "training.keep_checkpoints=1",
    "training.eval_every=0",
]
# rejection sampling needs a sampler that answers some questions right: the shipped warm start (the laptop's
# "instruct model"), sampling 4 times each of 8 questions with the instruction and limits it was trained with (with
# Search-R1's instruction it keeps about 3% of its samples, so 32 samples often keep none)
SAMPLER = [
    "sampling.model=data/warm-start/smollm2-135m-world",
    "sampling.backend=transformers",
    "sampling.samples=4",
    "data.max_train_questions=8",
    "rollout.max_turns=2",
    "rollout.max_observation_tokens=256",
    "rollout.max_total_tokens=768",
]


@pytest.mark.parametrize("name", ["sft", "grpo-no-search", "rejection-sampling"])
def test_a_table_1_recipe_trains_on_cpu_with_smollm2(tmp_path, repo_root, name):
    sets = SHRINK
    if name == "rejection-sampling":
        (tmp_path / "instruction.txt").write_text(WORKED_EXAMPLE_INSTRUCTION, encoding="utf-8")
        sets = [*SHRINK, *SAMPLER, f"population.instruction_file={tmp_path / 'instruction.txt'}"]
    result = invoke(
        "train",
        "--recipe",
        repo_root / f"recipes/qwen2.5-3b/{name}.yaml",
        "--device",
        "cpu",
        "--output-dir",
        tmp_path,
        "--name",
        name,
        *[a for s in sets for a in ("--set", s)],
    )
    assert result.exit_code == 0, result.output
    run = tmp_path / name
    summary = json.loads((run / "summary.json").read_text())
    assert summary["steps"] == 1 and (run / "checkpoints/final/model.safetensors").is_file()
    row = json.loads((run / "metrics.jsonl").read_text().splitlines()[0])
    assert row["loss"] is not None
    if name == "grpo-no-search":
        assert row["search/searches_per_trajectory"] == 0  # max_turns 0: the tool is gone
    if name == "rejection-sampling":
        sampled = summary["sampling"]
        assert sampled["trajectories"] == 32 and sampled["kept"] > 0, sampled
