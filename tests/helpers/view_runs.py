"""Runs and ablations for `inspo view`'s tests and benchmark: a finished run (tests/helpers/run_dirs.make_run) with
kept rollouts (`run.save_rollouts`' rows, as training writes them), evolutions, figures and evaluations with
predictions; hostile text (markup, a script, a lone surrogate) where a policy or an optimizer writes."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.run_dirs import make_run, write_evaluation
from inspo_cli.jsonio import atomic_write_jsonl_gz
from inspo_cli.training.rollout_log import step_file_name

MARKUP = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
XSS = MARKUP + "\ud800"  # and a lone surrogate: a policy's broken byte, which rollouts keep (ASCII-escaped)
TYPES = ("single_hop", "bridge", "comparison")


WORDS = [
    f"{a}{b}"
    for a in ("ka", "lo", "mi", "ne", "po", "ru", "si", "ta", "ve", "zo")
    for b in ("ben", "dor", "fel", "gar", "hin", "lum", "mar", "nok", "rit", "sul", "tam", "wen")
]


def passage(seed: int, words: int = 120) -> str:
    """Text that compresses like retrieved passages do (not like one sentence repeated): for the benchmark's sizes."""
    state, out = seed * 2654435761 % 2**32, []
    for _ in range(words):
        state = (1103515245 * state + 12345) % 2**31
        out.append(WORDS[state % len(WORDS)])
    return " ".join(out)


def rollout_row(step: int, index: int, group_size: int = 4, hostile: bool = False, filler: bool = False) -> dict:
    group, k = divmod(index, group_size)
    em = 1.0 if (index % 3 == 0) else 0.0
    answer = "Ada Vell" if em else (XSS if hostile and k == 1 else "Bob")
    policy_1 = f"<think>step {step}</think><search> founder of Hokin Works {index} </search>"
    observation = '\n<information>Doc 1(Title: "Hokin Works") Hokin Works was founded by Ada Vell.'
    observation += (" " + passage(step * 1_000_003 + index) if filler else "") + "</information>\n"
    policy_2 = f"<answer> {answer} </answer>"
    return {
        "step": step,
        "group": group,
        "qid": f"world:q{group}",
        "question": f"Who founded Hokin Works? ({group})" + (f" {XSS}" if hostile and group == 0 else ""),
        "golden_answers": ["Ada Vell"],
        "instruction_id": ("i0", "i1", "i4")[group % 3],
        "type": TYPES[group % 3],
        "prompt": "Answer it. Who founded Hokin Works?",
        "prompt_ids": [1, 2, 3],
        "completion_ids": list(range(12)),
        "mask": [[1, 5], [0, 4], [1, 3]],
        "segments": [
            {"by": "policy", "text": policy_1},
            {"by": "inserted", "text": observation},
            {"by": "policy", "text": policy_2},
        ],
        "searches": [f"founder of Hokin Works {index}"],
        "retrieved": [["w1", "w2"]],
        "tool_calls": {"search": 1},
        "tool_errors": {},
        "invalid_actions": 1 if index % 5 == 4 else 0,
        "turns": 2,
        "answer": answer,
        "stop_reason": "length" if index % 7 == 6 else "answer",
        "truncated": index % 7 == 6,
        "reward": em + 0.2,
        "score": em,
        "em": em,
        "format_bonus": 0.2,
    }


def write_rollouts(run: Path, steps: int, rows_per_step: int, hostile: bool = False, filler: bool = False) -> None:
    for step in range(1, steps + 1):
        rows = (rollout_row(step, i, hostile=hostile, filler=filler) for i in range(rows_per_step))
        atomic_write_jsonl_gz(run / "rollouts" / step_file_name(step), rows)


def write_predictions(directory: Path, em: list[float], hostile: bool = False) -> None:
    write_evaluation(directory, em, "Answer it. {question}")
    rows = []
    for i, value in enumerate(em):
        prediction = "Ada Vell" if value else (XSS if hostile and i == 1 else "Bob")
        rows.append(
            {
                "method": "agent",
                "benchmark": "world",
                "id": f"q{i}",
                "question": f"Who founded firm {i}?",
                "golden_answers": ["Ada Vell"],
                "prediction": prediction,
                "em": value,
                "f1": value,
                "subem": value,
                "searches": 1,
                "stop_reason": "answer",
                "turns": 2,
                "invalid_actions": 0,
                "queries": [f"firm {i}"],
                "retrieved": [["w1"]],
                "response": f"<search> firm {i} </search><answer> {prediction} </answer>",
            }
        )
    (directory / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


EVOLUTIONS = [
    {
        "step": 2,
        "proposer": "reflection",
        "parents": ["i0"],
        "retired": ["i2"],
        "candidates": [
            {
                "text": "Search first.",
                "parent": "i0",
                "proposer": "reflection",
                "round": 1,
                "verification_score": 0.5,
                "accepted": True,
                "reason": "accepted",
                "instruction_id": "i1",
                "parent_score": 0.25,
            },
            {
                "text": "Plan, then search.",
                "parent": "i0",
                "proposer": "reflection",
                "round": 1,
                "verification_score": 0.25,
                "accepted": True,
                "reason": "accepted",
                "instruction_id": "i3",
                "parent_score": 0.25,
            },
            {
                "text": XSS,
                "parent": "i0",
                "proposer": "reflection",
                "round": 1,
                "verification_score": 0.0,
                "accepted": False,
                "reason": "below its parent",
                "instruction_id": None,
                "parent_score": 0.25,
            },
        ],
    },
    {
        "step": 4,
        "proposer": "reflection",
        "parents": ["i1"],
        "retired": ["i3"],
        "candidates": [
            {
                "text": "Search twice.",
                "parent": "i1",
                "proposer": "reflection",
                "round": 1,
                "verification_score": 0.75,
                "accepted": True,
                "reason": "accepted",
                "instruction_id": "i4",
                "parent_score": 0.5,
            },
        ],
    },
]


def make_view_run(
    root: Path, name: str = "demo", seed: int = 0, rows_per_step: int = 8, hostile: bool = True, population: bool = True
) -> Path:
    """A finished 4-step run with 2 kept groups (8 rows) per step, its lineage and two evaluations (steps 2, 4)."""
    run = make_run(root, name, seed, [0.2, 0.3, 0.4, 0.5], 0.5, population=population)
    write_rollouts(run, 4, rows_per_step, hostile)
    if population:
        (run / "evolutions.json").write_text(json.dumps(EVOLUTIONS))
    write_predictions(run / "evaluations/step-2", [1.0, 0.0, 0.0, 1.0, 0.0], hostile)
    write_predictions(run / "evaluations/step-4", [1.0, 1.0, 0.0, 0.0, 1.0], hostile)
    return run
