"""INSPO's proposer (§3.3, App. E): show the optimizer the parent and rollouts it got wrong, ask for revisions.

    reflection_prompt(parent.text, buffer.failures(4, rng), n=6)

A rollout is the question followed by the policy's response, as App. F prints a rollout (`Question: ...` then
the response); several failures share one `<example>` block, one Response/Correct answer pair after another,
as the template's `...` shows. The template is the paper's, word for word; only its placeholders are filled.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from inspo_cli.instructions.proposers.base import _TAG_RULES, NoFailures, _check_n

if TYPE_CHECKING:
    from inspo_cli.config.sections import PopulationConfig
    from inspo_cli.instructions.population import Candidate, InstructionPopulation
    from inspo_cli.instructions.replay import ReplayBuffer

REFLECTION_TEMPLATE = (
    "The initial prompt is:\n"
    "\n"
    "<ins_0>\n"
    "{instruction}\n"
    "</ins_0>\n"
    "\n"
    "However, it still gets the following examples wrong:\n"
    "\n"
    "<example>\n"
    "{examples}\n"
    "</example>\n"
    "\n"
    "Analyze the reasons behind these mistakes and why the prompt could have gotten these examples wrong.\n"
    "Now take the reasons into account. Revise and improve the initial prompt by giving {n} different but better "
    "candidates.\n" + _TAG_RULES
)


class Failure(Protocol):
    """What the reflection prompt needs from a failed rollout (a replay `Experience` has it); read-only, as a frozen
    dataclass's fields are."""

    @property
    def question(self) -> str: ...

    @property
    def response(self) -> str: ...

    @property
    def golden_answers(self) -> Sequence[str]: ...


def prompt(
    parent: Candidate,
    population: InstructionPopulation,
    buffer: ReplayBuffer,
    config: PopulationConfig,
    rng: random.Random,
) -> str:
    """The parent's own latest failures first ("it still gets the following examples wrong")."""
    failures = buffer.failures(config.failures_per_call, rng, instruction_id=parent.id)
    if not failures:
        raise NoFailures(
            "the reflection proposer needs failed rollouts to reflect on, and the replay buffer "
            "has none (every stored rollout earned the full reward)"
        )
    return reflection_prompt(parent.text, failures, config.candidates_per_call)


def reflection_prompt(instruction: str, failures: Sequence[Failure], n: int) -> str:
    """INSPO's optimizer prompt: the parent instruction and rollouts it got wrong, asking for n revisions."""
    _check_n(n)
    if not failures:
        raise ValueError("the reflection prompt needs at least one failed rollout")
    return REFLECTION_TEMPLATE.format(instruction=instruction.strip(), examples=examples_block(failures), n=n)


def examples_block(failures: Sequence[Failure]) -> str:
    """The rollouts inside an `<example>` block: Response (the question, then the policy's response), Correct
    answer; one after another."""
    return "\n\n".join(
        f"Response: Question: {f.question.strip()}\n{f.response.strip()}\n"
        f"Correct answer: {' | '.join(a.strip() for a in f.golden_answers)}"
        for f in failures
    )
