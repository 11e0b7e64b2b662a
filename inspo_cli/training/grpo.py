"""GRPO (eq. 2) as one room: the TRL config a recipe makes and the `SearchGRPOTrainer` built from it.

    args = grpo_config(recipe, batch_plan(recipe, processes), run.checkpoints_dir, device)
    trainer = build_grpo(ctx)        # `training.algorithm: grpo`, through `inspo_cli.registry.ALGORITHMS`

The batch numbers are the run's `BatchPlan` (`inspo_cli.config.batch_plan`), computed once by `run_training`.
The trainer itself (multi-turn rollouts with search, observation masking, INSPO's per-question instructions) is
`training.trainer.SearchGRPOTrainer`; SFT's counterpart of this file is `training.sft`.
"""

from __future__ import annotations

from pathlib import Path

from inspo_cli.agent.tools import recipe_tools
from inspo_cli.config import Recipe
from inspo_cli.config.batch_plan import BatchPlan
from inspo_cli.policy.models import resolve_model_path, uses_chat_template
from inspo_cli.retrieval import open_from_config
from inspo_cli.training.trainer_inputs import lora_config, question_dataset, shared_kwargs, train_questions


def grpo_kwargs(recipe: Recipe, plan: BatchPlan, checkpoints_dir: Path, device: str = "cpu") -> dict:
    """Every value the recipe hands to TRL's `GRPOConfig`; the rest are TRL's defaults (`inspo recipe check --trl`
    prints both). Where TRL's default differs from what the paper or Search-R1 ran, the value is set explicitly."""
    t, r, m = recipe.training, recipe.rollout, recipe.model
    return dict(
        **shared_kwargs(recipe, checkpoints_dir, device, plan.max_updates, t.save_every * plan.updates_per_step),
        gradient_accumulation_steps=plan.accumulation,
        steps_per_generation=plan.steps_per_generation,
        num_generations=t.group_size,
        num_iterations=t.num_iterations,
        beta=t.kl_beta,
        use_bias_correction_kl=t.kl_bias_correction,
        epsilon=t.clip_epsilon,
        epsilon_high=t.clip_epsilon_high,
        loss_type=t.loss_type,
        importance_sampling_level=t.importance_sampling_level,
        top_entropy_quantile=t.top_entropy_quantile,
        entropy_coef=t.entropy_coef,
        scale_rewards=t.scale_rewards,
        temperature=r.temperature,
        top_p=r.top_p,
        max_completion_length=r.max_total_tokens,
        # TRL's test (no final EOS) would zero every trajectory that ends at </answer>: the trainer masks the
        # trajectories the rollout cut instead (training.mask_truncated_completions)
        mask_truncated_completions=False,
        logging_steps=plan.updates_per_step,
        use_vllm=m.backend == "vllm",
        vllm_mode=m.vllm_mode,
        vllm_gpu_memory_utilization=m.vllm_gpu_memory_utilization,
        vllm_enable_sleep_mode=m.vllm_enable_sleep_mode,
        vllm_importance_sampling_correction=t.vllm_is_correction != "off",
        vllm_importance_sampling_mode="sequence_mask" if t.vllm_is_correction == "off" else t.vllm_is_correction,
        vllm_importance_sampling_clip_max=t.vllm_is_clip,
        log_completions=t.log_completions,
        num_completions_to_print=8,  # TRL prints every completion of the batch otherwise (2,560 in the paper)
    )


def trainer_switches(recipe: Recipe) -> dict:
    """The recipe's switches that `SearchGRPOTrainer` itself carries out (TRL has none for them)."""
    t = recipe.training
    return dict(
        mask_truncated=t.mask_truncated_completions,
        dynamic_sampling_rounds=t.dynamic_sampling_max_rounds if t.dynamic_sampling else 0,
        compile_generation=recipe.model.compile_generation,
        instructions_per_question=recipe.population.instructions_per_question,
        baseline=recipe.population.baseline,
        save_rollouts=recipe.run.rollout_groups,
    )


def grpo_config(recipe: Recipe, plan: BatchPlan, checkpoints_dir: Path, device: str = "cpu"):
    from trl import GRPOConfig

    return GRPOConfig(**grpo_kwargs(recipe, plan, checkpoints_dir, device))


def build_grpo(ctx):
    """`SearchGRPOTrainer` for the run in `ctx` (a `training.run.TrainingContext`)."""
    from inspo_cli.training.trainer import SearchGRPOTrainer  # imports TRL and torch: not at `recipe check`

    recipe, plan = ctx.recipe, ctx.plan
    args = grpo_config(recipe, plan, ctx.run.checkpoints_dir, ctx.device)
    retriever = open_from_config(recipe.retriever)
    with ctx.vllm_engine:  # TRL starts a colocated vLLM engine inside the trainer
        return SearchGRPOTrainer(
            model=resolve_model_path(recipe.model.name_or_path),
            args=args,
            train_dataset=question_dataset(train_questions(recipe)),
            processing_class=ctx.tokenizer,
            instructions=ctx.instructions,
            retriever=retriever,
            tools=recipe_tools(recipe, retriever),
            protocol=recipe.agent.protocol,
            rollout=recipe.rollout,
            reward=recipe.reward,
            topk=recipe.retriever.topk,
            chat=uses_chat_template(ctx.tokenizer, recipe.model.chat_template),
            updates_per_step=plan.updates_per_step,
            **trainer_switches(recipe),
            generation_batch_size=plan.generation_batch_per_process,
            peft_config=lora_config(recipe),
            callbacks=ctx.callbacks,
            coevolution=ctx.coevolution,
            evaluation=ctx.evaluation,
        )
