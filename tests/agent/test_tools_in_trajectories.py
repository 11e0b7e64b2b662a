"""Tools in a rollout (issue 40): each tool describes itself, the Search-R1 protocol with a second tool's element,
masks and per-tool counts, an uninvited tool as an invalid action, and observation limits (the tool's own first)."""

from __future__ import annotations

import re

import pytest
from helpers.agent_tools import masked
from helpers.rollout import engine_for

from inspo_cli.agent.protocol import CORRECTIVE_OBSERVATION, corrective_observation, parse_action, stop_strings
from inspo_cli.agent.rollout import summarize
from inspo_cli.agent.tools import ToolContext, build_tools
from inspo_cli.agent.tools.calculator import Calculator
from inspo_cli.config import RecipeError, load_recipe
from inspo_cli.registry import TOOLS


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
