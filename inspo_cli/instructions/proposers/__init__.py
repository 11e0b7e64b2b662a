"""The optimizer's proposers (paper App. E): one file per way of asking an LLM for new instructions.

    prompt = load_proposer(recipe.population.proposer)(parent, population, buffer, recipe.population, rng)
    texts = parse_candidates(optimizer.complete(prompt), n=6, exclude=[parent.text])   # from .base

A proposer is a module with one function, `prompt(parent, population, buffer, config, rng) -> str`, that
builds the text sent to the optimizer LM. `PROPOSERS` maps the name a recipe uses (`population.proposer`) to
that module; the config validates against it and evolution looks the name up in it. To add a proposer, write
`proposers/<name>.py` and add its line below. Modules are imported on first use, so this file imports
nothing: the config can read the names without loading the proposers (or creating an import cycle).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from inspo_cli.instructions.proposers.base import ProposalPrompt

PROPOSERS: dict[str, str] = {
    "reflection": "inspo_cli.instructions.proposers.reflection",  # INSPO: reflect on failed rollouts
    "paraphrase": "inspo_cli.instructions.proposers.paraphrase",  # ablation: rewrite without feedback
    "history": "inspo_cli.instructions.proposers.history",  # ablation: OPRO's scored history
}


def load_proposer(name: str) -> ProposalPrompt:
    """The `prompt` function of the proposer registered as `name`."""
    if name not in PROPOSERS:
        raise ValueError(f"unknown proposer {name!r}; registered: {', '.join(PROPOSERS)} "
                         "(inspo_cli.instructions.proposers.PROPOSERS)")
    return importlib.import_module(PROPOSERS[name]).prompt
