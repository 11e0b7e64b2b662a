"""One training run, start to finish: build the trainer from a recipe, train (or resume), save, summarise.

    run_training(recipe, run)                       # a fresh run in a directory made by `RunDir.create`
    run_training(recipe, run, resume=True)          # continue from its newest checkpoint

The trainer comes from `training.algorithm` (`inspo_cli.registry.ALGORITHMS`): GRPO in `inspo_cli.training.grpo`,
SFT in `inspo_cli.training.sft`, rejection sampling (sampling/, then SFT) in `inspo_cli.training.rejection_sampling`,
each given a `TrainingContext` that carries the run's `BatchPlan`.
The run directory (`inspo_cli.runs.RunDir`) ends up holding metrics.jsonl,
tensorboard/, plots/, checkpoints/checkpoint-<update>/ (HF Trainer checkpoints with optimizer, scheduler and RNG
states, and INSPO's coevolution.json), checkpoints/final/ (the policy as a plain model directory, LoRA merged),
evaluations/step-<N>/ (the periodic evaluations, App. B), with INSPO instructions.jsonl and evolutions.json, and
best_instruction.txt and summary.json (`inspo_cli.training.summary`), the layout `inspo evaluate --run` reads.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from inspo_cli.config import Recipe
from inspo_cli.config.batch_plan import BatchPlan, batch_plan
from inspo_cli.errors import InspoError
from inspo_cli.evaluation.runner import evaluation_questions
from inspo_cli.policy.models import default_device, load_tokenizer
from inspo_cli.policy.vllm_engine import colocated_engine_environment, engine_settings, require_vllm
from inspo_cli.progress import err_console
from inspo_cli.registry import ALGORITHMS
from inspo_cli.runs import RunDir
from inspo_cli.training.algorithms import build_trainer
from inspo_cli.training.coevolution import instruction_source
from inspo_cli.training.periodic_eval import PeriodicEvaluation
from inspo_cli.training.preflight import VLLM_SERVER_ON_CPU
from inspo_cli.training.summary import finish_run
from inspo_cli.training.trackers import wandb_run


@dataclass
class TrainingContext:
    """What every algorithm's trainer is built from (`inspo_cli.training.algorithms`)."""

    recipe: Recipe
    run: RunDir
    device: str
    state: object  # accelerate's PartialState
    tokenizer: object
    instructions: object  # the InstructionSource the policy is prompted with
    coevolution: object  # INSPO's CoEvolutionFactory, or None
    evaluation: object  # PeriodicEvaluation, or None
    plan: BatchPlan  # the step's batches, computed once (`inspo_cli.config.batch_plan`)
    callbacks: list
    vllm_engine: object  # a context manager: vLLM's settings for a colocated engine while TRL starts it


