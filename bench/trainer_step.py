"""Trainer step time: `SearchGRPOTrainer` against plain TRL `GRPOTrainer`, and the phases of a multi-turn step.

    python bench/trainer_step.py                     # CPU, SmolLM2-135M-sized models, ~12 min on 2 cores
    # bench/results/trainer_step_cuda.json
    python bench/trainer_step.py --device cuda --dtype bfloat16 --skip-phases --tag _cuda

1. Overhead, search off. Both trainers get the same questions under the same instruction (plain text), the same
   GRPOConfig (16 trajectories per step: 4 questions x group 4, micro-batch 8) and the same budget of new tokens.
   The policy is SmolLM2-135M's architecture with *random* weights, so neither side stops early (no EOS, no stop
   string) and both do exactly the same work: the difference is our rollout engine (turn bookkeeping, stop
   criterion, masks), instruction sampling and metrics. Both use the same CPU LM-head setting (see `run_plain`);
   one more plain run shows TRL as shipped. Step time is TRL's own `step_time` (all of `training_step`,
   generation included); the first step of each run is a warm-up and is dropped; runs alternate.
2. Phases, search on: the real SmolLM2 under a worked-example instruction with BM25 over the bundled world (two
   search turns), and our per-step split into generation, retrieval, scoring and update.

Writes bench/results/trainer_step.json and the "Trainer step" section of bench/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import tempfile
import time
from pathlib import Path

from _common import ROOT, machine, update_readme_section

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

from inspo_cli.agent.protocol import build_prompt  # noqa: E402
from inspo_cli.benchmarks import load_benchmark  # noqa: E402
from inspo_cli.config import ModelConfig, Recipe, RetrieverConfig, RewardConfig, RolloutConfig, TrainingConfig  # noqa: E402
from inspo_cli.config.batch_plan import batch_plan  # noqa: E402
from inspo_cli.config.instruction_defaults import WORKED_EXAMPLE_INSTRUCTION  # noqa: E402
from inspo_cli.instructions.sampling import StaticInstruction  # noqa: E402
from inspo_cli.jsonio import atomic_write_json  # noqa: E402
from inspo_cli.policy.models import load_tokenizer, resolve_model_path  # noqa: E402
from inspo_cli.training.grpo import grpo_config  # noqa: E402
from inspo_cli.training.trainer_inputs import question_dataset  # noqa: E402

STEPS = 4  # steps per run by default, the first a warm-up
PHASES = ("generation", "retrieval", "scoring", "update")


def random_weights_copy(name: str, out: Path) -> Path:
    """The architecture and tokenizer of `name`, with freshly initialised weights."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    path = resolve_model_path(name)
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(path), dtype=torch.float32).save_pretrained(out)
    AutoTokenizer.from_pretrained(path).save_pretrained(out)
    return out


def recipe_for(model: str, steps: int, max_new: int, max_turns: int, dtype: str = "float32") -> Recipe:
    return Recipe(
        model=ModelConfig(name_or_path=model, dtype=dtype, chat_template="off"),
        retriever=RetrieverConfig(kind="bm25", corpus=str(ROOT / "data/world/corpus.jsonl"), topk=3),
        rollout=RolloutConfig(
            max_turns=max_turns,
            single_turn_stop="tag",  # with max_turns 0 too, the turn stops at its tags (the stop check measured)
            max_tokens_per_turn=max_new,
            max_observation_tokens=128,
            max_prompt_tokens=512,
            max_total_tokens=1024,
        ),
        reward=RewardConfig(format_weight=0.2),
        training=TrainingConfig(
            steps=steps,
            group_size=4,
            batch_size=4,
            mini_batch_trajectories=16,
            micro_batch_size=8,
            learning_rate=1e-5,
            warmup_ratio=0.0,
            kl_beta=0.0,
            save_every=10_000,
        ),
    )


def run_ours(recipe: Recipe, questions, out: Path, device: str) -> list[dict]:
    from inspo_cli.retrieval import open_from_config
    from inspo_cli.training.trainer import SearchGRPOTrainer

    tokenizer = load_tokenizer(recipe.model)
    trainer = SearchGRPOTrainer(
        model=resolve_model_path(recipe.model.name_or_path),
        args=grpo_config(recipe, batch_plan(recipe), out, device=device),
        train_dataset=question_dataset(questions),
        processing_class=tokenizer,
        instructions=StaticInstruction(WORKED_EXAMPLE_INSTRUCTION),
        retriever=open_from_config(recipe.retriever),
        rollout=recipe.rollout,
        reward=recipe.reward,
        topk=3,
        chat=False,
        generation_batch_size=16,
    )
    trainer.train()
    return [row for row in trainer.state.log_history if "step_time" in row]


