"""Qwen2.5's `<tool_call>` JSON parsed strictly (issues 40 and 51): malformed calls as their errors, calls and
answers in the order written, argument types from the JSON schema, and nothing the policy writes in a call (deep
nesting, lone surrogates, huge fractions) stops the rollout."""

from __future__ import annotations

import json

import pytest
from helpers.function_calling import TOOL_TURN, call
from helpers.rollout import engine_for, tools

from inspo_cli.agent.call_formats import (
    FunctionCallingFormat,
    argument_problem,
    json_depth,
    valid_text,
)


@pytest.mark.parametrize(
    "text, error",
    [
        (
            '<tool_call>\n{"name": "search", "arguments": {"query": 3}}\n</tool_call>',
            "search: argument 'query' must be a JSON string",
        ),
        (
            "<tool_call>{nope}</tool_call>",
            "the tool call is not valid JSON (Expecting property name enclosed in double "
            "quotes: line 1 column 2 (char 1))",
        ),
        (
            '<tool_call>{"name": "web", "arguments": {}}</tool_call>',
            'there is no tool "web"; the tools are search, calculator',
        ),
        ('<tool_call>{"name": 7, "arguments": {}}</tool_call>', "there is no tool 7; the tools are search, calculator"),
        ('<tool_call>{"name": "search", "arguments": {}}</tool_call>', "search: missing argument 'query'"),
        (
            '<tool_call>{"name": "search", "arguments": {"query": "x", "k": 2}}</tool_call>',
            "search: no argument 'k'; it takes query",
        ),
        ('<tool_call>{"name": "search", "arguments": "x"}</tool_call>', 'search: "arguments" must be a JSON object'),
        ('<tool_call>["search"]</tool_call>', 'a tool call is one JSON object with exactly "name" and "arguments"'),
        (
            '<tool_call>{"name": "search", "arguments": {"query": "x"}, "id": 1}</tool_call>',
            'a tool call is one JSON object with exactly "name" and "arguments"',
        ),
        ("<tool_call></tool_call>", "the tool call is not valid JSON (Expecting value: line 1 column 1 (char 0))"),
    ],
)
def test_a_malformed_call_is_parsed_into_its_error(qwen_tokenizer, text, error):
    parsed = FunctionCallingFormat(tools("search", "calculator"), qwen_tokenizer).parse(text)
    assert (parsed.kind, parsed.error) == ("call", error)


def test_calls_and_answers_are_read_in_the_order_written(qwen_tokenizer):
    fmt = FunctionCallingFormat(tools("search", "calculator"), qwen_tokenizer)
    parsed = fmt.parse("<think> look </think>\n" + call("calculator", expression="2 * 3") + " <answer> 1 </answer>")
    assert (parsed.kind, parsed.tool.name, dict(parsed.arguments), parsed.content) == (
        "call",
        "calculator",
        {"expression": "2 * 3"},
        "2 * 3",
    )
    assert fmt.parse("<answer> 6 </answer>" + call("search", query="x")).content == "6"
    assert fmt.parse("<search> x </search>").kind == "invalid"  # the other protocol's tags are no call here
    assert fmt.parse('<tool_call>{"name": "search"').kind == "invalid"  # no complete call


@pytest.mark.parametrize(
    "schema_type, good, bad",
    [
        ("string", "x", 1),
        ("integer", 3, 3.5),
        ("integer", 3, True),
        ("number", 2.5, "2.5"),
        ("boolean", False, 0),
        ("array", [1], {}),
        ("object", {}, []),
    ],
)
def test_argument_types_follow_the_json_schema(schema_type, good, bad):
    schema = {"type": "object", "properties": {"a": {"type": schema_type}}, "required": ["a"]}
    assert argument_problem(schema, {"a": good}) is None
    assert argument_problem(schema, {"a": bad}) == f"argument 'a' must be a JSON {schema_type}"


# -- issue 51: nothing the policy writes in a call stops the rollout -----------------------------------------------

DEEP = 1000  # past json's recursion limit


