"""Tools beyond search (issue 40): the calculator's arithmetic and its bounds, the Search-R1 protocol with a second
tool's element, masks and per-tool counts, the registry and `agent.tools`, and a tool from outside the package."""

from __future__ import annotations

import re
import sys
import textwrap
import time
from pathlib import Path

import pytest
from helpers.cli_helpers import assert_one_line_error, invoke
from helpers.rollout import engine_for

from inspo_cli.agent.protocol import CORRECTIVE_OBSERVATION, corrective_observation, parse_action, stop_strings
from inspo_cli.agent.rollout import summarize
from inspo_cli.agent.tools import ToolContext, build_tools
from inspo_cli.agent.tools.arithmetic import ArithmeticRefused, evaluate
from inspo_cli.agent.tools.calculator import Calculator
from inspo_cli.config import RecipeError, load_recipe
from inspo_cli.errors import InspoError
from inspo_cli.registry import TOOLS

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "expression, value",
    [
        ("(2024 - 1987) * 12", "444"),
        ("2024 − 1987", "37"),
        ("7 / 4", "1.75"),
        ("10 ÷ 4", "2.5"),
        ("3 × 4", "12"),
        ("0.1 + 0.2", "0.3"),  # exact: decimals as written, not binary floats
        ("1 / 3", "1/3 (about 0.333333333333)"),
        ("-2 / 3", "-2/3 (about -0.666666666667)"),
        ("2 ** -2", "0.25"),
        ("2^10", "1024"),
        ("-7 // 2", "-4"),
        ("-7 % 3", "2"),
        ("2e3 + 1", "2001"),
        ("1987 < 2001", "true"),
        ("3 == 3.0", "true"),
        ("1 != 1", "false"),
        ("((((1))))", "1"),
        ("1_000 + 1", "1001"),
        (" 12 ", "12"),
        ("+".join(["1"] * 290), "290"),
    ],
)
def test_the_calculator_is_exact(expression, value):
    assert evaluate(expression) == value


@pytest.mark.parametrize(
    "expression, why",
    [
        ("9**9**9", "exponent may be at most 10,000"),
        ("2**10000", "at most 3,000 digits"),
        ("(" * 10_000 + "1" + ")" * 10_000, "longer than 1,000 characters"),
        ("(" * 60 + "1" + ")" * 60, "more than 50 nested parentheses"),
        ("1" * 1_000_000, "longer than 1,000 characters"),
        ("9" * 101, "more than 100 digits"),
        ("1e400", "exponent may be at most 100"),
        ("+".join(["1"] * 400), "more than 300 operations"),
        ("-" * 900 + "1", "more than 300 operations"),
        ("x + 1", "names are not arithmetic"),
        ("__import__('os').system('true')", "function calls are not arithmetic"),
        ("(1).real", "attributes are not arithmetic"),
        ("lambda: 1", "lambdas are not arithmetic"),
        ("'a' * 3", "str constants are not numbers"),
        ("[1, 2][0]", "subscripts are not arithmetic"),
        ("True + 1", "bool constants are not numbers"),
        ("3j", "complex constants are not numbers"),
        ("1 < 2 < 3", "one comparison at a time"),
        ("(1 < 2) + 1", "not a number"),
        ("1 / 0", "division by zero"),
        ("1 % 0", "division by zero"),
        ("0 ** -1", "division by zero"),
        ("2 ** 0.5", "whole number"),
        ("", "empty"),
        ("1 +", "not an arithmetic expression"),
        ("10**3000 * 10**3000", "more than 3,000 digits"),
    ],
)
def test_the_calculator_refuses_in_one_short_line_and_quickly(expression, why):
    started = time.perf_counter()
    with pytest.raises(ArithmeticRefused, match=why) as refused:
        evaluate(expression)
    assert time.perf_counter() - started < 2 and "\n" not in str(refused.value) and len(str(refused.value)) < 120


def test_the_calculator_tool_answers_an_error_observation_instead_of_raising():
    observations = Calculator().call([{"expression": "6 * 7"}, {"expression": "1/0"}, {}, {"expression": 5}])
    assert [o.text for o in observations] == [
        "42",
        "error: division by zero",
        "error: the expression must be text",
        "error: the expression must be text",
    ]
    assert [o.error for o in observations] == [False, True, True, True]
    assert all(o.passage_ids is None for o in observations)


