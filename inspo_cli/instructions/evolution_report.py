"""What one evolution did and cost: every proposal and what became of it, for instructions.jsonl and the overhead.

The outcomes a proposal can have are the constants below; the cost is counted in optimizer calls, verification
rollouts and time.

    report = evolve(...)                       # evolution.py
    report.accepted()                          # the proposals that joined the population
    rows = report.as_dict()["candidates"]      # every proposal, accepted or not, and why
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

# What became of a proposed candidate
ACCEPTED = "accepted"
DUPLICATE = "duplicate"  # the same text (ignoring whitespace) as an alive instruction: never verified
TOO_LONG = "too long"  # over population.max_instruction_chars: never verified
BELOW_PARENT = "below parent"  # accept=beat_parent: over accept_margin standard errors below its parent on D_B
NOT_IN_TOP_N = "not in top-n"  # verified, but accept_top_n others of its batch scored higher
NO_ROOM = "no room"  # good enough, but the population was already full
CUT_OFF = "cut off"  # the unclosed last block of an answer stopped at optimizer.max_output_tokens: never verified
LEAKED = "leaked"  # leak_check refuse: holds an answer the optimizer was shown, or a question's words (leakage.py)
NO_QUESTIONS = "no questions"  # every replay question was shown to the optimizer: nothing left to verify on


@dataclass
class ProposedCandidate:
    """One instruction the optimizer proposed during an evolution, and what became of it."""

    text: str
    parent: str  # the parent's instruction id
    proposer: str
    round: int  # 1-based verification round
    verification_score: float | None  # mean reward on D_B; None unverified (duplicate, too long, cut off, verify off)
    accepted: bool
    reason: str  # ACCEPTED, DUPLICATE, TOO_LONG, CUT_OFF, LEAKED, NO_QUESTIONS, BELOW_PARENT, NOT_IN_TOP_N or NO_ROOM
    instruction_id: str | None = None  # its id in the population when accepted
    parent_score: float | None = None  # the parent's mean reward on the same D_B, in the same verification call
    # the mean per-question difference (candidate - parent) on D_B and its standard error (verification.py)
    difference: float | None = None
    difference_se: float | None = None
    leak: str | None = None  # why the leakage guard flagged it (leak_check refuse: not admitted; flag: admitted)
    # verify_sequential only (left out of as_dict otherwise): the D_B questions it was scored on, and the look (chunk
    # of D_B, 1-based) that decided it out of the looks planned
    verified_questions: int | None = None
    decided_at_look: int | None = None
    looks: int | None = None
    # verified only (left out of as_dict otherwise): per question type of D_B, the questions and the candidate's and
    # the parent's mean reward and EM on them (`by_type`; EM None where the verifier gives none)
    by_type: dict[str, dict[str, Any]] | None = None


SEQUENTIAL_ONLY = ("verified_questions", "decided_at_look", "looks", "by_type")


@dataclass
class EvolutionReport:
    """What one evolution did and cost, for instructions.jsonl and the run's overhead account."""

    step: int
    proposer: str
    parents: list[str]  # ids, best weight first
    retired: list[str]  # ids of the non-parents retired at the start (Alg. 1 line 17)
    candidates: list[ProposedCandidate] = field(default_factory=list)
    rounds: int = 0
    optimizer_calls: int = 0  # calls that returned an answer
    truncated_answers: int = 0  # of those, answers stopped before their end (output limit, provider's filter)
    verification_calls: int = 0
    verification_rollouts: int = 0  # sum over verifier calls of (candidates + 1 parent) x questions x verify_rollouts
    wall_s: float = 0.0
    stop_reason: str = ""  # "population full", "max_verify_rounds reached", "optimizer budget exhausted",
    # "no failed rollouts to reflect on", ...
    optimizer_error: str | None = None  # the optimizer's message when it stopped the evolution

    def accepted(self) -> list[ProposedCandidate]:
        return [c for c in self.candidates if c.accepted]

    def as_dict(self) -> dict[str, Any]:
        row = {**asdict(self), "wall_s": round(self.wall_s, 3)}
        row["candidates"] = [
            {k: v for k, v in c.items() if v is not None or k not in SEQUENTIAL_ONLY} for c in row["candidates"]
        ]
        return row


def by_type(
    candidate: Mapping[str, tuple[float, float | None]],
    parent: Mapping[str, tuple[float, float | None]],
    categories: Mapping[str, str],
) -> dict[str, dict[str, Any]]:
    """Per question type (a key missing from `categories`: "unknown"), over the questions both were scored on (by
    key: (mean reward, mean EM or None)): how many, and each side's mean reward and EM."""
    groups: dict[str, list[str]] = {}
    for key in sorted(set(candidate) & set(parent)):
        groups.setdefault(categories.get(key) or "unknown", []).append(key)

    def mean(scores: Mapping[str, tuple[float, float | None]], keys: list[str], i: int) -> float | None:
        values = [v for k in keys if (v := scores[k][i]) is not None]
        return None if len(values) < len(keys) else round(sum(values) / len(values), 6)

    return {
        kind: {
            "questions": len(keys),
            "candidate_reward": mean(candidate, keys, 0),
            "parent_reward": mean(parent, keys, 0),
            "candidate_em": mean(candidate, keys, 1),
            "parent_em": mean(parent, keys, 1),
        }
        for kind, keys in sorted(groups.items())
    }
