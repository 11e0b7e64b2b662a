"""`rollout.schedule: per-trajectory` (issue 41, item 1): trajectories advance on their own, and each one is the
trajectory the turn-synchronous engine makes, whatever order the engine finishes requests in."""

from __future__ import annotations

import dataclasses
import random
import threading
import time

import pytest
from helpers.fake_retrievers import OverlapRetriever
from helpers.rollout import engine_for

from inspo_cli.config import ModelConfig, Recipe, RolloutConfig
from inspo_cli.config.validation import ConfigValueError


class ScriptedStream:
    """The `GenerationStream` seam over a scripted policy: requests finish one per poll, in an order drawn from
    `seed` (not the order they came in), as an engine whose requests have different lengths finishes them."""

    def __init__(self, policy, stop, seed=0, per_poll=1):
        self.policy, self.stop, self.random, self.per_poll = policy, stop, random.Random(seed), per_poll
        self.waiting: list = []
        self.seeds: dict = {}
        self.log: list = []

    def submit(self, key, context, max_new_tokens, seed):
        self.waiting.append((key, list(context), max_new_tokens))
        self.seeds[(key, len(self.seeds))] = seed

    def poll(self):
        done = []
        for _ in range(min(self.per_poll, len(self.waiting))):
            key, context, budget = self.waiting.pop(self.random.randrange(len(self.waiting)))
            (generation,) = self.policy.generate([context], [budget], self.stop)
            done.append((key, generation))
            self.log.append(("generated", key))
        return done

    def pending(self):
        return len(self.waiting)


SCRIPTS = {
    "Hokin": ["<think> look </think> <search> founder of Hokin Works </search>", "<answer> Ada Vell </answer>"],
    "violin": [
        "no tags at all",
        "<search> violin of Vell </search>",
        "<search> again </search>",
        "<search> and again </search>",
        "<answer> 1714 </answer>",
    ],
    "castle": ["<search> castle </search><EOS>", "wandering<EOS>", "<answer> stone </answer>"],
    "river": ["a very long turn " * 30],
    "bridge": ["<calculate> 2024 - 1987 </calculate>", "<calculate> 1/0 </calculate>", "<answer> 37 </answer>"],
}
QUESTIONS = [
    "Who founded Hokin Works?",
    "When was the violin of Vell made?",
    "What is the castle made of?",
    "Where does the river go?",
    "How old is the bridge?",
]


class ByQuestion:
    """The scripted policy, keyed by the script whose key comes first in the context (the question, before any
    observation mentions another key): each trajectory follows its own script whatever order turns come in."""

    def __init__(self, policy):
        self.policy = policy

    def generate(self, contexts, max_new_tokens, stop=()):
        out = []
        for context, budget in zip(contexts, max_new_tokens):
            text = self.policy.tokenizer.decode(context)
            key = min((k for k in self.policy.scripts if k in text), key=text.index)
            turn = self.policy.turns.get(key, 0)
            self.policy.turns[key] = turn + 1
            script = self.policy.scripts[key]
            (generation,) = type(self.policy)(
                self.policy.tokenizer, {key: [script[min(turn, len(script) - 1)]]}
            ).generate([context], [budget], stop)
            out.append(generation)
        return out


def rollout(tokenizer, schedule, seed=0, per_poll=1, **limits):
    engine, scripted, _ = engine_for(tokenizer, SCRIPTS, tools=["search", "calculator"], **limits)
    policy = engine.backend = ByQuestion(scripted)
    if schedule == "per-trajectory":
        engine.config = dataclasses.replace(engine.config, schedule="per-trajectory")
        streams = []

        def stream(stop):
            streams.append(ScriptedStream(policy, stop, seed, per_poll))
            return streams[-1]

        policy.stream = stream
    return engine.run(["Answer."] * len(QUESTIONS), QUESTIONS), engine


FIELDS = (
    "prompt_ids",
    "completion_ids",
    "completion_mask",
    "logprobs",
    "queries",
    "retrieved",
    "tool_calls",
    "tool_errors",
    "tool_observation_tokens",
    "turns",
    "invalid_actions",
    "answer",
    "stop_reason",
    "response",
    "last_turn_cut",
)


@pytest.mark.parametrize("seed, per_poll", [(0, 1), (1, 1), (2, 3), (3, 10)])
@pytest.mark.parametrize("limits", [{}, {"max_turns": 1}, {"max_total_tokens": 160, "max_tokens_per_turn": 40}])
def test_each_trajectory_is_the_one_the_synchronous_engine_makes(tiny_tokenizer, seed, per_poll, limits):
    synchronous, _ = rollout(tiny_tokenizer, "turn-synchronous", **limits)
    mine, _ = rollout(tiny_tokenizer, "per-trajectory", seed, per_poll, **limits)
    for want, got in zip(synchronous, mine):
        assert {f: getattr(got, f) for f in FIELDS} == {f: getattr(want, f) for f in FIELDS}
    assert {t.stop_reason for t in mine} >= {"answer"}  # the scripts reach the ends they are written for


def test_the_scripts_cover_every_end_and_observation(tiny_tokenizer):
    """What the equivalence above compares: answers, the final turn without search, cut turns, the context limit,
    EOS dropped before the corrective observation, tool errors."""
    trajectories, _ = rollout(tiny_tokenizer, "per-trajectory")
    by_question = dict(zip(QUESTIONS, trajectories))
    assert by_question[QUESTIONS[0]].stop_reason == "answer" and by_question[QUESTIONS[0]].queries
    assert by_question[QUESTIONS[1]].stop_reason == "max_turns" and by_question[QUESTIONS[1]].invalid_actions == 1
    assert by_question[QUESTIONS[3]].last_turn_cut and by_question[QUESTIONS[3]].truncated
    assert by_question[QUESTIONS[4]].tool_errors == {"calculator": 1}
    assert tiny_tokenizer.eos_token_id not in by_question[QUESTIONS[2]].completion_ids


