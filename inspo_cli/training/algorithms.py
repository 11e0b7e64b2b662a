"""Training algorithms by name, for `training.algorithm`: one registry line each.

Each entry is "module:function", a builder that takes a `inspo_cli.training.run.TrainingContext` and returns a
transformers `Trainer` (TRL's GRPOTrainer or SFTTrainer, extended); `run_training` does the rest (resume, final
model, summary) the same way for all. Modules are imported only when a run uses them, so the config can validate
a recipe against these names without importing torch or TRL.
"""

from __future__ import annotations

import importlib

ALGORITHMS = {
    "grpo": "inspo_cli.training.run:build_grpo",  # the paper's (eq. 2) through TRL's GRPOTrainer
    "sft": "inspo_cli.training.sft:build_sft",  # TRL's SFTTrainer on `data.trajectories` (the SFT baseline)
    # Search-R1's rejection sampling: sample with search, keep the correct trajectories, then SFTTrainer on them
    "rejection-sampling": "inspo_cli.training.rejection_sampling:build_rejection_sampling",
}
SFT_ALGORITHMS = ("sft", "rejection-sampling")  # trained by TRL's SFTTrainer: examples, not question groups
PROGRESS_BEFORE_TRAINING = ("rejection-sampling",)  # a phase before training that saves (and resumes) its own work


def build_trainer(ctx):
    module, _, attribute = ALGORITHMS[ctx.recipe.training.algorithm].partition(":")
    return getattr(importlib.import_module(module), attribute)(ctx)


def updates_per_step(recipe, processes: int) -> int:
    """Optimizer updates per logged training step: batch / mini-batch for GRPO, one for SFT."""
    from inspo_cli.training.setup import schedule, sft_accumulation

    if recipe.training.algorithm in SFT_ALGORITHMS:
        sft_accumulation(recipe, processes)  # checks that the batch divides
        return 1
    return schedule(recipe, processes).updates_per_step
