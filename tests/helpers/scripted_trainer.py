"""A SearchGRPOTrainer on the tiny random Llama with a scripted policy at the backend seam: the real TRL loss and
masks, rollouts that search then answer (right on even rows, wrong on odd ones, so rewards differ). Shared by
test_trainer.py and test_loss_menu.py."""

from __future__ import annotations

import contextlib
from dataclasses import replace

from helpers.fake_retrievers import OverlapRetriever
from inspo_cli.benchmarks import Question
from inspo_cli.config import ModelConfig, Recipe, RewardConfig, RolloutConfig, TrainingConfig
from inspo_cli.config.batch_plan import batch_plan
from inspo_cli.instructions.sampling import Pick, StaticInstruction
from inspo_cli.policy.generation import Generation
from inspo_cli.policy.models import load_tokenizer
from inspo_cli.training.grpo import grpo_config, trainer_switches
from inspo_cli.training.trainer import SearchGRPOTrainer
from inspo_cli.training.trainer_inputs import question_dataset

QUESTIONS = [
    Question("q1", "Who founded Hokin Works?", ("Ada Vell",), "t"),
    Question("q2", "When was the violin of Vell recorded?", ("1714",), "t"),
]
GROUP = 2


class ScriptedBackend:
    """A policy backend whose replies a subclass's `generate` writes: no weights to swap in."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def generating_with(self, model):
        return contextlib.nullcontext()


class AlternatingPolicy:
    """Turn 1: a search (in the agent.protocol's format). Turn 2: the right answer on even rows, a wrong one on odd
    rows (so rewards differ)."""

    SEARCH = {
        "search-r1": "<think> look it up </think> <search> founder of Hokin Works </search>",
        "function-calling": '<think> look it up </think>\n<tool_call>\n{"name": "search", "arguments": '
        '{"query": "founder of Hokin Works"}}\n</tool_call>',
    }

    def __init__(self, tokenizer, protocol: str = "search-r1"):
        self.tokenizer, self.search = tokenizer, self.SEARCH[protocol]

    def generating_with(self, model):
        return contextlib.nullcontext()  # scripted: no weights to swap in

    def generate(self, contexts, max_new_tokens, stop=()):
        out = []
        for row, context in enumerate(contexts):
            text = self.tokenizer.decode(context)
            if "<information>" not in text and "<tool_response>" not in text:
                reply = self.search
            else:
                gold = "Ada Vell" if "Hokin" in text.split("Question:")[-1].split("\n")[0] else "1714"
                reply = f"<think> found it </think> <answer> {gold if row % 2 == 0 else 'castle'} </answer>"
            ids = self.tokenizer(reply, add_special_tokens=False)["input_ids"][: max_new_tokens[row]]
            out.append(Generation(ids, "stop"))
        return out


class RecordingSource(StaticInstruction):
    def __init__(self, text):
        super().__init__(text, "rec")
        self.sampled: list[tuple[list[str], int]] = []
        self.observed: list[tuple[list[Pick], list[float], list[str] | None]] = []
        self.ended: list[int] = []

    def sample(self, keys, step):
        self.sampled.append((list(keys), step))
        return super().sample(keys, step)

    def observe(self, picks, group_rewards, categories=None):
        self.observed.append((list(picks), list(group_rewards), None if categories is None else list(categories)))

    def end_step(self, step):
        self.ended.append(step)


def tiny_recipe(model_dir, **training) -> Recipe:
    return Recipe(
        model=ModelConfig(name_or_path=str(model_dir), dtype="float32"),
        rollout=RolloutConfig(
            max_turns=2, max_tokens_per_turn=64, max_observation_tokens=64, max_prompt_tokens=256, max_total_tokens=512
        ),
        training=TrainingConfig(
            **{
                "steps": 1,
                "group_size": GROUP,
                "batch_size": 2,
                "mini_batch_trajectories": 2 * GROUP,
                "micro_batch_size": 4,
                "learning_rate": 1e-3,
                "kl_beta": 0.0,
                "warmup_ratio": 0.0,
                **training,
            }
        ),
    )


def trainer_factory(tmp_path, tiny_model_dir):
    """What the `make_trainer` fixture (conftest.py) hands a test: make(source, protocol, model={...}, **training)."""

    def make(source=None, protocol="search-r1", model=None, **training):
        recipe = tiny_recipe(tiny_model_dir, **training)
        if model:
            recipe.model = replace(recipe.model, **model)
        if protocol == "function-calling":  # the tools' JSON and its calls are long in the tiny vocabulary
            recipe.rollout = replace(
                recipe.rollout, max_tokens_per_turn=256, max_prompt_tokens=1024, max_total_tokens=2048
            )
        tokenizer = load_tokenizer(recipe.model)
        trainer = SearchGRPOTrainer(
            model=str(tiny_model_dir),
            args=grpo_config(recipe, batch_plan(recipe), tmp_path / "checkpoints"),
            train_dataset=question_dataset(QUESTIONS),
            processing_class=tokenizer,
            instructions=source or StaticInstruction("Answer the given question."),
            retriever=OverlapRetriever(),
            rollout=recipe.rollout,
            reward=RewardConfig(),
            topk=2,
            chat=True,
            protocol=protocol,
            updates_per_step=batch_plan(recipe).updates_per_step,
            **trainer_switches(recipe),
        )
        trainer.engine.backend = AlternatingPolicy(tokenizer, protocol)
        trainer.model.train()
        return trainer

    return make


def generation_batch():
    """What TRL's sampler hands over: each question repeated group_size times, consecutively."""
    return [
        {"prompt": q.question, "qid": f"t:{q.id}", "category": q.category, "golden_answers": list(q.golden_answers)}
        for q in QUESTIONS
        for _ in range(GROUP)
    ]