class SlowSearch(OverlapRetriever):
    """A retriever whose answer takes 0.3 s; it records when each call started and ended."""

    def __init__(self, log):
        super().__init__()
        self.log = log

    def search(self, queries, k):
        self.log.append(("search started", threading.current_thread().name))
        started = time.perf_counter()
        time.sleep(0.3)
        self.seconds = time.perf_counter() - started
        self.log.append(("search done", None))
        return super().search(queries, k)


def test_tool_calls_overlap_generation_of_the_other_trajectories(tiny_tokenizer):
    """Hokin searches at once; violin writes three turns without tools meanwhile. The turn-synchronous engine would
    wait for the search before violin's second turn; here violin's turns are generated while the search runs, in
    a thread of the pool."""
    log: list = []
    scripts = {"Hokin": SCRIPTS["Hokin"], "violin": ["thinking", "still thinking", "<answer> 1714 </answer>"]}
    search = SlowSearch(log)
    engine, policy, _ = engine_for(tiny_tokenizer, scripts, retriever=search)
    engine.config = dataclasses.replace(engine.config, schedule="per-trajectory")

    class Paced(ScriptedStream):
        def poll(self):
            time.sleep(0.05)  # an engine step takes time
            done = super().poll()
            log.extend(("generated", key) for key, _ in done)
            return done

    policy.stream = lambda stop: Paced(policy, stop, per_poll=10)
    trajectories = engine.run(["Answer."] * 2, ["Who founded Hokin Works?", "When was the violin of Vell made?"])
    started = next(i for i, e in enumerate(log) if e[0] == "search started")
    done = log.index(("search done", None))
    violin_turns = [i for i, e in enumerate(log) if e == ("generated", 1)]
    assert len([i for i in violin_turns if started < i < done]) >= 2  # generated while the search was running
    assert log[started][1].startswith("inspo-tool")
    assert [t.stop_reason for t in trajectories] == ["answer", "answer"]
    # only the wait with nothing generating counts against the rollout (the trainer's retrieval phase)
    assert 0 < engine.tool_wait_seconds == engine.retrieval_seconds < search.seconds


def test_both_schedules_seed_each_turn_by_row_and_turn(tiny_tokenizer):
    """With request seeds, each request's seed depends on its row and turn only (one draw per batch from torch's
    generator): so both schedules give every turn the same seed."""
    import torch

    class SeedRecorder:
        request_seeds = True

        def __init__(self, policy):
            self.policy, self.seen = policy, []

        def generate(self, contexts, max_new_tokens, stop=(), seeds=None):
            self.seen.extend(seeds)
            return self.policy.generate(contexts, max_new_tokens, stop)

    seeds = {}
    for schedule in ("turn-synchronous", "per-trajectory"):
        engine, policy, _ = engine_for(tiny_tokenizer, {k: SCRIPTS[k] for k in ("Hokin", "violin")})
        engine.config = dataclasses.replace(engine.config, schedule=schedule)
        recorder = SeedRecorder(policy)
        engine.backend = recorder
        streams = []
        recorder.stream = lambda stop: streams.append(ScriptedStream(policy, stop, 5)) or streams[-1]
        torch.manual_seed(7)
        engine.run(["Answer."] * 2, QUESTIONS[:2])
        seeds[schedule] = sorted(recorder.seen) if schedule == "turn-synchronous" else sorted(streams[0].seeds.values())
    assert seeds["turn-synchronous"] == seeds["per-trajectory"] and len(set(seeds["per-trajectory"])) == 6


def test_per_trajectory_needs_a_colocated_vllm_engine():
    with pytest.raises(
        ConfigValueError,
        match="is per-trajectory, which drives a vLLM engine request by request: it "
        "needs model.backend=vllm with model.vllm_mode=colocate \\(got "
        "transformers\\)",
    ) as info:
        Recipe(rollout=RolloutConfig(schedule="per-trajectory"))
    assert info.value.field_name == "rollout.schedule"
    with pytest.raises(ConfigValueError, match="got vllm, server"):
        Recipe(rollout=RolloutConfig(schedule="per-trajectory"), model=ModelConfig(backend="vllm", vllm_mode="server"))
    Recipe(rollout=RolloutConfig(schedule="per-trajectory"), model=ModelConfig(backend="vllm"))
    with pytest.raises(ConfigValueError, match="must be one of turn-synchronous, per-trajectory"):
        RolloutConfig(schedule="async")


def test_a_tool_that_fails_fails_the_rollout_as_in_turns(tiny_tokenizer):
    class Broken(OverlapRetriever):
        def search(self, queries, k):
            raise RuntimeError("index gone")

    engine, policy, _ = engine_for(tiny_tokenizer, {"Hokin": SCRIPTS["Hokin"]}, retriever=Broken())
    engine.config = dataclasses.replace(engine.config, schedule="per-trajectory")
    policy.stream = lambda stop: ScriptedStream(policy, stop)
    with pytest.raises(RuntimeError, match="index gone"):
        engine.run(["Answer."], QUESTIONS[:1])
