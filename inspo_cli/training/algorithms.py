"""Training algorithms by name, for `training.algorithm`: one registry line each.

Each entry is "module:class" of a trainer built with the keyword arguments `inspo_cli.training.run` passes
(`SearchGRPOTrainer`'s); modules are imported only when a run uses them, so the config can validate a recipe
against these names without importing torch or TRL.
"""

from __future__ import annotations

import importlib

ALGORITHMS = {
    "grpo": "inspo_cli.training.trainer:SearchGRPOTrainer",  # the paper's (eq. 2) through TRL's GRPOTrainer
}


def trainer_class(name: str):
    module, _, attribute = ALGORITHMS[name].partition(":")
    return getattr(importlib.import_module(module), attribute)
