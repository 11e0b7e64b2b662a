"""Decode speed of the trainer's rollouts against plain `generate` of the same weights (issue 52).

    python bench/generation_speed.py                                  # CPU: SmolLM2-135M and the tiny Qwen shape
    python bench/generation_speed.py --device cuda --models qwen2.5-3b --tag _cuda        # a GPU machine

Per model, the same weights, batch, prompt and number of new tokens on every side, in ms per decode step (wall time
over the steps the longest row took, prefill included as `generate` has it):

  (a) plain `model.generate` of the weights in the compute dtype (sampling, top_k=0, as the backend);
  (b) `TransformersBackend.generate` alone, without and with the protocol's stop strings (`</search>`, `</answer>`);
  (c) the same backend call inside `SearchGRPOTrainer._policy_for_generation` of a real trainer, mid-`train()`:
      the context every training rollout runs in (accelerate's prepared model, TRL's unwrapping, no_grad, and with
      mixed precision the float32 masters cast once to the compute dtype, `policy.generation_weights`);
  (c-before) with `--dtype bfloat16` (mixed precision: float32 masters under bf16 autocast) the same trainer context
      without that cast, i.e. generating through accelerate's autocast wrapper as every rollout did before.

Sides alternate within each repeat; the medians are reported with their ratios to (a). The models have random
weights (the architecture's config), so nothing ends early by chance of a trained policy. A second table gives
tokens per second of the backend against its batch size (`rollout.generation_batch_size`). Results:
bench/results/generation_speed{tag}.json and a section of bench/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from _common import ROOT, SMOLLM2, machine, positive_int, update_readme_section

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

from inspo_cli.jsonio import atomic_write_json  # noqa: E402

STOP = ("</search>", "</answer>")


class _Measured(Exception):
    """Raised out of the trainer's rollout once the sides are measured: the bench needs no update."""


def random_model(name: str, out: Path, device: str) -> Path:
    """`name`'s architecture with random float32 weights, and SmolLM2's tokenizer (or the carried one on a GPU)."""
    import torch
    from gpu_checks import COMMON, QWEN, carried_tokenizer
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, Qwen2Config

    from inspo_cli.policy.models import resolve_model_path

    config = (
        Qwen2Config(**QWEN[name], **COMMON)
        if name in QWEN
        else AutoConfig.from_pretrained(resolve_model_path("smollm2-135m-instruct"))
    )
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.save_pretrained(out)
    del model
    AutoTokenizer.from_pretrained(carried_tokenizer()).save_pretrained(out)
    return out


def contexts_for(tokenizer, batch: int, prompt: int, seed: int = 0) -> list[list[int]]:
    import random

    rng = random.Random(seed)
    top = min(len(tokenizer), 30_000)
    return [[rng.randrange(100, top) for _ in range(prompt)] for _ in range(batch)]


def timed(call) -> float:
    """ms per decode step of `call()`, which returns the number of decode steps it made."""
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()
    started = time.perf_counter()
    steps = call()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return (time.perf_counter() - started) * 1000 / max(steps, 1)


def plain_generate(model, contexts, new_tokens: int, pad_id: int):
    import torch

    def call() -> int:
        ids = torch.tensor(contexts, device=model.device)
        with torch.no_grad():
            out = model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=new_tokens,
                do_sample=True,
                top_k=0,
                top_p=1.0,
                temperature=1.0,
                pad_token_id=pad_id,
            )
        return out.shape[1] - ids.shape[1]

    return call


def backend_generate(backend, contexts, new_tokens: int, stop):
    def call() -> int:
        return max(len(g.token_ids) for g in backend.generate(contexts, [new_tokens] * len(contexts), stop))

    return call


