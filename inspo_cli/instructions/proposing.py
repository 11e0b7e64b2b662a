"""Asking the optimizer LM for new instructions: a proposer's prompt, its answer as candidates, the initial rewrites.

The proposer is the one registered as `population.proposer` (`proposers.PROPOSERS`); the rewrites fill the initial
population from the recipe's instruction.

    prompt = proposal_prompt(config.proposer, parent, population, buffer, config, rng)   # what evolution asks
    texts = propose(config.proposer, parent, population, buffer, lm, config, rng)       # one call's candidates
    rewrites = initial_rewrites(instruction, lm, n=3, keep=recipe_instructions)

An answer cut off at the output limit loses only its unfinished last block (`proposers.base.parse_candidates`).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from typing import TYPE_CHECKING

from inspo_cli.instructions.candidate import Candidate
from inspo_cli.instructions.population import InstructionPopulation
from inspo_cli.instructions.proposers import load_proposer
from inspo_cli.instructions.proposers.base import parse_candidates
from inspo_cli.instructions.proposers.paraphrase import paraphrase_prompt
from inspo_cli.instructions.providers.language_model import LanguageModel, ask, how_it_stopped
from inspo_cli.instructions.replay import ReplayBuffer

if TYPE_CHECKING:
    from inspo_cli.config.sections import PopulationConfig

logger = logging.getLogger(__name__)


def proposal_prompt(
    proposer: str,
    parent: Candidate,
    population: InstructionPopulation,
    buffer: ReplayBuffer,
    config: PopulationConfig,
    rng: random.Random,
) -> str:
    """The prompt of the proposer registered as `proposer` (`proposers.PROPOSERS`), asking the optimizer for
    `candidates_per_call` new instructions from `parent`. The reflection proposer raises `NoFailures` when the
    replay buffer holds no failed rollout."""
    return load_proposer(proposer)(parent, population, buffer, config, rng)


def propose(
    proposer: str,
    parent: Candidate,
    population: InstructionPopulation,
    buffer: ReplayBuffer,
    lm: LanguageModel,
    config: PopulationConfig,
    rng: random.Random,
) -> list[str]:
    """Up to `candidates_per_call` new instructions from one optimizer call, none equal to an alive one (nor the
    unfinished last block of an answer cut off at the output limit)."""
    answer = ask(lm, proposal_prompt(proposer, parent, population, buffer, config, rng))
    return parse_candidates(
        answer.text,
        n=config.candidates_per_call,
        max_chars=config.max_instruction_chars,
        exclude=[c.text for c in population.alive()],
        truncated=answer.truncated,
    )


def initial_rewrites(
    text: str, lm: LanguageModel, n: int, keep: Sequence[str] = (), max_chars: int | None = None
) -> list[str]:
    """Up to n distinct rewrites of `text` for the initial population, from one paraphrase-template call.

    Neither the original nor any text in `keep` (the recipe's other instructions) is among them; the caller builds
    the population as `[*recipe_instructions, *rewrites]`. Fewer than n come back when the optimizer gave fewer
    usable ones (duplicates, empty blocks, blocks over `max_chars`, or the unfinished last block of an answer cut
    off at the output limit: logged as a warning, and counted in the optimizer's accounting).
    """
    if not text.strip():
        raise ValueError("the instruction to rewrite is empty")
    if n <= 0:
        return []
    answer = ask(lm, paraphrase_prompt(text, n))
    if answer.truncated:
        logger.warning(
            "the optimizer's answer with the initial rewrites %s (an unfinished last rewrite is dropped)",
            how_it_stopped(answer),
        )
    return parse_candidates(answer.text, n=n, max_chars=max_chars, exclude=[text, *keep], truncated=answer.truncated)
