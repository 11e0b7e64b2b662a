"""What `inspo distill RUN` will do, worked out before anything is written: the source run checked, the teacher
(checkpoint and I*), the student's instruction, the derived recipe and distill.json, and whether the output directory
is new, to resume, or done.

    plan = plan_distillation("runs/inspo-3b", options=DistillOptions(instruction="seed", keep="all"))
    plan.recipe, plan.info, plan.out, plan.status          # status: "new", "resume" or "done"

The derived recipe is RUN's own, read back as `inspo train --resume` reads it, with these changes (then the user's
--set, then the options): training.algorithm distill (GRPO's own settings back to their defaults), model.name_or_path
the teacher's weights on the transformers backend (the student starts from them), the sampler on RUN's model.backend,
one static instruction (the student's), training.batch_size RUN's trajectories per optimizer update
(mini_batch_trajectories), and training.steps one epoch over the sampled trajectories (questions x sampling.samples /
batch_size) unless --steps or --set training.steps says otherwise. Every option is recorded in it.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import yaml

from inspo_cli.config import Recipe, dump_recipe, load_recipe
from inspo_cli.config.run_sections import MAX_RUN_NAME, MAX_SAMPLES, RUN_NAME
from inspo_cli.config.training_section import GRPO_ONLY, TrainingConfig
from inspo_cli.errors import InspoError
from inspo_cli.evaluation.checkpoints import (
    FINAL,
    PopulationUnknown,
    checkpoint_steps,
    default_checkpoint,
    paper_choice,
    run_policy,
)
from inspo_cli.files import INSTRUCTION_FILE_BYTES, check_can_create, read_text
from inspo_cli.instructions.initial import initial_instructions
from inspo_cli.registry import is_sft
from inspo_cli.runs import RunDir
from inspo_cli.training.distill import FORMS, KEEP
from inspo_cli.training.trainer_inputs import train_questions

BARE_QUESTION = "{question}"  # --instruction none: the prompt is the question alone (in the chat template if any)
# Recipe fields the distillation itself sets, each with the option that chooses it: a --set of one would make
# distill.json describe a teacher, student or directory other than the one trained
SET_BY_DISTILL = {
    "training.algorithm": "it is distill",
    "model.name_or_path": "the teacher's weights: choose them with --step",
    "sampling.model": "the teacher's weights: choose them with --step",
    "population.enabled": "the student's instruction: choose it with --instruction",
    "population.stage": "the student's instruction: choose it with --instruction",
    "population.instructions": "the student's instruction: choose it with --instruction",
    "population.instruction_file": "the student's instruction: choose it with --instruction",
    "population.instructions_per_question": "the student's one instruction: choose it with --instruction",
    "run.name": "the directory: choose it with --out",
    "run.output_dir": "the directory: choose it with --out",
}


@dataclass(frozen=True)
class DistillOptions:
    """`inspo distill`'s options; None takes the default from RUN's recipe."""

    instruction: str = "seed"  # the student's: seed (RUN's first instruction), none, a text, or @FILE
    step: str | None = None  # the teacher: None (what `inspo evaluate --run` takes), final, best or a training step
    keep: str = "all"
    form: str = "off-policy"
    samples: int | None = None  # sampling.samples
    steps: int | None = None  # training.steps
    learning_rate: float | None = None  # training.learning_rate
    overrides: tuple[str, ...] = ()  # --set KEY=VALUE on the derived recipe


@dataclass(frozen=True)
class Teacher:
    checkpoint: str  # "final" or the training step, as `inspo evaluate --run RUN --checkpoint` takes it
    step: int
    model: str  # what loads: a model directory (or a LoRA checkpoint, merged into the cache when it loads)
    instruction: str
    instruction_id: str


@dataclass
class DistillPlan:
    source: RunDir
    out: RunDir
    recipe: Recipe
    info: dict  # distill.json (`runs.file_shapes.DISTILL_SHAPE`)
    status: str  # "new" (create it), "resume" (unfinished), "done" (finished with these same settings)


def plan_distillation(source: str | Path, out: str | Path | None = None, options: DistillOptions | None = None):
    """The `DistillPlan` for distilling run `source` into `out` (default `source/distill`); every refusal is one line
    naming the path or option and the fix, and nothing is written."""
    options = options or DistillOptions()
    run = RunDir.open(source)
    recipe = run.recipe()
    _check_options(options)
    if not recipe.population.enabled:
        raise InspoError(
            f"run {run} trained with one static instruction (population.enabled: false), so it has no evolved "
            "instruction I* to distil; distil an INSPO run (population.enabled: true)"
        )
    teacher = find_teacher(run, recipe, options.step)
    recorded, source_kind, prompted = student_instruction(options.instruction, recipe)
    if prompted.strip() == teacher.instruction.strip():
        raise InspoError(
            f"--instruction {options.instruction}: the student's instruction is the teacher's own I* "
            f"({teacher.instruction_id} at checkpoint {teacher.checkpoint}), so there is nothing to distil; give "
            "the student another instruction (seed, none, a text or @FILE) or the teacher another --step"
        )
    target = RunDir(Path(out) if out is not None else run.distill_dir)
    _check_out(run, target)
    info = {
        "distilled_from": str(run.path.resolve()),
        "form": options.form,
        "keep": options.keep,
        "teacher_checkpoint": teacher.checkpoint,
        "teacher_step": teacher.step,
        "teacher_model": teacher.model,
        "teacher_instruction": teacher.instruction,
        "teacher_instruction_id": teacher.instruction_id,
        "student_instruction": recorded,
        "student_instruction_source": source_kind,
        "student_prompt_instruction": prompted,
    }
    derived = distill_recipe(run, recipe, teacher, prompted, target.path, options)
    return DistillPlan(run, target, derived, info, _status(target, derived, info))


def _check_options(options: DistillOptions) -> None:
    if options.keep not in KEEP:
        raise InspoError(f"--keep {options.keep}: choose {' or '.join(KEEP)}")
    if options.form not in FORMS:
        raise InspoError(
            f"--form {options.form}: only {', '.join(FORMS)} is implemented (the on-policy form: docs/distill.md)"
        )
    for flag, value in (("--samples", options.samples), ("--steps", options.steps)):
        if value is not None and value < 1:
            raise InspoError(f"{flag} must be at least 1 (got {value})")
    if options.samples is not None and options.samples > MAX_SAMPLES:
        raise InspoError(f"--samples must be at most {MAX_SAMPLES} trajectories per question (got {options.samples})")
    if options.learning_rate is not None and not options.learning_rate > 0:
        raise InspoError(f"--learning-rate must be > 0 (got {options.learning_rate}), e.g. 1e-5")
    for override in options.overrides:
        key = override.split("=", 1)[0].strip()
        if key in SET_BY_DISTILL:
            raise InspoError(f"--set {key}: inspo distill sets it ({SET_BY_DISTILL[key]}); leave the --set out")


def _check_out(run: RunDir, out: RunDir) -> None:
    """An --out that names a directory of its own, outside the checkpoints of the run it distils (where the run's
    checkpoint rotation and readers look)."""
    name = out.path.name  # the run's name in its recipe: '.', '..' and '/' have none
    if not (RUN_NAME.match(name) and len(name) <= MAX_RUN_NAME):
        raise InspoError(
            f"--out {str(out.path)!r}: the distilled run's directory needs a plain name of at most {MAX_RUN_NAME} "
            "letters, digits, '.', '_' or '-'; pass --out runs/NAME"
        )
    checkpoints = run.checkpoints_dir.resolve()
    if out.path.resolve().is_relative_to(checkpoints):
        raise InspoError(
            f"--out {out}: inside the checkpoints of {run} ({checkpoints}), which the run rotates and reads as its "
            "own; pass --out outside them (the default is RUN/distill)"
        )


def find_teacher(run: RunDir, recipe: Recipe, step: str | None) -> Teacher:
    """The policy `step` names and its instruction, by `inspo evaluate --run`'s rules (`run_policy`); without
    --step, what `inspo evaluate --run RUN` evaluates: App. B's choice for a finished run (its final policy unless
    the reward collapsed), the newest checkpoint for an unfinished one. Nothing in RUN is written (a LoRA checkpoint
    is merged into the cache when it loads)."""
    which = step if step is not None else default_checkpoint(run)
    try:
        if which == "best":
            which = paper_choice(run, recipe)
        if which is None:
            steps = checkpoint_steps(run, recipe)
            which = FINAL if run.has_final_model() or not steps else str(max(steps))
        policy = run_policy(run, recipe, which, merge_adapter=False)
    except PopulationUnknown as error:  # `inspo evaluate` may be given an instruction; the teacher's is its own I*
        known = [str(step) for step, path in checkpoint_steps(run, recipe).items() if _population_saved(path)]
        raise InspoError(
            f"{error.folder} has no {error.state_name}, so the teacher's instruction I* at that step is unknown; "
            + (f"pick a --step whose checkpoint has it ({', '.join(known)}) or " if known else "")
            + "copy the run again from where it ran"
        ) from None
    except InspoError as error:  # `inspo evaluate` calls the same choice --checkpoint; here it is --step
        raise InspoError(str(error).replace("--checkpoint", "--step")) from None
    if not policy.instruction.strip():
        raise InspoError(
            f"run {run}: the teacher's instruction I* at checkpoint {which} is empty ({policy.instruction_id}), "
            f"so {run.summary_file.name} or the checkpoint's population is damaged; copy the run again from where it "
            "ran, or pick another --step"
        )
    if which == FINAL:
        summary = run.finished_summary()
        return Teacher(FINAL, int(summary["steps"]), _absolute(policy.path), policy.instruction, policy.instruction_id)
    which = str(int(which))  # "04" and "4" are the same teacher, recorded one way
    return Teacher(which, int(which), _absolute(policy.path), policy.instruction, policy.instruction_id)


def _population_saved(checkpoint: Path) -> bool:
    return RunDir.checkpoint_coevolution(checkpoint).is_file()


def _absolute(model: str) -> str:
    """A local model directory by its absolute path (the derived recipe is read from anywhere); a hub id as is."""
    local = Path(model).expanduser()
    return str(local.resolve()) if local.exists() else model


def student_instruction(option: str, recipe: Recipe) -> tuple[str, str, str]:
    """(the instruction distill.json records, where it came from, the text prompts are built from) for --instruction
    `option`: seed (the recipe's first instruction, the static baseline's), none (the bare question: recorded as ""),
    @FILE (a text file's content) or the text itself."""
    if option == "seed":
        seed = initial_instructions(recipe)[0]
        return seed, "seed", seed
    if option == "none":
        return "", "none", BARE_QUESTION
    if option.startswith("@"):
        text = read_text(option[1:], "--instruction", max_bytes=INSTRUCTION_FILE_BYTES).strip()
        if not text:
            raise InspoError(f"--instruction {option}: the file is empty; write the instruction in it")
        return text, "file", text
    if not option.strip():
        raise InspoError("--instruction is empty; pass seed, none, the instruction's text or @FILE")
    try:
        option.encode("utf-8")
    except UnicodeEncodeError as error:  # a byte the shell's locale could not decode: no file could record it
        raise InspoError(
            f"--instruction: not valid text (character {error.start} is a lone surrogate, from bytes that are not "
            "UTF-8); write the instruction in a UTF-8 file and pass --instruction @FILE"
        ) from None
    return option.strip(), "text", option.strip()


def distill_recipe(
    run: RunDir, recipe: Recipe, teacher: Teacher, student: str, out: Path, options: DistillOptions
) -> Recipe:
    """RUN's recipe turned into the distillation's (the module docstring lists the changes), validated."""
    t = recipe.training
    derived: dict = {
        "training.algorithm": "distill",
        **{f"training.{name}": TrainingConfig.__dataclass_fields__[name].default for name in GRPO_ONLY},
        "training.batch_size": t.batch_size if is_sft(t.algorithm) else t.mini_batch_trajectories,
        "model.name_or_path": teacher.model,
        "model.backend": "transformers",  # SFTTrainer trains and evaluates with the trained model itself
        "sampling.model": "",  # the teacher: model.name_or_path
        "sampling.backend": recipe.sampling.backend if is_sft(t.algorithm) else recipe.model.backend,
        "population.enabled": False,
        "population.stage": "online",
        "population.instructions": [student],
        "population.instruction_file": None,
        "population.instructions_per_question": 1,  # one static instruction: nothing to split rollouts over
        "run.name": out.name,
        "run.output_dir": str(out.parent),
    }
    flags = {
        "--samples": ("sampling.samples", options.samples),
        "--learning-rate": ("training.learning_rate", options.learning_rate),
        "--steps": ("training.steps", options.steps),
    }
    overrides = [f"{key}={json.dumps(value)}" for key, value in derived.items()] + list(options.overrides)
    result = load_recipe(run.recipe_file, overrides, written_by_run=True, flags=flags)
    if options.steps is None and not any(o.split("=", 1)[0].strip() == "training.steps" for o in options.overrides):
        trajectories = len(train_questions(result)) * result.sampling.samples
        result.training.steps = max(1, math.ceil(trajectories / result.training.batch_size))  # one epoch
    return result


def _status(out: RunDir, recipe: Recipe, info: dict) -> str:
    """What to do with `out`: create it ("new"), or, when `inspo distill` made it with these same settings,
    "resume" or "done"; anything else there is refused."""
    if not out.path.exists():
        if out.path.is_symlink():
            raise InspoError(
                f"--out {out}: a link to {os.readlink(out.path)}, which does not exist; pass --out with a new directory"
            )
        check_can_create(out.path, "--out")
        return "new"
    if not out.info_file.is_file():
        raise InspoError(f"--out {out}: exists and is not a run directory; pass --out with a new directory")
    made = out.distill_info()
    if made is None:
        raise InspoError(
            f"--out {out}: a run directory that `inspo distill` did not make (no {out.distill_info_file.name}); pass "
            "--out with a new directory (or delete it if a distillation was cut off as it started)"
        )
    for key in info:
        if made.get(key) != info[key]:
            raise _other_settings(out, key, made.get(key), info[key])
    have, want = (_flat(yaml.safe_load(dump_recipe(r))) for r in (out.recipe(), recipe))
    for key in sorted(set(have) | set(want)):
        if have.get(key) != want.get(key):
            raise _other_settings(out, key, have.get(key), want.get(key))
    return "done" if out.summary_file.is_file() else "resume"


def _other_settings(out: RunDir, key: str, made, now) -> InspoError:
    return InspoError(
        f"--out {out}: holds a distillation made with {key}={_short(made)} (now {_short(now)}); give the options "
        "it was made with to resume it, or pass --out with a new directory for another"
    )


def _short(value) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def _flat(tree, prefix: str = "") -> dict:
    if not isinstance(tree, dict):
        return {prefix: tree}
    flat: dict = {}
    for key, value in tree.items():
        flat.update(_flat(value, f"{prefix}.{key}" if prefix else str(key)))
    return flat
