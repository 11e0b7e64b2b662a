"""One training run, start to finish: build the trainer from a recipe, train (or resume), save, summarise.

    run_training(recipe, run_dir)                       # a fresh run in a directory made by create_run_dir
    run_training(recipe, run_dir, resume=True)          # continue from its newest checkpoint

The run directory ends up holding recipe.yaml and run.json (from `create_run_dir`), metrics.jsonl,
tensorboard/, plots/*.png, checkpoints/checkpoint-<update>/ (HF Trainer checkpoints with optimizer, scheduler
and RNG states), checkpoints/final/ (the policy as a plain model directory, LoRA merged) and summary.json,
the layout `inspo evaluate --run` reads, and evaluations/step-<N>/ (the periodic evaluations, App. B). With INSPO
(`population.enabled`) also instructions.jsonl, evolutions.json, best_instruction.txt, and coevolution.json in
every checkpoint.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from inspo_cli.config import Recipe
from inspo_cli.errors import InspoError
from inspo_cli.jsonio import atomic_write_json, atomic_write_text
from inspo_cli.runs import CHECKPOINTS_DIR, COEVOLUTION_FILE, FINAL_DIR, SUMMARY_FILE, complete_checkpoints

BEST_INSTRUCTION_FILE = "best_instruction.txt"
EVOLUTIONS_FILE = "evolutions.json"  # every evolution: candidates proposed, verification scores, accepted or why not


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The newest complete HF checkpoint (it has trainer_state.json, written last) under checkpoints/."""
    found = complete_checkpoints(run_dir)
    return found[max(found)] if found else None


def run_training(recipe: Recipe, run_dir: Path, resume: bool = False, device: str | None = None) -> dict:
    import torch
    from accelerate import PartialState
    from transformers import PrinterCallback, ProgressCallback

    from inspo_cli.models import load_tokenizer, resolve_model_path, uses_chat_template
    from inspo_cli.training.run_logger import RunLogger, plot_curves, truncate_metrics
    from inspo_cli.training.setup import grpo_config, lora_config, question_dataset, schedule, train_questions
    from inspo_cli.training.trainer import SearchGRPOTrainer
    from retriever import open_from_config

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is the documented multi-turn hook
    _quiet_libraries()
    state = PartialState()
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    checkpoint = None
    if resume:
        checkpoint = latest_checkpoint(run_dir)
        if checkpoint is None:
            raise InspoError(f"{run_dir} has no complete checkpoint to resume from (checkpoints/checkpoint-N with "
                             "trainer_state.json); start a new run instead")
        if state.is_main_process:
            truncate_metrics(run_dir, int(checkpoint.name.removeprefix("checkpoint-")))
    state.wait_for_everyone()

    plan = schedule(recipe, state.num_processes)
    args = grpo_config(recipe, run_dir / CHECKPOINTS_DIR, state.num_processes, device)
    instructions, coevolution = instruction_source(recipe, checkpoint, state)  # a missing API key fails here, early
    evaluation = periodic_evaluation(recipe, run_dir)  # so does a missing evaluation set
    tokenizer = load_tokenizer(recipe.model)
    logger = RunLogger(run_dir, recipe.training.steps, plan.updates_per_step, instructions=instructions,
                       collapse=(recipe.evaluation.collapse_window, recipe.evaluation.collapse_drop))
    trainer = SearchGRPOTrainer(
        model=resolve_model_path(recipe.model.name_or_path), args=args,
        train_dataset=question_dataset(train_questions(recipe)), processing_class=tokenizer,
        instructions=instructions, retriever=open_from_config(recipe.retriever),
        rollout=recipe.rollout, reward=recipe.reward, topk=recipe.retriever.topk,
        chat=uses_chat_template(tokenizer, recipe.model.chat_template), updates_per_step=plan.updates_per_step,
        generation_batch_size=plan.steps_per_generation * recipe.training.micro_batch_size,
        peft_config=lora_config(recipe), callbacks=[logger], coevolution=coevolution, evaluation=evaluation)
    if coevolution is not None:
        from inspo_cli.training.coevolution import PolicyVerifier

        coevolution.verifier = PolicyVerifier(trainer.engine, recipe.reward, trainer._policy_for_generation,
                                              trainer.accelerator)
    for callback in (PrinterCallback, ProgressCallback):  # RunLogger prints one line per step instead
        trainer.remove_callback(callback)

    started = time.time()
    trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    wall = time.time() - started
    _save_final(trainer, tokenizer, run_dir / CHECKPOINTS_DIR / FINAL_DIR, state)
    summary = {}
    if state.is_main_process:
        plots = plot_curves(run_dir)
        summary = _summary(run_dir, recipe, instructions, wall, checkpoint, plots)
        if coevolution is not None:
            summary["overhead"] = overhead_account(coevolution, recipe, summary["steps"], wall)
            atomic_write_json(run_dir / EVOLUTIONS_FILE, coevolution.reports)
        atomic_write_text(run_dir / BEST_INSTRUCTION_FILE, summary["best_instruction"] + "\n")
        atomic_write_json(run_dir / SUMMARY_FILE, summary)
    state.wait_for_everyone()
    return summary


