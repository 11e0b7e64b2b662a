"""The paper's inference methods (Table 1), one file each, behind one signature: questions in, predictions out.

    predict = get_method("rag")
    predictions = predict(ctx, ["who founded Hokin Works?", ...])     # ctx: base.MethodContext

A method is a module with one function, `predict(ctx, questions) -> list[Prediction]` (see `base.py`).
`METHODS` maps the name used by `evaluation.method` and `inspo evaluate --method` to that module; the config
validates against it and the CLI help lists it. To add a method, write `methods/<name>.py` and add its line below.
Modules are imported on first use, so this file imports nothing: the config can read the names cheaply.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from inspo_cli.evaluation.methods.base import Method

METHODS: dict[str, str] = {  # in the paper's Table 1 order, which reports follow
    "direct": "inspo_cli.evaluation.methods.direct",  # FlashRAG's direct generation
    "rag": "inspo_cli.evaluation.methods.rag",  # FlashRAG's standard RAG
    "ircot": "inspo_cli.evaluation.methods.ircot",  # IRCoT (Trivedi et al., 2023)
    "search-o1": "inspo_cli.evaluation.methods.search_o1",  # Search-o1 (Li et al., 2025)
    "agent": "inspo_cli.evaluation.methods.agent",  # the Search-R1 protocol with an instruction
}
METHOD_NAMES = tuple(METHODS)


def get_method(name: str) -> Method:
    """The `predict` function of the method registered as `name`."""
    if name not in METHODS:
        raise ValueError(f"unknown inference method {name!r}; registered: {', '.join(METHODS)} "
                         "(inspo_cli.evaluation.methods.METHODS)")
    return importlib.import_module(METHODS[name]).predict
