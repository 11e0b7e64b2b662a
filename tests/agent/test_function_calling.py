"""`agent.protocol: function-calling` (issue 40): tools through the chat template, Qwen2.5's `<tool_call>` JSON parsed
strictly, results spliced in the tool role as the template renders them, malformed calls as error observations, the
exact ids inserted, and the Qwen2.5 rendering for a template without tool support."""

from __future__ import annotations

import copy
import json
import re

import pytest
from helpers.rollout import engine_for, tools

from inspo_cli.agent.call_formats import (
    FUNCTION_CALLING_CORRECTIVE,
    QWEN25_TEMPLATE,
    FunctionCallingFormat,
    argument_problem,
    json_depth,
    valid_text,
)
from inspo_cli.agent.tools import ToolContext, build_tools
from inspo_cli.config import RecipeError, load_recipe
from inspo_cli.registry import PROTOCOLS

TOOL_TURN = ("<|im_end|>\n<|im_start|>user\n<tool_response>\n", "\n</tool_response><|im_end|>\n<|im_start|>assistant\n")
USER_TURN = ("<|im_end|>\n<|im_start|>user\n", "<|im_end|>\n<|im_start|>assistant\n")


def call(name, **arguments) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def schema_lines(*names) -> str:
    return "\n".join(json.dumps(t.schema(), ensure_ascii=False) for t in tools(*names))


def qwen_tools_system(identity: str, *names) -> str:
    return (
        f"<|im_start|>system\n{identity}\n\n# Tools\n\nYou may call one or more functions to assist with the user "
        "query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
        f"{schema_lines(*names)}\n</tools>\n\nFor each function call, return a json object with function name and "
        'arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, '
        '"arguments": <args-json-object>}\n</tool_call><|im_end|>\n'
    )


