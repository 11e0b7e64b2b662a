"""From a recipe to the pieces `SearchGRPOTrainer` needs: GRPOConfig, the question dataset, LoRA, instructions.

Batch sizes in a recipe follow Search-R1's scripts, which App. B quotes: `batch_size` counts *questions* per step
(each gets `group_size` rollouts), `mini_batch_trajectories` counts *trajectories* per optimizer update over all
processes, `micro_batch_size` counts *trajectories per device* in one forward/backward pass. One training step
generates `batch_size × group_size` trajectories and makes `batch_size × group_size / mini_batch_trajectories`
optimizer updates on them (512 × 5 / 256 = 10). In TRL's terms:

    per_device_train_batch_size = micro_batch_size
    gradient_accumulation_steps = mini_batch_trajectories / (micro_batch_size × processes)
    steps_per_generation        = gradient_accumulation_steps × updates per step
    max_steps                   = steps × updates per step                        (optimizer updates)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from inspo_cli.config import Recipe
from inspo_cli.errors import InspoError
from inspo_cli.files import INSTRUCTION_FILE_BYTES, read_text


@dataclass(frozen=True)
class Schedule:
    updates_per_step: int
    gradient_accumulation_steps: int
    steps_per_generation: int
    max_updates: int


def schedule(recipe: Recipe, processes: int = 1) -> Schedule:
    t = recipe.training
    trajectories = t.mini_batch_trajectories
    per_pass = t.micro_batch_size * processes
    if trajectories % per_pass:
        raise InspoError(
            f"training.micro_batch_size={t.micro_batch_size} × {processes} process(es) = {per_pass} trajectories per "
            f"pass must divide training.mini_batch_trajectories={trajectories}; choose a micro_batch_size and a "
            f"number of processes whose product divides {trajectories}")
    accumulation = trajectories // per_pass
    updates = t.batch_size * t.group_size // trajectories
    return Schedule(updates, accumulation, accumulation * updates, t.steps * updates)


def sft_accumulation(recipe: Recipe, processes: int = 1) -> int:
    """SFT's gradient accumulation: `batch_size` examples per update over `micro_batch_size` per device and pass."""
    t = recipe.training
    per_pass = t.micro_batch_size * processes
    if t.batch_size % per_pass:
        raise InspoError(f"training.micro_batch_size={t.micro_batch_size} × {processes} process(es) = {per_pass} "
                         f"examples per pass must divide training.batch_size={t.batch_size} (SFT counts examples); "
                         f"choose a micro_batch_size that divides {t.batch_size // processes}")
    return t.batch_size // per_pass


def shared_kwargs(recipe: Recipe, checkpoints_dir: Path, device: str, max_updates: int, save_steps: int) -> dict:
    """What `GRPOConfig` and `SFTConfig` get alike: the optimizer and its schedule, checkpoints, seed, device."""
    from inspo_cli.models import resolve_dtype

    t, m = recipe.training, recipe.model
    dtype = resolve_dtype(m.dtype, device)
    return dict(
        output_dir=str(checkpoints_dir),
        per_device_train_batch_size=t.micro_batch_size,
        max_steps=max_updates,
        learning_rate=t.learning_rate,
        lr_scheduler_type=t.lr_scheduler,
        warmup_steps=round(t.warmup_ratio * max_updates),
        weight_decay=t.weight_decay,
        adam_beta2=t.adam_beta2,
        max_grad_norm=t.max_grad_norm,
        save_strategy="steps",
        save_steps=save_steps,
        save_total_limit=t.keep_checkpoints or None,
        save_only_model=False,  # optimizer, scheduler and RNG states are what make --resume exact
        seed=recipe.run.seed,
        # metrics.jsonl and TensorBoard are written by RunLogger, per training step; W&B (run.report_to) by TRL's
        # callback, into the W&B run trackers.wandb_run started
        report_to=list(recipe.run.report_to) or "none",
        run_name=checkpoints_dir.parent.name,
        disable_tqdm=True,
        use_cpu=device == "cpu",
        bf16=str(dtype) == "torch.bfloat16" and device != "cpu",
        model_init_kwargs={"dtype": dtype},
        gradient_checkpointing=m.gradient_checkpointing,
    )


