"""Compiled decoding (`model.compile_generation`) against eager `generate`: decode ms per step and compile time.

    python bench/compiled_generation.py                  # CPU: SmolLM2-135M and the tiny Qwen shape, ~15 min
    python bench/compiled_generation.py --models qwen2-tiny --reps 2
    python bench/compiled_generation.py --device cuda --models qwen2.5-3b \
        --out bench/results/compiled_generation_cuda.json

Both sides call `model.generate` on the same batch (8 left-padded prompts of about 400 corpus tokens, greedy, 128 new
tokens forced with `min_new_tokens`), the compiled side with exactly the keyword arguments `TransformersBackend` adds
for it (`static_cache_kwargs`). Decode ms per step = (time for 128 tokens - time for 1 token) / 127, so the prefill
is not counted. The compiled side's first call (which compiles) is timed apart; then the sides alternate, `--reps`
times each, and the medians are compared. Whether both sides produced the same ids is recorded. Last, on the tiny
Qwen, calls of other batch sizes and widths show how many compiles a run pays for (dynamo's automatic dynamic
shapes). The Qwen shapes have random weights and SmolLM2's tokenizer.

Writes bench/results/compiled_generation.json and the "Compiled decoding" section of bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from _common import ROOT, machine, update_readme_section
from gpu_checks import COMMON, QWEN, carried_tokenizer

from inspo_cli.config import ModelConfig  # noqa: E402
from inspo_cli.jsonio import atomic_write_json  # noqa: E402
from inspo_cli.policy.compiled_generation import decoding_compile_config, static_cache_kwargs  # noqa: E402
from inspo_cli.policy.models import load_model  # noqa: E402

SMOLLM2 = "smollm2-135m-instruct"
OUT = str(ROOT / "bench" / "results" / "compiled_generation.json")


def load(name: str, device: str):
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    if name == "smollm2-135m":
        return load_model(ModelConfig(name_or_path=SMOLLM2, dtype="float32"), device)
    from transformers import AutoTokenizer

    # the Qwen shapes need only a tokenizer: a GPU machine has no packaged model, only the carried tokenizer files
    tokenizer = AutoTokenizer.from_pretrained(carried_tokenizer())
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    torch.manual_seed(0)
    config = Qwen2Config(
        **{**QWEN[name], **COMMON, "bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id}
    )
    return AutoModelForCausalLM.from_config(config, dtype=dtype).to(device).eval(), tokenizer


def prompts(tokenizer, batch: int, length: int) -> list[list[int]]:
    """`batch` prompts of corpus text, `length` tokens down to `length - 3 * (batch - 1)`: left padding, as in a
    rollout."""
    with open(ROOT / "data/world/corpus.jsonl", encoding="utf-8") as f:
        text = " ".join(json.loads(line)["contents"] for _, line in zip(range(200), f))
    ids = tokenizer.encode(text)
    return [ids[row * 50 : row * 50 + length - 3 * row] for row in range(batch)]


def generate(model, tokenizer, contexts, new_tokens: int, compiled) -> tuple[float, list[list[int]]]:
    """Seconds for one greedy `generate` of exactly `new_tokens`, and the ids it generated."""
    import torch

    width = max(len(c) for c in contexts)
    ids = torch.full((len(contexts), width), tokenizer.pad_token_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, context in enumerate(contexts):
        ids[row, width - len(context) :] = torch.tensor(context)
        mask[row, width - len(context) :] = 1
    extra = static_cache_kwargs(compiled, width, new_tokens) if compiled is not None else {}
    synchronize = torch.cuda.synchronize if model.device.type == "cuda" else (lambda: None)
    synchronize()
    started = time.perf_counter()
    with torch.no_grad():
        out = model.generate(
            input_ids=ids.to(model.device),
            attention_mask=mask.to(model.device),
            do_sample=False,
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            pad_token_id=tokenizer.pad_token_id,
            **extra,
        )
    synchronize()
    return time.perf_counter() - started, out[:, width:].tolist()


def measure(name: str, device: str, batch: int, length: int, new_tokens: int, reps: int) -> dict:
    model, tokenizer = load(name, device)
    contexts = prompts(tokenizer, batch, length)
    compiled = decoding_compile_config()
    generate(model, tokenizer, contexts, 4, None)  # warm-up
    first_s, compiled_ids = generate(model, tokenizer, contexts, new_tokens, compiled)
    times: dict[str, dict[str, list[float]]] = {"eager": {"full": [], "one": []}, "compiled": {"full": [], "one": []}}
    eager_ids = None
    for _ in range(reps):
        for side, config in (("eager", None), ("compiled", compiled)):
            seconds, ids = generate(model, tokenizer, contexts, new_tokens, config)
            times[side]["full"].append(seconds)
            times[side]["one"].append(generate(model, tokenizer, contexts, 1, config)[0])
            if side == "eager":
                eager_ids = ids
    step_ms = {
        side: 1000 * (statistics.median(t["full"]) - statistics.median(t["one"])) / (new_tokens - 1)
        for side, t in times.items()
    }
    result = {
        "model": name,
        "dtype": str(model.dtype).removeprefix("torch."),
        "params_m": round(sum(p.numel() for p in model.parameters()) / 1e6, 1),
        "decode_ms_per_step": {side: round(ms, 2) for side, ms in step_ms.items()},
        "compiled_over_eager": round(step_ms["compiled"] / step_ms["eager"], 3),
        "first_compiled_call_s": round(first_s, 1),
        "compile_s": round(first_s - statistics.median(times["compiled"]["full"]), 1),
        "same_ids": compiled_ids == eager_ids,
        "seconds": {side: {k: [round(x, 3) for x in v] for k, v in t.items()} for side, t in times.items()},
    }
    if name == "qwen2-tiny":
        result["shape_changes"] = shape_changes(model, tokenizer, compiled, new_tokens)
    return result


def shape_changes(model, tokenizer, compiled, new_tokens: int) -> list[dict]:
    """Calls of other batch sizes and widths after the first shape: which of them compile again, and for how long."""
    import torch._dynamo.utils

    rows = []
    for batch, length in ((5, 400), (3, 700), (8, 380), (2, 900), (7, 450)):
        before = torch._dynamo.utils.counters["stats"]["unique_graphs"]
        seconds, _ = generate(model, tokenizer, prompts(tokenizer, batch, length), new_tokens, compiled)
        rows.append(
            {
                "batch": batch,
                "prompt_tokens": length,
                "seconds": round(seconds, 2),
                "compiled_again": torch._dynamo.utils.counters["stats"]["unique_graphs"] > before,
            }
        )
    return rows


def section(report: dict) -> str:
    m = report["machine"]
    lines = [
        "## Compiled decoding (`model.compile_generation`, issue 52)",
        "",
        f"`{report['command']}` on {m['cpu_cores']} CPU cores ({m['cpu']}), GPU: {m['gpu']}, "
        f"torch {m['packages'].get('torch')}, transformers {m['packages'].get('transformers')}; batch "
        f"{report['batch']}, prompts of about {report['prompt_tokens']} tokens, {report['new_tokens']} new tokens "
        f"(greedy), medians of {report['reps']} alternating repetitions; load average {report['load_before']} before "
        f"the run, {report['load_after']} after (2 cores shared).",
        "",
        "| model | eager ms/step | compiled ms/step | compiled / eager | first compiled call s | same ids |",
        "|---|---|---|---|---|---|",
    ]
    for r in report["results"]:
        d = r["decode_ms_per_step"]
        lines.append(
            f"| {r['model']} ({r['params_m']}M, {r['dtype']}) | {d['eager']} | {d['compiled']} | "
            f"{r['compiled_over_eager']} | {r['first_compiled_call_s']} | {r['same_ids']} |"
        )
    for r in report["results"]:
        if "shape_changes" in r:
            compiles = "; ".join(
                f"batch {c['batch']} x {c['prompt_tokens']}: "
                + ("compiled again, " if c["compiled_again"] else "")
                + f"{c['seconds']} s"
                for c in r["shape_changes"]
            )
            lines += [
                "",
                f"Shape changes after the first shape ({r['model']}, {report['new_tokens']} tokens each): "
                f"{compiles}. Dynamo compiles once more at the first change of the batch and of the cache "
                "length, then reuses one graph with both symbolic.",
            ]
    lines += ["", report["verdict"]]
    return "\n".join(lines)


def verdict_of(results: list[dict]) -> str:
    each = "; ".join(
        f"{r['model']} {r['compiled_over_eager']}x eager's time per step after {r['compile_s']} s of compiling"
        for r in results
    )
    if all(r["compiled_over_eager"] < 1 for r in results):
        return f"Compiled decoding: {each}. It wins on every model here."
    return (
        f"Compiled decoding: {each}. It does not win on every model here, so `model.compile_generation` stays "
        "off by default."
    )


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="smollm2-135m,qwen2-tiny")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--prompt-tokens", type=int, default=400)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--out", default=OUT)
    args = parser.parse_args()
    load_before = round(os.getloadavg()[0], 2)
    results = [
        measure(name, args.device, args.batch, args.prompt_tokens, args.new_tokens, args.reps)
        for name in args.models.split(",")
    ]
    verdict = verdict_of(results)
    report = {
        "benchmark": "compiled_generation",
        "machine": machine(("torch", "transformers")),
        "device": args.device,
        "threads": torch.get_num_threads(),
        "batch": args.batch,
        "prompt_tokens": args.prompt_tokens,
        "new_tokens": args.new_tokens,
        "reps": args.reps,
        "command": "python bench/compiled_generation.py" + (f" --device {args.device}" if args.device != "cpu" else ""),
        "load_before": load_before,
        "load_after": round(os.getloadavg()[0], 2),
        "results": results,
        "verdict": verdict,
    }
    atomic_write_json(args.out, report)
    if args.out == OUT:
        update_readme_section("compiled-generation", section(report))
    print(section(report))


if __name__ == "__main__":
    main()
