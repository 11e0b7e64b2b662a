"""The OPRO-style ablation (App. E): earlier instructions with their scores, asking for better ones.

    history_prompt([(c.text, 100 * c.weight) for c in ranked], n=6)

The score of an instruction is its importance weight (the moving average of its mean group reward) x 100, the
template's 0..100 scale. The template is the paper's, word for word (curly quotes included).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TYPE_CHECKING

from inspo_cli.instructions.candidate import normalize_text
from inspo_cli.instructions.proposers.base import _TAG_RULES, _check_n

if TYPE_CHECKING:
    from inspo_cli.config.sections import PopulationConfig
    from inspo_cli.instructions.population import Candidate, InstructionPopulation
    from inspo_cli.instructions.replay import ReplayBuffer

HISTORY_LIMIT = 20  # OPRO shows its 20 best-scored instructions; more would only lengthen the prompt

HISTORY_TEMPLATE = (
    "<history>\n"
    "{history}\n"
    "</history>\n"
    "\n"
    "Based on the above \u201cinstruction: score\u201d history for instructions with their scores, where the score "
    "ranges from 0 to 100, analyze what components can lead to better performance.\n"
    "Give {n} different but better candidates. Make it concise and effective. Be creative and diverse in your "
    "suggestions.\n" + _TAG_RULES
)


def prompt(
    parent: Candidate,
    population: InstructionPopulation,
    buffer: ReplayBuffer,
    config: PopulationConfig,
    rng: random.Random,
) -> str:
    return history_prompt(scored_history(population), config.candidates_per_call)


def history_prompt(scored_instructions: Sequence[tuple[str, float]], n: int) -> str:
    """The OPRO-style baseline: (instruction, score in 0..100) pairs, in the order given, asking for n better ones.

    OPRO lists its history from worst to best score, so the best examples are closest to the request.
    """
    _check_n(n)
    if not scored_instructions:
        raise ValueError("the history prompt needs at least one scored instruction")
    rows = []
    for i, (text, score) in enumerate(scored_instructions, start=1):
        if not 0.0 <= score <= 100.0:
            raise ValueError(f"score {score} of instruction {i} is outside 0..100; scale rewards by 100")
        rows.append(f"<ins_{i}> {text.strip()} </ins_{i}>\n<score_{i}> {round(score, 1):g} </score_{i}>")
    return HISTORY_TEMPLATE.format(history="\n".join(rows), n=n)


def scored_history(population: InstructionPopulation, limit: int = HISTORY_LIMIT) -> list[tuple[str, float]]:
    """(text, 100 x weight) of the best `limit` instructions with a measured weight, worst first (OPRO's order).

    Every candidate ever created counts, pruned ones included (their weight is the one they were pruned
    with); one whose weight was reset and not measured since is left out rather than shown as a false 0.
    A text recorded twice keeps its newest score. Scores are clipped to the template's 0..100.
    """
    scores: dict[str, tuple[str, float]] = {}
    for row in population.records():  # creation order, so a newer record of a text replaces the older
        if row["recent_means"]:
            scores[normalize_text(row["text"])] = (row["text"], min(100.0, max(0.0, 100.0 * row["weight"])))
    if not scores:  # nothing measured yet: the alive instructions, unscored, are all the history there is
        return [(c.text, 0.0) for c in population.alive()][-limit:]
    return sorted(scores.values(), key=lambda pair: pair[1])[-limit:]