@pytest.mark.parametrize(
    "body",
    [
        "[" * DEEP + "]" * DEEP,
        '{"name": "search", "arguments": {"query": ' + "[" * DEEP + "]" * DEEP + "}}",
        '{"name": "search", "arguments": ' + '{"a": ' * DEEP + "1" + "}" * DEEP + "}",
        "[" * 33 + "]" * 33,
    ],
)
def test_a_call_nested_too_deep_is_an_error_not_a_recursion_error(qwen_tokenizer, body):
    fmt = FunctionCallingFormat(tools("search", "calculator"), qwen_tokenizer)
    parsed = fmt.parse(f"<tool_call>{body}</tool_call>")
    assert (parsed.kind, parsed.tool, parsed.error) == ("call", None, "the tool call nests more than 32 levels deep")


def test_nesting_up_to_the_limit_is_parsed_and_brackets_in_strings_do_not_count(qwen_tokenizer):
    fmt = FunctionCallingFormat(tools("search", "calculator"), qwen_tokenizer)
    at_limit = '{"name": "search", "arguments": {"query": ' + "[" * 30 + "]" * 30 + "}}"
    assert json_depth(at_limit) == 32
    assert fmt.parse(f"<tool_call>{at_limit}</tool_call>").error == "search: argument 'query' must be a JSON string"
    siblings = '{"name": "search", "arguments": {"query": "x", "n": [' + ", ".join(['{"a": [1]}'] * 50) + "]}}"
    assert (
        json_depth(siblings) == 5
        and fmt.parse(f"<tool_call>{siblings}</tool_call>").error == "search: no argument 'n'; it takes query"
    )
    bracketed = call("search", query="[" * 100 + '\\"{' * 50)
    assert json_depth(bracketed) == 2
    assert fmt.parse(bracketed).content == "[" * 100 + '\\"{' * 50


def test_a_lone_surrogate_from_a_json_escape_is_searched_as_the_replacement_character(qwen_tokenizer):
    """JSON's \\ud800 is the one way a policy's text holds a lone surrogate, which no file or HTTP body can encode:
    it becomes U+FFFD, what a tokenizer's decoding of invalid bytes gives in the Search-R1 protocol."""
    fmt = FunctionCallingFormat(tools("search", "calculator"), qwen_tokenizer)
    parsed = fmt.parse(
        '<tool_call>{"name": "search", "arguments": {"query": "a\\ud800b\\udc00 \\ud83d\\ude00"}}</tool_call>'
    )
    assert (parsed.error, parsed.content) == (None, "a\ufffdb\ufffd \U0001f600")  # a valid pair stays one character
    assert (
        fmt.parse('<tool_call>{"name": "search", "arguments": {"query": "x", "\\ud800": 1}}</tool_call>').error
        == "search: no argument '\ufffd'; it takes query"
    )
    assert valid_text({"a\udfff": ["\ud800", {"\udc00": "x", "n": 1.5}], "b": None}) == {
        "a\ufffd": ["\ufffd", {"\ufffd": "x", "n": 1.5}],
        "b": None,
    }
    script = {
        "Q1": [
            '<tool_call>{"name": "search", "arguments": {"query": "violin \\ud800"}}</tool_call>',
            "<answer> 1714 </answer>",
        ]
    }
    engine, _, retriever = engine_for(qwen_tokenizer, script, tools=["search"], protocol="function-calling")
    [t] = engine.run(["I."], ["Q1 ?"])
    assert t.queries == ["violin \ufffd"] and t.invalid_actions == 0 and retriever.calls == [1]
    json.dumps(t.queries, ensure_ascii=False).encode("utf-8")  # what a run's files write


def test_a_deep_call_and_a_huge_fraction_in_a_rollout_leave_it_going(qwen_tokenizer):
    script = {
        "Q1": [
            "<tool_call>" + "[" * DEEP + "]" * DEEP + "</tool_call>",
            call("calculator", expression="0.5**9000"),
            "<answer> 0 </answer>",
        ]
    }
    engine, _, _ = engine_for(
        qwen_tokenizer,
        script,
        tools=["search", "calculator"],
        protocol="function-calling",
        max_tokens_per_turn=4096,
        max_total_tokens=8192,
    )
    [t] = engine.run(["I."], ["Q1 ?"])
    observations = qwen_tokenizer.decode([i for i, m in zip(t.completion_ids, t.completion_mask) if not m])
    assert observations.startswith(TOOL_TURN[0] + "error: the tool call nests more than 32 levels deep" + TOOL_TURN[1])
    assert (t.stop_reason, t.turns, t.invalid_actions, t.tool_errors) == ("answer", 3, 1, {})
    assert t.tool_calls == {"calculator": 1}  # 0.5**9000 is written out as its exact fraction
