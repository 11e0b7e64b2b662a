"""Supervised fine-tuning through TRL's `SFTTrainer`: the paper's "SFT" baseline and warm starts.

Every example is a prompt exactly as the rollout engine builds it for the recipe (its instruction, the question,
chat template or plain text, cut to `rollout.max_prompt_tokens`) followed by a target completion in the Search-R1
protocol. Only tokens the policy writes carry loss: the prompt and any `<information>` observation (inserted by the
retriever) get label -100, as they get no gradient in GRPO. The examples reach TRL already tokenized, as
`input_ids` plus `completion_mask` (TRL's `completion_only_loss` turns the mask into labels), so what is trained
on is token for token what a rollout would hold.

`data.trajectories` picks the targets:

- `answers` (default): question → `<answer> gold </answer>`, the first golden answer; the paper's SFT row
  (Table 1, "Model Inference": no search tool), evaluated with `rollout.max_turns: 0`.
- `world-oracle`: the synthetic world's oracle trajectories (`inspo_cli.world.oracle`): its searches for the
  entities each hop needs, the retrieved passages, then the answer; a warm start for a small policy.

Batch sizes for SFT count examples: `batch_size` per optimizer update, `micro_batch_size` per device and pass
(`group_size` and `mini_batch_trajectories` are GRPO's and unused). `steps` counts optimizer updates; the examples are
shuffled and repeated as needed.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from pathlib import Path

import torch
from transformers import TrainerCallback
from trl import SFTTrainer

from inspo_cli.agent.rollout import RolloutEngine
from inspo_cli.agent.tools import recipe_tools
from inspo_cli.config import Recipe
from inspo_cli.errors import InspoError
from inspo_cli.jsonio import atomic_write_json, read_json
from inspo_cli.policy.generation import Generation
from inspo_cli.policy.generation_weights import generation_dtype, in_compute_dtype
from inspo_cli.policy.models import resolve_model_path, uses_chat_template
from inspo_cli.policy.transformers_backend import TransformersBackend
from inspo_cli.retrieval import open_from_config
from inspo_cli.runs import DAMAGED, RunDir
from inspo_cli.training.trainer_inputs import lora_config, shared_kwargs, train_questions
from inspo_cli.world.oracle import oracle_trajectories

TOKENS_FILE = "sft_tokens.json"  # in each checkpoint: TRL's running num_tokens, which TRL itself does not save


def sft_examples(recipe: Recipe, engine, instruction: str) -> list[dict]:
    """Tokenized examples ({input_ids, completion_mask}) for the recipe's `data.trajectories`."""

    questions = train_questions(recipe)
    source = recipe.data.trajectories
    if source == "answers":
        examples = [answer_example(engine, instruction, q.question, q.golden_answers[0]) for q in questions]
    else:
        trajectories = oracle_trajectories(engine, instruction, questions)
        examples = [
            {
                "input_ids": t.prompt_ids + t.completion_ids,
                "completion_mask": [0] * len(t.prompt_ids) + t.completion_mask,
            }
            for _, t in trajectories
        ]
    if not examples:
        raise InspoError(f"data.trajectories={source} gave no training example for data.train={recipe.data.train}")
    return examples


def answer_example(engine, instruction: str, question: str, answer: str) -> dict:
    prompt = engine.prompt_ids(instruction, question)[-engine.config.max_prompt_tokens :]
    completion = engine.tokenizer(f"<answer> {answer} </answer>", add_special_tokens=False)["input_ids"]
    completion = completion[: max(engine.config.max_total_tokens - len(prompt), 0)]
    return {"input_ids": prompt + completion, "completion_mask": [0] * len(prompt) + [1] * len(completion)}


def sft_kwargs(recipe: Recipe, plan, checkpoints_dir, device: str = "cpu") -> dict:
    """Every value the recipe hands to TRL's `SFTConfig`; the rest are TRL's defaults. `plan` is the run's
    `BatchPlan` (`inspo_cli.config.batch_plan`): `batch_size` examples per update."""

    t = recipe.training
    return dict(
        **shared_kwargs(recipe, checkpoints_dir, device, plan.max_updates, t.save_every),
        gradient_accumulation_steps=plan.accumulation,
        completion_only_loss=True,  # labels from completion_mask: prompt and observations get none
        max_length=None,  # the examples are cut to the rollout limits already
        packing=False,
        logging_steps=1,
    )


def build_sft(ctx):
    """`training.algorithm: sft`: a `SearchSFTTrainer` on the recipe's `data.trajectories`."""
    recipe = ctx.recipe  # the recipe guarantees a static instruction and the transformers backend
    # the retriever is opened only when something searches: oracle trajectories, or evaluation with search turns
    engine = sft_engine(ctx, searching=recipe.data.trajectories != "answers")
    started = time.perf_counter()
    examples = sft_examples(recipe, engine, ctx.instructions.best_pick().text)
    if ctx.state.is_main_process:
        print(
            f"sft: {len(examples)} examples from data.trajectories={recipe.data.trajectories} "
            f"({time.perf_counter() - started:.1f}s)",
            flush=True,
        )
    return sft_trainer(ctx, engine, examples)


