"""Run directories for `inspo report --audit`: an INSPO run (the demo recipe, evolve_every 2) whose evolution at step
2 accepted i1 (from i0), with rollout_traits.jsonl rows a test shapes, or, as runs before the audit were, only a
checkpoint's replay buffer."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.run_dirs import make_run


def trait_row(
    step: int,
    instruction_id: str,
    rollouts: int = 30,
    answer_words: float = 2,
    several: float = 0.0,
    copied: float = 0.0,
    searches: float = 1,
    reward: float = 0.5,
    bonus: float = 0.0,
) -> dict:
    """A rollout_traits.jsonl row of `rollouts` answered rollouts with these means (shares for `several`, `copied`;
    `bonus` is the format bonus per rollout, inside `reward`)."""
    return {
        "step": step,
        "instruction_id": instruction_id,
        "rollouts": rollouts,
        "answered": rollouts,
        "answer_words": round(answer_words * rollouts),
        "several_answers": round(several * rollouts),
        "copied": round(copied * rollouts),
        "searches": round(searches * rollouts),
        "no_search": rollouts if searches == 0 else 0,
        "reward": round(reward * rollouts, 6),
        "em": round((reward - bonus) * rollouts, 6),
        "format_bonus": round(bonus * rollouts, 6),
    }


def evolution(by_type: dict | None = None, **candidate) -> dict:
    """Evolution at step 2: i1 ("Search first.") accepted from i0 ("Answer it. {question}"), one other rejected."""
    accepted = {
        "text": "Search first.",
        "parent": "i0",
        "proposer": "reflection",
        "round": 1,
        "verification_score": 0.5,
        "accepted": True,
        "reason": "accepted",
        "instruction_id": "i1",
        "parent_score": 0.4,
        "difference": 0.1,
        "difference_se": 0.05,
        "leak": None,
        **({"by_type": by_type} if by_type is not None else {}),
        **candidate,
    }
    rejected = {**accepted, "text": "Guess.", "accepted": False, "reason": "below parent", "instruction_id": None}
    return {"step": 2, "proposer": "reflection", "parents": ["i0"], "retired": [], "candidates": [accepted, rejected]}


def audit_run(root: Path, name: str = "inspo-s0", rows: list[dict] | None = None, format_weight: float = 0.2) -> Path:
    """A finished INSPO run (4 steps) with one evolution and, unless None, these rollout_traits.jsonl rows."""
    run = make_run(root, name, 0, [0.1, 0.2, 0.3, 0.4], 0.3, overrides=(f"reward.format_weight={format_weight}",))
    (run / "evolutions.json").write_text(json.dumps([evolution({"temporal": TYPE_ROW})]))
    if rows is not None:
        (run / "rollout_traits.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run


TYPE_ROW = {"questions": 5, "candidate_reward": 0.6, "parent_reward": 0.4, "candidate_em": 0.4, "parent_em": 0.4}


def before_after(after: dict | None = None, before: dict | None = None, rollouts: int = 30) -> list[dict]:
    """i0's rollouts at steps 1-2 and i1's at steps 3-4 (and i2's, which no comparison reads), alike but for
    `after` (i1's, per rollout) and `before` (i0's)."""
    rows = []
    for step in (1, 2):
        rows += [trait_row(step, "i0", rollouts, **(before or {})), trait_row(step, "i2", 5)]
    for step in (3, 4):
        rows += [trait_row(step, "i1", rollouts, **(after or {})), trait_row(step, "i0", 5)]
    return rows


def replay_state(entries: list[dict]) -> dict:
    """A coevolution.json holding these replay entries (a population of i0 and i1)."""
    candidates = [
        {
            "id": i,
            "text": t,
            "parent": p,
            "proposer": "initial" if p is None else "reflection",
            "step_born": 0 if p is None else 2,
            "verification_score": None,
            "weight_history": [],
            "step_pruned": None,
        }
        for i, t, p in (("i0", "Answer it. {question}", None), ("i1", "Search first.", "i0"))
    ]
    return {
        "population": {
            "version": 1,
            "seed": 0,
            "next_id": 2,
            "last_step_ended": 4,
            "pending": {},
            "candidates": candidates,
        },
        "replay": {"capacity": 4096, "entries": entries},
        "evolutions": [evolution()],
    }


def replay_entry(step: int, instruction_id: str, response: str, reward: float = 0.0) -> dict:
    return {
        "instruction_id": instruction_id,
        "question_key": f"world:q{step}",
        "question": "Who led Sontania when Brakune Kedahl was born?",
        "golden_answers": ["Selo Lido"],
        "response": response,
        "reward": reward,
        "step": step,
    }
