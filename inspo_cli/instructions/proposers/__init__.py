"""The optimizer's proposers (paper App. E): one file per way of asking an LLM for new instructions.

    prompt = load_proposer(recipe.population.proposer)(parent, population, buffer, recipe.population, rng)
    texts = parse_candidates(optimizer.complete(prompt), n=6, exclude=[parent.text])   # from .base

A proposer is a module with one function, `prompt(parent, population, buffer, config, rng) -> str`, that
builds the text sent to the optimizer LM. `PROPOSERS` maps the name a recipe uses (`population.proposer`) to
that module (`inspo_cli.registry`, where the config validates the name). To add a proposer, write
`proposers/<name>.py` and add its line to `inspo_cli/registry.py` (docs/contributing.md walks through one); a recipe
may also name one by import path (`package.module:prompt`), whose every prompt is checked to be a non-empty string.
Modules are imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from inspo_cli.registry import PROPOSERS

__all__ = ["PROPOSERS", "load_proposer"]  # PROPOSERS: re-exported, the registry's names

if TYPE_CHECKING:
    from inspo_cli.instructions.proposers.base import ProposalPrompt


def load_proposer(name: str) -> ProposalPrompt:
    """The `prompt` function of the proposer registered (or imported) as `name`."""
    return PROPOSERS.load(
        name,
        lambda args, prompt: (
            None
            if isinstance(prompt, str) and prompt.strip()
            else "a non-empty str (the prompt sent to the optimizer LM)"
        ),
    )