def trainer_for(model_dir: Path, out: Path, dtype: str, device: str, batch: int):
    """A SearchGRPOTrainer over `model_dir` as `inspo train` builds it (one process), generating `batch` at once."""
    from trainer_step import recipe_for

    from inspo_cli.benchmarks import load_benchmark
    from inspo_cli.config.batch_plan import batch_plan
    from inspo_cli.config.instruction_defaults import WORKED_EXAMPLE_INSTRUCTION
    from inspo_cli.instructions.sampling import StaticInstruction
    from inspo_cli.policy.models import load_tokenizer, resolve_model_path
    from inspo_cli.retrieval import open_from_config
    from inspo_cli.training.grpo import grpo_config
    from inspo_cli.training.trainer import SearchGRPOTrainer
    from inspo_cli.training.trainer_inputs import question_dataset

    recipe = recipe_for(str(model_dir), steps=1, max_new=8, max_turns=0, dtype=dtype)
    questions = load_benchmark("world", "train", world_dir=ROOT / "data/world", limit=16)
    return SearchGRPOTrainer(
        model=resolve_model_path(recipe.model.name_or_path),
        args=grpo_config(recipe, batch_plan(recipe), out, device),
        train_dataset=question_dataset(questions),
        processing_class=load_tokenizer(recipe.model),
        instructions=StaticInstruction(WORKED_EXAMPLE_INSTRUCTION),
        retriever=open_from_config(recipe.retriever),
        rollout=recipe.rollout,
        reward=recipe.reward,
        topk=3,
        chat=False,
        generation_batch_size=batch,
    )


def measure_model(name: str, args, work: Path) -> dict:
    import torch
    from transformers import AutoModelForCausalLM

    from inspo_cli.config import ModelConfig
    from inspo_cli.policy.models import load_tokenizer, resolve_dtype
    from inspo_cli.policy.transformers_backend import TransformersBackend

    model_dir = random_model(name, work / name, args.device)
    compute = resolve_dtype(args.dtype, args.device)
    tokenizer = load_tokenizer(ModelConfig(name_or_path=str(model_dir)))
    plain = AutoModelForCausalLM.from_pretrained(model_dir, dtype=compute).to(args.device).eval()
    contexts = contexts_for(tokenizer, args.batch, args.prompt)
    backend = TransformersBackend(plain, tokenizer, 1.0, 1.0, batch_size=args.batch)
    started = time.perf_counter()
    backend.generate(contexts[:1], [1], STOP)  # the stop-id table, built once per backend and stop strings
    stop_table_seconds = time.perf_counter() - started
    sides = {
        "a": plain_generate(plain, contexts, args.new_tokens, backend.pad_id),
        "b": backend_generate(backend, contexts, args.new_tokens, ()),
        "b_stop": backend_generate(backend, contexts, args.new_tokens, STOP),
    }
    runs = ["after"] if compute == torch.float32 else ["after", "before"]  # before: only mixed precision had one
    samples: dict[str, list[float]] = {}
    for run in runs:
        trainer = trainer_for(model_dir, work / f"{name}-{run}", args.dtype, args.device, args.batch)
        if run == "before":
            trainer._generation_dtype = None  # generate through accelerate's autocast wrapper, as before the fix
        trainer_backend = trainer.engine.backend
        trainer_backend.generate(contexts[:1], [1], STOP)
        side = "c" if run == "after" else "c_before"

        def measure(instructions, prompts):  # in place of the rollout engine, inside _policy_for_generation
            for _ in range(args.repeats):
                for key, call in [
                    *sides.items(),
                    (side, backend_generate(trainer_backend, contexts, args.new_tokens, STOP)),
                ]:
                    samples.setdefault(key, []).append(timed(call))
            raise _Measured

        trainer.engine.run = measure
        with contextlib.suppress(_Measured):
            trainer.train()
        del trainer
    medians = {key: statistics.median(values) for key, values in samples.items()}
    return {
        "model": name,
        "parameters": sum(p.numel() for p in plain.parameters()),
        "ms_per_step": medians,
        "samples": samples,
        "ratio_to_plain": {k: v / medians["a"] for k, v in medians.items()},
        "stop_check_share": medians["b_stop"] / medians["b"] - 1,
        "stop_table_seconds": stop_table_seconds,
        "batch_sweep": batch_sweep(plain, tokenizer, args) if args.sweep else {},
    }


