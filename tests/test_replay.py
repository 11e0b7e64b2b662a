"""The replay buffer: bounded FIFO, failure priority (the parent's, latest step, low reward), distinct questions."""

from __future__ import annotations

import json
import random

import pytest

from inspo_cli.errors import InspoError
from inspo_cli.instructions.replay import Experience, ReplayBuffer, ReplayQuestion, experiences_from


def experience(name: str, reward: float, step: int, key: str | None = None) -> Experience:
    return Experience("i0", key or name, f"question {key or name}?", ("answer",), f"response {name}", reward, step)


def responses(experiences) -> list[str]:
    return [e.response.removeprefix("response ") for e in experiences]


def test_buffer_is_bounded_and_evicts_the_oldest():
    buffer = ReplayBuffer(capacity=3)
    buffer.extend(experience(name, 0.0, step) for step, name in enumerate("abcde"))
    assert len(buffer) == 3 and responses(buffer) == ["c", "d", "e"]
    buffer.add(experience("f", 1.0, 5))
    assert responses(buffer) == ["d", "e", "f"]


def test_failures_rank_the_parents_first_then_latest_step_then_low_reward():
    buffer = ReplayBuffer(capacity=10)
    buffer.extend([experience("old-fail", 0.0, 1), experience("new-fail", 0.0, 3), experience("new-pass", 1.0, 3),
                   experience("new-half", 0.5, 3), experience("mid-fail", 0.0, 2)])
    rng = random.Random(0)
    assert responses(buffer.failures(2, rng, "i0")) == ["new-fail", "new-half"]  # the latest step first
    assert responses(buffer.failures(4, rng, "i0")) == ["new-fail", "new-half", "mid-fail", "old-fail"]
    assert responses(buffer.failures(9, rng, "i0")) == ["new-fail", "new-half", "mid-fail", "old-fail"]  # never a pass
    assert buffer.failures(0, rng) == [] and ReplayBuffer(2).failures(3, rng) == []

    other = Experience("i7", "k", "question k?", ("answer",), "response other-new-fail", 0.0, 3)
    buffer.add(other)
    assert responses(buffer.failures(5, rng, "i0"))[-1] == "other-new-fail"  # the parent's own come first
    assert responses(buffer.failures(1, rng, "i7")) == ["other-new-fail"]


def test_failures_sample_uniformly_among_ties_at_the_boundary():
    buffer = ReplayBuffer(capacity=20)
    latest = [experience(f"latest{i}", 0.0, 5) for i in range(6)]
    earlier = [experience(f"earlier{i}", 0.0, 4) for i in range(2)]
    buffer.extend(earlier + [experience("pass", 1.0, 5)] + latest)
    seen = set()
    for seed in range(20):
        chosen = buffer.failures(3, random.Random(seed))
        assert len(chosen) == 3 and set(chosen) <= set(latest)  # all 3 places go to the latest step's failures
        seen |= set(responses(chosen))
    assert len(seen) == 6  # every tied failure gets its chance, not just the first three to arrive
    chosen = buffer.failures(7, random.Random(1))
    assert chosen[:6] == latest and chosen[6] in earlier
    assert buffer.failures(3, random.Random(42)) == buffer.failures(3, random.Random(42))
    assert set(buffer.failures(3, random.Random(0), instruction_id="i0")) <= set(latest)


def test_verification_questions_are_distinct_and_newest():
    buffer = ReplayBuffer(capacity=20)
    for step in range(3):
        buffer.extend(experience(f"{key}@{step}", 0.0, step, key=key) for key in ("q1", "q2", "q3", "q4"))
    questions = buffer.verification_questions(2, random.Random(0))
    assert len(questions) == 2 and len({q.key for q in questions}) == 2
    everything = buffer.verification_questions(10, random.Random(0))  # fewer distinct questions than asked
    assert everything == [ReplayQuestion(k, f"question {k}?", ("answer",)) for k in ("q1", "q2", "q3", "q4")]
    draws = {tuple(q.key for q in buffer.verification_questions(2, random.Random(s))) for s in range(20)}
    assert len(draws) > 1
    assert buffer.verification_questions(0, random.Random(0)) == []


def test_verification_questions_leave_out_the_latest_update_while_older_ones_suffice():
    """The latest step's questions are the ones the policy was just trained on (mostly under the parent's
    instruction): D_B comes from older questions where the buffer holds enough of them, topped up otherwise."""
    buffer = ReplayBuffer(capacity=20)
    buffer.extend(experience(f"{key}@1", 0.0, 1, key=key) for key in ("a", "b", "c", "d"))
    buffer.extend(experience(f"{key}@2", 0.0, 2, key=key) for key in ("d", "e", "f"))  # d was asked again
    for seed in range(10):
        assert {q.key for q in buffer.verification_questions(3, random.Random(seed))} == {"a", "b", "c"}
    drawn = {q.key for q in buffer.verification_questions(5, random.Random(0))}
    assert {"a", "b", "c"} < drawn and len(drawn & {"d", "e", "f"}) == 2


def test_state_round_trips_through_json_exactly():
    buffer = ReplayBuffer(capacity=3)
    buffer.extend(experiences_from(["i0", "i1"], ["k1", "k2"], ["q1?", "q2?"], [["a", "b"], ["c"]],
                                   ["r1", "r2"], [1, 0.25], step=4))
    state = buffer.state_dict()
    restored = ReplayBuffer.from_state_dict(json.loads(json.dumps(state)))
    assert restored.state_dict() == state and list(restored) == list(buffer)
    assert restored.capacity == 3 and list(restored)[0].golden_answers == ("a", "b")
    assert restored.latest_step() == 4 and ReplayBuffer(1).latest_step() is None


def test_bad_capacity_and_ragged_columns_are_refused():
    with pytest.raises(InspoError, match="population.replay_capacity"):
        ReplayBuffer(0)
    with pytest.raises(ValueError, match="different lengths"):
        experiences_from(["i0"], ["k1", "k2"], ["q"], [["a"]], ["r"], [1.0], step=0)
