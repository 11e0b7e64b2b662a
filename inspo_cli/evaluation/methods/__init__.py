"""The paper's inference methods (Table 1), one file each, behind one signature: questions in, predictions out.

    predict = get_method("rag")
    predictions = predict(ctx, ["who founded Hokin Works?", ...])     # ctx: base.MethodContext

A method is a module with one function, `predict(ctx, questions) -> list[Prediction]` (see `base.py`).
`METHODS` (`inspo_cli.registry`) maps the name used by `evaluation.method` and `inspo evaluate --method` to that
module; the config validates against it and the CLI help lists it. To add a method, write `methods/<name>.py` and
add its line to `inspo_cli/registry.py`. Modules are imported on first use. A method named by import path has every
batch's predictions checked: a list of one `Prediction` per question, so a short list is an error, never a table
that scored fewer questions than it says.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from inspo_cli.evaluation.methods.base import Prediction
from inspo_cli.registry import METHODS

if TYPE_CHECKING:
    from inspo_cli.evaluation.methods.base import Method


def get_method(name: str) -> Method:
    """The `predict` function of the method registered (or imported) as `name`."""
    return METHODS.load(name, _one_prediction_per_question)


def _one_prediction_per_question(args: tuple, predictions: Any) -> str | None:

    questions = args[1]
    ok = (
        isinstance(predictions, list)
        and len(predictions) == len(questions)
        and all(
            isinstance(p, Prediction) and isinstance(p.answer, (str, type(None))) and isinstance(p.response, str)
            for p in predictions
        )
    )
    return (
        None
        if ok
        else (f"a list of {len(questions)} Prediction (answer: str or None, response: str), one per question, in order")
    )
