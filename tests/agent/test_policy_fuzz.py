"""Nothing the policy writes stops a run (issue 51): the rollout engine, driven by adversarial and random policy output
through both protocols, both schedules and every registered tool, over an in-process BM25 index and over HTTP
(`inspo serve-retriever`'s app with a small `--max-query-chars`), finishes every trajectory without an exception and
counts what it could not use as invalid actions. Hypothesis draws the turns from a fixed seed (`derandomize`): the
fast suite drives a few thousand turns, `--runslow` ten times more."""

from __future__ import annotations

import json
import time

import pytest
from helpers.fake_retrievers import OverlapRetriever
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from inspo_cli.agent import RolloutEngine
from inspo_cli.agent.rollout import STOP_REASONS
from inspo_cli.agent.tools import ToolContext, build_tools
from inspo_cli.config import RolloutConfig
from inspo_cli.policy.generation import Generation
from inspo_cli.registry import TOOLS
from retriever.client import HTTPRetriever
from retriever.server import create_app, serve_in_background

MAX_QUERY_CHARS = 64  # the HTTP server's --max-query-chars: a long query is the policy's to shorten
CONFIG = {
    "max_turns": 3,
    "max_tokens_per_turn": 4096,
    "max_observation_tokens": 96,
    "max_prompt_tokens": 512,
    "max_total_tokens": 8192,
    "max_response_tokens": 8192,
}  # room for the hostile turns whole: a cut one is no call
DEEP = 1000  # past json's recursion limit with the engine's frames on the stack

# What the hostile pass wrote, and its neighbours: each became a traceback before the fix.
HOSTILE = [
    "<calculate>(1/3)**9999</calculate>",
    "<calculate>-(7/3)**-9999</calculate>",
    "<calculate>9**9**9</calculate>",
    "<calculate>0.5**9000</calculate>",
    "<calculate>2**-9000</calculate>",
    "<calculate>-2.0**-9999</calculate>",
    "<calculate>1e101</calculate>",
    "<calculate>1/0</calculate>",
    "<calculate>" + "(" * 60 + "</calculate>",
    "<calculate>\x00</calculate>",
    "<calculate>" + "9" * 5000 + "</calculate>",
    "<calculate></calculate>",
    "<search>" + "long query " * 30 + "</search>",
    "<search>\x00</search>",
    "<search></search>",
    "<search><search>nested</search></search>",
    "<search>a<answer>b</search>",
    "<answer>unclosed",
    "</search></answer>",
    "<search>",
    "<information>forged</information>",
    "",
    "<tool_call>" + "[" * DEEP + "]" * DEEP + "</tool_call>",
    '<tool_call>{"name": "search", "arguments": {"query": ' + "[" * DEEP + "]" * DEEP + "}}</tool_call>",
    '<tool_call>{"name": "search", "arguments": {"query": "\\ud800 lone"}}</tool_call>',
    '<tool_call>{"name": "search", "arguments": {"query": "\\udc00' + "x" * 200 + '"}}</tool_call>',
    '<tool_call>{"name": "calculator", "arguments": {"expression": "0.5**9000"}}</tool_call>',
    '<tool_call>{"name": "calculator", "arguments": {"expression": 1' + "0" * 5000 + "}}</tool_call>",
    '<tool_call>{"name": "calculator", "arguments": {"expression": NaN}}</tool_call>',
    '<tool_call>{"name": ["search"], "arguments": {}}</tool_call>',
    '<tool_call>{"name": "search"}</tool_call>',
    '<tool_call>{"name": "search", "arguments": null}</tool_call>',
    "<tool_call></tool_call>",
    "<tool_call>{",
    '<tool_call>{"name": "nope", "arguments": {}}</tool_call>',
    '<tool_call>{"\\ud800": 1}</tool_call>',
]

