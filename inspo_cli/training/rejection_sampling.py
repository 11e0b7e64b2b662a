"""`training.algorithm: rejection-sampling`: Search-R1's rejection-sampling baseline (the paper's tool-integrated
"SFT" row, Table 1), in two phases inside one run directory.

Phase 1, sampling: every training question is rolled out `sampling.samples` times (Search-R1: five) by
`sampling.model` (Search-R1: the instruct model) with the recipe's instruction, through the rollout engine, search
included, at `rollout.temperature`, on `sampling.backend` (transformers or vLLM). A trajectory is kept when its
reward is 1 (exact match with the default reward). The questions go in batches of `sampling.batch_size`; each
batch is written whole (atomically) to `sampling/batch-<N>.jsonl` in the run directory: a header row (batch,
seconds), then one row per trajectory, the kept ones with their token ids and loss mask. A killed phase 1
continues at the first batch without a file; `sampling/summary.json` marks it complete. Under `accelerate launch`,
process r samples batches r, r + n, ...
Each batch is seeded from `run.seed` and its number (`derived_seed`), so a resumed phase 1 samples what an
uninterrupted one would, and each run seed samples its own trajectories, on either backend: vLLM samples each
request with a seed drawn from that seeded generator (`load_backend(request_seeds=True)`), not from its engine's.

Phase 2, SFT: TRL's SFTTrainer on the kept trajectories (`SearchSFTTrainer`, as `training.algorithm: sft`): the
prompt as the trained model's rollout engine builds it, then the sampled completion token for token, with the
`<information>` observations masked out of the loss exactly as GRPO masks them. It resumes from its checkpoints as
every run does. The sampler and the trained model must share a vocabulary (Qwen2.5 base and instruct do).

    kept = sample_phase(recipe, run, questions, instruction, state, device, tokenizer)   # rows kept by phase 1
"""

from __future__ import annotations

import dataclasses
import gc
import time
from collections import Counter
from collections.abc import Callable

from inspo_cli.agent.rollout import RolloutEngine
from inspo_cli.agent.tools import recipe_tools
from inspo_cli.config import Recipe
from inspo_cli.errors import InspoError
from inspo_cli.jsonio import atomic_write_json, atomic_write_jsonl, read_jsonl
from inspo_cli.policy.models import uses_chat_template
from inspo_cli.policy.seeds import derived_seed
from inspo_cli.retrieval import open_from_config
from inspo_cli.runs import RunDir
from inspo_cli.training.reward import trajectory_rewards
from inspo_cli.training.trainer_inputs import train_questions


def sampler_config(recipe: Recipe):
    """The model section phase 1 samples with: the recipe's model, renamed to `sampling.model` and on
    `sampling.backend` (no LoRA: the sampler is not trained; `model.compile_generation` only where the sampler is the
    transformers backend: vLLM compiles its own engine, and the setting still holds for the run's evaluations)."""
    s = recipe.sampling
    return dataclasses.replace(
        recipe.model,
        name_or_path=s.model.strip() or recipe.model.name_or_path,
        backend=s.backend,
        lora=False,
        compile_generation=recipe.model.compile_generation and s.backend == "transformers",
    )


def build_rejection_sampling(ctx):
    """Phase 1 (or its saved result), then a `SearchSFTTrainer` on the kept trajectories."""
    recipe = ctx.recipe
    instruction = ctx.instructions.best_pick().text
    return sft_on_samples(
        ctx,
        sampled_under=instruction,
        trained_under=instruction,
        keep=earned_full_reward,
        what="rejection-sampling: SFT on {n} kept trajectories",
        nothing_kept=(
            f"rejection sampling kept no trajectory: no sample of {_sampler_name(recipe)} on "
            f"data.train={recipe.data.train} earned reward 1 ({ctx.run.sampling_summary_file}); "
            "raise sampling.samples, use a stronger sampling.model, or train with GRPO"
        ),
    )


