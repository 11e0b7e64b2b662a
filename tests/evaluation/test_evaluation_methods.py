"""The five inference methods against a rule-driven policy (the `PolicyBackend` seam) and a word-overlap retriever."""

from __future__ import annotations

import pytest
from helpers.fake_retrievers import OverlapRetriever

from inspo_cli.benchmarks import Question
from inspo_cli.config import RolloutConfig
from inspo_cli.evaluation.methods import get_method
from inspo_cli.evaluation.methods.base import MethodContext, short_answer
from inspo_cli.evaluation.methods.search_o1 import boxed_answer
from inspo_cli.evaluation.runner import averages, evaluate_methods
from inspo_cli.policy.generation import Generation


class RulePolicy:
    """Replies `reply(context_text)`; cut at the first stop string (kept), like a real backend."""

    def __init__(self, tokenizer, reply):
        self.tokenizer, self.reply = tokenizer, reply
        self.prompts: list[str] = []

    def generate(self, contexts, max_new_tokens, stop=()):
        out = []
        for context, budget in zip(contexts, max_new_tokens):
            text = self.tokenizer.decode(context)
            self.prompts.append(text)
            reply, finish = self.reply(text), "eos"
            cuts = [reply.index(s) + len(s) for s in stop if s in reply]
            if cuts:
                reply, finish = reply[: min(cuts)], "stop"
            ids = self.tokenizer(reply, add_special_tokens=False)["input_ids"][:budget]
            out.append(Generation(ids, finish))
        return out


def make_ctx(tiny_tokenizer, reply, **rollout) -> tuple[MethodContext, RulePolicy, OverlapRetriever]:
    policy, retriever = RulePolicy(tiny_tokenizer, reply), OverlapRetriever()
    config = RolloutConfig(
        **{
            "max_turns": 3,
            "max_tokens_per_turn": 64,
            "max_observation_tokens": 200,
            "max_prompt_tokens": 4000,
            "max_total_tokens": 8000,
            **rollout,
        }
    )
    return (
        MethodContext(
            policy, tiny_tokenizer, retriever, config, topk=2, chat=True, instruction="Answer the given question."
        ),
        policy,
        retriever,
    )


QUESTIONS = ["When was the violin of Vell recorded?", "When was the comet of Vell recorded?"]


def test_direct_answers_without_retrieval(tiny_tokenizer):
    ctx, policy, retriever = make_ctx(tiny_tokenizer, lambda text: "Answer: 1714")
    predictions = get_method("direct")(ctx, QUESTIONS)
    assert [p.answer for p in predictions] == ["1714", "1714"] and retriever.calls == []
    assert "based on your own knowledge" in policy.prompts[0] and "Question: When was the violin" in policy.prompts[0]


def test_rag_retrieves_once_for_all_questions_and_shows_the_documents(tiny_tokenizer):
    ctx, policy, retriever = make_ctx(tiny_tokenizer, lambda text: "1714\nextra line")
    predictions = get_method("rag")(ctx, QUESTIONS)
    assert retriever.calls == [2]
    assert '(Title: "Violin") The violin of Vell was recorded in 1714.' in policy.prompts[0]
    assert [(p.answer, p.searches) for p in predictions] == [("1714", 1), ("1714", 1)]


def test_ircot_interleaves_thoughts_and_retrieval_until_the_answer(tiny_tokenizer):
    def reply(text):
        thoughts = text.split("Thought:")[-1]
        if "comet" in thoughts:
            return " So the answer is: 1735.\nmore"
        return " The comet of Vell is what matters.\nmore"

    ctx, policy, retriever = make_ctx(tiny_tokenizer, reply)
    [prediction] = get_method("ircot")(ctx, [QUESTIONS[1]])
    assert prediction.answer == "1735" and prediction.stop_reason == "answer"
    assert prediction.queries == [QUESTIONS[1], "The comet of Vell is what matters."]
    assert retriever.calls == [1, 1]
    assert "Wikipedia Title: Comet\nThe comet of Vell" in policy.prompts[-1]


def test_ircot_asks_for_the_answer_when_out_of_steps(tiny_tokenizer):
    ctx, _, retriever = make_ctx(
        tiny_tokenizer, lambda t: "1714" if t.endswith("So the answer is:") else "Hmm.\n", max_turns=2
    )
    [prediction] = get_method("ircot")(ctx, [QUESTIONS[0]])
    assert prediction.answer == "1714" and prediction.searches == 3 and retriever.calls == [1, 1, 1]