_LONG_QUERY = "long query " * 30
REFUSED_CALLS = [  # one refused call per tool and protocol
    f"<search>{_LONG_QUERY}</search>",
    "<calculate>1/0</calculate>",
    f"<tool_call>{json.dumps({'name': 'search', 'arguments': {'query': _LONG_QUERY}})}</tool_call>",
    f"<tool_call>{json.dumps({'name': 'calculator', 'arguments': {'expression': '1/0'}})}</tool_call>",
]

_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=60)  # token ids can never decode to a surrogate
_JSON = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=8,
)


@st.composite
def _tag(draw) -> str:
    tag = draw(st.sampled_from(["search", "calculate", "answer", "tool_call", "information", "think"]))
    body = draw(_TEXT | st.sampled_from(["(1/3)**9999", "2**-9000", "9**9**9", "7 / 4", "x" * 100]))
    return f"<{tag}>{body}" + draw(st.sampled_from([f"</{tag}>", "", f"</{tag}></{tag}>"]))


@st.composite
def _tool_call(draw) -> str:
    name = draw(st.sampled_from([*TOOLS, "answer", ""]) | _JSON)
    arguments = draw(
        st.dictionaries(st.sampled_from(["query", "expression", "other"]), _JSON | _TEXT, max_size=2) | _JSON
    )
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


_WORDS = st.text(st.sampled_from("abcdefghij 0123456789+-*/()."), max_size=30) | st.builds(
    "{} {} {}".format,
    st.integers(-999, 999),
    st.sampled_from(["+", "-", "*", "/", "//", "%", "**", "<"]),
    st.integers(-99, 99),
)
# calls as the policy means them, in either protocol: the tools' own answers and refusals (a long query over HTTP)
_WELL_FORMED = st.one_of(
    st.builds("<search> {} </search>".format, _WORDS),
    st.builds("<calculate> {} </calculate>".format, _WORDS),
    st.builds("<answer> {} </answer>".format, _WORDS),
    st.builds(
        lambda name, text: (
            f"<tool_call>\n{json.dumps({'name': name, 'arguments': {argument: text}})}\n</tool_call>"
            if (argument := "query" if name == "search" else "expression")
            else ""
        ),
        st.sampled_from(["search", "calculator"]),
        _WORDS,
    ),
)
TEXT_TURN = st.one_of(
    st.sampled_from(HOSTILE),
    _WELL_FORMED,
    _WELL_FORMED,
    _TEXT,
    _tag(),
    _tool_call(),
    st.lists(_tag() | _tool_call() | _TEXT, max_size=3).map("".join),
)
# (text, or raw token ids when not None; how the turn ended; the EOS id it ended at)
TURN = st.tuples(
    TEXT_TURN,
    st.none() | st.lists(st.integers(0, 599), max_size=20),
    st.sampled_from(["stop", "eos", "length"]),
    st.booleans(),
)


class FuzzPolicy:
    """The `PolicyBackend` seam writing the drawn turns, each trajectory's next one picked by its context (so that
    the turns a trajectory gets do not hang on the order its requests come in), or `in_order`; as `stream` it
    finishes requests in the order they came (the per-trajectory schedule's engine)."""

    def __init__(self, tokenizer):
        self.tokenizer, self.turns, self.generated, self.in_order = tokenizer, [], 0, False
        self.eos_ids = {tokenizer.eos_token_id, tokenizer.pad_token_id}  # a generation config with two EOS ids

    def _one(self, context, budget: int) -> Generation:
        pick = self.generated if self.in_order else len(context) + sum(context[-4:])
        text, token_ids, finish, other_eos = self.turns[pick % len(self.turns)]
        self.generated += 1
        ids = list(token_ids) if token_ids is not None else self.tokenizer(text, add_special_tokens=False)["input_ids"]
        ids = [i % len(self.tokenizer) for i in ids]
        if finish == "eos":
            ids.append(self.tokenizer.pad_token_id if other_eos else self.tokenizer.eos_token_id)
        if len(ids) > budget:
            ids, finish = ids[:budget], "length"
        return Generation(ids, finish)

    def generate(self, contexts, max_new_tokens, stop=()):
        return [self._one(context, budget) for context, budget in zip(contexts, max_new_tokens)]

    def stream(self, stop):
        policy, waiting = self, []

        class Stream:
            def submit(self, key, context, max_new_tokens, seed):
                waiting.append((key, context, max_new_tokens))

            def poll(self):
                key, context, budget = waiting.pop(0)
                return [(key, policy._one(context, budget))]

            def pending(self):
                return len(waiting)

        return Stream()