def sft_engine(ctx, searching: bool):
    """The rollout engine SFT builds its prompts with and evaluates through (its backend is set by the trainer);
    with a retriever when `searching` or when evaluation during training searches."""

    recipe = ctx.recipe
    r = recipe.rollout
    searching = searching or (ctx.evaluation is not None and r.max_turns > 0)
    retriever = open_from_config(recipe.retriever) if searching else None
    return RolloutEngine(
        _BackendSetByTrainer(),
        retriever,
        ctx.tokenizer,
        r,
        topk=recipe.retriever.topk,
        chat=uses_chat_template(ctx.tokenizer, recipe.model.chat_template),
        tools=recipe_tools(recipe, retriever),
        protocol=recipe.agent.protocol,
    )


class _BackendSetByTrainer:
    """SFT's engine builds prompts before the trainer's model exists; `SearchSFTTrainer` then gives it a backend."""

    def generate(
        self, contexts: Sequence[Sequence[int]], max_new_tokens: Sequence[int], stop: Sequence[str]
    ) -> list[Generation]:
        raise RuntimeError(_NO_MODEL_YET)

    def generating_with(self, model) -> contextlib.AbstractContextManager:
        raise RuntimeError(_NO_MODEL_YET)


_NO_MODEL_YET = "SFT's rollout engine generates only once SearchSFTTrainer has given it the model"


def sft_trainer(ctx, engine, examples: list[dict]):
    """A `SearchSFTTrainer` on tokenized examples ({input_ids, completion_mask})."""
    from datasets import Dataset
    from trl import SFTConfig

    recipe = ctx.recipe
    args = SFTConfig(**sft_kwargs(recipe, ctx.plan, ctx.run.checkpoints_dir, ctx.device))
    return SearchSFTTrainer(
        model=resolve_model_path(recipe.model.name_or_path),
        args=args,
        train_dataset=Dataset.from_list(examples),
        processing_class=ctx.tokenizer,
        peft_config=lora_config(recipe),
        callbacks=ctx.callbacks,
        engine=engine,
        instructions=ctx.instructions,
        evaluation=ctx.evaluation,
        compile_generation=recipe.model.compile_generation,
    )


class SearchSFTTrainer(SFTTrainer):
    """TRL's SFTTrainer plus App. B's evaluation during training: every `training.eval_every` steps the policy is
    rolled out, greedily, with the run's instruction through the rollout engine (search included), as GRPO runs are."""

    def __init__(
        self, *, engine, instructions, evaluation=None, callbacks=None, compile_generation: bool = False, **kwargs
    ):
        self.engine, self.instructions, self.evaluation = engine, instructions, evaluation
        super().__init__(callbacks=[*(callbacks or []), _Evaluate(self)], **kwargs)
        self._generation_dtype = generation_dtype(self.args, self.is_deepspeed_enabled or self.is_fsdp_enabled)
        if engine is not None:  # it generates with this trainer's model (swapped in unwrapped while it evaluates)
            r = engine.config
            engine.backend = TransformersBackend(
                self.model,
                self.processing_class,
                r.temperature,
                r.top_p,
                evaluation.config.batch_size if evaluation else 32,
                compile_generation=compile_generation,
            )

    def train(self, resume_from_checkpoint=None, **kwargs):
        if resume_from_checkpoint:  # TRL counts num_tokens from 0 in every process; a resumed run goes on counting
            saved = Path(resume_from_checkpoint) / TOKENS_FILE
            if saved.is_file():
                self._total_train_tokens = read_json(saved, {"num_tokens": float}, DAMAGED)["num_tokens"]
        return super().train(resume_from_checkpoint=resume_from_checkpoint, **kwargs)

    def _save_checkpoint(self, model, trial):
        """The token count goes in before HF writes trainer_state.json, the file that marks a checkpoint complete."""
        if self.args.should_save:
            folder = Path(self._get_output_dir(trial=trial)) / RunDir.checkpoint_name(self.state.global_step)
            folder.mkdir(parents=True, exist_ok=True)
            atomic_write_json(folder / TOKENS_FILE, {"num_tokens": self._total_train_tokens})
        super()._save_checkpoint(model, trial)

    @contextlib.contextmanager
    def _policy_for_generation(self):
        model = self.accelerator.unwrap_model(self.model)
        was_training = model.training
        model.eval()
        try:  # from the weights cast once to the compute dtype, outside autocast (policy.generation_weights)
            with (
                torch.no_grad(),
                in_compute_dtype(model, self._generation_dtype) as policy,
                self.engine.backend.generating_with(policy),
            ):
                yield
        finally:
            model.train(was_training)

    def _evaluate_step(self, step: int) -> None:
        if self.evaluation is not None:
            for name, value in self.evaluation.after_step(
                step, self.engine, self._policy_for_generation, self.instructions, self.accelerator
            ).items():
                self._metrics["train"][name].append(value)


class _Evaluate(TrainerCallback):
    def __init__(self, trainer: SearchSFTTrainer):
        self.trainer = trainer

    def on_step_end(self, args, state, control, **kwargs):
        self.trainer._evaluate_step(state.global_step)
