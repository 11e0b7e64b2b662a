"""Rollout engine speed: policy tokens/s of `RolloutEngine` against a plain batched `model.generate`.

    python bench/rollout_engine.py                       # SmolLM2-135M on CPU, ~3 min on 2 cores
    python bench/rollout_engine.py --model Qwen/Qwen2.5-3B --batch 64 --max-new 500 --device cuda

Search off: the same prompts (bundled-world questions under Search-R1's instruction, chat template), the same
batches and the same greedy decoding, so both sides produce the same tokens (checked): the engine (`max_turns=0`:
one turn, its own stopping criterion, exact-id bookkeeping) against `model.generate` with transformers' own
`stop_strings`. Repetitions alternate between the two; the median of each is reported.
Search on: the engine with `max_turns=2` and in-process BM25 over the world, under a worked-example instruction in
plain text (with which SmolLM2 does search); how much of its wall time is retrieval.

Writes bench/results/rollout_engine.json and the "Rollout engine" section of bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from _common import ROOT, machine, update_readme_section

from inspo_cli.agent import STOP_STRINGS, RolloutEngine
from inspo_cli.benchmarks import load_benchmark
from inspo_cli.config import ModelConfig, RolloutConfig
from inspo_cli.config.instruction_defaults import SEARCH_R1_INSTRUCTION, WORKED_EXAMPLE_INSTRUCTION
from inspo_cli.jsonio import atomic_write_json
from inspo_cli.policy.models import load_model
from inspo_cli.policy.transformers_backend import TransformersBackend


def plain_generate(model, tokenizer, prompts, batch: int, max_new: int) -> tuple[list[list[int]], float]:
    """`model.generate` over the same length-sorted batches the engine's backend uses."""
    import torch

    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    outputs: list[list[int]] = [[] for _ in prompts]
    pad = tokenizer.pad_token_id
    started = time.perf_counter()
    for first in range(0, len(order), batch):
        rows = order[first : first + batch]
        width = max(len(prompts[i]) for i in rows)
        ids = torch.full((len(rows), width), pad, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for r, i in enumerate(rows):
            ids[r, width - len(prompts[i]) :] = torch.tensor(prompts[i])
            mask[r, width - len(prompts[i]) :] = 1
        with torch.inference_mode():
            out = model.generate(
                input_ids=ids.to(model.device),
                attention_mask=mask.to(model.device),
                max_new_tokens=max_new,
                do_sample=False,
                stop_strings=list(STOP_STRINGS),
                tokenizer=tokenizer,
                pad_token_id=pad,
            )
        for r, i in enumerate(rows):
            outputs[i] = out[r, width:].tolist()
    return outputs, time.perf_counter() - started


def matches(engine_ids: list[int], plain_ids: list[int], pad: int) -> bool:
    """The engine's tokens are the plain row's, and the plain row has only padding after them."""
    n = len(engine_ids)
    return plain_ids[:n] == engine_ids and all(t == pad for t in plain_ids[n:])


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--questions", type=int, default=16)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--max-new", type=int, default=64)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "rollout_engine.json"))
    args = parser.parse_args()
    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device

    from retriever import open_retriever

    model, tokenizer = load_model(ModelConfig(name_or_path=args.model), device)
    questions = [
        q.question for q in load_benchmark("world", "test", world_dir=ROOT / "data/world", limit=args.questions)
    ]
    retriever = open_retriever(ROOT / "data/world/corpus.jsonl")
    limits = dict(
        max_tokens_per_turn=args.max_new,
        max_observation_tokens=256,
        max_prompt_tokens=1024,
        max_total_tokens=2048,
        temperature=0.0,
    )

    def engine(max_turns: int, chat: bool) -> RolloutEngine:
        backend = TransformersBackend(model, tokenizer, temperature=0.0, batch_size=args.batch)
        return RolloutEngine(
            backend,
            retriever,
            tokenizer,
            RolloutConfig(max_turns=max_turns, single_turn_stop="tag", **limits),
            chat=chat,
        )  # the turn stops at its tags, as the plain side's stop strings do

    prompts = [engine(0, True).prompt_ids(SEARCH_R1_INSTRUCTION, q) for q in questions]
    engine_times, plain_times, same = [], [], True
    plain_generate(model, tokenizer, prompts[: args.batch], args.batch, 4)  # warm-up
    for _ in range(args.reps):
        off = engine(0, True)
        started = time.perf_counter()
        trajectories = off.run_prompts(prompts)
        engine_times.append(time.perf_counter() - started)
        plain, seconds = plain_generate(model, tokenizer, prompts, args.batch, args.max_new)
        plain_times.append(seconds)
        same &= all(matches(t.completion_ids, p, tokenizer.pad_token_id) for t, p in zip(trajectories, plain))
    tokens = sum(sum(t.completion_mask) for t in trajectories)
    engine_s, plain_s = statistics.median(engine_times), statistics.median(plain_times)

    searching = engine(2, False)
    started = time.perf_counter()
    with_search = searching.run([WORKED_EXAMPLE_INSTRUCTION] * len(questions), questions)
    wall = time.perf_counter() - started
    search_tokens = sum(sum(t.completion_mask) for t in with_search)

    report = {
        "benchmark": "rollout_engine",
        "machine": machine(("torch", "transformers")),
        "device": device,
        "model": args.model,
        "dtype": str(model.dtype).removeprefix("torch."),
        "questions": len(prompts),
        "batch": args.batch,
        "max_new_tokens_per_turn": args.max_new,
        "reps": args.reps,
        "decoding": "greedy",
        "search_off": {
            "policy_tokens": tokens,
            "same_tokens_as_plain_generate": same,
            "engine_s": [round(t, 3) for t in engine_times],
            "plain_generate_s": [round(t, 3) for t in plain_times],
            "engine_tokens_per_s": round(tokens / engine_s, 1),
            "plain_tokens_per_s": round(tokens / plain_s, 1),
            "engine_over_plain": round(plain_s / engine_s, 3),
        },
        "search_on": {
            "max_turns": 2,
            "retriever": "BM25 in-process (world corpus)",
            "wall_s": round(wall, 3),
            "policy_tokens": search_tokens,
            "tokens_per_s": round(search_tokens / wall, 1),
            "searches": sum(t.num_searches for t in with_search),
            "retriever_calls": searching.retriever_calls,
            "retrieval_s": round(searching.retrieval_seconds, 4),
            "retrieval_share": round(searching.retrieval_seconds / wall, 6),
        },
    }
    atomic_write_json(args.out, report)
    update_readme_section("rollout_engine", markdown(report))
    print(json.dumps(report, indent=2))


