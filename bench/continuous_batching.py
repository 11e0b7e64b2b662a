"""Continuous batching for the transformers backend on CPU: is it faster than the padded batch inspo uses?

    python bench/continuous_batching.py                  # SmolLM2-135M on CPU, a few minutes on 2 cores
    python bench/continuous_batching.py --questions 32 --max-new 160 --reps 3

`TransformersBackend` generates a turn for a batch of contexts with one `model.generate` call (left padding, KV
cache): a row that has finished keeps its place in the batch until the last row ends. transformers 5's continuous
batching (`model.generate_batch`, a paged KV cache whose running batch drops finished requests and takes new ones)
is what a per-trajectory schedule on the transformers backend would be built on. Here both generate one turn of
the same prompts (world questions under the worked-example instruction, plain text), sampled at temperature 1,
at most `--max-new` tokens, ending at EOS only: continuous batching has no stop strings (they would need streaming
and cancelling), so this is its best case, with the long tail of EOS-ended rows that a padded batch carries.
Repetitions alternate between the two; medians of the policy tokens per second.

Writes bench/results/continuous_batching.json and the "Continuous batching (transformers)" section of
bench/README.md.
"""

from __future__ import annotations

import argparse
import statistics
import time

from _common import ROOT, machine, update_readme_section

from inspo_cli.agent import RolloutEngine  # noqa: E402
from inspo_cli.benchmarks import load_benchmark  # noqa: E402
from inspo_cli.config import ModelConfig, RolloutConfig  # noqa: E402
from inspo_cli.config.instruction_defaults import WORKED_EXAMPLE_INSTRUCTION  # noqa: E402
from inspo_cli.jsonio import atomic_write_json  # noqa: E402
from inspo_cli.policy.models import load_model  # noqa: E402
from inspo_cli.policy.transformers_backend import TransformersBackend  # noqa: E402

MODEL = ModelConfig(name_or_path="smollm2-135m-instruct", dtype="float32", chat_template="off")


def padded(model, tokenizer, prompts: list[list[int]], max_new: int) -> list[int]:
    """Generated lengths, `TransformersBackend` with one batch of all prompts."""
    backend = TransformersBackend(model, tokenizer, temperature=1.0, top_p=1.0, batch_size=len(prompts))
    return [len(g.token_ids) for g in backend.generate(prompts, [max_new] * len(prompts), stop=())]


def continuous(model, tokenizer, prompts: list[list[int]], max_new: int) -> list[int]:
    """Generated lengths, transformers' continuous batching (`generate_batch`) over the same prompts."""
    from transformers import GenerationConfig

    config = GenerationConfig(
        do_sample=True,
        temperature=1.0,
        top_p=1.0,
        top_k=0,
        max_new_tokens=max_new,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    outputs = model.generate_batch(prompts, generation_config=config, progress_bar=False)
    if any(o.error for o in outputs.values()):
        raise RuntimeError(next(o.error for o in outputs.values() if o.error))
    return [len(o.generated_tokens) for o in outputs.values()]


SIDES = {"padded batch (inspo)": padded, "continuous batching": continuous}


def section(result: dict) -> str:
    m = result["machine"]
    lines = [
        "## Continuous batching (transformers)",
        "",
        f"`{result['command']}` on {m['cpu_cores']} CPU cores ({m['cpu']}), transformers "
        f"{m['packages'].get('transformers', '?')}, torch {m['packages'].get('torch', '?')}, "
        f"SmolLM2-135M-Instruct (float32): one turn of {result['questions']} world questions, "
        f"temperature 1, at most {result['max_new_tokens']} tokens, ending at EOS; "
        f"median of {result['reps']} alternating repetitions.",
        "",
        "| generation | wall s | tokens generated | tokens/s |",
        "|---|---|---|---|",
    ]
    for name, row in result["sides"].items():
        lines.append(f"| {name} | {row['seconds']:.1f} | {row['tokens']:.0f} | {row['tokens_per_s']:.0f} |")
    lines += ["", result["verdict"]]
    return "\n".join(lines)


def main() -> None:
    from transformers import set_seed

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=32)
    parser.add_argument("--max-new", type=int, default=160)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    model, tokenizer = load_model(MODEL, "cpu")
    questions = [
        q.question for q in load_benchmark("world", "test", world_dir=ROOT / "data/world", limit=args.questions)
    ]
    engine = RolloutEngine(
        TransformersBackend(model, tokenizer),
        None,
        tokenizer,
        RolloutConfig(max_prompt_tokens=512, max_total_tokens=1024),
        chat=False,
    )
    prompts = [engine.prompt_ids(WORKED_EXAMPLE_INSTRUCTION, q) for q in questions]
    for side in SIDES.values():  # warm-up
        side(model, tokenizer, prompts[:4], 8)
    runs: dict[str, list[dict]] = {name: [] for name in SIDES}
    for rep in range(args.reps):
        for name in list(SIDES) if rep % 2 == 0 else list(SIDES)[::-1]:
            set_seed(rep)
            started = time.perf_counter()
            lengths = SIDES[name](model, tokenizer, prompts, args.max_new)  # each side its own no-grad mode
            seconds = time.perf_counter() - started
            runs[name].append(
                {
                    "seconds": seconds,
                    "tokens": sum(lengths),
                    "tokens_per_s": sum(lengths) / seconds,
                    "ended_before_limit": sum(n < args.max_new for n in lengths) / len(lengths),
                }
            )
            print(name, rep, {k: round(v, 3) for k, v in runs[name][-1].items()}, flush=True)
    sides = {name: {k: statistics.median(r[k] for r in rows) for k in rows[0]} for name, rows in runs.items()}
    ours, cb = sides["padded batch (inspo)"], sides["continuous batching"]
    ratio = cb["tokens_per_s"] / ours["tokens_per_s"]
    verdict = f"Continuous batching generates {ratio:.2f}x the padded batch's tokens per second here, so the " + (
        "transformers backend could gain from it: see docs/rollout-schedules.md."
        if ratio > 1.05
        else "transformers backend keeps its padded batch (turn-synchronous); `rollout.schedule: "
        "per-trajectory` is for vLLM."
    )
    result = {
        "command": "python bench/continuous_batching.py",
        "machine": machine(("torch", "transformers")),
        "questions": len(prompts),
        "max_new_tokens": args.max_new,
        "reps": args.reps,
        "sides": sides,
        "cb_over_padded_tokens_per_s": ratio,
        "verdict": verdict,
        "runs": runs,
    }
    atomic_write_json(ROOT / "bench/results/continuous_batching.json", result)
    update_readme_section("continuous-batching", section(result))
    print(section(result))


if __name__ == "__main__":
    main()
