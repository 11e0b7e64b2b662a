"""Tools through the commands (issue 40): `recipe check` builds them, `inspo ablate` plans a variant per tool set,
`inspo evaluate` counts calls per tool, a bad path is quoted as written, and oracle trajectories use both tools."""

from __future__ import annotations

import re
import sys
import textwrap

import pytest
from helpers.agent_tools import ECHO, ROOT
from helpers.cli_helpers import assert_one_line_error, invoke

from inspo_cli.agent.tools import ToolContext, build_tools
from inspo_cli.errors import InspoError


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
