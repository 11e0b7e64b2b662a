"""What a recipe hands to TRL, and how it compares with the paper's App. B: `inspo recipe check --trl`.

    report = trl_report(recipe, processes=8, device="cuda")
    report["appendix_b"]     # one row per App. B / §4 setting: the paper's value, the recipe's, where it goes, match
    report["grpo_config"]    # every GRPOConfig field as TRL holds it after its own __post_init__
    report["set_by_inspo"]   # the fields the recipe sets; every other one is TRL's default

The rows name where each value ends up: a `GRPOConfig` field, or the rollout engine / population for what TRL
never sees (turn limits, passages, the INSPO schedule). The GRPOConfig is built for real, so TRL's own
validation runs; on a machine without the requested GPU it is built for the CPU and the device fields
(`use_cpu`, `bf16`, `fp16`) are then set to what the GPU run will pass.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from inspo_cli.config import Recipe
from inspo_cli.config.batch_plan import BatchPlan, batch_plan
from inspo_cli.config.loss_rules import listed
from inspo_cli.config.paper import model_size, paper_value
from inspo_cli.config.training_section import TrainingConfig
from inspo_cli.config.validation import choices
from inspo_cli.registry import LOSS_TYPES, is_sft
from inspo_cli.runs import RunDir
from inspo_cli.training.grpo import grpo_kwargs

_COMPARE = object()


def _row(setting: str, paper, recipe_value, target: str, matches=_COMPARE, note: str = "") -> dict:
    """`matches`: True/False, "equivalent" (another value with the same effect), or None (paper value unknown)."""
    if matches is _COMPARE:
        matches = paper == recipe_value
    return {
        "setting": setting,
        "paper": paper,
        "recipe": recipe_value,
        "target": target,
        "matches": matches,
        "note": note,
    }


def appendix_b_rows(recipe: Recipe, kwargs: dict, plan: BatchPlan) -> list[dict]:
    """The paper's training settings next to the recipe's, with the TRL field (or inspo component) each feeds."""
    t, r, p = recipe.training, recipe.rollout, recipe.population
    size = model_size(recipe.model.name_or_path)

    def paper(key: str):  # App. B and §4 "Setups" (inspo_cli/config/paper.yaml), by model size where it depends on it
        return paper_value(key, size)

    processes = plan.processes
    # a loss that averages per trajectory and then over the micro-batch, with no per-micro-batch token threshold
    per_sequence_mean = not LOSS_TYPES[t.loss_type].divides_by_tokens and t.top_entropy_quantile == 1.0
    per_sequence_losses = [name for name, loss in LOSS_TYPES.items() if not loss.divides_by_tokens]
    per_generation = kwargs["per_device_train_batch_size"] * kwargs["steps_per_generation"] * processes
    per_update = kwargs["per_device_train_batch_size"] * kwargs["gradient_accumulation_steps"] * processes
    rows = [
        _row(
            "training steps",
            paper("training.steps"),
            t.steps,
            "max_steps",
            note=f"{kwargs['max_steps']} optimizer updates, {plan.updates_per_step} per step",
        ),
        _row("group size G", paper("training.group_size"), t.group_size, "num_generations"),
        _row(
            "batch (questions per step)",
            paper("training.batch_size"),
            t.batch_size,
            "steps_per_generation",
            matches=paper("training.batch_size") == per_generation // t.group_size == t.batch_size,
            note=f"{kwargs['per_device_train_batch_size']} x {kwargs['steps_per_generation']} x {processes} "
            f"process(es) = {per_generation} trajectories",
        ),
        _row(
            "mini-batch (trajectories per update)",
            paper("training.mini_batch_trajectories"),
            t.mini_batch_trajectories,
            "gradient_accumulation_steps",
            matches=paper("training.mini_batch_trajectories") == per_update == t.mini_batch_trajectories,
            note=f"{kwargs['per_device_train_batch_size']} x {kwargs['gradient_accumulation_steps']} x {processes} "
            f"process(es) = {per_update} trajectories; Search-R1 repeats each question n_agent=5 times "
            "before veRL splits the batch, so its 256 counts trajectories",
        ),
        _row(
            "optimizer updates per step (Search-R1 code)",
            10,
            plan.updates_per_step,
            "steps_per_generation x num_iterations / gradient_accumulation_steps",
            note=f"{t.batch_size} x {t.group_size} / {t.mini_batch_trajectories}"
            + (f" x {t.num_iterations} passes" if t.num_iterations > 1 else "")
            + f"; {plan.max_updates} in all",
        ),
        _row(
            "micro-batch (trajectories per GPU pass)",
            paper("training.micro_batch_size"),
            t.micro_batch_size,
            "per_device_train_batch_size",
            matches=True if t.micro_batch_size == 8 else "equivalent" if per_sequence_mean else False,
            note=f"with loss_type {listed(per_sequence_losses)} (and every token's entropy kept) the policy "
            "gradient does not depend on the micro-batch (memory only)",
        ),
        _row(
            "learning rate",
            paper("training.learning_rate"),
            t.learning_rate,
            "learning_rate",
            **({} if size else {"matches": None}),
        ),
        _row("LR schedule", paper("training.lr_scheduler"), t.lr_scheduler, "lr_scheduler_type"),
        _row(
            "warm-up ratio",
            paper("training.warmup_ratio"),
            t.warmup_ratio,
            "warmup_steps",
            note=f"{kwargs['warmup_steps']} of {kwargs['max_steps']} updates",
        ),
        _row(
            "max prompt length",
            paper("rollout.max_prompt_tokens"),
            r.max_prompt_tokens,
            "engine: rollout.max_prompt_tokens",
        ),
        _row(
            "response tokens per turn",
            paper("rollout.max_tokens_per_turn"),
            r.max_tokens_per_turn,
            "engine: rollout.max_tokens_per_turn",
        ),
        _row(
            "observation tokens per turn",
            paper("rollout.max_observation_tokens"),
            r.max_observation_tokens,
            "engine: rollout.max_observation_tokens",
        ),
        _row(
            "response tokens (turns and observations)",
            paper("rollout.max_response_tokens"),
            r.max_response_tokens,
            "engine: rollout.max_response_tokens",
        ),
        _row(
            "max turns",
            paper("rollout.max_turns"),
            r.max_turns,
            "engine: rollout.max_turns",
            **({} if size else {"matches": None}),
        ),
        _row("temperature", paper("rollout.temperature"), r.temperature, "temperature"),
        _row("top-p", paper("rollout.top_p"), r.top_p, "top_p"),
        _row("rollout schedule", paper("rollout.schedule"), r.schedule, "engine: rollout.schedule"),
        _row("KL coefficient beta", paper("training.kl_beta"), t.kl_beta, "beta"),
        _row("clip ratio epsilon", paper("training.clip_epsilon"), t.clip_epsilon, "epsilon"),
        _row("retrieved passages", paper("retriever.topk"), recipe.retriever.topk, "engine: retriever.topk"),
        _row("loss aggregation (eq. 2)", paper("training.loss_type"), t.loss_type, "loss_type"),
        _row(
            "importance ratio (eq. 2)",
            paper("training.importance_sampling_level"),
            t.importance_sampling_level,
            "importance_sampling_level",
            note="sequence: one ratio per trajectory; GSPO's with loss_type grpo and clip epsilon 3e-4 / 4e-4",
        ),
        _row(
            "upper clip epsilon_high",
            paper("training.clip_epsilon_high"),
            t.clip_epsilon_high,
            "epsilon_high",
            note=f"null: symmetric, 1 + clip_epsilon = {1 + t.clip_epsilon:g}"
            if t.clip_epsilon_high is None
            else f"{t.loss_type.upper()}'s cap of the importance weight"
            if LOSS_TYPES[t.loss_type].needs_cap
            else "DAPO's clip-higher",
        ),
        _row(
            "advantage scaling",
            paper("training.scale_rewards"),
            t.scale_rewards,
            "scale_rewards",
            note="reward minus the group mean, divided by the std of: "
            + " | ".join(choices(TrainingConfig, "scale_rewards")),
        ),
        _row(
            "passes over each batch (Search-R1's ppo_epochs)",
            paper("training.num_iterations"),
            t.num_iterations,
            "num_iterations",
        ),
        _row(
            "truncated trajectories in the loss",
            paper("training.mask_truncated_completions"),
            t.mask_truncated_completions,
            "trainer: training.mask_truncated_completions",
            note="read from the rollout (context full, or last turn out of tokens); TRL's own switch stays off",
        ),
        _row(
            "high-entropy token share in the loss",
            paper("training.top_entropy_quantile"),
            t.top_entropy_quantile,
            "top_entropy_quantile",
        ),
        _row(
            "groups of equal rewards in the batch",
            paper("training.dynamic_sampling"),
            t.dynamic_sampling,
            "trainer: training.dynamic_sampling",
            note="true: dropped and refilled from further questions (DAPO), at most "
            f"{t.dynamic_sampling_max_rounds} extra rounds"
            if t.dynamic_sampling
            else "kept (zero advantage)",
        ),
        _row(
            "KL term",
            "beta x k3 (no importance weight)",
            "beta x k3" + (" x ratio" if t.kl_bias_correction else ""),
            "use_bias_correction_kl",
            matches=not t.kl_bias_correction,
        ),
        _row(
            "vLLM IS correction",
            paper("training.vllm_is_correction"),
            t.vllm_is_correction,
            "vllm_importance_sampling_correction",
        ),
        _row(
            "prompt format (App. F)",
            paper("model.chat_template"),
            "chat template" if recipe.model.chat_template != "off" else "plain text",
            "engine: model.chat_template",
            note="App. F shows <|im_start|>assistant after the question; Search-R1 applies the template when the "
            "tokenizer has one",
        ),
        _row("weight decay (Search-R1 code)", paper("training.weight_decay"), t.weight_decay, "weight_decay"),
        _row(
            "entropy bonus (Search-R1 code)",
            paper("training.entropy_coef"),
            t.entropy_coef,
            "entropy_coef",
            note="a mean per token whatever the loss_type (TRL); veRL aggregates it as its policy loss",
        ),
    ]
    if p.enabled:
        rows += [
            _row("population size N_P", paper("population.size"), p.size, "inspo: population.size"),
            _row("parents N_parent", paper("population.n_parent"), p.n_parent, "inspo: population.n_parent"),
            _row(
                "sampling temperature tau_s",
                paper("population.temperature"),
                p.temperature,
                "inspo: population.temperature",
            ),
            _row(
                "weight window n", paper("population.weight_window"), p.weight_window, "inspo: population.weight_window"
            ),
            _row("when the instruction is optimised", paper("population.stage"), p.stage, "inspo: population.stage"),
            _row("pruning", paper("population.prune"), p.prune, "inspo: population.prune"),
            _row("prune every K_p", paper("population.prune_every"), p.prune_every, "inspo: population.prune_every"),
            _row(
                "evolve every K_e", paper("population.evolve_every"), p.evolve_every, "inspo: population.evolve_every"
            ),
            _row(
                "evolve until T_e", paper("population.evolve_until"), p.evolve_until, "inspo: population.evolve_until"
            ),
            _row("proposer", paper("population.proposer"), p.proposer, "inspo: population.proposer"),
            _row(
                "failures per reflection",
                paper("population.failures_per_call"),
                p.failures_per_call,
                "inspo: population.failures_per_call",
            ),
            _row("verification", paper("population.verify"), p.verify, "inspo: population.verify"),
            _row(
                "verification set |D_B|",
                paper("population.verify_size"),
                p.verify_size,
                "inspo: population.verify_size",
            ),
            _row(
                "verification rollouts per question (App. C)",
                paper("population.verify_rollouts"),
                p.verify_rollouts,
                "inspo: population.verify_rollouts",
                note="App. C counts 6 x 200 rollouts per evolution",
            ),
            _row(
                "candidates per evolution (App. C)",
                paper("population.candidates_per_call"),
                p.candidates_per_call,
                "inspo: population.candidates_per_call",
            ),
            _row(
                "verification rounds (App. C)",
                paper("population.max_verify_rounds"),
                p.max_verify_rounds,
                "inspo: population.max_verify_rounds",
            ),
            _row("optimizer", paper("optimizer.model"), recipe.optimizer.model, "inspo: optimizer.model"),
            _row(
                "leak guard (beyond the paper)",
                paper("population.leak_check"),
                p.leak_check,
                "inspo: population.leak_check",
                note="off: the paper's loop; refuse / flag: candidates holding a shown answer or a question's words "
                "are refused / marked, D_B leaves out the shown questions, an evaluation question shown "
                "whole stops the run (docs/faithfulness.md)",
            ),
        ]
    return rows


def _plain(value):
    """A JSON/YAML-friendly form of a GRPOConfig value (torch dtypes, enums and paths become strings)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def trl_report(recipe: Recipe, processes: int = 1, device: str = "cpu") -> dict:
    """GRPO: App. B's rows and the GRPOConfig ("grpo_config"). SFT (`training.algorithm: sft` or
    rejection-sampling): the SFTConfig
    ("sft_config"), and no App. B rows (those are the RL runs' settings)."""

    checkpoints = RunDir(Path(recipe.run.output_dir) / "<run>").checkpoints_dir
    common = {
        "processes": processes,
        "device": device,
        "population": _plain(dataclasses.asdict(recipe.population)) if recipe.population.enabled else None,
    }
    if is_sft(recipe.training.algorithm):
        from trl import SFTConfig

        from inspo_cli.training.sft import sft_kwargs  # imports TRL and torch

        kwargs = sft_kwargs(recipe, batch_plan(recipe, processes), checkpoints, device)
        return {
            **common,
            "appendix_b": [],
            "sft_config": _plain(_built(SFTConfig, kwargs, device)),
            "set_by_inspo": sorted(kwargs),
        }
    from trl import GRPOConfig

    plan = batch_plan(recipe, processes)
    kwargs = grpo_kwargs(recipe, plan, checkpoints, device)
    values = _built(GRPOConfig, kwargs, device)
    # derived by TRL from the world size it runs in, i.e. the number of processes accelerate launches
    values["generation_batch_size"] = plan.generation_batch
    return {
        **common,
        "appendix_b": appendix_b_rows(recipe, kwargs, plan),
        "grpo_config": _plain(values),
        "set_by_inspo": sorted(kwargs),
    }


def _built(config_class, kwargs: dict, device: str) -> dict:
    """The config as TRL holds it after its own validation; built for the CPU on a machine without the GPU asked
    for (TRL refuses bf16 there), with the device fields then set to what the GPU run will pass."""
    import torch

    buildable = dict(kwargs)
    if device != "cpu" and not torch.cuda.is_available():
        buildable.update(use_cpu=True, bf16=False, fp16=False)
    values = config_class(**buildable).to_dict()
    values.update(use_cpu=kwargs["use_cpu"], bf16=kwargs["bf16"], fp16=kwargs["fp16"])
    return values
