"""How the policy calls its tools (`agent.protocol`): how a prompt shows them, how a call is read and how its result
is written back, for the rollout engine and the world's oracle.

- `search-r1` (the paper's): every tool has its own element, `<search> query </search>`, `<calculate> 1 + 2
  </calculate>`, whose text fills the tool's one parameter; its result comes back as Search-R1's `<information>`
  block (`Tool.observation_parts`); a turn with no complete element gets the corrective observation
  (`protocol.corrective_observation`), plain text in the same turn. Token for token what the engine did before tools.
- `function-calling`: the tool schemas go through the chat template (`apply_chat_template(..., tools=...)`); a call
  is the template's format, Qwen2.5's (Hermes'): `<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`,
  parsed strictly (one JSON object with exactly `name` and `arguments`, a tool of the agent, arguments that fit its
  schema); the result is a message in the tool role, spliced in exactly as the template renders it; a malformed call
  gets an error observation in the tool role; a turn with neither a call nor an answer gets the corrective
  observation as a user message. A tokenizer whose template does not render tools (SmolLM2's; a tokenizer with no
  template) is rendered with Qwen2.5-Instruct's template (`QWEN25_TEMPLATE`) and a neutral system message,
  `FUNCTION_CALLING_SYSTEM`.

In both, the answer is `<answer> ... </answer>` in the policy's own text, and generation stops at the end of a call
or of the answer. docs/tools.md shows the token layouts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inspo_cli.agent.instruction_rendering import function_calling_instruction, response_tags
from inspo_cli.agent.protocol import (
    build_prompt,
    corrective_observation,
    information_parts,
    parse_action,
    stop_strings,
    user_message,
)
from inspo_cli.agent.tools.base import Observation, Tool
from inspo_cli.errors import InspoError
from inspo_cli.registry import PROTOCOLS

# Qwen2.5-Instruct's chat template (tokenizer_config.json of Qwen/Qwen2.5-*-Instruct, Apache-2.0), used for
# function calling with a tokenizer whose own template does not render tools.
QWEN25_TEMPLATE = (Path(__file__).parent / "qwen2.5_chat_template.jinja").read_text(encoding="utf-8")

FUNCTION_CALLING_SYSTEM = "You are a helpful assistant."  # with QWEN25_TEMPLATE only: not Qwen's "You are Qwen"

FUNCTION_CALLING_CORRECTIVE = (
    'My previous action is invalid. If I want to call a tool, I should write <tool_call>\n{"name": <tool name>, '
    '"arguments": <arguments as a JSON object>}\n</tool_call>. If I want to give the final answer, I should put '
    "the answer between <answer> and </answer>. Let me try again."
)

_ANSWER_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_FUNCTION_RE = re.compile(r"<tool_call>(.*?)</tool_call>|<answer>(.*?)</answer>", re.DOTALL)


@dataclass(frozen=True)
class Call:
    """One turn's action: `answer` (content: the answer's text), `call` (a tool with its arguments; content: the
    text of the tool's main argument, what a search records as its query), or `invalid` (no complete call or
    answer). A malformed call is a `call` with `error` set: the error observation's text; `tool` is None when the
    call named no tool of the agent."""

    kind: str
    tool: Tool | None = None
    arguments: Mapping[str, Any] = field(default_factory=dict)
    content: str = ""
    error: str | None = None


Parts = tuple[str, str, str]  # (opening, body, closing) of an inserted observation; only the body is ever cut


class SearchR1Format:
    """Search-R1's tags: `<tag> argument </tag>` per tool, results in `<information>`."""

    name = "search-r1"

    def __init__(self, tools: Sequence[Tool], tokenizer, chat: bool):
        self.tools, self.tokenizer, self.chat = list(tools), tokenizer, chat
        self._by_tag = {tool.tag: tool for tool in self.tools}
        self.stop = stop_strings(list(self._by_tag))
        self.corrective: Parts = ("", corrective_observation([(t.tag, t.argument) for t in self.tools]), "")

    def instruction_for(self, instruction: str) -> str:
        """The instruction as this protocol shows it: as written (instructions are written in these tags)."""
        return instruction

    def prompt_ids(self, instruction: str, question: str) -> list[int]:
        text = build_prompt(self.tokenizer, instruction, question, self.chat)
        # A chat template already writes its BOS; plain text gets the tokenizer's usual special tokens.
        return self.tokenizer(text, add_special_tokens=not self.chat)["input_ids"]

    def parse(self, text: str) -> Call:
        """The first complete element among the tools' and `<answer>`, as Search-R1 reads `<search>`/`<answer>`."""
        action = parse_action(text, list(self._by_tag))
        if action.kind in ("answer", "invalid"):
            return Call(action.kind, content=action.content)
        tool = self._by_tag[action.kind]
        return Call("call", tool, {tool.argument: action.content}, action.content)

    def observation_parts(self, tool: Tool, observation: Observation) -> Parts:
        return tool.observation_parts(observation)

    def error_parts(self, message: str) -> Parts:
        return information_parts(message)

    def write_call(self, tool: Tool, argument: str) -> str:
        """A call as the policy writes it (the world's oracle writes its turns with this)."""
        return f"<{tool.tag}> {argument} </{tool.tag}>"


