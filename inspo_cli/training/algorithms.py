"""Build the trainer a recipe's `training.algorithm` names (`inspo_cli.registry.ALGORITHMS`).

Each registry entry names a builder, "module:function" (a recipe may name its own the same way), that takes a
`inspo_cli.training.run.TrainingContext` and returns a transformers `Trainer` (TRL's GRPOTrainer or SFTTrainer,
extended); `run_training` does the rest (resume, final model, summary) the same way for all. The module is
imported only when a run uses it; a builder named by import path that returns no `Trainer` is one line.
"""

from __future__ import annotations

from typing import Any

from inspo_cli.registry import ALGORITHMS


def build_trainer(ctx):
    return ALGORITHMS.load(ctx.recipe.training.algorithm, _a_trainer)(ctx)


def _a_trainer(args: tuple, trainer: Any) -> str | None:
    from transformers import Trainer

    return None if isinstance(trainer, Trainer) else "a transformers Trainer (e.g. TRL's GRPOTrainer or SFTTrainer)"