def run_plain(recipe: Recipe, questions, out: Path, device: str, as_shipped: bool = False) -> list[dict]:
    """Plain GRPOTrainer. By default with the same CPU LM-head setting ours uses (score completion positions only,
    see `score_only_labelled_positions_on_cpu`), so the comparison isolates the rollout engine; `as_shipped`
    restores TRL's own setting (every position scored on CPU)."""
    from datasets import Dataset
    from trl import GRPOTrainer

    from inspo_cli.metrics import exact_match, extract_answer
    from inspo_cli.training.trl_patches import score_only_labelled_positions_on_cpu

    tokenizer = load_tokenizer(recipe.model)
    args = grpo_config(recipe, batch_plan(recipe), out, device=device)
    args.max_completion_length = recipe.rollout.max_tokens_per_turn
    rows = [
        {
            "prompt": build_prompt(tokenizer, WORKED_EXAMPLE_INSTRUCTION, q.question, False),
            "golden_answers": list(q.golden_answers),
        }
        for q in questions
    ]

    def em(completions, golden_answers, **kwargs):
        return [exact_match(extract_answer(c), g) for c, g in zip(completions, golden_answers)]

    trainer = GRPOTrainer(
        model=resolve_model_path(recipe.model.name_or_path),
        reward_funcs=[em],
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
    )
    with contextlib.nullcontext() if as_shipped else score_only_labelled_positions_on_cpu():
        trainer.train()
    return [row for row in trainer.state.log_history if "step_time" in row]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--steps", type=int, default=STEPS, help="steps per run (the first is a warm-up)")
    parser.add_argument("--repeats", type=int, default=2, help="runs per trainer, alternating")
    parser.add_argument("--max-new", type=int, default=64)
    parser.add_argument("--dtype", default="float32", help="policy precision (bfloat16 on GPUs)")
    parser.add_argument(
        "--skip-phases", action="store_true", help="only the overhead part (it needs no trained weights)"
    )
    parser.add_argument("--tag", default="", help="suffix of the results file and README section, e.g. _cuda")
    args = parser.parse_args()
    questions = load_benchmark("world", "train", world_dir=ROOT / "data/world", limit=64)

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        random_model = random_weights_copy(args.model, tmp / "random")
        overhead = recipe_for(str(random_model), args.steps, args.max_new, max_turns=0, dtype=args.dtype)
        steps = {"ours": [], "plain": []}
        runs = [("plain", run_plain), ("ours", run_ours)] * args.repeats
        if args.device == "cpu":  # on GPUs TRL's own LM-head setting is the one both sides use already
            steps["plain_as_shipped"] = []
            runs.append(("plain_as_shipped", lambda *a: run_plain(*a, as_shipped=True)))
        for i, (name, run) in enumerate(runs):
            started = time.perf_counter()
            rows = run(overhead, questions, tmp / f"{name}-{i}", args.device)
            steps[name] += [{"seconds": r["step_time"], "tokens": r["completions/mean_length"]} for r in rows[1:]]
            print(
                f"{name}: {time.perf_counter() - started:.0f}s, steps "
                + ", ".join(f"{r['step_time']:.1f}s" for r in rows)
            )
        if not args.skip_phases:
            phases_recipe = recipe_for(args.model, args.steps, 48, max_turns=2, dtype=args.dtype)
            phase_rows = run_ours(phases_recipe, questions, tmp / "phases", args.device)[1:]

    seconds = {name: statistics.median(s["seconds"] for s in rows) for name, rows in steps.items()}
    tokens = {name: statistics.mean(s["tokens"] for s in rows) for name, rows in steps.items()}
    result = {
        "machine": machine(("torch", "trl", "transformers")),
        "setup": {
            "model": args.model,
            "device": args.device,
            "dtype": args.dtype,
            "trajectories_per_step": 16,
            "max_new_tokens": args.max_new,
            "steps_per_run": args.steps,
            "repeats": args.repeats,
        },
        "overhead": {
            "median_step_seconds": seconds,
            "mean_new_tokens": tokens,
            "ratio": seconds["ours"] / seconds["plain"],
            "steps": steps,
        },
    }
    if not args.skip_phases:
        result["multi_turn_phases"] = {
            "seconds": {p: statistics.mean(r[f"time/{p}"] for r in phase_rows) for p in PHASES},
            "step_seconds": statistics.mean(r["step_time"] for r in phase_rows),
            "searches_per_trajectory": statistics.mean(r["search/searches_per_trajectory"] for r in phase_rows),
            "observation_share": statistics.mean(r["length/observation_share"] for r in phase_rows),
        }
    atomic_write_json(ROOT / f"bench/results/trainer_step{args.tag}.json", result)
    write_section(result, args.tag)
    print(f"ours {seconds['ours']:.2f}s vs plain {seconds['plain']:.2f}s per step: {result['overhead']['ratio']:.3f}x")