class FunctionCallingFormat:
    """The chat template's function calling: Qwen2.5/Hermes `<tool_call>` JSON, results in the tool role."""

    name = "function-calling"
    stop = ("</tool_call>", "</answer>")

    def __init__(self, tools: Sequence[Tool], tokenizer, chat: bool = True):
        self.tools, self.tokenizer = list(tools), tokenizer
        self._by_name = {tool.name: tool for tool in self.tools}
        self.schemas = [tool.schema() for tool in self.tools]
        self.own_template = renders_tools(tokenizer, self.schemas)
        self._system = [] if self.own_template else [{"role": "system", "content": FUNCTION_CALLING_SYSTEM}]
        self._tool_turn = self._splice("tool")
        user_opening, user_closing = self._splice("user")
        self.corrective: Parts = (user_opening, FUNCTION_CALLING_CORRECTIVE, user_closing)
        self._result_tags = response_tags(*self._tool_turn)

    def _render(self, messages: list[dict], generation_prompt: bool) -> str:
        template = None if self.own_template else QWEN25_TEMPLATE
        return self.tokenizer.apply_chat_template(
            [*self._system, *messages],
            tools=self.schemas,
            tokenize=False,
            add_generation_prompt=generation_prompt,
            chat_template=template,
        )

    def _splice(self, role: str) -> tuple[str, str]:
        """What the template writes between the end of an assistant's text and a `role` message's content, and
        after that content up to the next assistant turn: the opening and closing of an inserted observation."""
        said, result = "ASSISTANT_TEXT_9f3c", "INSERTED_TEXT_9f3c"
        conversation = [{"role": "user", "content": "QUESTION_9f3c"}, {"role": "assistant", "content": said}]
        refused = (
            f"agent.protocol=function-calling: the tokenizer's chat template does not render a {role} message "
            "after an assistant's as a continuation of the conversation, so inspo cannot insert tool results "
            "into it; use agent.protocol=search-r1"
        )
        try:
            before = self._render(conversation, False)
            after = self._render([*conversation, {"role": role, "content": result}], True)
        except Exception as error:  # a template that raises on the role (Gemma's: roles must alternate)
            raise InspoError(f"{refused} (it raised {type(error).__name__}: {str(error)[:120]})") from None
        if not after.startswith(before) or said not in before or after[len(before) :].count(result) != 1:
            raise InspoError(refused)
        tail = before[before.rindex(said) + len(said) :]
        middle = after[len(before) :]
        opening, _, closing = middle.partition(result)
        return tail + opening, closing

    def instruction_for(self, instruction: str) -> str:
        """The instruction as this protocol shows it: its Search-R1 elements made calls (`instruction_rendering`)."""
        return function_calling_instruction(instruction, self.tools, self.write_call, self._result_tags)

    def prompt_ids(self, instruction: str, question: str) -> list[int]:
        message = user_message(self.instruction_for(instruction), question)
        text = self._render([{"role": "user", "content": message}], True)
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]  # the template writes any BOS itself

    def parse(self, text: str) -> Call:
        """The first complete `<tool_call>` or `<answer>`; a call that is not one JSON object with exactly `name`
        (a tool of the agent) and `arguments` (fitting its schema) is a malformed call."""
        match = _FUNCTION_RE.search(text)
        if match is None:
            return Call("invalid")
        if match.group(1) is None:
            return Call("answer", content=match.group(2).strip())
        body = match.group(1)
        if json_depth(body) > MAX_JSON_DEPTH:  # json.loads recurses per level: ~1,000 levels is a RecursionError
            return Call("call", error=f"the tool call nests more than {MAX_JSON_DEPTH} levels deep")
        try:
            call = valid_text(json.loads(body))
        except ValueError as error:
            return Call("call", error=f"the tool call is not valid JSON ({str(error)[:120]})")
        if not isinstance(call, dict) or set(call) != {"name", "arguments"}:
            return Call("call", error='a tool call is one JSON object with exactly "name" and "arguments"')
        tool = self._by_name.get(call["name"]) if isinstance(call["name"], str) else None
        if tool is None:
            return Call(
                "call",
                error=f"there is no tool {json.dumps(call['name'])[:80]}; the tools are {', '.join(self._by_name)}",
            )
        arguments = call["arguments"]
        problem = argument_problem(tool.parameters, arguments)
        if problem is not None:
            return Call("call", tool, {}, "", error=f"{tool.name}: {problem}")
        return Call("call", tool, arguments, str(arguments.get(tool.argument, "")))

    def observation_parts(self, tool: Tool, observation: Observation) -> Parts:
        return self._tool_turn[0], observation.text, self._tool_turn[1]

    def error_parts(self, message: str) -> Parts:
        return self._tool_turn[0], message, self._tool_turn[1]

    def write_call(self, tool: Tool, argument: str) -> str:
        """A call as Qwen2.5's template writes an assistant's tool call."""
        return f"<tool_call>\n{json.dumps({'name': tool.name, 'arguments': {tool.argument: argument}})}\n</tool_call>"


