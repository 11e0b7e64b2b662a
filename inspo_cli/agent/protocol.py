"""The Search-R1 text protocol: how a prompt is built, how an action is read, how an observation is written.

A trajectory is plain text the policy writes turn by turn:

    <think> ... </think> <search> query </search>
    <information>Doc 1(Title: "T") text
    Doc 2(Title: "T") text</information>          <- inserted by the environment, masked out of the loss
    <think> ... </think> <answer> Paris </answer>

Everything here matches Search-R1 (`search_r1/llm_agent/generation.py`, `scripts/data_process/qa_search_*.py`) so
that checkpoints and instructions move between the two projects unchanged: the question is stripped and gets a
"?" when it has none, the user message is `<instruction> Question: <question>\n` (in the tokenizer's chat template
when it has one), passages are rendered with their quoted title line, an empty `<search></search>` is searched like
any other query, and an unparsable action gets Search-R1's corrective observation.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from retriever.corpus import Passage

STOP_STRINGS = ("</search>", "</answer>")

# Search-R1's own wording, so a policy trained with either project reacts to it the same way.
CORRECTIVE_OBSERVATION = (
    "\nMy previous action is invalid. If I want to search, I should put the query between <search> and "
    "</search>. If I want to give the final answer, I should put the answer between <answer> and </answer>. "
    "Let me try again.\n"
)

_ACTION_RE = re.compile(r"<(search|answer)>(.*?)</\1>", re.DOTALL)


@dataclass(frozen=True)
class Action:
    kind: str  # a tool's tag ("search", "calculate"), "answer" or "invalid"
    content: str = ""


def parse_action(text: str, tags: Sequence[str] = ("search",)) -> Action:
    """The first complete element of one turn's text among the tools' `tags` and `<answer>`, as Search-R1 reads
    `<search>`/`<answer>`."""
    pattern = _ACTION_RE if tuple(tags) == ("search",) else _action_re(tuple(tags))
    match = pattern.search(text)
    if match is None:
        return Action("invalid")
    return Action(match.group(1), match.group(2).strip())  # an empty query is searched too, as in Search-R1


def _action_re(tags: tuple[str, ...]) -> re.Pattern:
    return re.compile(rf"<({'|'.join(map(re.escape, (*tags, 'answer')))})>(.*?)</\1>", re.DOTALL)


def stop_strings(tags: Sequence[str]) -> tuple[str, ...]:
    """Where a turn's generation stops: the end of any tool's element or of the answer (Search-R1's two for
    [search])."""
    return tuple(f"</{tag}>" for tag in tags) + ("</answer>",)


def corrective_observation(elements: Sequence[tuple[str, str]]) -> str:
    """The observation after a turn without a valid action, naming each tool's element by (tag, argument):
    Search-R1's, word for word, for [("search", "query")]."""
    calls = " ".join(
        f"If I want to {tag}, I should put the {argument} between <{tag}> and </{tag}>." for tag, argument in elements
    )
    return (
        f"\nMy previous action is invalid. {calls} If I want to give the final answer, I should put the answer "
        "between <answer> and </answer>. Let me try again.\n"
    )


def format_passages(passages: Sequence[Passage]) -> str:
    """Search-R1's `_passages2string`: one `Doc i(Title: <title line>) <text>` line per passage."""
    lines = []
    for i, passage in enumerate(passages, start=1):
        title_line, _, text = passage.contents.partition("\n")
        lines.append(f"Doc {i}(Title: {title_line}) {text}")
    return "\n".join(lines)


def information_parts(body: str) -> tuple[str, str, str]:
    """(opening, body, closing) of Search-R1's observation block; the body alone is truncated when it is too long."""
    return "\n\n<information>", body, "</information>\n\n"


def search_r1_question(question: str) -> str:
    """Search-R1's question preprocessing, for training and test sets alike: strip, then end it with "?"."""
    question = question.strip()
    return question if question.endswith("?") else f"{question}?"


def user_message(instruction: str, question: str) -> str:
    """The instruction with the question: at `{question}` if the instruction has it, else appended."""
    question = search_r1_question(question)
    if "{question}" in instruction:
        return instruction.replace("{question}", question)
    return f"{instruction.strip()} Question: {question}\n"


def build_prompt(tokenizer, instruction: str, question: str, chat: bool) -> str:
    """The prompt text: the user message in the tokenizer's chat template (`chat`, see `models.uses_chat_template`),
    else plain text."""
    message = user_message(instruction, question)
    if not chat:
        return message
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": message}], tokenize=False, add_generation_prompt=True
    )