def sft_on_samples(
    ctx, sampled_under: str, trained_under: str, keep: Callable[[float], bool], what: str, nothing_kept: str
):
    """Phase 1 sampled with the instruction `sampled_under` (or its saved result), then a `SearchSFTTrainer` on the
    kept completions, each behind the prompt of `trained_under`: rejection sampling trains under the instruction it
    sampled with, context distillation (training/distill.py) under the student's. `what` is the progress line's
    start ({n}: the examples), `nothing_kept` the error when no sample was kept."""
    from inspo_cli.training.sft import sft_engine, sft_trainer  # imports TRL and torch: only when it trains

    recipe, run = ctx.recipe, ctx.run
    questions = train_questions(recipe)
    kept = sample_phase(recipe, run, questions, sampled_under, ctx.state, ctx.device, ctx.tokenizer, keep)
    engine = sft_engine(ctx, searching=False)
    examples = rejection_examples(engine, trained_under, questions, kept)
    if not examples:
        raise InspoError(nothing_kept)
    if ctx.state.is_main_process:
        t = recipe.training
        # a batch larger than the examples holds them all once: one epoch a step, not batch / examples
        epochs = t.steps * min(t.batch_size, len(examples)) / len(examples)
        print(
            f"{what.format(n=len(examples))} ({t.steps} steps of {t.batch_size}: {epochs:.2f} epochs)",
            flush=True,
        )
    return sft_trainer(ctx, engine, examples)


def rejection_examples(engine, instruction: str, questions, kept: list[dict]) -> list[dict]:
    """SFT examples ({input_ids, completion_mask}): the prompt as `engine` builds it for the trained model, then
    each kept completion token for token, observations masked (0) as they were sampled."""
    text = {q.key: q.question for q in questions}
    prompts: dict[str, list[int]] = {}
    examples = []
    for row in kept:
        if row["key"] not in prompts:
            prompts[row["key"]] = engine.prompt_ids(instruction, text[row["key"]])[-engine.config.max_prompt_tokens :]
        prompt = prompts[row["key"]]
        examples.append(
            {"input_ids": prompt + row["completion_ids"], "completion_mask": [0] * len(prompt) + row["completion_mask"]}
        )
    return examples


def earned_full_reward(reward: float) -> bool:
    """Rejection sampling's rule: a trajectory is kept when its reward is 1 (exact match by default)."""
    return reward >= 1


def sample_phase(
    recipe: Recipe,
    run: RunDir,
    questions,
    instruction: str,
    state,
    device: str,
    tokenizer,
    keep: Callable[[float], bool] = earned_full_reward,
) -> list[dict]:
    """Run phase 1 where it stopped (or not at all when complete); the kept rows, in question order. `keep(reward)`
    says which trajectories are saved with their tokens (context distillation keeps them all)."""
    if not questions:
        raise InspoError(f"data.train={recipe.data.train} has no questions; point it at a non-empty file")
    size = recipe.sampling.batch_size
    batches = [questions[i : i + size] for i in range(0, len(questions), size)]
    if not run.sampling_summary_file.is_file():
        if state.is_main_process:
            run.sampling_dir.mkdir(exist_ok=True)
        state.wait_for_everyone()
        mine = [i for i in range(len(batches)) if i % state.num_processes == state.process_index]
        todo = [i for i in mine if not run.sampling_batch_file(i).is_file()]
        if state.is_main_process and len(todo) < len(mine):
            print(f"sampling: {len(mine) - len(todo)} of {len(mine)} batches already sampled; continuing", flush=True)
        if todo:
            if state.num_processes > 1 and device != "cpu":
                device = f"cuda:{state.local_process_index}"
            _sample(recipe, instruction, batches, todo, run, device, tokenizer, state, keep)
        state.wait_for_everyone()
        if state.is_main_process:
            atomic_write_json(run.sampling_summary_file, sampling_summary(recipe, batches, run))
        state.wait_for_everyone()
    kept: list[dict] = []
    for index, batch in enumerate(batches):
        _, rows = _read_batch(run, index, batch)
        kept.extend(row for row in rows if "completion_ids" in row)
    return kept


def _sampler_name(recipe: Recipe) -> str:
    return sampler_config(recipe).name_or_path


