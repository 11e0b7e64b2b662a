"""Run directories: one folder per run, everything needed to understand and reproduce it.

    run = RunDir.create(recipe, recipe_path="recipes/demo.yaml", command=sys.argv)   # runs/<name>/
    run = RunDir.open("runs/demo-20261122-101500")                                   # an existing run
    run.metrics_file, run.latest_checkpoint(), run.summary(), run.resumable_recipe({...})

`RunDir` is the one owner of the layout: every file name below is spelled here and nowhere else, and so are
checkpoint discovery and reading a finished or unfinished run. A new directory (named by `run.name`, else the
recipe's file name and a timestamp; an existing directory is never reused) starts with

    recipe.yaml          the fully resolved recipe (loadable by `load_recipe`)
    run.json             seed, command, package versions, git revision and whether the checkout had local changes

and the run adds

    metrics.jsonl        one row per step (`append_metrics`); tensorboard/ the same scalars; plots/*.png
    instructions.jsonl   every candidate instruction ever (INSPO)
    evolutions.json      every evolution: candidates, verification scores, accepted or why not (INSPO)
    rollout_traits.jsonl per step and instruction: answer length, searches, format bonus... (`inspo report --audit`)
    coevolution.json     population, replay buffer and evolutions, to resume from: in every checkpoint of
                         `inspo train`, in the run directory itself for `inspo evolve` (whose policy is frozen)
    checkpoints/checkpoint-<update>/   HF Trainer checkpoints; complete once trainer_state.json is written
    checkpoints/final/   the trained policy as a plain model directory (LoRA merged)
    evaluations/step-<N>/  the periodic evaluations during training (App. B)
    best_instruction.txt, summary.json   written last: a run with summary.json is finished
    distill/             `inspo distill RUN`'s run directory (its own recipe.yaml, checkpoints, summary.json, and
                         distill.json: the teacher checkpoint and instruction, the student's instruction)

All writes are atomic (`inspo_cli.jsonio`).
"""

from __future__ import annotations

from inspo_cli.runs.environment import TRACKED_PACKAGES, git_state, package_versions
from inspo_cli.runs.file_shapes import DAMAGED, INFO_SHAPE, METRICS_ROW_SHAPE, SUMMARY_SHAPE, check_tools
from inspo_cli.runs.run_dir import RunDir, checkpoint_problem, weights_problem

__all__ = [
    "DAMAGED",
    "INFO_SHAPE",
    "METRICS_ROW_SHAPE",
    "SUMMARY_SHAPE",
    "TRACKED_PACKAGES",
    "RunDir",
    "check_tools",
    "checkpoint_problem",
    "git_state",
    "package_versions",
    "weights_problem",
]
