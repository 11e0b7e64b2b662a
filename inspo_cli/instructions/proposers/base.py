"""What every proposer shares: its signature, the tag rules that end App. E's templates, and the parser for the
optimizer's answer.

`parse_candidates` is lenient about what LLMs actually return: prose around the tags, a missing closing tag,
numbering that skips or repeats, code fences; it drops empty and duplicate candidates (and over-long ones when
given a cap; evolution records those instead, see `evolution_report.TOO_LONG`). It is strict about one thing: in an
answer the provider cut off at its output limit (`truncated`), a last block without a closing tag ends where the cut
fell, mid-sentence, so it is no candidate (`cut_off_block` returns it, for the record). In an answer that ended on its
own, such a block is the model's finished text without its closing tag, and is kept: the local optimizer opens
`<ins_1>` for its 135M model, which, when it does stop before the limit, has seldom closed the tag.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from inspo_cli.instructions.candidate import normalize_text

if TYPE_CHECKING:
    from inspo_cli.config.sections import PopulationConfig
    from inspo_cli.instructions.population import Candidate, InstructionPopulation
    from inspo_cli.instructions.replay import ReplayBuffer

# The last lines of every App. E template, word for word; {n} is the number of candidates asked for.
_TAG_RULES = (
    "Make sure you include the same XML tags <>...</> as the original prompt in your improved prompts.\n"
    "For each XML tag, include both the beginning and ending tags, such as <answer>...</answer>.\n"
    "List the instruction candidates in <ins_1>...</ins_1> to <ins_{n}>...</ins_{n}> tags."
)


class ProposalPrompt(Protocol):
    """A proposer: the prompt asking the optimizer for `config.candidates_per_call` new instructions from `parent`."""

    def __call__(
        self,
        parent: Candidate,
        population: InstructionPopulation,
        buffer: ReplayBuffer,
        config: PopulationConfig,
        rng: random.Random,
    ) -> str: ...


class NothingToPropose(ValueError):
    """The proposer cannot build a prompt from what the population and the buffer hold; the evolution stops there
    (with this message as its stop reason) and training goes on with the population it has."""


class NoFailures(NothingToPropose):
    """Every rollout in the replay buffer earned the full reward: nothing for the reflection to work on."""


def _check_n(n: int) -> None:
    if n < 1:
        raise ValueError(f"the number of candidates to ask for must be >= 1, got {n}")


# -- parsing the optimizer's answer -------------------------------------------------------------------

# <ins_3>, <INS_3>, < ins_3 >, <ins-3>, <ins 3>; the number is not trusted, only the tag's position
_OPEN_TAG = re.compile(r"<\s*ins[_\- ]?\d*\s*>", re.IGNORECASE)
_CLOSE_TAG = re.compile(r"<\s*/\s*ins[_\- ]?\d*\s*>", re.IGNORECASE)
_FENCE_LINE = re.compile(r"^\s*```[\w-]*\s*$")
_HAS_WORD = re.compile(r"\w")  # "..." echoed from the template's "<ins_1>...</ins_1>" is not a candidate


def parse_candidates(
    text: str, n: int | None = None, max_chars: int | None = None, exclude: Sequence[str] = (), truncated: bool = False
) -> list[str]:
    """The instructions inside `<ins_k>...</ins_k>` tags, in order, at most n, each stripped.

    A block runs from its opening tag to the first closing tag (of any number) or, when that is missing, to
    the next opening tag or the end of the text. Blocks that are empty or punctuation only, longer than
    `max_chars` (when given), or equal (ignoring whitespace) to an earlier block or to a text in `exclude` (pass
    the parent, which optimizers like to echo back as `<ins_0>`) are dropped; so is the last block when it has no
    closing tag and the answer was `truncated` (see `cut_off_block`).
    """
    seen = {normalize_text(t) for t in exclude}
    candidates: list[str] = []
    blocks = _blocks(text)
    if truncated and blocks and not blocks[-1][1]:
        blocks = blocks[:-1]
    for body, _ in blocks:
        normalized = normalize_text(body)
        if not _HAS_WORD.search(body) or (max_chars is not None and len(body) > max_chars) or normalized in seen:
            continue
        seen.add(normalized)
        candidates.append(body)
        if n is not None and len(candidates) >= n:
            break
    return candidates


def cut_off_block(text: str) -> str | None:
    """The last block of a truncated answer when it has no closing tag (and holds a word): the unfinished
    candidate `parse_candidates(..., truncated=True)` drops. None when the answer has no such block."""
    blocks = _blocks(text)
    if blocks and not blocks[-1][1] and _HAS_WORD.search(blocks[-1][0]):
        return blocks[-1][0]
    return None


def _blocks(text: str) -> list[tuple[str, bool]]:
    """(body, ended) for every block, stripped of code fences and whitespace; `ended` is false only for a last
    block that runs to the end of the text, no closing tag and no next opening tag after it."""
    openings = list(_OPEN_TAG.finditer(text))
    blocks = []
    for i, opening in enumerate(openings):
        last = i + 1 == len(openings)
        body = text[opening.end() : len(text) if last else openings[i + 1].start()]
        closing = _CLOSE_TAG.search(body)
        if closing:
            body = body[: closing.start()]
        blocks.append((_strip_code_fence(body).strip(), closing is not None or not last))
    return blocks


def _strip_code_fence(body: str) -> str:
    """Drop a ``` line opening and/or closing the block, which chat models add around long text."""
    lines = body.strip().splitlines()
    if lines and _FENCE_LINE.match(lines[0]):
        lines = lines[1:]
    if lines and _FENCE_LINE.match(lines[-1]):
        lines = lines[:-1]
    return "\n".join(lines)
