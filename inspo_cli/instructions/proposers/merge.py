"""Beyond the paper: merge two parents (GEPA's `use_merge`, E-SPL's recombination), in the style of App. E.

    merge_prompt(first.text, first_failures, second.text, second_failures, n=6)

The parent evolution hands over is the first; the second is the best other parent by weight (so it needs
`population.n_parent` >= 2, which the recipe checks). The optimizer sees both instructions, each with rollouts it got
wrong (`failures_per_call` split between them, the first parent's half rounded up), and is asked for candidates that
keep what works in each. A candidate is verified against the first parent, as every candidate is against the parent
it was proposed from.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TYPE_CHECKING

from inspo_cli.instructions.proposers.base import _TAG_RULES, NoFailures, NothingToPropose, _check_n
from inspo_cli.instructions.proposers.reflection import Failure, examples_block

if TYPE_CHECKING:
    from inspo_cli.config.sections import PopulationConfig
    from inspo_cli.instructions.population import Candidate, InstructionPopulation
    from inspo_cli.instructions.replay import ReplayBuffer

MERGE_TEMPLATE = (
    "The first prompt is:\n"
    "\n"
    "<ins_0>\n"
    "{first}\n"
    "</ins_0>\n"
    "\n"
    "It gets the following examples wrong:\n"
    "\n"
    "<example>\n"
    "{first_examples}\n"
    "</example>\n"
    "\n"
    "The second prompt is:\n"
    "\n"
    "<ins_0>\n"
    "{second}\n"
    "</ins_0>\n"
    "\n"
    "It gets the following examples wrong:\n"
    "\n"
    "<example>\n"
    "{second_examples}\n"
    "</example>\n"
    "\n"
    "Analyze what each prompt does well, and the reasons behind the mistakes of each.\n"
    "Now take both into account. Merge the two prompts into {n} different but better candidates that keep the "
    "strengths of each and avoid the mistakes of both.\n" + _TAG_RULES
)


def prompt(
    parent: Candidate,
    population: InstructionPopulation,
    buffer: ReplayBuffer,
    config: PopulationConfig,
    rng: random.Random,
) -> str:
    """`parent` and the best other parent, each with its own latest failures."""
    others = [c for c in population.parents() if c.id != parent.id]
    if not others:
        raise NothingToPropose(
            "the merge proposer needs two parents, and the population has one; set population.n_parent to 2 or more"
        )
    second = others[0]
    first_k = (config.failures_per_call + 1) // 2
    first_failures = buffer.failures(first_k, rng, instruction_id=parent.id)
    second_failures = buffer.failures(max(config.failures_per_call - first_k, 1), rng, instruction_id=second.id)
    if not first_failures and not second_failures:
        raise NoFailures(
            "the merge proposer needs failed rollouts to show, and the replay buffer has none (every "
            "stored rollout earned the full reward)"
        )
    return merge_prompt(parent.text, first_failures, second.text, second_failures, config.candidates_per_call)


def merge_prompt(
    first: str, first_failures: Sequence[Failure], second: str, second_failures: Sequence[Failure], n: int
) -> str:
    """Two instructions, each with rollouts it got wrong, asking for n merged candidates."""
    _check_n(n)
    return MERGE_TEMPLATE.format(
        first=first.strip(),
        first_examples=examples_block(first_failures) or "(none)",
        second=second.strip(),
        second_examples=examples_block(second_failures) or "(none)",
        n=n,
    )