def test_each_tool_describes_itself_for_a_function_calling_prompt():
    search, calculator = build_tools(["search", "calculator"], ToolContext())
    assert calculator.schema() == {
        "type": "function",
        "function": {
            "name": "calculator",
            "description": calculator.description,
            "parameters": {
                "type": "object",
                "properties": {"expression": {"type": "string", "description": "the arithmetic to compute"}},
                "required": ["expression"],
            },
        },
    }
    assert search.schema()["function"]["parameters"]["required"] == ["query"]


def test_the_paper_protocol_keeps_search_r1s_strings():
    assert stop_strings(["search"]) == ("</search>", "</answer>")
    assert corrective_observation([("search", "query")]) == CORRECTIVE_OBSERVATION
    assert parse_action("<calculate> 1 + 1 </calculate>").kind == "invalid"  # not a tool of the paper's agent
    two = ["search", "calculate"]
    assert stop_strings(two) == ("</search>", "</calculate>", "</answer>")
    assert parse_action("<calculate> 1 + 1 </calculate> <search> x </search>", two) == parse_action(
        "<calculate> 1 + 1 </calculate>", two
    )
    assert parse_action("<calculate> 1 + 1 </calculate>", two).content == "1 + 1"
    assert "between <calculate> and </calculate>" in corrective_observation(
        [("search", "query"), ("calculate", "expression")]
    )


def masked(tokenizer, trajectory, value):
    return tokenizer.decode([i for i, m in zip(trajectory.completion_ids, trajectory.completion_mask) if m == value])


def test_search_and_calculator_in_one_trajectory(tiny_tokenizer):
    script = [
        "<search> violin of Vell </search>",
        "<calculate> 1714 - 1707 </calculate>",
        "<calculate> 1714 / 0 </calculate>",
        "<answer> 7 </answer>",
    ]
    engine, policy, retriever = engine_for(
        tiny_tokenizer,
        {"Q1": script, "Q2": ["<calculate>2*3</calculate>", "<answer> 6 </answer>"]},
        tools=["search", "calculator"],
        max_turns=4,
    )
    one, two = engine.run(["I."] * 2, ["Q1 how many years?", "Q2 six?"])
    # the policy's tokens are exactly what it generated; every observation is masked out
    generated = [tiny_tokenizer(text, add_special_tokens=False)["input_ids"] for text in script]
    assert [i for i, m in zip(one.completion_ids, one.completion_mask) if m == 1] == sum(generated, [])
    observations = masked(tiny_tokenizer, one, 0)
    assert "<information>7</information>" in observations
    assert "<information>error: division by zero</information>" in observations
    assert (one.answer, one.stop_reason, one.turns) == ("7", "answer", 4)
    assert one.queries == ["violin of Vell"] and one.num_searches == 1  # searches count the search tool only
    assert one.tool_calls == {"search": 1, "calculator": 2} and one.tool_errors == {"calculator": 1}
    assert one.invalid_actions == 1  # the refused expression
    assert two.tool_calls == {"calculator": 1}
    assert masked(tiny_tokenizer, two, 0) == "\n\n<information>6</information>\n\n"
    assert sum(one.tool_observation_tokens.values()) == one.completion_mask.count(0)
    # one batch per tool per turn: the first turn's calculator call did not wait for another turn
    assert retriever.calls == [1]
    stats = summarize([one, two], ["search", "calculator"])
    assert stats["tools/calculator/calls"] == 1.5 and stats["tools/calculator/errors"] == 0.5
    assert stats["tools/search/calls"] == 0.5 and stats["search/searches_per_trajectory"] == 0.5
    assert stats["search/valid_action_rate"] == 1 - 1 / 6


def test_a_tool_the_recipe_did_not_ask_for_is_an_invalid_action(tiny_tokenizer):
    engine, _, _ = engine_for(tiny_tokenizer, {"Q1": ["<calculate> 1 + 1 </calculate>", "<answer> 2 </answer>"]})
    [t] = engine.run(["I."], ["Q1 ?"])
    assert masked(tiny_tokenizer, t, 0) == CORRECTIVE_OBSERVATION and t.invalid_actions == 1 and not t.tool_calls


