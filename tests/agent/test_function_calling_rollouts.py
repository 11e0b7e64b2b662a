"""Function-calling trajectories (issue 40): two tools with the exact ids inserted and masks, malformed calls as
error observations and invalid actions, the HTTP retriever beside a second tool, oracle trajectories, and
`inspo ablate` comparing the protocols."""

from __future__ import annotations

import pytest
from helpers.function_calling import TOOL_TURN, USER_TURN, call
from helpers.rollout import engine_for

from inspo_cli.agent.call_formats import (
    FUNCTION_CALLING_CORRECTIVE,
)
from inspo_cli.agent.tools import ToolContext, build_tools


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