@pytest.fixture(scope="module")
def engines(tiny_tokenizer, world_retriever):
    """An engine per protocol x schedule x retriever (BM25 in-process; over HTTP with a small --max-query-chars),
    every registered tool, all driven by one FuzzPolicy."""
    policy = FuzzPolicy(tiny_tokenizer)
    served = serve_in_background(create_app(OverlapRetriever(), max_query_chars=MAX_QUERY_CHARS))
    url = served.__enter__()
    http = HTTPRetriever(url, max_retries=1)
    built = {}
    for protocol in ("search-r1", "function-calling"):
        for schedule in ("turn-synchronous", "per-trajectory"):
            for where, retriever in (("in-process", world_retriever), ("http", http)):
                tools = build_tools(list(TOOLS), ToolContext(retriever, topk=2))
                config = RolloutConfig(**CONFIG, schedule=schedule)
                built[protocol, schedule, where] = RolloutEngine(
                    policy, retriever, tiny_tokenizer, config, topk=2, chat=True, tools=tools, protocol=protocol
                )
    yield policy, built
    http.close()
    served.__exit__(None, None, None)


def drive(engines, examples: int) -> dict:
    """Roll out `examples` drawn batches; the totals over every trajectory."""
    policy, built = engines
    totals = {"turns": 0, "trajectories": 0, "invalid_actions": 0, "answers": 0, "calls": {}, "errors": {}}

    @settings(
        max_examples=examples, derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(key=st.sampled_from(sorted(built)), turns=st.lists(TURN, min_size=1, max_size=12), batch=st.integers(1, 8))
    def roll_out(key, turns, batch):
        engine = built[key]
        policy.turns, policy.generated = turns, 0
        trajectories = engine.run(["Answer it."] * batch, [f"question {i}" for i in range(batch)])
        assert len(trajectories) == batch
        for t in trajectories:
            assert t.stop_reason in STOP_REASONS
            assert len(t.completion_ids) == len(t.completion_mask)
            assert len(t.prompt_ids) + len(t.completion_ids) <= CONFIG["max_total_tokens"]
            assert sum(t.tool_errors.values()) <= t.invalid_actions <= t.turns
            assert all(t.tool_errors.get(name, 0) <= calls for name, calls in t.tool_calls.items())
            for name, calls in t.tool_calls.items():
                totals["calls"][name] = totals["calls"].get(name, 0) + calls
            for name, errors in t.tool_errors.items():
                totals["errors"][name] = totals["errors"].get(name, 0) + errors
            totals["invalid_actions"] += t.invalid_actions
            totals["answers"] += t.stop_reason == "answer"
        totals["turns"] += policy.generated
        totals["trajectories"] += batch

    # every tool's refusal on every engine, whatever Hypothesis draws (its draws depend on what ran before it in the
    # process: under -n a worker's earlier tests once left the search refusal undrawn)
    for key in sorted(built):
        for text in REFUSED_CALLS:
            roll_out = example(key=key, turns=[(text, None, "stop", False)], batch=1)(roll_out)
    roll_out()
    return totals


def _check_reached_every_path(totals: dict) -> None:
    assert totals["invalid_actions"] > 0 and totals["answers"] > 0
    assert set(totals["errors"]) == set(TOOLS)  # every tool answered some call with an error observation
    assert all(totals["calls"][name] > totals["errors"][name] for name in TOOLS)  # and others with a result


def test_every_hostile_turn_through_every_engine_is_one_turn_and_the_rollout_goes_on(engines):
    """Each turn of the hostile pass, then an answer, in each protocol, schedule and retriever: two turns, the
    answer read (from the policy's whole text, as Search-R1 reads it), the hostile turn at most one invalid action
    (several are valid calls in one protocol)."""
    policy, built = engines
    invalid, policy.in_order = 0, True
    for key, engine in built.items():
        for text in HOSTILE:
            policy.turns, policy.generated = (
                [(text, None, "stop", False), ("<answer> x </answer>", None, "stop", False)],
                0,
            )
            [t] = engine.run(["Answer it."], ["question"])
            assert (t.stop_reason, t.turns) == ("answer", 2) and t.answer.endswith("x"), (key, text[:80])
            assert t.invalid_actions in (0, 1) and sum(t.tool_errors.values()) <= t.invalid_actions
            invalid += t.invalid_actions
    policy.in_order = False
    assert invalid > len(built) * len(HOSTILE) * 3 // 4


def test_adversarial_policy_output_never_stops_a_rollout(engines):
    started = time.perf_counter()
    totals = drive(engines, examples=250)
    seconds = time.perf_counter() - started
    print(f"\nfuzz: {totals['turns']} turns, {totals['trajectories']} trajectories in {seconds:.1f} s; {totals}")
    # 3,001 turns alone; the same seed drew about 2,500 inside the whole suite (Hypothesis' generation also depends
    # on what ran before it in the process), so the floor only guards against a fuzz test that stopped fuzzing
    assert totals["turns"] >= 2000
    _check_reached_every_path(totals)


@pytest.mark.slow
def test_adversarial_policy_output_never_stops_a_rollout_at_length(engines):
    started = time.perf_counter()
    totals = drive(engines, examples=2500)
    print(
        f"\nfuzz: {totals['turns']} turns, {totals['trajectories']} trajectories in "
        f"{time.perf_counter() - started:.1f} s; {totals}"
    )
    assert totals["turns"] >= 25_000
    _check_reached_every_path(totals)


class EndsAtAnotherEos:
    """A backend whose generation config has two EOS ids, the tokenizer's and `eos` (which need not be a special
    token): its first turn ends at `eos`, its second answers."""

    def __init__(self, tokenizer, eos: int):
        self.tokenizer, self.eos_ids, self.eos, self.calls = tokenizer, {tokenizer.eos_token_id, eos}, eos, 0

    def generate(self, contexts, max_new_tokens, stop=()):
        self.calls += 1
        if self.calls == 1:
            return [
                Generation(self.tokenizer("I do not know", add_special_tokens=False)["input_ids"] + [self.eos], "eos")
            ]
        return [Generation(self.tokenizer("<answer> x </answer>", add_special_tokens=False)["input_ids"], "stop")]


@pytest.mark.parametrize("eos", ["<|endoftext|>", "."])  # a special token; a plain one (Llama 3's <|eot_id|> kind)
def test_a_turn_ending_at_another_eos_id_drops_it_and_goes_on(tiny_tokenizer, eos):
    eos_id = tiny_tokenizer.convert_tokens_to_ids(eos)
    assert eos_id != tiny_tokenizer.eos_token_id and (eos_id in tiny_tokenizer.all_special_ids) == (eos != ".")
    engine = RolloutEngine(
        EndsAtAnotherEos(tiny_tokenizer, eos_id), OverlapRetriever(), tiny_tokenizer, RolloutConfig(**CONFIG), chat=True
    )
    [t] = engine.run(["Answer it."], ["question"])
    said = tiny_tokenizer("I do not know", add_special_tokens=False)["input_ids"]
    corrective = tiny_tokenizer(engine.format.corrective[1], add_special_tokens=False)["input_ids"]
    assert t.completion_ids[: len(said) + len(corrective)] == said + corrective  # no EOS in the context or the loss
    assert (t.stop_reason, t.answer, t.turns, t.invalid_actions) == ("answer", "x", 2, 1)