def test_a_template_with_tool_support_renders_the_prompt_and_tool_results_itself(qwen_tokenizer):
    fmt = FunctionCallingFormat(tools("search", "calculator"), qwen_tokenizer)
    assert fmt.own_template
    prompt = qwen_tokenizer.decode(fmt.prompt_ids("Answer it.", "who founded Hokin Works"))
    assert prompt == (
        qwen_tools_system(
            "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.", "search", "calculator"
        )
        + "<|im_start|>user\nAnswer it. Question: who founded Hokin Works?\n<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert fmt.observation_parts(None, _Obs("R")) == (TOOL_TURN[0], "R", TOOL_TURN[1])
    assert fmt.corrective == (USER_TURN[0], FUNCTION_CALLING_CORRECTIVE, USER_TURN[1])
    assert fmt.stop == ("</tool_call>", "</answer>")


def test_a_template_without_tool_support_is_rendered_the_way_qwen25_renders_tools(tiny_tokenizer):
    """SmolLM2's template (and the tiny model's ChatML) ignores tools=: Qwen2.5's template renders them, with a
    neutral system message instead of Qwen's identity."""
    assert tiny_tokenizer.apply_chat_template(
        [{"role": "user", "content": "x"}], tools=[tools("search")[0].schema()], tokenize=False
    ) == tiny_tokenizer.apply_chat_template([{"role": "user", "content": "x"}], tokenize=False)
    fmt = FunctionCallingFormat(tools("search"), tiny_tokenizer)
    assert not fmt.own_template
    prompt = tiny_tokenizer.decode(fmt.prompt_ids("Answer it.", "who?"))
    assert prompt == (
        qwen_tools_system("You are a helpful assistant.", "search")
        + "<|im_start|>user\nAnswer it. Question: who?\n<|im_end|>\n<|im_start|>assistant\n"
    )
    assert fmt.observation_parts(None, _Obs("R")) == (TOOL_TURN[0], "R", TOOL_TURN[1])


class _Obs:
    def __init__(self, text):
        self.text = text


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


def test_two_tools_in_one_function_calling_trajectory_with_exact_ids_and_masks(qwen_tokenizer):
    script = [
        "<think> find it </think>\n" + call("search", query="violin of Vell"),
        call("calculator", expression="1714 - 1707"),
        "<answer> 7 </answer>",
    ]
    engine, policy, retriever = engine_for(
        qwen_tokenizer,
        {"Q1": script},
        tools=["search", "calculator"],
        protocol="function-calling",
        max_tokens_per_turn=256,
    )
    assert engine.stop_strings == ("</tool_call>", "</answer>")
    [t] = engine.run(["I."], ["Q1 how many years?"])
    encode = lambda text: qwen_tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    passages = retriever.search(["violin of Vell"], k=2)[0]
    from inspo_cli.agent.protocol import format_passages

    expected = (
        encode(script[0])
        + encode(TOOL_TURN[0])
        + encode(format_passages(passages))
        + encode(TOOL_TURN[1])
        + encode(script[1])
        + encode(TOOL_TURN[0])
        + encode("7")
        + encode(TOOL_TURN[1])
        + encode(script[2])
    )
    expected_mask = (
        [1] * len(encode(script[0]))
        + [0] * (len(encode(TOOL_TURN[0]) + encode(format_passages(passages)) + encode(TOOL_TURN[1])))
        + [1] * len(encode(script[1]))
        + [0] * len(encode(TOOL_TURN[0]) + encode("7") + encode(TOOL_TURN[1]))
        + [1] * len(encode(script[2]))
    )
    assert (t.completion_ids, t.completion_mask) == (expected, expected_mask)
    assert (t.answer, t.stop_reason, t.turns, t.invalid_actions) == ("7", "answer", 3, 0)
    assert t.queries == ["violin of Vell"] and [p.id for p in passages] == t.retrieved[0]
    assert t.tool_calls == {"search": 1, "calculator": 1} and not t.tool_errors
    assert sum(t.tool_observation_tokens.values()) == t.completion_mask.count(0)
    # the next turn's context is the prompt and everything so far: the result is spliced in, nothing re-encoded
    assert (
        policy.calls[1]["contexts"][0]
        == t.prompt_ids + expected[: len(policy.calls[1]["contexts"][0]) - len(t.prompt_ids)]
    )


def test_malformed_calls_become_error_observations_and_invalid_actions(qwen_tokenizer):
    script = [
        "<tool_call>{bad json}</tool_call>",
        call("calculator", formula="1 + 1"),
        call("calculator", expression="1 / 0"),
        "I am not sure.<EOS>",
        "<answer> 2 </answer>",
    ]
    engine, _, _ = engine_for(
        qwen_tokenizer,
        {"Q1": script},
        tools=["search", "calculator"],
        protocol="function-calling",
        max_turns=5,
        max_tokens_per_turn=256,
    )
    [t] = engine.run(["I."], ["Q1 ?"])
    observations = qwen_tokenizer.decode([i for i, m in zip(t.completion_ids, t.completion_mask) if not m])
    assert observations == (
        TOOL_TURN[0] + "error: the tool call is not valid JSON (Expecting property name enclosed in double quotes: "
        "line 1 column 2 (char 1))"
        + TOOL_TURN[1]
        + TOOL_TURN[0]
        + "error: calculator: missing argument 'expression'"
        + TOOL_TURN[1]
        + TOOL_TURN[0]
        + "error: division by zero"
        + TOOL_TURN[1]
        + USER_TURN[0]
        + FUNCTION_CALLING_CORRECTIVE
        + USER_TURN[1]
    )
    assert (t.invalid_actions, t.turns, t.answer) == (4, 5, "2")
    # a call that named a tool counts among its calls and errors; the JSON that named none only as invalid
    assert t.tool_calls == {"calculator": 2} and t.tool_errors == {"calculator": 2}
    # the EOS that ended the fourth turn is dropped, as in the Search-R1 protocol: the user turn closes it
    assert qwen_tokenizer.eos_token_id not in [i for i, m in zip(t.completion_ids, t.completion_mask) if m]


def test_the_http_retriever_serves_search_beside_a_second_tool_in_one_trajectory(tiny_tokenizer):
    from helpers.fake_retrievers import OverlapRetriever

    from retriever.client import HTTPRetriever
    from retriever.server import create_app, serve_in_background

    local = OverlapRetriever()
    for protocol, first, second in [
        ("search-r1", "<search> violin of Vell </search>", "<calculate> 1714 - 1707 </calculate>"),
        ("function-calling", call("search", query="violin of Vell"), call("calculator", expression="1714 - 1707")),
    ]:
        with serve_in_background(create_app(local)) as url, HTTPRetriever(url) as remote:
            script = {"Q1": [first, second, "<answer> 7 </answer>"]}
            engine, _, _ = engine_for(
                tiny_tokenizer,
                script,
                retriever=remote,
                tools=["search", "calculator"],
                protocol=protocol,
                max_tokens_per_turn=256,
            )
            [over_http] = engine.run(["I."], ["Q1 ?"])
        engine, _, _ = engine_for(
            tiny_tokenizer,
            script,
            retriever=OverlapRetriever(),
            tools=["search", "calculator"],
            protocol=protocol,
            max_tokens_per_turn=256,
        )
        [in_process] = engine.run(["I."], ["Q1 ?"])
        assert over_http.completion_ids == in_process.completion_ids, protocol
        assert over_http.completion_mask == in_process.completion_mask
        assert over_http.tool_calls == {"search": 1, "calculator": 1} and over_http.retrieved == in_process.retrieved
        assert over_http.answer == "7" and engine.retriever_calls == 1


def test_the_protocol_is_a_recipe_field_checked_against_the_chat_template(repo_root):
    recipe = load_recipe(
        repo_root / "recipes/demo.yaml", ["model.chat_template=auto", "agent.protocol=function-calling"]
    )
    assert recipe.agent.protocol == "function-calling"
    assert load_recipe(repo_root / "recipes/demo.yaml").agent.protocol == "search-r1"
    with pytest.raises(
        RecipeError,
        match="agent.protocol: is function-calling, which writes its prompts through a "
        "chat template, but model.chat_template is off",
    ):
        load_recipe(repo_root / "recipes/demo.yaml", ["agent.protocol=function-calling"])
    protocols = re.escape(", ".join(PROTOCOLS))
    with pytest.raises(RecipeError, match=rf"agent.protocol: must be one of {protocols} \(got 'hermes"):
        load_recipe(repo_root / "recipes/demo.yaml", ["agent.protocol=hermes"])
    with pytest.raises(RecipeError, match=r"\(got 'xxxxx"):
        load_recipe(repo_root / "recipes/demo.yaml", [f"agent.protocol={'x' * 5000}"])


@pytest.mark.slow
def test_oracle_trajectories_in_the_function_calling_protocol(tmp_path, qwen_tokenizer):
    """SFT warm starts and rejection sampling work in either protocol: the oracle's calls are the template's."""
    from dataclasses import replace

    from helpers.sft import ROLLOUT

    from inspo_cli.agent.rollout import RolloutEngine
    from inspo_cli.benchmarks import WORLD, load_benchmark
    from inspo_cli.world import generate_world, write_world
    from inspo_cli.world.oracle import coverage, oracle_trajectories
    from retriever import open_retriever

    write_world(generate_world(seed=1, size="tiny", arithmetic_share=0.5), tmp_path / "world")
    questions = [
        q for q in load_benchmark(WORLD, "train", world_dir=tmp_path / "world") if q.metadata["type"] == "arithmetic"
    ][:6]
    retriever = open_retriever(str(tmp_path / "world/corpus.jsonl"))
    rollout = replace(
        ROLLOUT,
        max_turns=3,
        max_observation_tokens=4096,
        max_total_tokens=16384,
        max_prompt_tokens=4096,
        max_tokens_per_turn=512,
    )  # JSON is long in the tiny vocabulary
    engine = RolloutEngine(
        None,
        retriever,
        qwen_tokenizer,
        rollout,
        topk=2,
        chat=True,
        tools=build_tools(["search", "calculator"], ToolContext(retriever, 2)),
        protocol="function-calling",
    )
    kept = oracle_trajectories(engine, "Search, then answer. Question: {question}\n", questions)
    assert coverage(questions, kept)["arithmetic"][0] >= 0.75 * len(questions)
    for key, t in kept:
        q = next(q for q in questions if q.key == key)
        written = qwen_tokenizer.decode([i for i, m in zip(t.completion_ids, t.completion_mask) if m])
        assert written.endswith(
            call("calculator", expression=q.metadata["calculation"]) + f"<answer> {q.golden_answers[0]} </answer>"
        )
        assert t.tool_calls == {"search": 2, "calculator": 1} and not t.tool_errors and t.invalid_actions == 0


def test_ablate_compares_the_protocols_and_says_what_function_calling_needs(repo_root):
    from inspo_cli.ablation.plan import plan_axes, resolve
    from inspo_cli.errors import InspoError

    plan = plan_axes(
        repo_root / "recipes/qwen2.5-3b/search-r1.yaml", [("protocol", ["search-r1", "function-calling"])], seeds=[0]
    )
    variants = {v.name: resolve(v) for v in plan.variants}
    assert {name: r.agent.protocol for name, r in variants.items()} == {
        "search-r1": "search-r1",
        "protocol-function-calling": "function-calling",
    }
    with pytest.raises(InspoError, match="--protocol 'hermes': must be one of search-r1, function-calling"):
        plan_axes(repo_root / "recipes/qwen2.5-3b/search-r1.yaml", [("protocol", ["hermes"])], seeds=[0])
    with pytest.raises(InspoError, match="model.chat_template is off"):
        plan_axes(repo_root / "recipes/demo.yaml", [("protocol", ["function-calling"])], seeds=[0])


def test_a_template_that_cannot_continue_with_a_tool_message_is_refused_in_one_line(qwen_tokenizer):
    from inspo_cli.errors import InspoError

    raising = copy.deepcopy(qwen_tokenizer)  # renders tools, but refuses any role after the assistant's
    raising.chat_template = QWEN25_TEMPLATE.replace(
        "{%- for message in messages %}",
        "{%- for message in messages %}{%- if loop.index0 > 1 %}{{ raise_exception('roles must alternate') }}"
        "{%- endif %}",
        1,
    )
    with pytest.raises(
        InspoError,
        match=r"^agent.protocol=function-calling: the tokenizer's chat template does "
        r"not render a tool message .* \(it raised TemplateError: roles must "
        r"alternate\)$",
    ):
        FunctionCallingFormat(tools("search"), raising)
    rewriting = copy.deepcopy(qwen_tokenizer)  # renders a tool message without its content
    rewriting.chat_template = QWEN25_TEMPLATE.replace(
        "{{- message.content }}\n        {{- '\\n</tool_response>' }}", "{{- '\\n</tool_response>' }}"
    )
    assert rewriting.chat_template != QWEN25_TEMPLATE
    with pytest.raises(InspoError, match="use agent.protocol=search-r1$"):
        FunctionCallingFormat(tools("search"), rewriting)


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