def run_training(recipe: Recipe, run: RunDir, resume: bool = False, device: str | None = None) -> dict:
    from accelerate import PartialState
    from transformers import PrinterCallback, ProgressCallback

    # both import transformers and torch; this module stays light for preflight and `recipe check`
    from inspo_cli.training.guards import NonFiniteGuard
    from inspo_cli.training.run_logger import RunLogger, StepLog

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is the documented multi-turn hook
    _quiet_libraries()
    state = PartialState()
    device = device or default_device()
    checkpoint = None
    if resume:
        checkpoint, skipped = run.resume_point()
        unusable = "; ".join(f"{path.name}: {problem}" for path, problem in skipped)
        # an algorithm whose first phase keeps its own progress (rejection sampling's sampling/) resumes a run cut
        # before its first checkpoint: that phase goes on where it stopped, then training starts
        if checkpoint is None and not ALGORITHMS.resolve(recipe.training.algorithm).progress_before_training:
            raise InspoError(
                f"{run} has no complete checkpoint to resume from ({unusable or 'none was saved'}); "
                "start a new run instead"
            )
        if state.is_main_process:
            _say_resume_point(checkpoint, unusable)
            run.truncate_metrics(RunDir.checkpoint_update(checkpoint) if checkpoint else 0)
    state.wait_for_everyone()

    plan = batch_plan(recipe, state.num_processes)  # a batch that does not divide fails here, early
    engine = _vllm_engine(recipe, device)  # so does vLLM server mode on CPU, or vLLM missing
    saved = RunDir.checkpoint_coevolution(checkpoint) if checkpoint is not None else None
    # a missing API key fails here, early
    instructions, coevolution = instruction_source(recipe, saved, state, record=run.optimizer_calls_file)
    evaluation = periodic_evaluation(recipe, run)  # so does a missing evaluation set
    tokenizer = load_tokenizer(recipe.model)
    log = StepLog(
        run,
        recipe.training.steps,
        instructions=instructions,
        collapse=(recipe.evaluation.collapse_window, recipe.evaluation.collapse_drop),
    )
    callbacks = [
        RunLogger(log, plan.updates_per_step),
        NonFiniteGuard(plan.updates_per_step, recipe.training.learning_rate),
    ]
    trainer = build_trainer(
        TrainingContext(
            recipe, run, device, state, tokenizer, instructions, coevolution, evaluation, plan, callbacks, engine
        )
    )
    for callback in (PrinterCallback, ProgressCallback):  # RunLogger prints one line per step instead
        trainer.remove_callback(callback)

    before = run.logged_seconds() if checkpoint else 0.0  # the steps kept from before the resume
    started = time.time()
    with wandb_run(recipe, run.path, state.is_main_process):  # W&B (run.report_to), TRL's callback logs into it
        trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    wall = before + time.time() - started  # the run's, across resumes (App. C's shares divide by it)
    _save_final(trainer, tokenizer, run.final_dir, state)
    summary = {}
    if state.is_main_process:
        summary = finish_run(
            run,
            recipe,
            instructions,
            getattr(trainer, "coevolution", None),
            wall,
            run.relative(checkpoint) if checkpoint else None,
            processes=state.num_processes,
            device=device,
        )
    state.wait_for_everyone()
    return summary


def _say_resume_point(checkpoint: Path | None, unusable: str) -> None:
    """One line: where the run goes on from, and which newer checkpoints a kill left unusable."""

    where = f"resuming from {checkpoint.name}" if checkpoint is not None else "resuming before the first checkpoint"
    err_console.print(
        where + (f" (newer, unusable: {unusable})" if unusable else ""), markup=False, highlight=False, soft_wrap=True
    )


def _vllm_engine(recipe: Recipe, device: str):
    """What a vLLM-backed run needs before TRL starts its engine: vLLM installed, a mode that works on `device`,
    and (colocated) the engine settings TRL does not pass, as vLLM's environment variables while it starts."""

    m = recipe.model
    if m.backend != "vllm":
        return contextlib.nullcontext()
    if m.vllm_mode == "server" and device == "cpu":
        raise InspoError(VLLM_SERVER_ON_CPU)
    require_vllm()
    if m.vllm_mode == "server":
        return contextlib.nullcontext()
    return colocated_engine_environment(engine_settings(m, device))


def periodic_evaluation(recipe: Recipe, run: RunDir):
    """App. B's evaluation every `training.eval_every` steps, with its questions loaded now (None when off)."""

    e = recipe.evaluation
    if recipe.training.eval_every <= 0:
        return None
    try:
        questions = evaluation_questions(e.benchmarks, recipe.data, e.split, e.limit)
    except InspoError as error:
        raise InspoError(
            f"{error} (evaluation during training, training.eval_every={recipe.training.eval_every}, "
            "needs it; or set training.eval_every=0)"
        ) from None
    return PeriodicEvaluation(questions, e, recipe.training.eval_every, recipe.training.steps, run)


def _quiet_libraries() -> None:
    """RunLogger's step lines are the output; per-file tqdm bars and v6 deprecation notices are noise here."""
    import warnings

    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")


def _save_final(trainer, tokenizer, final: Path, state) -> None:
    """The trained policy as a plain model directory (LoRA merged into the base), written then renamed."""
    tmp = final.with_name(f".{final.name}.tmp")
    if state.is_main_process and tmp.exists():
        shutil.rmtree(tmp)
    state.wait_for_everyone()
    model = trainer.accelerator.unwrap_model(trainer.model)
    if hasattr(model, "merge_and_unload"):  # a peft model
        if state.is_main_process:
            model.merge_and_unload().save_pretrained(tmp)
    else:
        trainer.save_model(str(tmp))  # gathers sharded (ZeRO-3 / FSDP) weights
    if state.is_main_process:
        tokenizer.save_pretrained(tmp)
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    state.wait_for_everyone()
