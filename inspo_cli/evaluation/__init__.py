"""`inspo evaluate`'s machinery: the paper's inference methods, scoring, and Table-1 reports."""

from inspo_cli.evaluation.methods import METHOD_NAMES, MethodContext, Prediction, get_method
from inspo_cli.evaluation.runner import averages, evaluate_methods

__all__ = ["METHOD_NAMES", "MethodContext", "Prediction", "averages", "evaluate_methods", "get_method"]
