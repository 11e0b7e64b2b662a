"""`inspo evolve`: INSPO's population / prune / evolve / verify loop with a frozen policy (no gradient updates).

Prompt optimisation before or after RL — the paper's pre-policy and post-policy ablations. Each step samples
`training.batch_size` questions, gives each question group one instruction drawn from the population, rolls out
`training.group_size` trajectories per question with the (fixed) policy, and feeds the rewards to the same
`CoEvolution` the trainer uses. The run directory gets the same files as `inspo train` (metrics.jsonl,
instructions.jsonl, evolutions.json, best_instruction.txt, summary.json, plots) except checkpoints: the policy
does not change. `coevolution.json` is rewritten atomically after every step, so `--resume` continues exactly.

    run_evolve(recipe, run_dir)                 # fresh
    run_evolve(recipe, run_dir, resume=True)    # from the last completed step
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from inspo_cli.config import Recipe
from inspo_cli.errors import InspoError
from inspo_cli.jsonio import atomic_write_json, atomic_write_jsonl, atomic_write_text
from inspo_cli.runs import COEVOLUTION_FILE, SUMMARY_FILE


def run_evolve(recipe: Recipe, run_dir: Path, resume: bool = False, device: str | None = None) -> dict:
    import torch
    from accelerate import PartialState

    from inspo_cli.agent import RolloutEngine, load_backend
    from inspo_cli.console import progress_bar
    from inspo_cli.instructions.replay import experiences_from
    from inspo_cli.models import uses_chat_template
    from inspo_cli.instructions.sampling import stable_random
    from inspo_cli.training.coevolution import PolicyVerifier
    from inspo_cli.training.reward import followed_protocol, outcome_rewards
    from inspo_cli.training.run import BEST_INSTRUCTION_FILE, EVOLUTIONS_FILE, instruction_source, overhead_account
    from inspo_cli.training.run_logger import (INSTRUCTIONS_FILE, METRICS_FILE, plot_curves, read_metrics,
                                               step_line, truncate_metrics)
    from inspo_cli.training.setup import train_questions
    from retriever import open_from_config

    if not recipe.population.enabled:
        raise InspoError("inspo evolve needs population.enabled=true (it evolves the instruction population); "
                         "set it with --set population.enabled=true")
    state = PartialState()
    if state.num_processes > 1:
        raise InspoError("inspo evolve runs in one process; launch it without accelerate")
    start = 0
    if resume:
        if not (run_dir / COEVOLUTION_FILE).is_file():
            raise InspoError(f"{run_dir} has no {COEVOLUTION_FILE} to resume from; start a new run instead")
        start = json.loads((run_dir / COEVOLUTION_FILE).read_text(encoding="utf-8"))["step"]
        truncate_metrics(run_dir, start)  # rows are keyed by "update", which is the step here
    population, coevolution = instruction_source(recipe, run_dir if resume else None, state)
    questions = train_questions(recipe)
    t, r = recipe.training, recipe.rollout
    backend, tokenizer = load_backend(recipe.model, r, batch_size=t.batch_size * t.group_size, device=device)
    engine = RolloutEngine(backend, open_from_config(recipe.retriever), tokenizer, r, topk=recipe.retriever.topk,
                           chat=uses_chat_template(tokenizer, recipe.model.chat_template))
    coevolution.verifier = PolicyVerifier(engine, recipe.reward)

    started = time.time()
    with progress_bar() as progress:
        task = progress.add_task("evolving", total=t.steps, completed=start)
        for step in range(start + 1, t.steps + 1):
            step_started = time.perf_counter()
            torch.manual_seed(recipe.run.seed * 100_003 + step)  # sampling is reproducible step by step
            picked = stable_random(recipe.run.seed, step, "questions").sample(range(len(questions)),
                                                                         min(t.batch_size, len(questions)))
            batch = [questions[i] for i in picked]
            keys = [f"{q.source}:{q.id}" for q in batch]
            picks = population.sample(keys, step - 1)
            retrieval_before = engine.retrieval_seconds
            rollout_started = time.perf_counter()
            trajectories = engine.run([p.text for p in picks for _ in range(t.group_size)],
                                      [q.question for q in batch for _ in range(t.group_size)])
            rollout_seconds = time.perf_counter() - rollout_started
            golden = [q.golden_answers for q in batch for _ in range(t.group_size)]
            rewards = outcome_rewards([x.answer for x in trajectories], golden,
                                      [followed_protocol(x) for x in trajectories], recipe.reward.metric,
                                      recipe.reward.format_weight)
            groups = [rewards[i * t.group_size:(i + 1) * t.group_size] for i in range(len(batch))]
            population.observe(picks, [sum(g) / len(g) for g in groups])
            coevolution.remember(experiences_from(
                [p.instruction_id for p in picks for _ in range(t.group_size)],
                [k for k in keys for _ in range(t.group_size)], [q.question for q in batch for _ in range(t.group_size)],
                golden, [x.response for x in trajectories], rewards, step))
            row = {"step": step, "update": step, "time": round(time.time(), 3), **_rollout_metrics(
                trajectories, rewards, golden), **coevolution.end_step(step),
                "time/generation": rollout_seconds - (engine.retrieval_seconds - retrieval_before),
                "time/retrieval": engine.retrieval_seconds - retrieval_before}
            row["step_seconds"] = round(time.perf_counter() - step_started, 3)
            with open(run_dir / METRICS_FILE, "a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")
            atomic_write_jsonl(run_dir / INSTRUCTIONS_FILE, population.records())
            atomic_write_json(run_dir / COEVOLUTION_FILE, {"step": step, **coevolution.state_dict()})
            progress.console.print(step_line(row, t.steps))
            progress.update(task, completed=step)

    wall = time.time() - started
    plots = plot_curves(run_dir)
    best = population.best()
    rows = read_metrics(run_dir)
    summary = {"steps": t.steps, "wall_seconds": round(wall, 1), "policy": recipe.model.name_or_path,
               "frozen_policy": True, "resumed_from_step": start if resume else None,
               "reward_first": rows[0]["reward"] if rows else None, "reward_last": rows[-1]["reward"] if rows else None,
               "best_instruction": best.text, "best_instruction_id": best.id,
               "instructions": [{"id": c.id, "text": c.text, "weight": c.weight} for c in population.alive()],
               "overhead": overhead_account(coevolution, recipe, t.steps, wall),
               "plots": [str(p.relative_to(run_dir)) for p in plots]}
    atomic_write_json(run_dir / EVOLUTIONS_FILE, coevolution.reports)
    atomic_write_text(run_dir / BEST_INSTRUCTION_FILE, best.text + "\n")
    atomic_write_json(run_dir / SUMMARY_FILE, summary)
    return summary


def _rollout_metrics(trajectories, rewards: list[float], golden) -> dict:
    from statistics import mean, pstdev

    from inspo_cli.agent.rollout import summarize
    from inspo_cli.rewards import exact_match

    return {"reward": mean(rewards), "reward_std": pstdev(rewards),
            "em": mean(exact_match(x.answer, g) for x, g in zip(trajectories, golden)), **summarize(trajectories)}
