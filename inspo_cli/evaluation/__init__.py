"""`inspo evaluate`'s machinery: the paper's inference methods (`methods/`), scoring, and Table-1 reports.

The names below are loaded on first access, so that importing `inspo_cli.evaluation.methods` for its registry
(as the config does) does not load the runner, the benchmarks and the rollout engine with it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from inspo_cli.evaluation.methods import METHOD_NAMES, METHODS, get_method
    from inspo_cli.evaluation.methods.base import MethodContext, Prediction
    from inspo_cli.evaluation.runner import averages, evaluate_methods

_EXPORTS = {
    "METHODS": "inspo_cli.evaluation.methods", "METHOD_NAMES": "inspo_cli.evaluation.methods",
    "get_method": "inspo_cli.evaluation.methods", "MethodContext": "inspo_cli.evaluation.methods.base",
    "Prediction": "inspo_cli.evaluation.methods.base", "averages": "inspo_cli.evaluation.runner",
    "evaluate_methods": "inspo_cli.evaluation.runner",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
