"""One instruction for either protocol: an instruction written in the Search-R1 protocol's tags, rendered for
function calling from the tools' schemas.

Instructions are written once, in the paper's tags (Search-R1's App. F instruction, the worked example, whatever the
optimizer evolves), and `agent.protocol` decides how the policy reads them. Under `search-r1` an instruction is used
as written, byte for byte. Under `function-calling` a `<search>` element would tell the policy to write tags the
protocol does not read, so an ablation of the protocol would measure contradictory prompting instead; each tool's
element is rewritten into the call the protocol does read, written by the format itself (`write_call`: the tool's
name and its argument, from its schema), and Search-R1's `<information>` into the tags the chat template wraps a
tool's result in (`<tool_response>` with Qwen2.5's and Hermes' templates):

    <search> Hokin Works </search>               ->  <tool_call>
                                                     {"name": "search", "arguments": {"query": "Hokin Works"}}
                                                     </tool_call>
    put the query between <search> and </search> ->  put the query in the "query" argument of a call to search
    <information>Doc 1(...) ...</information>    ->  <tool_response>Doc 1(...) ...</tool_response>

`<think>`, `<answer>` and `{question}` are the same in both protocols and stay. Text that names no tool's tag (an
instruction written for function calling) is left as it is.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from inspo_cli.agent.tools.base import Tool

INFORMATION_TAGS = ("<information>", "</information>")
_OPENING_TAG = re.compile(r"<([A-Za-z_][\w-]*)>\s*$")  # the tag a template opens a tool result with, at the end
_OPENING_CALL = re.compile(r"<([A-Za-z_][\w-]*)>")  # the tag a written call opens with, at the start


def response_tags(opening: str, closing: str) -> tuple[str, str] | None:
    """The tags around a tool's result in the template's tool turn (`<tool_response>`, `</tool_response>` in
    Qwen2.5's), from the text the format inserts before and after it; None for a template that writes none."""
    match = _OPENING_TAG.search(opening)
    if match is None or not closing.lstrip().startswith(f"</{match.group(1)}>"):
        return None
    return f"<{match.group(1)}>", f"</{match.group(1)}>"


def function_calling_instruction(
    instruction: str, tools: Sequence[Tool], write_call: Callable[[Tool, str], str], result_tags: tuple[str, str] | None
) -> str:
    """`instruction` with each tool's Search-R1 element made a function call (`write_call(tool, argument)`) and the
    `<information>` tags made `result_tags` (kept when None)."""
    for tool in tools:
        opening, closing = re.escape(f"<{tool.tag}>"), re.escape(f"</{tool.tag}>")
        # "between <search> and </search>" names the element's two tags, not a call whose text is "and"
        named = f'in the "{tool.argument}" argument of a call to {tool.name}'
        instruction = re.sub(rf"between\s+{opening}\s+and\s+{closing}", lambda _: named, instruction)
        instruction = re.sub(
            rf"{opening}([^<]*){closing}",  # an element's text, not a span of other tags
            _call_writer(write_call, tool),
            instruction,
        )
        # a tag named on its own ("use the <search> tag") is the call's own tag in this protocol (<tool_call>)
        call_tag = _OPENING_CALL.match(write_call(tool, ""))
        if call_tag is not None:
            instruction = instruction.replace(f"<{tool.tag}>", f"<{call_tag.group(1)}>")
            instruction = instruction.replace(f"</{tool.tag}>", f"</{call_tag.group(1)}>")
    if result_tags is not None:
        for old, new in zip(INFORMATION_TAGS, result_tags):
            instruction = instruction.replace(old, new)
    return instruction


def _call_writer(write_call: Callable[[Tool, str], str], tool: Tool) -> Callable[[re.Match[str]], str]:
    def write(match: re.Match[str]) -> str:
        return write_call(tool, match.group(1).strip())

    return write