def renders_tools(tokenizer, schemas: list[dict]) -> bool:
    """Whether the tokenizer's own chat template shows `tools=` (Qwen2.5's does; SmolLM2's ignores them)."""
    if getattr(tokenizer, "chat_template", None) is None:
        return False
    messages = [{"role": "user", "content": "x"}]
    try:
        with_tools = tokenizer.apply_chat_template(messages, tools=schemas, tokenize=False, add_generation_prompt=True)
        without = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    except Exception:  # a template that raises on tools has no tool support either
        return False
    return with_tools != without


MAX_JSON_DEPTH = 32  # of a tool call's arrays and objects: a call is two levels, its arguments a few more
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def json_depth(text: str) -> int:
    """How deeply the arrays and objects of JSON `text` nest (brackets inside strings not counted), read without
    recursion; for text that is not JSON, a number that bounds what a parser would recurse into."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def valid_text(value: Any) -> Any:
    """`value` parsed from JSON with every lone surrogate in its strings (keys too) replaced by U+FFFD, as decoding
    invalid UTF-8 does: JSON's `\\ud800` escape is the one way a policy's text can hold one, and no file, tokenizer or
    HTTP body can encode it. Recurses as deep as the value nests (MAX_JSON_DEPTH, checked before parsing)."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [valid_text(item) for item in value]
    if isinstance(value, dict):
        return {valid_text(key): valid_text(item) for key, item in value.items()}
    return value


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
}


def argument_problem(schema: Mapping[str, Any], arguments: Any) -> str | None:
    """What is wrong with `arguments` for a tool's JSON schema (an object of typed properties): not an object, a
    required argument missing, one the tool does not take, one of the wrong type; None when they fit."""
    if not isinstance(arguments, dict):
        return '"arguments" must be a JSON object'
    properties = schema.get("properties", {})
    missing = [name for name in schema.get("required", []) if name not in arguments]
    if missing:
        return f"missing argument {missing[0]!r}"
    unknown = [name for name in arguments if name not in properties]
    if unknown:
        return f"no argument {unknown[0][:60]!r}; it takes {', '.join(properties) or 'none'}"
    for name, value in arguments.items():
        kind = properties[name].get("type")
        allowed = _JSON_TYPES.get(kind) if isinstance(kind, str) else None
        wrong_type = (
            not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed)
            if allowed is not None
            else False
        )
        if wrong_type:
            return f"argument {name!r} must be a JSON {kind}"
    return None


def call_format(protocol: str, tools: Sequence[Tool], tokenizer, chat: bool):
    """The `agent.protocol` named `protocol` over `tools`."""
    if protocol not in PROTOCOLS:
        raise InspoError(f"agent.protocol: {protocol!r} is not one of {', '.join(PROTOCOLS)}")
    return PROTOCOLS.load(protocol)(tools, tokenizer, chat)  # inspo_cli.registry: the class that renders it
