"""The rollout engine against a scripted policy (the `PolicyBackend` seam) and the tiny tokenizer."""

from __future__ import annotations

import pytest
from helpers.rollout import engine_for

from inspo_cli.agent import CORRECTIVE_OBSERVATION, parse_action
from inspo_cli.agent.protocol import build_prompt, format_passages, user_message
from retriever.corpus import Passage

SEARCH_THEN_ANSWER = [
    "<think> look it up </think> <search> violin of Vell </search>",
    "<think> found it </think> <answer> 1714 </answer>",
]


def decode_masked(tokenizer, trajectory, value):
    return tokenizer.decode([i for i, m in zip(trajectory.completion_ids, trajectory.completion_mask) if m == value])


def test_generated_tokens_are_kept_exactly_and_observations_are_masked(tiny_tokenizer):
    engine, policy, _ = engine_for(tiny_tokenizer, {"Q1": SEARCH_THEN_ANSWER})
    [t] = engine.run(["Answer the question."], ["Q1 when was the violin recorded?"])
    generated = [tiny_tokenizer(text, add_special_tokens=False)["input_ids"] for text in SEARCH_THEN_ANSWER]
    assert [i for i, m in zip(t.completion_ids, t.completion_mask) if m == 1] == generated[0] + generated[1]
    # The second turn saw exactly prompt + first turn + observation: no decode/re-encode anywhere.
    assert policy.calls[1]["contexts"][0] == t.prompt_ids + t.completion_ids[: -len(generated[1])]
    observation = decode_masked(tiny_tokenizer, t, 0)
    assert observation == (
        '\n\n<information>Doc 1(Title: "Castle") The castle of Vell was recorded in 1707. It is '
        'known for the violin nearby.\nDoc 2(Title: "Violin") The violin of Vell was recorded in '
        "1714. It is known for the harbour nearby.</information>\n\n"
    )
    assert (t.answer, t.stop_reason, t.num_searches, t.turns) == ("1714", "answer", 1, 2)
    assert t.queries == ["violin of Vell"] and t.retrieved == [["p1", "p2"]]
    assert len(t.completion_mask) == len(t.completion_ids) and t.logprobs is None  # scripted: no log-probs


def test_one_retriever_call_per_turn_for_the_whole_batch(tiny_tokenizer):
    scripts = {
        "Q1": SEARCH_THEN_ANSWER,
        "Q2": ["<answer> now </answer>"],
        "Q3": ["<search> comet </search>", "<search> canal </search>", "<answer> x </answer>"],
    }
    engine, policy, retriever = engine_for(tiny_tokenizer, scripts)
    trajectories = engine.run(["I."] * 3, ["Q1 a", "Q2 b", "Q3 c"])
    assert retriever.calls == [2, 1]  # turn 1: Q1 and Q3 together; turn 2: Q3 alone
    assert [len(c["contexts"]) for c in policy.calls] == [3, 2, 1]
    assert [t.num_searches for t in trajectories] == [1, 0, 2]
    assert [t.answer for t in trajectories] == ["1714", "now", "x"]


def test_max_turns_then_one_last_turn_without_search(tiny_tokenizer):
    engine, policy, retriever = engine_for(tiny_tokenizer, {"Q1": ["<search> river </search>"]}, max_turns=2)
    [t] = engine.run(["I."], ["Q1 loops"])
    assert (t.num_searches, t.turns, t.stop_reason, t.answer) == (2, 3, "max_turns", None)
    assert retriever.calls == [1, 1]  # the third turn's search is not run


def test_unparsable_action_gets_the_corrective_observation(tiny_tokenizer):
    engine, _, retriever = engine_for(tiny_tokenizer, {"Q1": ["I think it is Paris.", "<answer> Paris </answer>"]})
    [t] = engine.run(["I."], ["Q1 capital?"])
    assert decode_masked(tiny_tokenizer, t, 0) == CORRECTIVE_OBSERVATION
    assert (t.invalid_actions, t.answer, t.stop_reason, retriever.calls) == (1, "Paris", "answer", [])


def test_eos_without_answer_gets_the_corrective_observation_and_goes_on_as_in_search_r1(tiny_tokenizer):
    engine, policy, retriever = engine_for(
        tiny_tokenizer, {"Q1": ["I do not know.<EOS>", "<search> violin </search>", "<answer> 1714 </answer>"]}
    )
    [t] = engine.run(["I."], ["Q1 ?"])
    assert (t.stop_reason, t.answer, t.turns, t.invalid_actions, t.num_searches) == ("answer", "1714", 3, 1, 1)
    first_turn = tiny_tokenizer("I do not know.", add_special_tokens=False)["input_ids"]
    corrective = tiny_tokenizer(CORRECTIVE_OBSERVATION, add_special_tokens=False)["input_ids"]
    # the sampled EOS is dropped (Search-R1 re-tokenises the turn's text, which has none), the correction follows
    assert t.completion_ids[: len(first_turn) + len(corrective)] == first_turn + corrective
    assert tiny_tokenizer.eos_token_id not in t.completion_ids
    assert policy.calls[1]["contexts"][0] == t.prompt_ids + first_turn + corrective