def test_search_o1_reasons_in_documents_and_reads_the_boxed_answer(tiny_tokenizer):
    def reply(text):
        if "**Task Instruction:**" in text:  # the Reason-in-Documents call
            assert "Doc 1(Title: " in text and "Current Search Query:**\ncomet of Vell" in text
            return "**Final Information**\n\nThe comet was recorded in 1735."
        if "<|begin_search_result|>" in text.split("<|im_start|>assistant\n")[-1]:
            return "So it is \\boxed{1735}."
        return "I should look this up. <|begin_search_query|>comet of Vell<|end_search_query|> ignored"

    ctx, policy, retriever = make_ctx(tiny_tokenizer, reply)
    [prediction] = get_method("search-o1")(ctx, [QUESTIONS[1]])
    assert (prediction.answer, prediction.searches, retriever.calls) == ("1735", 1, [1])
    assert "<|begin_search_result|>The comet was recorded in 1735.<|end_search_result|>" in prediction.response
    assert "ignored" not in prediction.response  # generation stops at the end of the query


def test_agent_runs_the_search_r1_protocol(tiny_tokenizer):
    def reply(text):
        return "<answer> 1714 </answer>" if "<information>" in text else "<search> violin of Vell </search>"

    ctx, _, retriever = make_ctx(tiny_tokenizer, reply)
    predictions = get_method("agent")(ctx, QUESTIONS)
    assert [(p.answer, p.searches, p.stop_reason) for p in predictions] == [("1714", 1, "answer")] * 2
    assert [(p.turns, p.invalid_actions) for p in predictions] == [(2, 0)] * 2  # a search turn, an answer turn
    assert retriever.calls == [2]
    # predictions.jsonl's segments: the policy's turns and the inserted passages apart, as the loss mask has them
    for prediction in predictions:
        by = [s["by"] for s in prediction.segments]
        assert by == ["policy", "inserted", "policy"], prediction.segments
        assert "<search> violin of Vell </search>" in prediction.segments[0]["text"]
        assert prediction.segments[1]["text"].strip().startswith("<information>")
        assert "<answer> 1714 </answer>" in prediction.segments[2]["text"]
        assert "".join(s["text"] for s in prediction.segments) == prediction.response
    rows = []
    questions = [Question("a", QUESTIONS[0], ("1714",), "world")]
    evaluate_methods(["agent", "direct"], {"world": questions}, ctx, batch_size=1, on_prediction=rows.append)
    assert rows[0]["segments"][1]["by"] == "inserted" and "segments" not in rows[1]  # the agent's rows only


def test_evaluate_methods_scores_em_f1_subem_and_searches(tiny_tokenizer):
    ctx, _, _ = make_ctx(tiny_tokenizer, lambda text: "1714")
    questions = [Question("a", QUESTIONS[0], ("1714",), "world"), Question("b", QUESTIONS[1], ("1735",), "world")]
    rows = []
    scores = evaluate_methods(["direct", "rag"], {"world": questions}, ctx, batch_size=1, on_prediction=rows.append)
    assert scores["direct"]["world"]["em"] == 0.5 and scores["direct"]["world"]["n"] == 2
    assert scores["rag"]["world"]["searches"] == 1.0
    assert averages(scores)["direct"]["em"] == 0.5
    assert [(r["method"], r["id"], r["em"]) for r in rows] == [
        ("direct", "a", 1.0),
        ("direct", "b", 0.0),
        ("rag", "a", 1.0),
        ("rag", "b", 0.0),
    ]


@pytest.mark.parametrize(
    "response, answer",
    [
        ("<think>x</think><answer> Paris </answer>", "Paris"),
        ("The answer is: 2014", "2014"),
        ("\n\nFinal answer: X", "X"),
        ("Answers vary", "Answers vary"),
        ("", None),
    ],
)
def test_short_answer(response, answer):
    assert short_answer(response) == answer


def test_boxed_answer_skips_the_echoed_template():
    assert boxed_answer(r"format \boxed{YOUR_ANSWER}. So \boxed{\text{Paris}}") == "Paris"
    assert boxed_answer(r"\boxed{YOUR_ANSWER}") is None and boxed_answer("no box") is None


ECHO_METHOD = """
from inspo_cli.evaluation.methods.base import Prediction


def predict(ctx, questions):
    return [Prediction("1714", f"echo: {q}") for q in questions]
"""


def test_a_method_is_one_file_plus_one_registry_line(tiny_tokenizer, tmp_path, monkeypatch):
    from inspo_cli.evaluation.methods import METHODS
    from inspo_cli.registry import Strategy

    assert list(METHODS) == ["direct", "rag", "ircot", "search-o1", "agent"]  # Table 1's order, which reports keep
    with pytest.raises(ValueError, match="unknown inference method 'echo'; registered: direct, rag, ircot"):
        get_method("echo")
    (tmp_path / "echo_method.py").write_text(ECHO_METHOD)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(METHODS.entries, "echo", Strategy("echo_method", "echoes"))
    ctx, _, _ = make_ctx(tiny_tokenizer, lambda text: "unused")
    questions = [Question("a", QUESTIONS[0], ("1714",), "world")]
    assert evaluate_methods(["echo"], {"world": questions}, ctx, batch_size=1)["echo"]["world"]["em"] == 1.0
