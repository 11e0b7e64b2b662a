"""`training.algorithm: distill`: context distillation of a run's evolved instruction I* into its weights, the
algorithm of the run directory `inspo distill RUN` makes (`training.distill_plan` derives its recipe and distill.json
from RUN; `experiment.distill` runs it). Off-policy, in two phases inside that one run directory:

Phase 1, sampling (rejection sampling's, `rejection_sampling.sample_phase`): the TEACHER, RUN's policy at the chosen
checkpoint (model.name_or_path of the derived recipe), prompted with that checkpoint's I*, rolls out every training
question `sampling.samples` times through the rollout engine, search included, at `rollout.temperature`. Every
trajectory is kept (`keep: all`, the default: context distillation imitates what the teacher does with I*, right or
wrong, as P²O's and Snell et al.'s keep their teacher samples), or only those with reward 1 (`keep: correct`).
Batches go to sampling/ and a killed phase 1 continues at the first unsampled batch.

Phase 2, SFT (`SearchSFTTrainer`, as rejection sampling's): the STUDENT, the same weights (with a fresh LoRA adapter
when RUN trained with LoRA), is trained on each kept completion token for token, after the prompt rebuilt with the
student's instruction (population.instructions[0] of the derived recipe: RUN's seed instruction by default), the
`<information>` observations masked out of the loss exactly as GRPO masks them. It resumes from its checkpoints as
every run does, and `inspo evaluate --run RUN/distill` evaluates the student with its own instruction.

The on-policy form (the student samples under its instruction, the loss is the per-token reverse KL to the teacher's
log-probabilities under I*) is not implemented: docs/distill.md says why.
"""

from __future__ import annotations

from inspo_cli.errors import InspoError
from inspo_cli.runs import RunDir
from inspo_cli.training.rejection_sampling import earned_full_reward, sft_on_samples

FORMS = ("off-policy",)
KEEP = {"all": lambda reward: True, "correct": earned_full_reward}  # which teacher trajectories the student learns


def build_distill(ctx):
    """Phase 1 (or its saved result) with the teacher's instruction, then a `SearchSFTTrainer` on the kept
    completions under the student's instruction."""
    info = distill_info(ctx.run)
    return sft_on_samples(
        ctx,
        sampled_under=info["teacher_instruction"],
        trained_under=ctx.instructions.best_pick().text,  # the derived recipe's one static instruction: the student's
        keep=KEEP[info["keep"]],
        what="distill: SFT on {n} teacher trajectories under the student's instruction",
        nothing_kept=(
            f"distill kept no trajectory: with keep={info['keep']} no sample of the teacher on "
            f"data.train={ctx.recipe.data.train} earned reward 1 ({ctx.run.sampling_summary_file}); "
            "distil with --keep all"
        ),
    )


def distill_info(run: RunDir) -> dict:
    """distill.json of a distilled run, checked: refused in one line for a run `inspo distill` did not make."""
    info = run.distill_info()
    if info is None:
        raise InspoError(
            f"training.algorithm=distill trains only in a run directory that `inspo distill RUN` made ({run} has "
            f"no {run.distill_info_file.name}); distil a run with `inspo distill RUN`"
        )
    for key, allowed in (("keep", tuple(KEEP)), ("form", FORMS)):
        if info[key] not in allowed:
            raise InspoError(
                f"{run.distill_info_file}: {key} is {info[key]!r}, not one of {', '.join(allowed)}; distil again "
                "into a new directory (inspo distill RUN --out DIR)"
            )
    return info