def test_a_tool_observation_is_cut_to_its_limit(tiny_tokenizer):
    engine, _, _ = engine_for(
        tiny_tokenizer,
        {"Q1": ["<calculate> 7 ** 1000 </calculate>", "<answer> x </answer>"]},
        tools=["calculator"],
        max_observation_tokens=40,
    )
    [t] = engine.run(["I."], ["Q1 ?"])
    assert t.tool_observation_tokens == {"calculator": 40}
    assert masked(tiny_tokenizer, t, 0).endswith("</information>\n\n")


def test_agent_tools_in_a_recipe():
    assert load_recipe(None).agent.tools == ["search"]
    assert load_recipe(None, ["agent.tools=[search, calculator]"]).agent.tools == ["search", "calculator"]
    for value, message in (
        ("[]", "agent.tools: must name at least one tool"),
        ("[search, calculator, search]", "agent.tools: names 'search' twice; list each tool once"),
        ("[serch]", rf"agent.tools\[0\]: must be one of {re.escape(', '.join(TOOLS))} \(got 'serch'\)"),
        ("[no.such.module:build]", "cannot import no.such.module"),
    ):
        with pytest.raises(RecipeError, match=message):
            load_recipe(None, [f"agent.tools={value}"])


ECHO = '''
"""Echo: repeats its text (a toy tool from outside the package)."""
from inspo_cli.agent.tools import Observation, Tool


class Echo(Tool):
    name, tag, argument = "echo", "echo", "text"
    description = "Repeats its text."
    parameters = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}

    def call(self, arguments):
        return [Observation(a["text"].upper()) for a in arguments]


def build(context):
    return Echo()
'''


@pytest.fixture
def echo_module(tmp_path, monkeypatch):
    (tmp_path / "lab_tools.py").write_text(textwrap.dedent(ECHO))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "lab_tools:build"
    sys.modules.pop("lab_tools", None)


def test_a_tool_from_outside_the_package_by_import_path(tiny_tokenizer, echo_module):
    assert load_recipe(None, [f"agent.tools=[search, '{echo_module}']"]).agent.tools == ["search", echo_module]
    engine, _, _ = engine_for(
        tiny_tokenizer, {"Q1": ["<echo> hi </echo>", "<answer> HI </answer>"]}, tools=["search", echo_module]
    )
    [t] = engine.run(["I."], ["Q1 ?"])
    assert masked(tiny_tokenizer, t, 0) == "\n\n<information>HI</information>\n\n" and t.tool_calls == {"echo": 1}
    # the same module, called through function calling: its schema is in the prompt, its name in the call
    call = '<tool_call>\n{"name": "echo", "arguments": {"text": "hi"}}\n</tool_call>'
    engine, _, _ = engine_for(
        tiny_tokenizer,
        {"Q1": [call, "<answer> HI </answer>"]},
        tools=["search", echo_module],
        protocol="function-calling",
        max_tokens_per_turn=256,
    )
    [t] = engine.run(["I."], ["Q1 ?"])
    assert '"name": "echo", "description": "Repeats its text."' in tiny_tokenizer.decode(t.prompt_ids)
    assert "<tool_response>\nHI\n</tool_response>" in masked(tiny_tokenizer, t, 0) and t.tool_calls == {"echo": 1}


def test_tools_that_do_not_build_into_a_usable_tool_are_one_line(echo_module, tmp_path):
    with pytest.raises(InspoError, match="names and tags must differ"):
        build_tools([echo_module, echo_module], ToolContext())
    with pytest.raises(InspoError, match=r"^agent.tools: builtins:repr: build\(\) returned a str, not an "):
        build_tools(["builtins:repr"], ToolContext())
    with pytest.raises(
        InspoError,
        match=r"^agent.tools: tool os:getcwd takes \(\), but a tool is called as "
        r"build\(context\)$",
    ):
        build_tools(["os:getcwd"], ToolContext())
    (tmp_path / "lab_tools.py").write_text(
        textwrap.dedent(ECHO)
        + textwrap.dedent("""
        def broken(context):
            raise KeyError("no such corpus")


        def bad_tag(context):
            tool = Echo()
            tool.tag = "my tool>"
            return tool
        """)
    )
    sys.modules.pop("lab_tools", None)
    with pytest.raises(InspoError, match=r"^agent.tools: lab_tools:broken: build\(\) raised KeyError: 'no such"):
        build_tools(["lab_tools:broken"], ToolContext())
    with pytest.raises(InspoError, match="tag 'my tool>' is not an element name"):
        build_tools(["lab_tools:bad_tag"], ToolContext())