def periodic_evaluation(recipe: Recipe, run_dir: Path):
    """App. B's evaluation every `training.eval_every` steps, with its questions loaded now (None when off)."""
    from inspo_cli.evaluation.runner import evaluation_questions
    from inspo_cli.training.periodic_eval import EVALUATIONS_DIR, PeriodicEvaluation

    e = recipe.evaluation
    if recipe.training.eval_every <= 0:
        return None
    try:
        questions = evaluation_questions(e.benchmarks, recipe.data, e.split, e.limit)
    except InspoError as error:
        raise InspoError(f"{error} (evaluation during training, training.eval_every={recipe.training.eval_every}, "
                         "needs it; or set training.eval_every=0)") from None
    return PeriodicEvaluation(questions, e, recipe.training.eval_every, recipe.training.steps, run_dir / EVALUATIONS_DIR)


def instruction_source(recipe: Recipe, checkpoint: Path | None, state):
    """(source, coevolution): the static instruction (Search-R1), or the INSPO population with its replay
    buffer and optimizer, fresh or as the checkpoint saved them."""
    import json

    from inspo_cli.instructions.evolution import initial_rewrites
    from inspo_cli.instructions.population import InstructionPopulation
    from inspo_cli.instructions.replay import ReplayBuffer
    from inspo_cli.instructions.sampling import StaticInstruction
    from inspo_cli.training.coevolution import CoEvolution, MainProcessLM
    from inspo_cli.training.setup import initial_instructions

    texts = initial_instructions(recipe)
    config = recipe.population
    if not config.enabled:
        return StaticInstruction(texts[0]), None
    lm = None
    if config.evolve_until > 0 or config.initial_rewrites:
        from inspo_cli.instructions.lm import open_optimizer

        lm = MainProcessLM(open_optimizer(recipe.optimizer) if state.is_main_process else None, state)
    if checkpoint is not None:
        path = checkpoint / COEVOLUTION_FILE
        if not path.is_file():
            raise InspoError(f"{checkpoint} has no {COEVOLUTION_FILE} although population.enabled is true; it was "
                             "written without the population, so it cannot be resumed with one")
        saved = json.loads(path.read_text(encoding="utf-8"))
        coevolution = CoEvolution(InstructionPopulation.from_state_dict(config, saved["population"]), config, lm,
                                  None, recipe.run.seed, ReplayBuffer.from_state_dict(saved["replay"]))
        coevolution.reports = list(saved.get("evolutions", []))
        optimizer = getattr(lm, "lm", None)
        if optimizer is not None and saved.get("optimizer"):
            optimizer.restore(saved["optimizer"])  # the budget carries over the interruption
        return coevolution.population, coevolution
    if config.initial_rewrites:  # the recipe's instructions stay; rewrites of the first fill the population
        texts = [*texts, *initial_rewrites(texts[0], lm, config.size - len(texts), keep=texts,
                                           max_chars=config.max_instruction_chars)]
    population = InstructionPopulation(config, seed=recipe.run.seed, initial_texts=texts)
    return population, CoEvolution(population, config, lm, None, recipe.run.seed)