def test_eos_on_the_last_turn_ends_it_without_an_answer(tiny_tokenizer):
    engine, _, _ = engine_for(tiny_tokenizer, {"Q1": ["I do not know.<EOS>"]}, max_turns=0)
    [t] = engine.run(["I."], ["Q1 ?"])
    assert (t.stop_reason, t.answer, t.turns) == ("max_turns", None, 1)


def test_without_search_the_one_turn_is_generated_whole_and_its_last_answer_read_as_in_search_r1(tiny_tokenizer):
    """Search-R1's GRPO-without-search baseline (`do_search: false`) generates each response in one call without stop
    strings, to EOS or 500 tokens, and reads the last <answer> of it; a <search> in it is only text."""
    whole = "<search> river </search> <answer> 1707 </answer> no, <answer> 1714 </answer> done<EOS>"
    engine, policy, retriever = engine_for(tiny_tokenizer, {"Q1": [whole]}, max_turns=0)
    [t] = engine.run(["I."], ["Q1 ?"])
    assert policy.calls[0]["stop"] == () and retriever.calls == []
    assert (t.stop_reason, t.answer, t.turns, t.num_searches) == ("answer", "1714", 1, 0)
    assert t.completion_ids[-1] == tiny_tokenizer.eos_token_id and t.completion_mask == [1] * len(t.completion_ids)
    [unanswered] = engine_for(tiny_tokenizer, {"Q1": ["I do not know.<EOS>"]}, max_turns=0)[0].run(["I."], ["Q1 ?"])
    assert (unanswered.stop_reason, unanswered.answer) == ("max_turns", None)
    assert unanswered.completion_ids[-1] == tiny_tokenizer.eos_token_id  # one generation: its EOS is trained on

    # single_turn_stop: tag, as every turn of the search loop: the first </search> or </answer> ends it
    tagged, policy, _ = engine_for(
        tiny_tokenizer, {"Q1": ["<search> river </search>"]}, max_turns=0, single_turn_stop="tag"
    )
    [t] = tagged.run(["I."], ["Q1 ?"])
    assert policy.calls[0]["stop"] == ("</search>", "</answer>") and (t.stop_reason, t.answer) == ("max_turns", None)
    # with search allowed the setting changes nothing: every turn stops at its tags
    searching, policy, _ = engine_for(tiny_tokenizer, {"Q1": SEARCH_THEN_ANSWER}, max_turns=1, single_turn_stop="eos")
    [t] = searching.run(["I."], ["Q1 ?"])
    assert {call["stop"] for call in policy.calls} == {("</search>", "</answer>")} and t.answer == "1714"


def test_the_no_search_baselines_stop_their_turn_as_their_sources_do(repo_root):
    from inspo_cli.config import load_recipe
    from inspo_cli.errors import InspoError

    stop = lambda name: load_recipe(repo_root / f"recipes/{name}.yaml", check_paths=False).rollout.single_turn_stop  # noqa: E731
    assert stop("qwen2.5-3b/grpo-no-search") == stop("qwen2.5-7b/grpo-no-search") == "eos"  # Search-R1's R1
    # the SFT target ends at </answer> without an EOS: its one turn ends there
    assert stop("qwen2.5-3b/sft") == stop("qwen2.5-7b/sft") == stop("world-table1/sft") == "tag"
    # and an SFT recipe of one's own that would run past it is refused
    with pytest.raises(InspoError, match="rollout.single_turn_stop: is eos, but training.algorithm=sft"):
        load_recipe(
            repo_root / "recipes/qwen2.5-3b/grpo-no-search.yaml",
            ["training.algorithm=sft", "model.backend=transformers"],
            check_paths=False,
        )


def test_end_at_eos_keeps_the_old_behaviour(tiny_tokenizer):
    engine, _, _ = engine_for(tiny_tokenizer, {"Q1": ["I do not know.<EOS>"]}, end_at_eos=True)
    [t] = engine.run(["I."], ["Q1 ?"])
    assert (t.stop_reason, t.answer, t.turns) == ("eos", None, 1)
    assert t.completion_ids[-1] == tiny_tokenizer.eos_token_id and t.completion_mask[-1] == 1


def test_an_empty_search_is_searched_as_in_search_r1(tiny_tokenizer):
    engine, _, retriever = engine_for(tiny_tokenizer, {"Q1": ["<search></search>", "<answer> x </answer>"]})
    [t] = engine.run(["I."], ["Q1 ?"])
    assert t.queries == [""] and retriever.calls == [1] and t.invalid_actions == 0
    assert decode_masked(tiny_tokenizer, t, 0).startswith("\n\n<information>")


