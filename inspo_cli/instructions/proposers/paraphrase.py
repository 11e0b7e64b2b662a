"""The paraphrasing ablation (App. E): the parent instruction alone, rewritten without feedback.

    paraphrase_prompt(parent.text, n=6)

Also the template that fills the initial population with rewrites (`proposing.initial_rewrites`). The template
is the paper's, word for word; only {Instruction} and the number of candidates (the 6 it prints) are filled.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from inspo_cli.instructions.proposers.base import _TAG_RULES, _check_n

if TYPE_CHECKING:
    from inspo_cli.config.sections import PopulationConfig
    from inspo_cli.instructions.population import Candidate, InstructionPopulation
    from inspo_cli.instructions.replay import ReplayBuffer

PARAPHRASE_TEMPLATE = (
    "<ins_0> {instruction} </ins_0>\n\nImprove the above prompt.\nGive {n} different candidates.\n" + _TAG_RULES
)


def prompt(
    parent: Candidate,
    population: InstructionPopulation,
    buffer: ReplayBuffer,
    config: PopulationConfig,
    rng: random.Random,
) -> str:
    return paraphrase_prompt(parent.text, config.candidates_per_call)


def paraphrase_prompt(instruction: str, n: int) -> str:
    """The paraphrasing baseline: the parent instruction alone, asking for n improved versions."""
    _check_n(n)
    return PARAPHRASE_TEMPLATE.format(instruction=instruction.strip(), n=n)