def overhead_account(coevolution, recipe: Recipe, steps: int, wall: float) -> dict:
    """The paper's App. C account: what evolving instructions cost next to training."""
    reports = coevolution.reports
    seconds = sum(r["wall_s"] for r in reports)
    return {"evolutions": len(reports), "evolution_seconds": round(seconds, 2),
            "share_of_wall_time": round(seconds / wall, 4) if wall else None,
            "verification_rollouts": sum(r["verification_rollouts"] for r in reports),
            "training_rollouts": steps * recipe.training.batch_size * recipe.training.group_size,
            "optimizer": coevolution.optimizer_accounting()}


def _quiet_libraries() -> None:
    """RunLogger's step lines are the output; per-file tqdm bars and v6 deprecation notices are noise here."""
    import warnings

    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")


def _save_final(trainer, tokenizer, final: Path, state) -> None:
    """The trained policy as a plain model directory (LoRA merged into the base), written then renamed."""
    tmp = final.with_name(".final.tmp")
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


def _summary(run_dir: Path, recipe: Recipe, instructions, wall: float, resumed_from: Path | None,
             plots: list[Path]) -> dict:
    from inspo_cli.evaluation.checkpoints import paper_choice
    from inspo_cli.instructions.population import InstructionPopulation
    from inspo_cli.training.collapse import detect_collapse
    from inspo_cli.training.run_logger import read_metrics

    rows = read_metrics(run_dir)

    def mean(key: str, part: list[dict]) -> float | None:
        values = [row[key] for row in part if row.get(key) is not None]
        return sum(values) / len(values) if values else None

    if isinstance(instructions, InstructionPopulation):
        best = instructions.best()
        best_text, best_id = best.text, best.id
        listed = [{"id": c.id, "text": c.text, "weight": c.weight, "alive": c.alive} for c in instructions.alive()]
    else:
        best_text, best_id = instructions.pick.text, instructions.pick.instruction_id
        listed = [{"id": best_id, "text": best_text}]
    window = max(1, len(rows) // 4)
    e = recipe.evaluation
    collapse = detect_collapse(rows, e.collapse_window, e.collapse_drop)
    try:
        selected = paper_choice(run_dir, recipe)
    except InspoError as error:  # collapsed before the first checkpoint: say so, the run itself is fine
        selected = str(error)
    evaluations = [{"step": row["step"], "em": row["eval/em"],
                    **{k.removeprefix("eval/").removesuffix("/em"): v for k, v in row.items()
                       if k.startswith("eval/") and k.endswith("/em") and k != "eval/em"}}
                   for row in rows if row.get("eval/em") is not None]
    return {
        "steps": rows[-1]["step"] if rows else 0,
        "updates": rows[-1]["update"] if rows else 0,
        "wall_seconds": round(wall, 1),
        "resumed_from": str(resumed_from.relative_to(run_dir)) if resumed_from else None,
        "reward_first_quarter": mean("reward", rows[:window]),
        "reward_last_quarter": mean("reward", rows[-window:]),
        "em_first_quarter": mean("em", rows[:window]),
        "em_last_quarter": mean("em", rows[-window:]),
        "final": rows[-1] if rows else None,
        "evaluations": evaluations,  # EM per periodic evaluation (files in evaluations/step-<N>/)
        "reward_collapse": collapse.as_dict() if collapse else None,
        "selected_checkpoint": selected,  # App. B: the final checkpoint before any reward collapse (--checkpoint best)
        "best_instruction": best_text,
        "best_instruction_id": best_id,
        "instructions": listed,
        "model": f"{CHECKPOINTS_DIR}/final",
        "metrics": "metrics.jsonl",
        "plots": [str(p.relative_to(run_dir)) for p in plots],
        "recipe_model": recipe.model.name_or_path,
    }