@pytest.mark.parametrize(
    "tag", ["answer", "information", "think", "tool_call", "tool_response", "tools", "invalid", "Answer"]
)
def test_a_tool_may_not_take_a_tag_the_protocol_writes(tmp_path, monkeypatch, tag):
    """<answer> would end the trajectory instead of calling the tool, <information> is the observation block, a tool
    tagged `invalid` would have its calls counted as turns without an action; refused by `inspo recipe check`, which
    builds the tools, not first at the run's start."""
    (tmp_path / "lab_clash.py").write_text(
        textwrap.dedent(ECHO)
        + textwrap.dedent(f"""
        def clash(context):
            tool = Echo()
            tool.tag = {tag!r}
            return tool
        """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "lab_clash", raising=False)
    with pytest.raises(
        InspoError,
        match=rf"^agent.tools: lab_clash:clash: tag '{tag}' is the protocol's own "
        r"element; a tool's tag must be none of answer, information, think",
    ):
        build_tools(["search", "lab_clash:clash"], ToolContext())
    result = invoke("recipe", "check", ROOT / "recipes/demo.yaml", "--set", "agent.tools=[search, 'lab_clash:clash']")
    assert_one_line_error(result, "agent.tools: lab_clash:clash: tag", "is the protocol's own element")
    sys.modules.pop("lab_clash", None)


def test_recipe_check_builds_a_tool_that_holds_on_to_the_retriever(tmp_path, monkeypatch):
    """A tool of one's own may keep the retriever's search from build(); recipe check builds it over one not opened
    yet, which only refuses a search made while building."""
    (tmp_path / "lab_rerank.py").write_text(
        textwrap.dedent(ECHO)
        + textwrap.dedent("""
        def rerank(context):
            tool = Echo()
            tool.name, tool.tag, tool.search = "rerank", "rerank", context.retriever.search
            return tool

        def eager(context):
            context.retriever.search(["warm up"], 1)
            return Echo()
        """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "lab_rerank", raising=False)
    result = invoke("recipe", "check", ROOT / "recipes/demo.yaml", "--set", "agent.tools=[search, 'lab_rerank:rerank']")
    assert result.exit_code == 0, result.output
    result = invoke("recipe", "check", ROOT / "recipes/demo.yaml", "--set", "agent.tools=[search, 'lab_rerank:eager']")
    assert_one_line_error(result, "agent.tools: lab_rerank:eager: build() raised", "search in its call()")
    sys.modules.pop("lab_rerank", None)


def test_ablate_plans_one_variant_per_tool_set_even_for_a_static_recipe():
    from inspo_cli.ablation.plan import plan_axes, resolve

    recipe = ROOT / "recipes/qwen2.5-3b/search-r1.yaml"
    plan = plan_axes(recipe, [("tools", ["search", "search+calculator"])], seeds=[0])
    variants = {v.name: v for v in plan.variants}
    # [search] is the base recipe itself, which the plan runs once
    assert set(variants) == {"search-r1", "tools-search_calculator"}
    assert resolve(variants["tools-search_calculator"]).agent.tools == ["search", "calculator"]
    assert resolve(variants["search-r1"]).agent.tools == ["search"]
    for bad, message in (("search+serch", "tools joined by \\+"), ("search+no.such:build", "importable")):
        with pytest.raises(InspoError, match=f"--tools '{re.escape(bad)}': must be {message}"):
            plan_axes(recipe, [("tools", [bad])], seeds=[0])
    with pytest.raises(InspoError, match="--proposer ablates INSPO's instruction population"):
        plan_axes(recipe, [("tools", ["search"]), ("proposer", ["paraphrase"])], seeds=[0])


def test_evaluate_counts_calls_per_question_by_tool(tiny_tokenizer, tmp_path):
    from helpers.fake_retrievers import OverlapRetriever
    from helpers.rollout import ScriptedPolicy

    from inspo_cli.benchmarks import Question
    from inspo_cli.config import RolloutConfig
    from inspo_cli.evaluation.methods.base import MethodContext
    from inspo_cli.evaluation.report import markdown, read_results, write_results
    from inspo_cli.evaluation.runner import evaluate_methods

    policy = ScriptedPolicy(
        tiny_tokenizer,
        {
            "Q1": ["<calculate> 6 * 7 </calculate>", "<calculate> 1/0 </calculate>", "<answer> 42 </answer>"],
            "Q2": ["<search> violin </search>", "<answer> 1714 </answer>"],
        },
    )
    retriever = OverlapRetriever()
    ctx = MethodContext(
        policy,
        tiny_tokenizer,
        retriever,
        RolloutConfig(max_turns=3, max_total_tokens=2048),
        topk=2,
        instruction="I.",
        tools=build_tools(["search", "calculator"], ToolContext(retriever, 2)),
    )
    questions = {
        "world": [
            Question("1", "Q1 six times seven?", ("42",), "world"),
            Question("2", "Q2 the violin?", ("1714",), "world"),
        ]
    }
    rows: list[dict] = []
    scores = evaluate_methods(["agent"], questions, ctx, batch_size=2, on_prediction=rows.append)
    score = scores["agent"]["world"]
    assert (score["em"], score["searches"], score["calls/calculator"], score["calls/search"]) == (1.0, 0.5, 1.0, 0.5)
    assert [row["tool_calls"] for row in rows] == [{"search": 0, "calculator": 2}, {"search": 1, "calculator": 0}]
    text = markdown(scores, {})
    assert "## Calls per question: calculator\n\n| Method | World |\n|---|---|\n| agent | 1.00 |" in text
    write_results(tmp_path, scores, {})  # results.json stays readable with the per-tool means
    assert read_results(tmp_path / "results.json", "fix")["scores"]["agent"]["world"]["calls/calculator"] == 1.0


def test_a_bad_tool_path_is_quoted_as_written_on_the_command_line():
    from helpers.cli_helpers import assert_one_line_error, invoke

    result = invoke("recipe", "check", ROOT / "recipes/demo.yaml", "--set", "agent.tools=['lab:x:y']")
    assert_one_line_error(result, "agent.tools[0]: tool 'lab:x:y' is not an import path")  # not an emoji for :x:


@pytest.mark.slow
def test_oracle_trajectories_of_arithmetic_questions_use_both_tools(tmp_path, tiny_tokenizer):
    """So SFT warm starts and rejection sampling work on the new type: two searches, the calculation, the answer;
    without the calculator the oracle keeps none of them (their answer is in no passage)."""
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
    ][:8]
    retriever = open_retriever(str(tmp_path / "world/corpus.jsonl"))
    # the tiny tokenizer spells passages almost letter by letter: room for two passages per search
    rollout = replace(ROLLOUT, max_turns=3, max_observation_tokens=4096, max_total_tokens=16384)
    both = RolloutEngine(
        None,
        retriever,
        tiny_tokenizer,
        rollout,
        topk=2,
        chat=False,
        tools=build_tools(["search", "calculator"], ToolContext(retriever, 2)),
    )
    kept = oracle_trajectories(both, "Search, then answer. Question: {question}\n", questions)
    assert coverage(questions, kept)["arithmetic"][0] >= 0.75 * len(questions)
    for key, t in kept:
        q = next(q for q in questions if q.key == key)
        written = tiny_tokenizer.decode([i for i, m in zip(t.completion_ids, t.completion_mask) if m])
        assert written.endswith(
            f"<calculate> {q.metadata['calculation']} </calculate><answer> {q.golden_answers[0]} </answer>"
        )
        assert t.tool_calls == {"search": 2, "calculator": 1} and not t.tool_errors
    search_only = RolloutEngine(None, retriever, tiny_tokenizer, rollout, topk=2, chat=False)
    assert oracle_trajectories(search_only, "Search, then answer. Question: {question}\n", questions) == []


# -- issue 51: the calculator writes out whatever it computes, and its bounds are pinned ----------------------------


@pytest.mark.parametrize(
    "expression, value",
    [
        ("1 / 8", "0.125"),
        ("-1 / 8", "-0.125"),
        ("1 / 16", "0.0625"),
        ("1 / 250", "0.004"),
        ("3 / 40", "0.075"),
        ("10 / 4", "2.5"),
        ("6 / 3", "2"),
        ("2 / 3 * 3", "2"),
        ("1 / 1024", "0.0009765625"),
        ("7 // 2", "3"),
        ("7.5 % 2", "1.5"),
        ("1 / 6", "1/6 (about 0.166666666667)"),
        ("1 / 7 * 7", "1"),
        ("1e100", "1" + "0" * 100),
        ("1e-100", "0." + "0" * 99 + "1"),
        ("1.5e2", "150"),
        ("1e+2", "100"),
        ("2E3", "2000"),
        ("9" * 100 + " - " + "9" * 100, "0"),
    ],
)
def test_division_is_exact_and_a_literals_exponent_goes_to_its_bound(expression, value):
    assert evaluate(expression) == value


@pytest.mark.parametrize("expression", ["1e101", "1e-101", "1.5E+101"])
def test_a_literals_exponent_past_its_bound_is_refused(expression):
    with pytest.raises(ArithmeticRefused, match="a number's exponent may be at most 100"):
        evaluate(expression)


def test_a_result_too_long_for_a_decimal_is_written_as_its_exact_fraction():
    """2**-9000 is computed exactly; its 9,000-place decimal would pass Python's int-to-str limit, so it is written
    as a fraction (each part within the 3,000 digits every result keeps), never a ValueError."""
    for expression, sign in (("0.5**9000", ""), ("2**-9000", ""), ("-2**-9000", "-"), ("0.2**4000", "")):
        text = evaluate(expression)
        numerator, _, rest = text.partition("/")
        denominator, _, approximation = rest.partition(" ")
        assert (numerator, approximation) == (f"{sign}1", "(about 0)")
        assert int(denominator) in (2**9000, 5**4000)
    assert evaluate("0.5**3000") == "0." + str(5**3000).rjust(3000, "0")  # a decimal up to 3,000 places
    # ... and 3,000 digits in all: this one's decimal has 5,096 (past the int-to-str limit)
    assert evaluate("(10**2999 + 1) * 0.5**3000").startswith(f"{10**2999 + 1}/{2**3000} (about ")
    assert evaluate("(10**2000 + 1) * 0.5**3000").startswith(f"{10**2000 + 1}/{2**3000} (about ")  # 4,097
    assert evaluate("-(0.5)**-9000") == str(-(2**9000))
    for expression in ("(1/3)**9999", "-(7/3)**-9999", "9**9**9"):
        with pytest.raises(ArithmeticRefused, match="a power"):
            evaluate(expression)
    observations = Calculator().call([{"expression": e} for e in ("0.5**9000", "(1/3)**9999", "2**-9000")])
    assert [o.error for o in observations] == [False, True, False]


def test_a_result_past_the_processes_own_int_to_str_limit_is_refused_not_raised():
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(640)
    try:
        with pytest.raises(ArithmeticRefused, match="the result is too long to write out"):
            evaluate("7 ** 1000")
    finally:
        sys.set_int_max_str_digits(limit)


class _ShortCalculator(Calculator):
    max_observation_tokens = 12


class _LongCalculator(Calculator):
    max_observation_tokens = 300


@pytest.mark.parametrize(
    "tool, recipe_limit, tokens", [(_ShortCalculator, 400, 12), (_LongCalculator, 40, 300), (Calculator, 40, 40)]
)
def test_a_tools_own_observation_limit_wins_over_the_recipes(tiny_tokenizer, tool, recipe_limit, tokens):
    engine, _, _ = engine_for(
        tiny_tokenizer,
        {"Q1": ["<calculate> 7 ** 1000 </calculate>", "<answer> x </answer>"]},
        tools=[],
        max_observation_tokens=recipe_limit,
    )
    engine = type(engine)(engine.backend, None, tiny_tokenizer, engine.config, tools=[tool()])
    [t] = engine.run(["I."], ["Q1 ?"])
    assert t.tool_observation_tokens == {"calculator": tokens}
    assert masked(tiny_tokenizer, t, 0).endswith("</information>\n\n")