def markdown(r: dict) -> str:
    off, on, m = r["search_off"], r["search_on"], r["machine"]
    return f"""## Rollout engine

`python bench/rollout_engine.py` — {r["model"]} ({r["dtype"]}) on {r["device"]}; machine: {m["cpu_cores"]} CPU cores \
({m["cpu"]}), GPU: {m["gpu"]}. {r["questions"]} questions of the bundled world, batches of {r["batch"]}, \
up to {r["max_new_tokens_per_turn"]} tokens per turn, greedy; median of {r["reps"]} alternating repetitions.

Search off (Search-R1's instruction, chat template):

| search off | policy tokens | seconds | tokens/s |
|---|---|---|---|
| `RolloutEngine` (max_turns=0) | {off["policy_tokens"]} | {statistics.median(off["engine_s"]):.2f} | \
{off["engine_tokens_per_s"]:,} |
| plain `model.generate` (stop_strings) | {off["policy_tokens"]} | {statistics.median(off["plain_generate_s"]):.2f} | \
{off["plain_tokens_per_s"]:,} |

Engine / plain: **{off["engine_over_plain"]:.2f}x** (target 0.9x); \
same tokens on both sides: {off["same_tokens_as_plain_generate"]}.

With search (a worked-example instruction in plain text, max_turns={on["max_turns"]}, \
{on["retriever"]}): {on["policy_tokens"]} policy tokens in {on["wall_s"]:.1f} s ({on["tokens_per_s"]} tokens/s), \
{on["searches"]} searches in {on["retriever_calls"]} retriever calls; retrieval took {on["retrieval_s"]:.3f} s, \
**{100 * on["retrieval_share"]:.3f}%** of the wall time (the policy's generation is the rest).
"""


if __name__ == "__main__":
    main()