def _sample(
    recipe: Recipe,
    instruction: str,
    batches,
    todo: list[int],
    run: RunDir,
    device: str,
    tokenizer,
    state,
    keep: Callable[[float], bool],
) -> None:
    from transformers import set_seed

    from inspo_cli.policy.backends import load_backend  # looked up per call: tests replace it at its module

    s, r = recipe.sampling, recipe.rollout
    config = sampler_config(recipe)
    backend, sampler_tokenizer = load_backend(
        config,
        r,
        s.generation_batch_size,
        device,
        state.process_index,
        state.num_processes,
        seed=recipe.run.seed,
        request_seeds=True,
    )
    if sampler_tokenizer.get_vocab() != tokenizer.get_vocab():
        raise InspoError(
            f"sampling.model={config.name_or_path} has another vocabulary than model.name_or_path="
            f"{recipe.model.name_or_path}; rejection sampling trains on the sampled token ids, so use "
            "a sampler of the same family (e.g. the instruct model of the base model trained)"
        )
    retriever = open_from_config(recipe.retriever)
    engine = RolloutEngine(
        backend,
        retriever,
        sampler_tokenizer,
        r,
        topk=recipe.retriever.topk,
        chat=uses_chat_template(sampler_tokenizer, config.chat_template),
        tools=recipe_tools(recipe, retriever),
        protocol=recipe.agent.protocol,
    )
    started, done, kept, total = time.perf_counter(), 0, 0, 0
    for index in todo:
        set_seed(derived_seed(recipe.run.seed, "sampling", index))
        batch_started = time.perf_counter()
        batch = batches[index]
        repeated = [q for q in batch for _ in range(s.samples)]
        trajectories = engine.run([instruction] * len(repeated), [q.question for q in repeated])
        rewards = trajectory_rewards(trajectories, [q.golden_answers for q in repeated], recipe.reward)
        rows = [
            _row(q, i % s.samples, t, reward, keep(reward))
            for i, (q, t, reward) in enumerate(zip(repeated, trajectories, rewards))
        ]
        atomic_write_jsonl(
            run.sampling_batch_file(index),
            [{"batch": index, "seconds": round(time.perf_counter() - batch_started, 2)}, *rows],
        )
        done, total = done + 1, total + len(rows)
        kept += sum("completion_ids" in row for row in rows)
        elapsed = time.perf_counter() - started
        print(
            f"sampling: batch {index + 1}/{len(batches)} ({done}/{len(todo)} here), kept {kept} of {total} "
            f"trajectories ({kept / total:.0%}), {elapsed:.0f}s, about {elapsed / done * (len(todo) - done):.0f}s "
            "left",
            flush=True,
        )
    del engine, backend
    _free_memory()


def _row(question, sample: int, trajectory, reward: float, kept: bool) -> dict:
    row = {
        "key": question.key,
        "sample": sample,
        "reward": reward,
        "answer": trajectory.answer,
        "stop_reason": trajectory.stop_reason,
        "searches": trajectory.num_searches,
        "turns": trajectory.turns,
        "invalid_actions": trajectory.invalid_actions,
    }
    if kept:  # what phase 2 trains on
        row.update(completion_ids=trajectory.completion_ids, completion_mask=trajectory.completion_mask)
    return row


def _read_batch(run: RunDir, index: int, batch) -> tuple[dict, list[dict]]:
    """(header, trajectory rows) of a saved batch, checked against the questions it should hold."""
    path = run.sampling_batch_file(index)
    if not path.is_file():
        raise InspoError(
            f"{path} is missing although {run.sampling_summary_file} says sampling finished; "
            f"delete {run.sampling_dir} to sample again"
        )
    header, *rows = read_jsonl(path)
    if header.get("batch") != index or {row["key"] for row in rows} != {q.key for q in batch}:
        raise InspoError(
            f"{path} holds samples of other questions than data.train gives now (the training data "
            f"changed since it was sampled); delete {run.sampling_dir} to sample again"
        )
    return header, rows


def sampling_summary(recipe: Recipe, batches, run: RunDir) -> dict:
    """Phase 1 in numbers: trajectories kept, questions with at least one kept, by question type."""
    types = {q.key: q.metadata.get("type", "all") for batch in batches for q in batch}
    trajectories: Counter[str] = Counter()
    kept: Counter[str] = Counter()
    solved: Counter[str] = Counter()
    questions = Counter(types.values())
    seconds = 0.0
    for index, batch in enumerate(batches):
        header, rows = _read_batch(run, index, batch)
        seconds += header["seconds"]
        solved_here = set()
        for row in rows:
            qtype = types[row["key"]]
            trajectories[qtype] += 1
            if "completion_ids" in row:
                kept[qtype] += 1
                solved_here.add(row["key"])
        for key in solved_here:
            solved[types[key]] += 1
    s = recipe.sampling
    return {
        "sampler": _sampler_name(recipe),
        "backend": s.backend,
        "samples_per_question": s.samples,
        "questions": sum(questions.values()),
        "trajectories": sum(trajectories.values()),
        "kept": sum(kept.values()),
        "questions_solved": sum(solved.values()),
        "kept_rate": round(sum(kept.values()) / max(sum(trajectories.values()), 1), 4),
        "sampling_seconds": round(seconds, 1),  # summed over batches (and processes), across resumes
        "by_type": {t: {"questions": questions[t], "kept": kept[t], "solved": solved[t]} for t in sorted(questions)},
    }


def _free_memory() -> None:
    """The sampler's weights and KV cache go before the trained model loads."""
    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