def grpo_kwargs(recipe: Recipe, checkpoints_dir: Path, processes: int = 1, device: str = "cpu") -> dict:
    """Every value the recipe hands to TRL's `GRPOConfig`; the rest are TRL's defaults (`inspo recipe check --trl`
    prints both). Where TRL's default differs from what the paper or Search-R1 ran, the value is set explicitly."""
    t, r, m = recipe.training, recipe.rollout, recipe.model
    plan = schedule(recipe, processes)
    return dict(
        **shared_kwargs(recipe, checkpoints_dir, device, plan.max_updates, t.save_every * plan.updates_per_step),
        gradient_accumulation_steps=plan.gradient_accumulation_steps,
        steps_per_generation=plan.steps_per_generation,
        num_generations=t.group_size,
        num_iterations=1,
        beta=t.kl_beta,
        use_bias_correction_kl=t.kl_bias_correction,
        epsilon=t.clip_epsilon,
        loss_type=t.loss_type,
        entropy_coef=t.entropy_coef,
        scale_rewards="group",
        temperature=r.temperature,
        top_p=r.top_p,
        max_completion_length=r.max_total_tokens,
        mask_truncated_completions=False,  # it would zero every trajectory that does not end in EOS
        logging_steps=plan.updates_per_step,
        use_vllm=m.backend == "vllm",
        vllm_mode=m.vllm_mode,
        vllm_gpu_memory_utilization=m.vllm_gpu_memory_utilization,
        vllm_importance_sampling_correction=t.vllm_is_correction != "off",
        vllm_importance_sampling_mode="sequence_mask" if t.vllm_is_correction == "off" else t.vllm_is_correction,
        vllm_importance_sampling_clip_max=t.vllm_is_clip,
        log_completions=False,
    )


def grpo_config(recipe: Recipe, checkpoints_dir: Path, processes: int = 1, device: str = "cpu"):
    from trl import GRPOConfig

    return GRPOConfig(**grpo_kwargs(recipe, checkpoints_dir, processes, device))


def lora_config(recipe: Recipe):
    if not recipe.model.lora:
        return None
    from peft import LoraConfig

    m = recipe.model
    return LoraConfig(r=m.lora_rank, lora_alpha=m.lora_alpha, lora_dropout=m.lora_dropout,
                      target_modules="all-linear", task_type="CAUSAL_LM")


def train_questions(recipe: Recipe):
    """The training questions the recipe names: the bundled world, the paper's NQ+HotpotQA mixture, or a file."""
    from inspo_cli.benchmarks import TRAIN_MIXTURE_NAME, WORLD, load_benchmark, load_questions, load_train_mixture

    d = recipe.data
    if d.train == WORLD:
        return load_benchmark(WORLD, "train", world_dir=d.world_dir, limit=d.max_train_questions)
    if d.train == TRAIN_MIXTURE_NAME:
        return load_train_mixture(d.benchmarks_dir, limit=d.max_train_questions)
    return load_questions(d.train, limit=d.max_train_questions)


def question_dataset(questions):
    """TRL's dataset: `prompt` is the bare question (the rollout engine adds the instruction), plus the keys
    the reward and the instruction source need."""
    from datasets import Dataset

    if not questions:
        raise InspoError("data.train has no questions; point it at a non-empty file or use data.train=world")
    return Dataset.from_list([{"prompt": q.question, "qid": q.key,
                               "golden_answers": list(q.golden_answers)} for q in questions])


def initial_instructions(recipe: Recipe) -> list[str]:
    """The recipe's instructions, or those of `population.instruction_file` (plain text, or JSONL with "text")."""
    path = recipe.population.instruction_file
    if path is None:
        return list(recipe.population.instructions)
    text = read_text(path, "population.instruction_file", max_bytes=INSTRUCTION_FILE_BYTES)
    if Path(path).suffix != ".jsonl":
        return [text.strip()] if text.strip() else _empty(path)
    texts = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line).get("text")
        except (json.JSONDecodeError, AttributeError, RecursionError):
            value = None
        if not isinstance(value, str) or not value.strip():
            raise InspoError(f"{path}:{n}: each line must be a JSON object with a non-empty \"text\" field")
        texts.append(value)
    return texts or _empty(path)


def _empty(path) -> list[str]:
    raise InspoError(f"population.instruction_file {path} holds no instruction; write one or remove the key")