def test_answer_comes_from_the_response_not_the_instruction(tiny_tokenizer):
    engine, _, _ = engine_for(tiny_tokenizer, {"Q1": ["<search> river </search>"]}, max_turns=1)
    [t] = engine.run(["For example, <answer> Beijing </answer>."], ["Q1 ?"])
    assert t.answer is None and t.stop_reason == "max_turns"


def test_observations_are_cut_to_their_token_limit(tiny_tokenizer):
    engine, _, _ = engine_for(tiny_tokenizer, {"Q1": SEARCH_THEN_ANSWER}, max_observation_tokens=30)
    [t] = engine.run(["I."], ["Q1 ?"])
    assert t.completion_mask.count(0) == 30
    assert decode_masked(tiny_tokenizer, t, 0).endswith("</information>\n\n")
    assert t.answer == "1714"  # the policy still gets its next turn


def test_context_cap_and_per_turn_budgets(tiny_tokenizer):
    long_turn = "<think> " + "the river and the castle " * 20 + "</think> <search> river </search>"
    engine, policy, _ = engine_for(
        tiny_tokenizer, {"Q1": [long_turn]}, max_tokens_per_turn=40, max_total_tokens=160, max_turns=4
    )
    [t] = engine.run(["I."], ["Q1 ?"])
    assert all(b <= 40 for call in policy.calls for b in call["budgets"])
    assert len(t.prompt_ids) + len(t.completion_ids) <= 160
    assert t.stop_reason == "context"


def test_a_response_stops_at_search_r1s_cap_whatever_room_the_context_has(tiny_tokenizer):
    """Search-R1 keeps the first 4,096 tokens of each response (turns and observations): nothing after is trained on
    or read for the answer. Here the cap is 100 and the context 2,048."""
    turns = ["<search> river </search>"] * 6 + ["<answer> 1714 </answer>"]
    capped, policy, _ = engine_for(tiny_tokenizer, {"Q1": turns}, max_turns=6, max_response_tokens=100)
    [t] = capped.run(["I."], ["Q1 ?"])
    assert len(t.completion_ids) == 100 and t.stop_reason == "context" and t.answer is None
    assert len(t.prompt_ids) + len(t.completion_ids) < 2048  # the context had room: the cap stopped it
    # each turn's budget is what is left of the cap
    assert all(
        b <= 100 - len(c) + len(t.prompt_ids)
        for call in policy.calls
        for b, c in zip(call["budgets"], call["contexts"])
    )
    free, _, _ = engine_for(tiny_tokenizer, {"Q1": turns}, max_turns=6)
    [whole] = free.run(["I."], ["Q1 ?"])
    assert whole.answer == "1714" and len(whole.completion_ids) > 100
    # the same trajectory cut where Search-R1 cuts it: the same tokens trained on (an observation the cut falls in
    # keeps its closing tag here, masked either way)
    written = lambda u, n: [i for i, m in zip(u.completion_ids[:n], u.completion_mask[:n]) if m]  # noqa: E731
    assert written(t, 100) == written(whole, 100) and t.completion_mask == whole.completion_mask[:100]


def test_long_prompts_keep_their_end(tiny_tokenizer):
    engine, _, _ = engine_for(tiny_tokenizer, {"Q1": ["<answer> a </answer>"]}, max_prompt_tokens=20)
    [t] = engine.run(["the river " * 50], ["Q1 ?"])
    assert t.prompt_truncated and len(t.prompt_ids) == 20
    assert tiny_tokenizer.decode(t.prompt_ids).endswith("assistant\n")


@pytest.mark.parametrize(
    "text, kind, content",
    [
        ("<think> x </think> <search> who? </search>", "search", "who?"),
        ("<answer> 42 </answer>", "answer", "42"),
        ("<search>  </search>", "search", ""),
        ("<search> unterminated", "invalid", ""),
        ("no tags at all", "invalid", ""),
    ],
)
def test_parse_action(text, kind, content):
    assert parse_action(text).kind == kind and parse_action(text).content == content


def test_prompt_format_matches_search_r1(tiny_tokenizer):
    assert user_message("Answer it.", "who?") == "Answer it. Question: who?\n"
    assert user_message("Q: {question}\nA:", " who? ") == "Q: who?\nA:"
    # Search-R1's preprocessing: stripped, and "?" added where missing (most NQ questions lack it)
    assert (
        user_message("Answer it.", " when was the violin recorded \n")
        == "Answer it. Question: when was the violin recorded?\n"
    )
    assert user_message("Q: {question}\nA:", "who founded it") == "Q: who founded it?\nA:"
    assert build_prompt(tiny_tokenizer, "Answer it.", "who?", chat=False) == "Answer it. Question: who?\n"
    chat = build_prompt(tiny_tokenizer, "Answer it.", "who?", chat=True)
    assert chat == "<|im_start|>user\nAnswer it. Question: who?\n<|im_end|>\n<|im_start|>assistant\n"
    passages = [Passage("a", "Paris", "Capital of France."), Passage("b", "", "No title.")]
    assert format_passages(passages) == 'Doc 1(Title: "Paris") Capital of France.\nDoc 2(Title: "") No title.'
