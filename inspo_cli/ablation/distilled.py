"""The distilled cell of a decomposition: `inspo distill`'s student of a seed's run, with the instruction it was taught
to answer under.

`inspo distill RUN` (`training.distill`) trains the run's policy, prompted with a student instruction (the seed
instruction S unless told otherwise), on what the same policy answered with I*: context distillation of I* into the
weights. Its run directory is `RUN/distill/` (`RunDir.distill_dir`), with distill.json saying which checkpoint taught
it with which instruction. The decomposition evaluates the student's final policy with the instruction it was taught
under, like every other cell and with the source run's evaluation settings, when the distillation

    finished (summary.json) and kept its final policy, and
    was taught by the policy this decomposition reports (the same step) with the same I*.

Otherwise the seed has no distilled cell and the table says why: a student of another checkpoint or instruction
would tell how much of *another* instruction effect survives, a number that would look right and be wrong.
"""

from __future__ import annotations

from inspo_cli.ablation.cells import DISTILLED, CellSpec, SeedCells, cell_key
from inspo_cli.ablation.results import RunResult
from inspo_cli.runs import RunDir


def plan_distilled(plan: SeedCells, run: RunDir, result: RunResult, recipe, seed_text: str, evolved: str) -> None:
    """Add the distilled cell to `plan` when `run` holds a distillation of the reported policy and I*; set
    `plan.distilled_note` to why not when it holds one that cannot be measured; nothing when it holds none."""
    student = RunDir(run.distill_dir)
    if not student.path.is_dir():
        return
    where = f"{run.path.name}/{student.path.name}"
    info, why = _usable(run, student, result, evolved)
    if info is None:
        plan.distilled_note = f"{where}: {why}"
        return
    text = info["student_prompt_instruction"]  # what its prompts were built from ("{question}" for no instruction)
    model = f"{where}@final"
    plan.cells[DISTILLED] = CellSpec(
        *DISTILLED, student, model, text, cell_key(model, text, recipe, result.seed), settings=run
    )
    plan.distilled = {
        "run": where,
        "student_instruction": info["student_instruction"],
        "student_is_seed": text == seed_text,
    }


def _usable(run: RunDir, student: RunDir, result: RunResult, evolved: str) -> tuple[dict | None, str]:
    """(distill.json, "") of a distillation the decomposition can measure, else (None, why not and what to do)."""
    info = student.distill_info()
    if info is None:
        return None, f"no {student.DISTILL_INFO}, so not a run `inspo distill` made; move it out of the way"
    if student.summary() is None:
        return None, f"not finished (no {student.SUMMARY}); resume it with `inspo distill` and report again"
    if not student.has_final_model():
        return None, f"kept no final policy ({student.relative(student.final_dir)}); distil again"
    if info["teacher_step"] != result.step:
        return None, (
            f"taught by step {info['teacher_step']}'s policy, and this decomposition reports step {result.step}; "
            f"distil that step (`inspo distill {run.path} --step {result.step}`) or report the step it was taught by"
        )
    if info["teacher_instruction"] != evolved:
        return None, "taught with another instruction than the I* reported here; distil again"
    return info, ""
