"""Trajectories, masks and rewards of fixed-seed rollouts, recorded as plain data: the tool registry (issue 40) must
leave the paper's agent (search alone, the Search-R1 protocol) token for token as it was.

`tests/fixtures/rollouts_before_tools.json` was written by this module run against the commit before the tools existed
(3157c78), with

    PYTHONPATH=<checkout of that commit>:tests python -m helpers.before_after tests/fixtures/rollouts_before_tools.json

and `tests/agent/test_tools_unchanged.py` compares today's engine with it. Recorded again the same way (that commit
with today's `retriever/bm25.py`) when BM25's ties at the k-th place came to go by row on every CPU (issue 41's
session): one scripted search's second passage changed, nothing else. Only APIs both sides have are used here.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROLLOUT = {
    "max_turns": 2,
    "max_tokens_per_turn": 40,
    "max_observation_tokens": 96,
    "max_prompt_tokens": 256,
    "max_total_tokens": 420,
}
SCRIPTS = {  # the scripted policy: every path of the protocol (search, empty search, invalid, EOS, answer, limits)
    "Nyrren": [
        "<think> look it up </think> <search> Nyrren founded </search>",
        "<search></search>",
        "<answer> 1712 </answer>",
    ],
    "Brask": ["no tag at all<EOS>", "<think> hmm </think><answer> Brask </answer>"],
    "Tolven": ["<search> Tolven river </search> and more text after", "still no tag", "<answer> x </answer>"],
    "Quill": ["<answer> Quill </answer><search> too late </search>"],
}


def _row(trajectory, reward: float) -> dict:
    return {
        "prompt_ids": trajectory.prompt_ids,
        "completion_ids": trajectory.completion_ids,
        "completion_mask": trajectory.completion_mask,
        "stop_reason": trajectory.stop_reason,
        "queries": trajectory.queries,
        "retrieved": trajectory.retrieved,
        "turns": trajectory.turns,
        "invalid_actions": trajectory.invalid_actions,
        "answer": trajectory.answer,
        "reward": reward,
    }


def _rewards(trajectories, golden) -> list[float]:
    from inspo_cli.config import RewardConfig
    from inspo_cli.training.reward import trajectory_rewards

    return trajectory_rewards(trajectories, golden, RewardConfig(format_weight=0.2))


def _retriever():
    from retriever import open_retriever

    return open_retriever(str(ROOT / "data/world/corpus.jsonl"))


def scripted(tokenizer_dir: str) -> list[dict]:
    """The scripted policy (tests/helpers/rollout.py) through the real tokenizer and BM25 over the world."""
    from transformers import AutoTokenizer

    from helpers.rollout import ScriptedPolicy
    from inspo_cli.agent import RolloutEngine
    from inspo_cli.config import RolloutConfig

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    engine = RolloutEngine(
        ScriptedPolicy(tokenizer, SCRIPTS), _retriever(), tokenizer, RolloutConfig(**ROLLOUT), topk=2, chat=True
    )
    questions = [f"When was {name} founded" for name in SCRIPTS]
    trajectories = engine.run(["Answer the question. Question: {question}\n"] * len(questions), questions)
    return [_row(t, r) for t, r in zip(trajectories, _rewards(trajectories, [["1712"]] * len(questions)))]


def sampled(recipe_path: str, model: str | None, seed: int, questions: int = 6) -> list[dict]:
    """A recipe's policy (its model, or `model`) sampling at temperature 1 from `seed` on the world's first test
    questions, BM25 top 2, the recipe's first instruction."""
    import torch

    from inspo_cli.agent import RolloutEngine
    from inspo_cli.benchmarks import load_questions
    from inspo_cli.config import RolloutConfig, load_recipe
    from inspo_cli.policy.backends import load_backend
    from inspo_cli.policy.models import uses_chat_template

    overrides = [f"model.name_or_path={model}"] if model else []
    recipe = load_recipe(recipe_path, overrides)
    rollout = RolloutConfig(**ROLLOUT)
    backend, tokenizer = load_backend(recipe.model, rollout, batch_size=questions, device="cpu", seed=seed)
    engine = RolloutEngine(
        backend,
        _retriever(),
        tokenizer,
        rollout,
        topk=2,
        chat=uses_chat_template(tokenizer, recipe.model.chat_template),
    )
    batch = load_questions(ROOT / "data/world/test.jsonl", limit=questions)
    torch.manual_seed(seed)
    trajectories = engine.run([recipe.population.instructions[0]] * len(batch), [q.question for q in batch])
    return [_row(t, r) for t, r in zip(trajectories, _rewards(trajectories, [q.golden_answers for q in batch]))]


def record(tiny_model_dir: str) -> dict:
    return {
        "scripted": scripted(tiny_model_dir),
        "tiny": sampled(str(ROOT / "recipes/demo.yaml"), tiny_model_dir, seed=5),
        "demo": sampled(str(ROOT / "recipes/demo.yaml"), None, seed=5),
    }


if __name__ == "__main__":
    import tempfile

    from helpers.tiny_model import build_tiny_model

    with tempfile.TemporaryDirectory() as tmp:
        data = record(str(build_tiny_model(Path(tmp))))
    Path(sys.argv[1]).write_text(json.dumps(data) + "\n")
    print({name: len(rows) for name, rows in data.items()})