def write_section(result: dict, tag: str = "") -> None:
    m, s, o = result["machine"], result["setup"], result["overhead"]
    title = "Trainer step" + (f" ({s['device']}, {s.get('dtype', 'float32')})" if tag else "")
    command = (
        "python bench/trainer_step.py"
        + (f" --device {s['device']} --dtype {s.get('dtype')} --skip-phases --tag {tag}" if tag else "")
        + (f" --steps {s['steps_per_run']}" if s.get("steps_per_run", STEPS) != STEPS else "")
    )
    shipped = len(o["steps"].get("plain_as_shipped", []))
    text = (
        f"""
## {title}

`{command}` — {s["device"]}, machine: {m["cpu_cores"]} CPU cores, GPU: {m["gpu"]}; torch {m["packages"].get("torch")},
trl {m["packages"].get("trl")}, transformers {m["packages"].get("transformers")}.

Search off, same single-turn batch ({s["trajectories_per_step"]} trajectories of {s["max_new_tokens"]} new tokens,
{s["model"]}'s architecture with random weights so both sides generate every token); median of
{len(o["steps"]["ours"])} steps each after warm-up:

| trainer | step time | new tokens / trajectory |
|---|---|---|
| plain TRL `GRPOTrainer` | {o["median_step_seconds"]["plain"]:.2f} s | {o["mean_new_tokens"]["plain"]:.1f} |
| `SearchGRPOTrainer` (rollout engine, `max_turns=0`) | {o["median_step_seconds"]["ours"]:.2f} s | \
{o["mean_new_tokens"]["ours"]:.1f} |
| ratio | **{o["ratio"]:.3f}x** (target <= 1.1x) | |
"""
        + (
            f"""| plain TRL as shipped (its CPU LM head scores prompt and padding positions too{
                f"; median of {shipped} steps" if shipped != len(o["steps"]["ours"]) else ""
            }) | \
{o["median_step_seconds"]["plain_as_shipped"]:.2f} s | {o["mean_new_tokens"]["plain_as_shipped"]:.1f} |
"""
            if "plain_as_shipped" in o["median_step_seconds"]
            else ""
        )
        + """
Both rows of the ratio use the same LM-head setting (`SearchGRPOTrainer` makes TRL's fused LM head score only
completion positions on CPU, as TRL already does on GPUs), so the ratio is the cost of the rollout engine,
instruction sampling and metrics alone. On a GPU the setting is TRL's own on both sides.
"""
    )
    if "multi_turn_phases" not in result:
        update_readme_section(f"trainer_step{tag}", text)
        return
    p = result["multi_turn_phases"]
    total = sum(p["seconds"].values())
    phase_rows = "\n".join(f"| {name} | {sec:.1f} s | {sec / total:.0%} |" for name, sec in p["seconds"].items())
    update_readme_section(
        f"trainer_step{tag}",
        text
        + f"""
Multi-turn step with search on ({s["model"]}, worked-example instruction, BM25 over the world, up to two searches;
{p["searches_per_trajectory"]:.2f} searches per trajectory, {p["observation_share"]:.0%} of completion tokens are
inserted passages), mean over {s["steps_per_run"] - 1} steps, {p["step_seconds"]:.1f} s per step:

| phase | time per step | share |
|---|---|---|
{phase_rows}
""",
    )


if __name__ == "__main__":
    main()
