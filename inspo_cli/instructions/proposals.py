"""The optimizer LM's prompts (paper App. E) and the parser for its answers.

Three ways to ask an LLM for new instructions, as in the paper's ablation:

    reflection_prompt(parent.text, buffer.failures(4, rng), n=6)   # INSPO: reflect on failed rollouts
    paraphrase_prompt(parent.text, n=6)                            # rewrite without feedback
    history_prompt([(c.text, 100 * c.weight) for c in ranked], n=6)  # OPRO-style: instructions with scores
    texts = parse_candidates(optimizer.complete(prompt), n=6, exclude=[parent.text])

The template text is the paper's, word for word (curly quotes and the `<>...</>` included); only its
placeholders are filled: {Instruction}, the rollouts and ground truths, the "instruction: score" history,
and the number of candidates (the paper's N, and the 6 printed in the paraphrasing template). The code
fences around blocks in the paper's typesetting are not part of the prompts.

A rollout in the reflection prompt is the question followed by the policy's response, as App. F prints a
rollout (`Question: ...` then the response); several failures share one `<example>` block, one
Response/Correct answer pair after another, as the template's `...` shows.

`parse_candidates` is lenient about what LLMs actually return: prose around the tags, a missing closing tag,
numbering that skips or repeats, code fences; it drops empty and duplicate candidates (and over-long ones when
given a cap; evolution records those instead, see `evolution.TOO_LONG`).
"""

from __future__ import annotations

import re
from typing import Protocol, Sequence

from inspo_cli.instructions.population import normalize_text

_TAG_RULES = (
    "Make sure you include the same XML tags <>...</> as the original prompt in your improved prompts.\n"
    "For each XML tag, include both the beginning and ending tags, such as <answer>...</answer>.\n"
    "List the instruction candidates in <ins_1>...</ins_1> to <ins_{n}>...</ins_{n}> tags."
)

PARAPHRASE_TEMPLATE = (
    "<ins_0> {instruction} </ins_0>\n"
    "\n"
    "Improve the above prompt.\n"
    "Give {n} different candidates.\n"
    + _TAG_RULES
)

HISTORY_TEMPLATE = (
    "<history>\n"
    "{history}\n"
    "</history>\n"
    "\n"
    "Based on the above \u201cinstruction: score\u201d history for instructions with their scores, where the score "
    "ranges from 0 to 100, analyze what components can lead to better performance.\n"
    "Give {n} different but better candidates. Make it concise and effective. Be creative and diverse in your "
    "suggestions.\n"
    + _TAG_RULES
)

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
    "candidates.\n"
    + _TAG_RULES
)


class Failure(Protocol):
    """What the reflection prompt needs from a failed rollout (a replay `Experience` has it)."""

    question: str
    response: str
    golden_answers: Sequence[str]


def reflection_prompt(instruction: str, failures: Sequence[Failure], n: int) -> str:
    """INSPO's optimizer prompt: the parent instruction and rollouts it got wrong, asking for n revisions."""
    _check_n(n)
    if not failures:
        raise ValueError("the reflection prompt needs at least one failed rollout")
    examples = "\n\n".join(
        f"Response: Question: {f.question.strip()}\n{f.response.strip()}\n"
        f"Correct answer: {' | '.join(a.strip() for a in f.golden_answers)}"
        for f in failures
    )
    return REFLECTION_TEMPLATE.format(instruction=instruction.strip(), examples=examples, n=n)


def paraphrase_prompt(instruction: str, n: int) -> str:
    """The paraphrasing baseline: the parent instruction alone, asking for n improved versions."""
    _check_n(n)
    return PARAPHRASE_TEMPLATE.format(instruction=instruction.strip(), n=n)


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


def _check_n(n: int) -> None:
    if n < 1:
        raise ValueError(f"the number of candidates to ask for must be >= 1, got {n}")


# -- parsing the optimizer's answer -------------------------------------------------------------------

# <ins_3>, <INS_3>, < ins_3 >, <ins-3>, <ins 3>; the number is not trusted, only the tag's position
_OPEN_TAG = re.compile(r"<\s*ins[_\- ]?\d*\s*>", re.IGNORECASE)
_CLOSE_TAG = re.compile(r"<\s*/\s*ins[_\- ]?\d*\s*>", re.IGNORECASE)
_FENCE_LINE = re.compile(r"^\s*```[\w-]*\s*$")
_HAS_WORD = re.compile(r"\w")  # "..." echoed from the template's "<ins_1>...</ins_1>" is not a candidate


def parse_candidates(text: str, n: int | None = None, max_chars: int | None = None,
                     exclude: Sequence[str] = ()) -> list[str]:
    """The instructions inside `<ins_k>...</ins_k>` tags, in order, at most n, each stripped.

    A block runs from its opening tag to the first closing tag (of any number) or, when that is missing, to
    the next opening tag or the end of the text. Blocks that are empty or punctuation only, longer than
    `max_chars` (when given), or equal (ignoring whitespace) to an earlier block or to a text in `exclude` (pass
    the parent, which optimizers like to echo back as `<ins_0>`) are dropped.
    """
    openings = list(_OPEN_TAG.finditer(text))
    seen = {normalize_text(t) for t in exclude}
    candidates: list[str] = []
    for i, opening in enumerate(openings):
        end = openings[i + 1].start() if i + 1 < len(openings) else len(text)
        body = text[opening.end():end]
        closing = _CLOSE_TAG.search(body)
        if closing:
            body = body[:closing.start()]
        body = _strip_code_fence(body).strip()
        normalized = normalize_text(body)
        if not _HAS_WORD.search(body) or (max_chars is not None and len(body) > max_chars) or normalized in seen:
            continue
        seen.add(normalized)
        candidates.append(body)
        if n is not None and len(candidates) >= n:
            break
    return candidates


def _strip_code_fence(body: str) -> str:
    """Drop a ``` line opening and/or closing the block, which chat models add around long text."""
    lines = body.strip().splitlines()
    if lines and _FENCE_LINE.match(lines[0]):
        lines = lines[1:]
    if lines and _FENCE_LINE.match(lines[-1]):
        lines = lines[:-1]
    return "\n".join(lines)
