"""Supervised fine-tuning on the world with the tiny model: a rollout engine without a policy (for the oracle's
and the sampler's trajectories), an SFT recipe, and the check that the loss falls on written tokens only."""

from __future__ import annotations

from pathlib import Path

import torch

from inspo_cli.agent.rollout import RolloutEngine
from inspo_cli.config import DataConfig, ModelConfig, Recipe, RetrieverConfig, RolloutConfig, TrainingConfig

REPO = Path(__file__).resolve().parents[2]
# the tiny model's 400-token vocabulary spells the world's passages almost letter by letter: room for two per search
ROLLOUT = RolloutConfig(
    max_turns=2, max_tokens_per_turn=48, max_observation_tokens=1024, max_prompt_tokens=256, max_total_tokens=2048
)
INSTRUCTION = "Search, then answer. Question: {question}\n"


def world_engine(tokenizer, retriever, rollout=ROLLOUT) -> RolloutEngine:
    return RolloutEngine(None, retriever, tokenizer, rollout, topk=2, chat=False)


def observation_runs(ids, mask) -> list[list[int]]:
    runs, current = [], []
    for i, m in zip(ids, mask):
        if m == 0:
            current.append(i)
        elif current:
            runs, current = runs + [current], []
    return runs + ([current] if current else [])


def sft_recipe(model_dir, trajectories: str, **training) -> Recipe:
    return Recipe(
        data=DataConfig(world_dir=str(REPO / "data/world"), max_train_questions=8, trajectories=trajectories),
        retriever=RetrieverConfig(kind="bm25", corpus=str(REPO / "data/world/corpus.jsonl"), topk=2),
        model=ModelConfig(name_or_path=str(model_dir), dtype="float32", chat_template="off"),
        rollout=ROLLOUT,
        training=TrainingConfig(
            **{
                "algorithm": "sft",
                "steps": 1,
                "batch_size": 4,
                "micro_batch_size": 4,
                "learning_rate": 1e-3,
                "warmup_ratio": 0.0,
                **training,
            }
        ),
    )


def assert_loss_only_on_written_tokens(tmp_path, recipe, tokenizer, examples) -> None:
    """Back-propagating TRL's SFT loss on a batch of `examples` gives zero gradient at every prompt and observation
    position and a nonzero one at every token the policy wrote; the labels are exactly those tokens."""
    from datasets import Dataset
    from trl import SFTConfig

    from inspo_cli.config.batch_plan import batch_plan
    from inspo_cli.training.sft import SearchSFTTrainer, sft_kwargs

    args = SFTConfig(**sft_kwargs(recipe, batch_plan(recipe), tmp_path))
    trainer = SearchSFTTrainer(
        model=recipe.model.name_or_path,
        args=args,
        train_dataset=Dataset.from_list(examples),
        processing_class=tokenizer,
        engine=None,
        instructions=None,
    )
    batch = next(iter(trainer.get_train_dataloader()))
    captured = {}

    def keep_hidden(module, args, output):
        output.retain_grad()
        captured["hidden"] = output

    handle = trainer.model.model.norm.register_forward_hook(keep_hidden)
    try:
        trainer.compute_loss(trainer.model, batch).backward()
    finally:
        handle.remove()
    # the final norm's output at position j feeds only the prediction of token j + 1
    grad = captured["hidden"].grad[:, :-1].abs().sum(-1)
    labels = batch["labels"][:, 1:]
    assert torch.all(grad[labels == -100] == 0) and torch.all(grad[labels != -100] > 0)
    # and the labelled tokens are exactly those the policy writes: no prompt and no observation token
    by_ids = {tuple(e["input_ids"]): e["completion_mask"] for e in examples}
    for ids, row in zip(batch["input_ids"].tolist(), batch["labels"].tolist()):
        mask = next(m for full, m in by_ids.items() if list(full) == ids[: len(full)])
        assert [i for i, m in zip(ids, mask) if m] == [i for i in row if i != -100]
        assert 0 in mask[mask.index(1) :]  # an observation after the policy's first token
