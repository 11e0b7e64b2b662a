"""Which policy of a training run to evaluate, and with which instruction: `inspo evaluate --run DIR --checkpoint`.

    policy = run_policy(run_dir, recipe, "best")      # App. B: the final checkpoint before any reward collapse
    policy = run_policy(run_dir, recipe, "100")       # the checkpoint saved after training step 100
    policy = run_policy(run_dir, recipe, "final")     # checkpoints/final
    policy.path, policy.instruction, policy.why       # a model directory, the I* of that checkpoint, why this one
    run_policy(run_dir, recipe, default_checkpoint(run_dir))  # what `inspo evaluate --run` takes by default

App. B evaluates "every 100 steps, and we report the final checkpoint before any reward collapse": its candidates
are the steps it evaluated, so "best" considers only checkpoints on the run's evaluation interval
(`training.eval_every`, the paper's 100), never the saves in between (the paper recipes save every 50 steps, to
resume from). Without `--checkpoint`, `inspo evaluate --run` reports that same choice for a finished run, as the
paper does, rather than the final policy.

Every checkpoint is evaluated with the best instruction of *its own* population (argmax w in the coevolution.json
saved with it), not the run's final one; a static-instruction run uses its instruction throughout. Checkpoints
are named by optimizer update (HF's checkpoint-<update>); here they are addressed by training step, the number
metrics.jsonl and the step lines show. A checkpoint that holds only a LoRA adapter is merged into its base model
once (cached in the checkpoint's `merged/`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from shlex import quote

from inspo_cli.collapse import detect_collapse
from inspo_cli.config import Recipe
from inspo_cli.config.batch_plan import batch_plan
from inspo_cli.errors import InspoError
from inspo_cli.instructions.initial import initial_instructions
from inspo_cli.instructions.population import InstructionPopulation
from inspo_cli.policy.models import merged_adapter_dir
from inspo_cli.runs import DAMAGED, RunDir, weights_problem

FINAL = RunDir.FINAL  # --checkpoint final


@dataclass(frozen=True)
class RunPolicy:
    label: str  # "final" or "step 100 (checkpoint-200)", for reports
    path: str  # what transformers / vLLM load: a model directory (adapters merged), or a frozen run's model
    instruction: str
    instruction_id: str
    why: str = ""  # with "best": why App. B's rule chose this policy, for the console


def checkpoint_steps(run: RunDir, recipe: Recipe) -> dict[int, Path]:
    """Complete checkpoints by training step."""
    per_step = batch_plan(recipe).updates_per_step
    return {update // per_step: path for update, path in run.checkpoints().items()}


def evaluation_steps(steps, recipe: Recipe) -> list[int]:
    """App. B's candidates among `steps`: those on the run's evaluation interval (`training.eval_every`; the
    paper evaluates every 100 steps), oldest first. With evaluation during training off (0) every step counts."""
    every = recipe.training.eval_every
    return sorted(step for step in set(steps) if step > 0 and (every <= 0 or step % every == 0))


def interval_text(recipe: Recipe) -> str:
    every = recipe.training.eval_every
    return f"every {every} steps, training.eval_every" if every > 0 else "any saved step, training.eval_every 0"


def paper_choice(run: RunDir, recipe: Recipe) -> str:
    """App. B's choice, "final" or a step: the last checkpoint on the evaluation interval at or before the peak of
    the reward that later collapsed; without a collapse, the final policy (else the newest checkpoint)."""
    return _paper_choice(run, recipe)[0]


def _paper_choice(run: RunDir, recipe: Recipe) -> tuple[str, str]:
    """(App. B's choice, why it is that one)."""

    e = recipe.evaluation
    collapse = detect_collapse(run.metrics(), e.collapse_window, e.collapse_drop)
    steps = checkpoint_steps(run, recipe)
    if collapse is None:
        if run.has_final_model() or not steps:
            return FINAL, "App. B's choice: no reward collapse, so the final policy"
        return str(max(steps)), "App. B's choice: no reward collapse, and no final policy yet, so the newest checkpoint"
    before = [step for step in evaluation_steps(steps, recipe) if step <= collapse.peak_step]
    if not before:
        raise InspoError(
            f"{collapse.describe()}, and run {run} saved no checkpoint on its evaluation interval "
            f"({interval_text(recipe)}) by step {collapse.peak_step}{_available(steps)}; evaluate one "
            "with --checkpoint N, or the final policy with --checkpoint final, and save at the evaluation "
            "steps next time (training.save_every)"
        )
    return str(max(before)), (
        f"App. B's choice: the last checkpoint on the evaluation interval "
        f"({interval_text(recipe)}) up to the reward's peak; {collapse.describe()}; "
        "--checkpoint final for the final policy"
    )


def default_checkpoint(run: RunDir) -> str | None:
    """What `inspo evaluate --run` evaluates without --checkpoint: App. B's choice ("best") for a finished training
    run, as the paper reports it; None (the newest checkpoint) for an unfinished one; a frozen-policy or chained
    run has one policy to report."""
    summary = run.summary()
    if summary is None or summary.get("frozen_policy") or summary.get("stage") in ("pre-rl", "post-rl"):
        return None
    return "best"


def run_policy(run: RunDir, recipe: Recipe, which: str | None = None, merge_adapter: bool = True) -> RunPolicy:
    """The policy `which` names: None (final, else the newest checkpoint), "final", "best" or a training step.
    `merge_adapter=False`: a checkpoint holding only a LoRA adapter is given as its folder, unmerged (as a
    model.name_or_path, `resolve_model_path` merges it into the cache), so nothing is written in the run."""
    steps = checkpoint_steps(run, recipe)
    summary = run.summary()
    if summary is not None and summary.get("frozen_policy"):  # `inspo evolve`: the recipe's model, never trained
        if which not in (None, FINAL, "best"):
            raise InspoError(
                f"--checkpoint {which!r}: run {run} is an `inspo evolve` run with a frozen policy and "
                "no checkpoints; leave --checkpoint out"
            )
        return RunPolicy(
            "frozen policy",
            summary.get("recipe_model", recipe.model.name_or_path),
            summary["best_instruction"],
            summary.get("best_instruction_id", "i0"),
        )
    if summary is not None and summary.get("stage") in ("pre-rl", "post-rl"):  # evolve and train chained
        if which not in (None, FINAL):
            training = [s["dir"] for s in summary.get("stages", []) if s["kind"] == "train"]
            raise InspoError(
                f"--checkpoint {which!r}: run {run} chains stages ({summary['stage']}); pick a checkpoint "
                f"of its training stage with --run "
                f"{quote(str(run.path / (training or ['stages/*-train'])[0]))}"
            )
        if not summary.get("model"):
            raise InspoError(f"{run.summary_file}: a chained run's summary names no model; {DAMAGED}")
        return RunPolicy(
            FINAL,
            str(_intact(run.path / summary["model"])),
            summary["best_instruction"],
            summary.get("best_instruction_id", "i0"),
        )
    why = ""
    if which == "best":
        which, why = _paper_choice(run, recipe)
    if which is None:
        which = FINAL if run.has_final_model() else (str(max(steps)) if steps else FINAL)
    if which == FINAL:
        if summary is not None and not run.has_final_model():
            raise InspoError(
                f"run {run} finished, but its final model ({run.relative(run.final_dir)}) is gone"
                f"{_available(steps)}; copy it back, or pick a checkpoint with --checkpoint N"
            )
        if summary is None:
            raise InspoError(
                f"run {run} has no final policy yet (unfinished){_available(steps)}; resume it with "
                f"`inspo train --resume {quote(str(run))}` or pick a checkpoint with --checkpoint N"
            )
        return RunPolicy(
            FINAL,
            str(_intact(run.final_dir)),
            summary["best_instruction"],
            summary.get("best_instruction_id", "i0"),
            why,
        )
    if which.isascii() and which.isdigit() and int(which) not in steps:
        per_step = batch_plan(recipe).updates_per_step
        for update, (path, problem) in run.unusable_checkpoints().items():
            if update // per_step == int(which):
                raise InspoError(
                    f"--checkpoint {which}: {path} cannot be used: {problem}; copy it again from where "
                    "the run ran, or pick another checkpoint"
                )
    if not (which.isascii() and which.isdigit()):  # "²" is a digit to str.isdigit
        raise InspoError(
            f"--checkpoint {which!r}: not a step number{_available(steps)}; use a step number, final or best"
        )
    if int(which) not in steps:
        raise InspoError(
            f"--checkpoint {which!r}: run {run} has no checkpoint at that step{_available(steps)}; "
            "use a step number, final or best"
        )
    step = int(which)
    folder = steps[step]
    text, instruction_id = _checkpoint_instruction(folder, recipe)
    path = _loadable(folder) if merge_adapter else folder
    return RunPolicy(f"step {step} ({folder.name})", str(path), text, instruction_id, why)


def _available(steps: dict[int, Path]) -> str:
    return f" (checkpoints at steps {', '.join(map(str, steps))})" if steps else " (and no checkpoints)"


class PopulationUnknown(InspoError):
    """A checkpoint of an INSPO run saved without its population, so its I* is unknown. `inspo evaluate` can take
    the instruction from the user; `inspo distill` needs the teacher's own and says so itself."""

    def __init__(self, folder: Path, state_name: str):
        self.folder, self.state_name = folder, state_name
        super().__init__(
            f"{folder} has no {state_name}, so its instruction population is unknown; evaluate it with --instruction "
            "TEXT_OR_FILE"
        )


def _checkpoint_instruction(folder: Path, recipe: Recipe) -> tuple[str, str]:
    """I* of the population saved with the checkpoint, or the static run's instruction."""

    state = RunDir.checkpoint_coevolution(folder)
    if state.is_file():
        saved = RunDir.coevolution_state(state)
        best = InstructionPopulation.from_state_dict(recipe.population, saved["population"]).best()
        return best.text, best.id
    if recipe.population.enabled:
        raise PopulationUnknown(folder, state.name)
    return initial_instructions(recipe)[0], "i0"


def _intact(folder: Path) -> Path:
    """A model directory the run saved, refused in one line when its weights are cut short or missing."""
    problem = weights_problem(folder)
    if problem is not None:
        raise InspoError(f"{folder}: {problem}; {DAMAGED}")
    return folder


def _loadable(folder: Path) -> Path:
    if (folder / "config.json").is_file():
        return folder
    if (folder / "adapter_config.json").is_file():
        return merged_adapter_dir(folder)
    raise InspoError(f"{folder} holds neither a model (config.json) nor a LoRA adapter (adapter_config.json)")
