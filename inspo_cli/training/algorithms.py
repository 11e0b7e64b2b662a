"""Build the trainer a recipe's `training.algorithm` names (`inspo_cli.registry.ALGORITHMS`).

Each registry entry names a builder, "module:function" (a recipe may name its own the same way), that takes a
`inspo_cli.training.run.TrainingContext` and returns a transformers `Trainer` (TRL's GRPOTrainer or SFTTrainer,
extended); `run_training` does the rest (resume, final model, summary) the same way for all. The module is
imported only when a run uses it.
"""

from __future__ import annotations

from inspo_cli.registry import ALGORITHMS


def build_trainer(ctx):
    return ALGORITHMS.load(ctx.recipe.training.algorithm)(ctx)
