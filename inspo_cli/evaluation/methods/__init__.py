"""The paper's inference methods (Table 1), one file each, behind one signature: questions in, predictions out.

    predict = get_method("rag")
    predictions = predict(ctx, ["who founded Hokin Works?", ...])     # ctx: base.MethodContext

A method is a module with one function, `predict(ctx, questions) -> list[Prediction]` (see `base.py`).
`METHODS` (`inspo_cli.registry`) maps the name used by `evaluation.method` and `inspo evaluate --method` to that
module; the config validates against it and the CLI help lists it. To add a method, write `methods/<name>.py` and
add its line to `inspo_cli/registry.py`. Modules are imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from inspo_cli.registry import METHODS

if TYPE_CHECKING:
    from inspo_cli.evaluation.methods.base import Method



def get_method(name: str) -> Method:
    """The `predict` function of the method registered (or imported) as `name`."""
    return METHODS.load(name)
