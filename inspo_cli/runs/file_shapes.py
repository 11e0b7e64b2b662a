"""What each file a run writes must look like when it is read back (`inspo_cli.jsonio.read_json`): the keys readers
use, and the range of the numbers a table takes from them, so that a damaged file is one line naming it instead of
a traceback somewhere downstream or a wrong number in a table."""

from __future__ import annotations

import json

from inspo_cli.jsonio import COUNT, POSITIVE, UNIT, Range, shape_problem

INFO_SHAPE = {"seed": int, "command?": [str]}
SECONDS = Range(0.0)  # a wall time, or a share of one: a negative one or NaN would be averaged into a cost column
SUMMARY_SHAPE = {
    "steps": COUNT,
    "best_instruction": str,
    "best_instruction_id?": str,
    "wall_seconds?": SECONDS,
    "frozen_policy?": bool,
    "model?": (str, None),
    "recipe_model?": str,
    "metrics?": str,
    "compute?": {"processes": POSITIVE, "device": str},
    "stage?": str,
    "stages?": [{"kind": str, "dir": str}],
    "instruction_source?": str,
    "evaluations?": [{"step": COUNT, "em": UNIT}],
    "reward_collapse?": (dict, None),
    "overhead?": (
        None,
        {
            "evolutions": COUNT,
            "verification_rollouts": COUNT,
            "training_rollouts?": COUNT,
            "share_of_wall_time?": (SECONDS, None),
            "leaked_candidates?": COUNT,
            "optimizer?": (None, {"calls?": COUNT, "total_tokens?": (COUNT, None)}),
        },
    ),
}
# `inspo distill`'s record of what it distilled (inspo_cli.training.distill): the source run, the teacher (its
# checkpoint, as `inspo evaluate --checkpoint` names it, and the instruction I*) and the student's instruction ("" for
# none, the bare question; `student_prompt_instruction` is the text its prompts are built from, "{question}" then)
DISTILL_SHAPE = {
    "distilled_from": str,
    "form": str,
    "keep": str,
    "teacher_checkpoint": str,
    "teacher_step": COUNT,
    "teacher_model": str,
    "teacher_instruction": str,
    "teacher_instruction_id": str,
    "student_instruction": str,
    "student_instruction_source": str,
    "student_prompt_instruction": str,
}
# evolutions.json (`inspo report --audit`, `inspo view`): what is read of each evolution's candidates
SCORE = (Range(), None)  # a mean reward or difference; None where it was not measured
TYPE_SHAPE = {
    "questions": POSITIVE,
    "candidate_reward": SCORE,
    "parent_reward": SCORE,
    "candidate_em": (UNIT, None),
    "parent_em": (UNIT, None),
}  # one question type of a candidate's by_type
CANDIDATE_SHAPE = {
    "text": str,
    "parent": str,
    "accepted": bool,
    "instruction_id?": (str, None),
    **{f"{key}?": SCORE for key in ("verification_score", "parent_score", "difference")},
    "difference_se?": (Range(0.0), None),
    "by_type?": ({str: TYPE_SHAPE}, None),
}  # what the audit reads of a candidate: the rest of it is not shown
EVOLUTIONS_SHAPE = [{"step": COUNT, "candidates": [CANDIDATE_SHAPE]}]
# Other metrics may be NaN (a diverged loss is a run's to log); a tool's counts per trajectory never are (`check_tools`)
METRICS_ROW_SHAPE = {"step": COUNT, "update?": COUNT, "*": (float, None)}
TOOL_COUNTS = ("/calls", "/errors", "/observation_tokens")  # tools/<tool>/...: means per trajectory (rollout.summarize)
STAGED = ("metrics", "instruction_source")  # where a staged run's summary says its curves and instructions are
DAMAGED = "the run wrote it whole, so it was damaged since: copy it again from where the run ran, or leave the run out"


def check_tools(row: dict) -> str | None:
    """What is wrong with a metrics row's tool counts (`tools/<tool>/calls`, ...: null, or a finite count >= 0)."""
    for key, value in row.items():
        if key.startswith("tools/") and key.endswith(TOOL_COUNTS):
            if (problem := shape_problem(value, (Range(0.0), None), json.dumps(key))) is not None:
                return problem
    return None