def batch_sweep(model, tokenizer, args) -> dict:
    """Tokens per second of the backend against rows per call, the prompt and new tokens of `--sweep-shape`."""
    from inspo_cli.policy.transformers_backend import TransformersBackend

    prompt, new = args.sweep_shape
    out = {}
    for batch in args.sweep:
        contexts = contexts_for(tokenizer, batch, prompt, seed=batch)
        backend = TransformersBackend(model, tokenizer, 1.0, 1.0, batch_size=batch)
        ms = statistics.median(timed(backend_generate(backend, contexts, new, ())) for _ in range(args.repeats))
        out[str(batch)] = {"ms_per_step": ms, "tokens_per_second": batch * 1000 / ms}
        print(f"  batch {batch}: {ms:.1f} ms per step, {batch * 1000 / ms:.0f} tokens/s", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--models", nargs="+", default=[SMOLLM2, "qwen2-tiny"])
    parser.add_argument(
        "--dtypes",
        nargs="+",
        default=None,
        help="compute dtypes, each a run (default: float32 bfloat16 on CPU, bfloat16 on CUDA)",
    )
    parser.add_argument("--batch", type=positive_int, default=8)
    parser.add_argument("--prompt", type=positive_int, default=400)
    parser.add_argument("--new-tokens", type=positive_int, default=128)
    parser.add_argument("--repeats", type=positive_int, default=3)
    parser.add_argument("--sweep", type=positive_int, nargs="*", default=[1, 2, 4, 8, 16, 32, 64])
    parser.add_argument("--sweep-shape", type=positive_int, nargs=2, default=[64, 32], metavar=("PROMPT", "NEW"))
    parser.add_argument("--tag", default="")
    parser.add_argument("--out", type=Path, help="write the results here instead (bench/gpu_checklist.py), no README")
    parser.add_argument("--readme", type=Path, help="a results JSON: write its README section only")
    args = parser.parse_args()
    from gpu_checks import shape_error

    if error := shape_error(args.models):
        parser.error(error)
    if args.readme:
        update_readme_section(f"generation_speed{args.tag}", section(json.loads(args.readme.read_text()), args.tag))
        return
    dtypes = args.dtypes or (["float32", "bfloat16"] if args.device == "cpu" else ["bfloat16"])
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            for dtype in dtypes:
                args.dtype = dtype
                print(f"{name}, {dtype}:", flush=True)
                row = measure_model(name, args, Path(tmp) / dtype)
                row["dtype"] = dtype
                results.append(row)
                print("  " + ", ".join(f"{k} {v:.1f} ms" for k, v in row["ms_per_step"].items()), flush=True)
    result = {
        "machine": machine(("torch", "trl", "transformers", "accelerate")),
        "setup": {
            "device": args.device,
            "batch": args.batch,
            "prompt_tokens": args.prompt,
            "new_tokens": args.new_tokens,
            "repeats": args.repeats,
            "stop": list(STOP),
            "sweep_shape": args.sweep_shape,
        },
        "models": results,
    }
    if args.out:
        atomic_write_json(args.out, result)
        return
    atomic_write_json(ROOT / f"bench/results/generation_speed{args.tag}.json", result)
    update_readme_section(f"generation_speed{args.tag}", section(result, args.tag))


def gpu_rows() -> str:
    """The GPU rows of the CPU table: bench/results/generation_speed_cuda.json (the generation check of
    bench/gpu_checklist.py on a lent GPU machine), else a row saying it was not measured."""
    path = ROOT / "bench/results/generation_speed_cuda.json"
    if not path.exists():
        return (
            "| Qwen2.5-3B on a GPU | bfloat16 | not measured: no GPU was lent to issue 52; `bench/gpu_checklist.py` "
            "runs this bench first on the next GPU machine | | | | | |\n"
        )
    result = json.loads(path.read_text())
    gpu, new_tokens = result["machine"]["gpu"], result["setup"]["new_tokens"]
    return (
        "\n".join(
            table_row(r, f"{r['model']} on {gpu} ({new_tokens} new tokens; {medians_of(r)})") for r in result["models"]
        )
        + "\n"
    )


def gpu_before_text() -> str:
    """What generating through the autocast wrapper cost on the GPU row's machine, from its results, if any."""
    path = ROOT / "bench/results/generation_speed_cuda.json"
    if not path.exists():
        return ""
    result = json.loads(path.read_text())
    costs = [f"{r['ratio_to_plain']['c_before']:.2f}x" for r in result["models"] if "c_before" in r["ratio_to_plain"]]
    return f", {', '.join(costs)} on {result['machine']['gpu']} (the row above)" if costs else ""


def medians_of(r: dict) -> str:
    """How many samples each median of a row is over: the sides timed in every trainer run, (a), (b) and (b+stop),
    have twice as many in a mixed-precision row (two runs: the fixed one and the one before) as (c) and (c-before)."""
    counts = {key: len(values) for key, values in r.get("samples", {}).items()}
    if not counts:
        return "medians"
    if len(set(counts.values())) == 1:
        return f"median of {next(iter(counts.values()))}"
    every_run = "/".join(f"({k.replace('_', '+')})" for k in ("a", "b", "b_stop") if k in counts)
    per_run = "/".join(f"({k.replace('_', '-')})" for k in ("c", "c_before") if k in counts)
    return f"medians of {counts.get('a')} for {every_run}, of {counts.get('c')} for {per_run}"


def table_row(r: dict, label: str) -> str:
    """One model's row of the ms-per-step table, `label` in its first cell."""
    ms, ratio = r["ms_per_step"], r["ratio_to_plain"]
    before = f"{ms['c_before']:.1f} ({ratio['c_before']:.2f}x)" if "c_before" in ms else "—"
    return (
        f"| {label} | {r['dtype']} | {ms['a']:.1f} | "
        f"{ms['b']:.1f} ({ratio['b']:.2f}x) | {ms['b_stop']:.1f} ({ratio['b_stop']:.2f}x) | "
        f"**{ms['c']:.1f} ({ratio['c']:.2f}x)** | {before} | {r['stop_check_share']:+.1%} |"
    )


def section(result: dict, tag: str) -> str:
    m, s = result["machine"], result["setup"]
    command = "OMP_WAIT_POLICY=PASSIVE python bench/generation_speed.py" + (
        f" --device {s['device']} --tag {tag}" if tag else ""
    )
    rows = [table_row(r, f"{r['model']} ({r['parameters'] / 1e6:.0f}M)") for r in result["models"]]
    gpu_row = gpu_rows() if s["device"] == "cpu" else ""
    gpu_before = gpu_before_text() if s["device"] == "cpu" else ""
    before_ratios = (
        ", ".join(
            f"{r['ratio_to_plain']['c_before']:.2f}x ({r['model']})"
            for r in result["models"]
            if "c_before" in r["ratio_to_plain"]
        )
        or "(not run)"
    )
    sweeps = [r for r in result["models"] if r["batch_sweep"]]
    sweep_text = ""
    if sweeps:
        batches = list(sweeps[0]["batch_sweep"])
        sweep_text = (
            f"\nThe backend's tokens per second against rows per call ({s['sweep_shape'][0]}-token prompts, "
            f"{s['sweep_shape'][1]} new tokens, median of {s['repeats']}):\n\n"
            "| model | dtype | "
            + " | ".join(f"batch {b}" for b in batches)
            + " |\n|---|---|"
            + "---|" * len(batches)
            + "\n"
            + "\n".join(
                f"| {r['model']} | {r['dtype']} | "
                + " | ".join(f"{r['batch_sweep'][b]['tokens_per_second']:.0f}" for b in batches)
                + " |"
                for r in sweeps
            )
            + "\n"
        )
    return f"""
## Generation speed{f" ({s['device']})" if tag else ""}

`{command}` — machine: {m["cpu_cores"]} CPU cores ({m["cpu"]}), GPU: {m["gpu"]}; torch {m["packages"].get("torch")},
transformers {m["packages"].get("transformers")}, trl {m["packages"].get("trl")}.

ms per decode step (median of {s["repeats"]} per trainer run, sides interleaved; (a), (b) and (b+stop) are timed in
each run, so a mixed-precision row's median of them is over {2 * s["repeats"]}), batch {s["batch"]},
{s["prompt_tokens"]}-token prompts, {s["new_tokens"]} new tokens, random weights; in brackets the ratio to plain
`generate` (a) of the same weights in the compute dtype. (b) the backend alone, (b+stop) with the stop strings
`</search>`, `</answer>`, (c) the backend inside the trainer's rollout context mid-`train()`, (c-before) that context
generating through accelerate's autocast wrapper over the float32 masters, as every mixed-precision rollout did
before issue 52.
Goal: (c)/(a) <= 1.1, stop check <= 5% of decode time.

| model | compute dtype | (a) plain | (b) backend | (b+stop) | (c) trainer rollout | (c-before) | stop check |
|---|---|---|---|---|---|---|---|
{chr(10).join(rows)}
{gpu_row}
On 2 CPU cores a side's run-to-run spread is about 10-15% (a stop check below zero is that noise), so the CPU
ratios say "no measurable overhead", not more. The mixed-precision rows show what issue 52 fixed: generating through
the autocast wrapper cost {before_ratios} on this machine, 3.2x on an H100 (109.4 against 34.7 ms per
step before the fix, Qwen2.5-3B, batch 8, one run each: the figures issue 52 was filed with; no results
file){gpu_before}; now each rollout casts the masters once and generates as plain `generate` of bf16 weights.
{sweep_text}"""


if __name__ == "__main__":
    main()
