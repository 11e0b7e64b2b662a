"""What every trainer is given, from a recipe: TRL's shared config values, the precision, the question dataset and
LoRA.

GRPO's own config is `training.grpo`, SFT's `training.sft`; the batch numbers behind both are
`inspo_cli.config.batch_plan`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from inspo_cli.benchmarks import TRAIN_MIXTURE_NAME, WORLD, load_benchmark, load_questions, load_train_mixture
from inspo_cli.config import Recipe
from inspo_cli.errors import InspoError
from inspo_cli.policy.models import resolve_dtype


def shared_kwargs(recipe: Recipe, checkpoints_dir: Path, device: str, max_updates: int, save_steps: int) -> dict:
    """What `GRPOConfig` and `SFTConfig` get alike: the optimizer and its schedule, checkpoints, seed, device."""
    t, m = recipe.training, recipe.model
    precision = training_precision(recipe, device)
    return dict(
        output_dir=str(checkpoints_dir),
        per_device_train_batch_size=t.micro_batch_size,
        max_steps=max_updates,
        learning_rate=t.learning_rate,
        # HF's "constant" ignores warmup_steps; "constant_with_warmup" is veRL's (Search-R1's) linear warm-up, then flat
        lr_scheduler_type="constant_with_warmup" if t.lr_scheduler == "constant" else t.lr_scheduler,
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
        bf16=precision.mixed == "bf16",
        fp16=precision.mixed == "fp16",
        model_init_kwargs={"dtype": precision.weights, **one_gpu_device_map(device)},
        gradient_checkpointing=m.gradient_checkpointing,
    )


def launched_sharded() -> bool:
    """Whether `accelerate launch` started this process under DeepSpeed or FSDP (it says so in the environment): even
    in one process these shard or offload weights, gradients and optimizer state themselves."""
    import os

    return any(os.environ.get(f"ACCELERATE_USE_{name}", "").lower() == "true" for name in ("DEEPSPEED", "FSDP"))


def one_gpu_device_map(device: str) -> dict:
    """`device_map` for TRL's model loading in a plain one-process run that sees one GPU: the whole model on it.

    TRL loads with `device_map="auto"` there, which may put part of a model on the CPU or disk; training cannot move
    such a model ("You can't move a model that has some modules offloaded", seen with Qwen2.5-7B on an H200). Pinned to
    the GPU, a model that does not fit stops with CUDA's out-of-memory error instead. Several processes (TRL sets
    `device_map=None`), DeepSpeed, FSDP, several visible GPUs (where "auto" may spread a model on purpose) and CPU are
    left to TRL's default."""
    import os

    if not device.startswith("cuda") or os.environ.get("WORLD_SIZE", "").strip() not in ("", "1") or launched_sharded():
        return {}
    import torch

    if not torch.cuda.is_available() or torch.cuda.device_count() != 1:
        return {}
    return {"device_map": {"": torch.cuda.current_device()}}


@dataclass(frozen=True)
class Precision:
    """How the policy is trained: `weights`, the dtype its trained weights are held in (the optimizer's master
    copy), and `mixed`, the autocast precision of forward and backward ("no", "bf16" or "fp16")."""

    weights: object  # a torch.dtype
    mixed: str


def training_precision(recipe: Recipe, device: str) -> Precision:
    """`model.dtype` bfloat16 (or float16) means bf16 (fp16) compute with float32 master weights, on every launch.

    AdamW's updates at the paper's learning rate (5e-7) are far below bfloat16's spacing (about 1.2e-4 for a weight
    near 0.02), so weights held in bfloat16 round almost every update away. ZeRO-3 keeps fp32 master weights and
    accelerate's FSDP upcasts trainable parameters to fp32 itself, but a one-process or DDP launch would train the
    bf16 weights directly; so the trained weights are loaded in float32 and the compute runs under accelerate's
    autocast, which is what Search-R1's verl does (actor in fp32 with an FSDP bf16 compute policy, the reference in
    bf16: verl/workers/fsdp_workers.py). With LoRA only the adapters train: the frozen base stays in
    `model.dtype`, and PEFT keeps the adapters in float32."""
    import torch

    dtype = resolve_dtype(recipe.model.dtype, device)
    mixed = {torch.bfloat16: "bf16", torch.float16: "fp16"}.get(dtype, "no")
    return Precision(dtype if recipe.model.lora or mixed == "no" else torch.float32, mixed)


def lora_config(recipe: Recipe):
    if not recipe.model.lora:
        return None
    from peft import LoraConfig

    m = recipe.model
    return LoraConfig(
        r=m.lora_rank,
        lora_alpha=m.lora_alpha,
        lora_dropout=m.lora_dropout,
        target_modules="all-linear",
        task_type="CAUSAL_LM",
    )


def train_questions(recipe: Recipe):
    """The training questions the recipe names: the bundled world, the paper's NQ+HotpotQA mixture, or a file."""

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
    return Dataset.from_list(
        [
            {"prompt": q.question, "qid": q.key, "category": q.category, "golden_answers": list(q.golden_answers)}
            for q in questions
        ]
    )
