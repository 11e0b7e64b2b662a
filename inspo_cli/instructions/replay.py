"""The replay buffer B of INSPO (§3.2, Alg. 1 line 15): recent trajectories, for reflection and verification.

Every rollout of a training step is stored as an `Experience` (instruction, question, response, reward,
step). Evolution reads the buffer twice: the optimizer reflects on a few *failures* of the parent instruction
(latest step first, then lowest reward; other instructions' only to fill up), and candidate instructions are
verified on a sample of distinct *questions* D_B from it.

    buffer = ReplayBuffer(capacity=recipe.population.replay_capacity)
    buffer.extend(experiences)                                   # after each step
    failures = buffer.failures(4, random.Random(seed), instruction_id=parent.id)   # for the reflection prompt
    questions = buffer.verification_questions(200, rng)          # |D_B| for verification

The buffer is bounded: when full, the oldest experience is evicted, so it holds the latest steps. All
randomness comes from the `random.Random` the caller passes, so a seeded run draws the same samples again.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Collection, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from inspo_cli.errors import InspoError


@dataclass(frozen=True)
class Experience:
    """One trajectory and the reward it earned: the tuple (I, q, tau, r(tau)) of §3.2."""

    instruction_id: str
    question_key: str
    question: str
    golden_answers: tuple[str, ...]
    response: str
    reward: float
    step: int


@dataclass(frozen=True)
class ReplayQuestion:
    """A question to verify candidate instructions on, with the answers that count as correct."""

    key: str
    question: str
    golden_answers: tuple[str, ...]


class ReplayBuffer:
    """A bounded FIFO of `Experience`s; the oldest is evicted when a new one arrives and the buffer is full."""

    def __init__(self, capacity: int):
        if capacity < 1:
            raise InspoError(
                f"replay buffer capacity must be >= 1 (got {capacity}); set population.replay_capacity to e.g. 4096"
            )
        self.capacity = capacity
        self._entries: deque[Experience] = deque(maxlen=capacity)

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self):
        return iter(self._entries)

    def add(self, experience: Experience) -> None:
        self._entries.append(experience)

    def extend(self, experiences: Iterable[Experience]) -> None:
        self._entries.extend(experiences)

    def failures(self, k: int, rng: random.Random, instruction_id: str | None = None) -> list[Experience]:
        """Up to k failed rollouts (reward below 1, the most any metric gives) for the reflection prompt.

        App. E shows the optimizer examples that *the parent* "still gets wrong", and §3.2 takes them from the
        latest step. So the rule ranks failures by (not of `instruction_id`, step descending, reward ascending)
        and takes the first k: the parent's latest failures first, others' only when the parent has too few. A
        rollout that earned the full reward is never passed off as a failure, so fewer than k (even none) may
        come back. Where the k-th place is tied (say 40 failures of the parent's latest step compete for 4
        places), the tied ones are sampled uniformly with `rng`, so repeated evolutions see different failures.
        The result is in rank order.
        """
        if k <= 0:
            return []

        def rank(e: Experience) -> tuple[int, int, float]:
            return (int(e.instruction_id != instruction_id), -e.step, e.reward)

        ranked = sorted((e for e in self._entries if e.reward < 1.0), key=rank)  # stable: ties keep arrival order
        if len(ranked) <= k:
            return ranked
        boundary = rank(ranked[k - 1])
        certain = [e for e in ranked if rank(e) < boundary]
        tied = [e for e in ranked if rank(e) == boundary]
        chosen = sorted(rng.sample(range(len(tied)), k - len(certain)))
        return certain + [tied[i] for i in chosen]

    def questions(self) -> list[ReplayQuestion]:
        """Every distinct question the buffer holds (by key, each with its newest text and answers), sorted by key."""
        newest: dict[str, Experience] = {}
        for experience in self._entries:
            newest[experience.question_key] = experience
        return [ReplayQuestion(k, newest[k].question, newest[k].golden_answers) for k in sorted(newest)]

    def verification_questions(self, n: int, rng: random.Random, exclude: Collection[str] = ()) -> list[ReplayQuestion]:
        """n distinct questions (by question key) sampled uniformly from the buffer; all of them if fewer. Keys in
        `exclude` (the questions the candidates' prompt showed the optimizer, `leakage.py`) are never drawn.

        The latest step's questions are the ones the policy was just updated on, mostly under the parent's own
        instruction, which would favour the parent; they are drawn only when the older questions number fewer
        than n. A question seen several times is represented by (and dated by) its newest experience. Keys are
        sorted before sampling, so the draw depends only on the buffer's contents and `rng`, not on arrival order.
        """
        newest: dict[str, Experience] = {}
        for experience in self._entries:
            if experience.question_key not in exclude:
                newest[experience.question_key] = experience
        latest = self.latest_step()
        older = sorted(k for k, e in newest.items() if e.step != latest)
        recent = sorted(k for k, e in newest.items() if e.step == latest)
        chosen = _sample(older, n, rng)
        chosen += _sample(recent, n - len(chosen), rng)
        return [ReplayQuestion(k, newest[k].question, newest[k].golden_answers) for k in sorted(chosen)]

    def latest_step(self) -> int | None:
        return max((e.step for e in self._entries), default=None)

    def state_dict(self) -> dict[str, Any]:
        """The buffer as JSON-serialisable data, oldest experience first."""
        return {
            "capacity": self.capacity,
            "entries": [{**asdict(e), "golden_answers": list(e.golden_answers)} for e in self._entries],
        }

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> ReplayBuffer:
        buffer = cls(state["capacity"])
        buffer.extend(_experience(row) for row in state["entries"])
        return buffer


def _sample(keys: list[str], n: int, rng: random.Random) -> list[str]:
    return list(keys) if n >= len(keys) else rng.sample(keys, max(n, 0))


STATE_SHAPE = {
    "capacity": int,
    "entries": [
        {
            "instruction_id": str,
            "question_key": str,
            "question": str,
            "golden_answers": [str],
            "response": str,
            "reward": float,
            "step": int,
        }
    ],
}  # `state_dict`, as jsonio checks it


def _experience(row: dict[str, Any]) -> Experience:
    fields = set(Experience.__dataclass_fields__)  # a row may carry more than this version knows
    return Experience(
        **{**{k: v for k, v in row.items() if k in fields}, "golden_answers": tuple(row["golden_answers"])}
    )


def experiences_from(
    instruction_ids: Sequence[str],
    question_keys: Sequence[str],
    questions: Sequence[str],
    golden_answers: Sequence[Sequence[str]],
    responses: Sequence[str],
    rewards: Sequence[float],
    step: int,
) -> list[Experience]:
    """Column-wise batch data (as the trainer has it) into `Experience`s; all columns must be the same length."""
    columns = (instruction_ids, question_keys, questions, golden_answers, responses, rewards)
    if len({len(c) for c in columns}) != 1:
        raise ValueError(f"columns of different lengths: {[len(c) for c in columns]}")
    return [Experience(i, k, q, tuple(g), r, float(w), step) for i, k, q, g, r, w in zip(*columns)]
