"""Compiled decoding (`model.compile_generation`) against eager `generate`: decode ms per step and compile time.

    python bench/compiled_generation.py                  # CPU: SmolLM2-135M and the tiny Qwen shape, ~15 min
    python bench/compiled_generation.py --models qwen2-tiny --reps 2
    python bench/compiled_generation.py --device cuda --models qwen2.5-3b \
        --out bench/results/compiled_generation_cuda.json
    python bench/compiled_generation.py --device cuda --models qwen2.5-3b --layers 2,4,8 --out OUT.json

`--layers 2,4,8` cuts the Qwen shape to those depths at its own width (what the GPU checklist runs: loading the 3B
and its first compiled call took over 140 s of a lease's 15 minutes on an H200): each depth is measured, and per side
a least-squares line through them is extrapolated to the full depth, a + b x layers, since each layer of a decode
step runs the same kernels (`at_full_depth`, marked as extrapolated, with its worst residual). A depth after the
first compiles from warm caches, so its `compile_s` is not a fresh compile's.

Both sides call `model.generate` on the same batch (8 left-padded prompts of about 400 corpus tokens, greedy, 128 new
tokens forced with `min_new_tokens`), as the backend decodes (without cuDNN attention on CUDA: `decoding_attention`),
the compiled side with exactly the keyword arguments `TransformersBackend` adds for it (`static_cache_kwargs`).
Decode ms per step = (time for 128 tokens - time for 1 token) / 127, so the prefill is not counted. The compiled
side's first call (which compiles) is timed apart; then the sides alternate, `--reps` times each, and the medians are
compared. Whether both sides produced the same ids is recorded. Last, on the tiny
Qwen, calls of other batch sizes and widths show how many compiles a run pays for (dynamo's automatic dynamic
shapes). The Qwen shapes have random weights and SmolLM2's tokenizer.

Writes bench/results/compiled_generation.json and the "Compiled decoding" section of bench/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import time

from _common import ROOT, SMOLLM2, machine, positive_int, synchronizer, update_readme_section
from gpu_checks import COMMON, QWEN, carried_tokenizer, shape_error

from inspo_cli.config import ModelConfig  # noqa: E402
from inspo_cli.jsonio import atomic_write_json  # noqa: E402
from inspo_cli.policy.compiled_generation import decoding_compile_config, static_cache_kwargs  # noqa: E402
from inspo_cli.policy.generation import decoding_attention  # noqa: E402
from inspo_cli.policy.models import load_model  # noqa: E402

SMOLLM2_MODEL = "smollm2-135m-instruct"  # the packaged model the smollm2-135m shape loads
OUT = str(ROOT / "bench" / "results" / "compiled_generation.json")


def load(name: str, device: str, layers: int | None = None):
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    if name == SMOLLM2:
        return load_model(ModelConfig(name_or_path=SMOLLM2_MODEL, dtype="float32"), device)
    from transformers import AutoTokenizer

    # the Qwen shapes need only a tokenizer: a GPU machine has no packaged model, only the carried tokenizer files
    tokenizer = AutoTokenizer.from_pretrained(carried_tokenizer())
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    torch.manual_seed(0)
    depth = {"num_hidden_layers": layers, "max_window_layers": layers} if layers else {}
    config = Qwen2Config(
        **{
            **QWEN[name],
            **COMMON,
            **depth,
            "bos_token_id": tokenizer.bos_token_id,
            "eos_token_id": tokenizer.eos_token_id,
        }
    )
    return AutoModelForCausalLM.from_config(config, dtype=dtype).to(device).eval(), tokenizer


def prompts(tokenizer, batch: int, length: int) -> list[list[int]]:
    """`batch` prompts of corpus text, `length` tokens down to `length - 3 * (batch - 1)`: left padding, as in a
    rollout."""
    with open(ROOT / "data/world/corpus.jsonl", encoding="utf-8") as f:
        text = " ".join(json.loads(line)["contents"] for _, line in zip(range(200), f))
    ids = tokenizer.encode(text)
    return [ids[row * 50 : row * 50 + length - 3 * row] for row in range(batch)]


def generate(model, tokenizer, contexts, new_tokens: int, compiled, as_backend=True) -> tuple[float, list[list[int]]]:
    """Seconds for one greedy `generate` of exactly `new_tokens`, and the ids it generated; `as_backend`: with the
    attention `TransformersBackend` decodes with, else torch's defaults as they stand."""
    import torch

    width = max(len(c) for c in contexts)
    ids = torch.full((len(contexts), width), tokenizer.pad_token_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, context in enumerate(contexts):
        ids[row, width - len(context) :] = torch.tensor(context)
        mask[row, width - len(context) :] = 1
    extra = static_cache_kwargs(compiled, width, new_tokens) if compiled is not None else {}
    synchronize = synchronizer(model.device)
    synchronize()
    started = time.perf_counter()
    attention = decoding_attention(model.device) if as_backend else contextlib.nullcontext()
    with torch.no_grad(), attention:
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


def measure(
    name: str, device: str, batch: int, length: int, new_tokens: int, reps: int, layers: int | None = None
) -> dict:
    model, tokenizer = load(name, device, layers)
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
        "layers": model.config.num_hidden_layers,
        "full_layers": QWEN[name]["num_hidden_layers"] if name in QWEN else model.config.num_hidden_layers,
        "decode_ms_per_step": {side: round(ms, 2) for side, ms in step_ms.items()},
        "compiled_over_eager": round(step_ms["compiled"] / step_ms["eager"], 3),
        "first_compiled_call_s": round(first_s, 1),
        "compile_s": round(first_s - statistics.median(times["compiled"]["full"]), 1),
        "same_ids": compiled_ids == eager_ids,
        "seconds": {side: {k: [round(x, 3) for x in v] for k, v in t.items()} for side, t in times.items()},
    }
    if name == "qwen2-tiny" and layers is None:
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


def many_calls(name: str, device: str, batch: int, length: int, layers: int | None, calls: int) -> dict:
    """`calls` compiled `generate` calls of 16 tokens in a row, as a training run makes them (a rollout makes one a
    turn), on the model loaded again once every depth is measured (a check cut off meanwhile keeps the depths): how
    many CUDA graph recordings they cost and whether torch gave up on CUDA graphs along the way
    (`cudagraph_skips`: after `cudagraph_unexpected_rerecord_limit` re-records, 128, in releases that count the
    re-records a new static cache causes; see inspo_cli/policy/compiled_generation.py), with the median seconds of
    the first and the last 10 calls. Recordings are counted through torch's private `CUDAGraphTreeManager`
    (None where it has no `record_function`); on CPU there are no CUDA graphs and both counts stay 0."""
    import torch._dynamo.utils
    from torch._inductor import cudagraph_trees

    model, tokenizer = load(name, device, layers)
    contexts = prompts(tokenizer, batch, length)
    compiled = decoding_compile_config()
    manager = getattr(cudagraph_trees, "CUDAGraphTreeManager", None)
    original = getattr(manager, "record_function", None)
    recordings = 0

    def counted(self, *args, **kwargs):
        nonlocal recordings
        recordings += 1
        return original(self, *args, **kwargs)

    if original is not None:
        manager.record_function = counted
    counters = torch._dynamo.utils.counters["inductor"]
    skips_before = counters["cudagraph_skips"]
    seconds = []
    try:
        for _ in range(calls):
            seconds.append(generate(model, tokenizer, contexts, 16, compiled)[0])
    finally:
        if original is not None:
            manager.record_function = original
    return {
        "model": name,
        "layers": model.config.num_hidden_layers,
        "calls": calls,
        "recordings": recordings if original is not None else None,
        "cudagraph_skips": counters["cudagraph_skips"] - skips_before,
        "first_10_median_s": round(statistics.median(seconds[:10]), 4),
        "last_10_median_s": round(statistics.median(seconds[-10:]), 4),
    }


def at_full_depth(results: list[dict]) -> dict:
    """Per model measured at two or more depths (`--layers`), each side's decode ms per step extrapolated to the
    model's full depth by a least-squares line through every depth, a + b x layers (each layer of a decode step is the
    same kernels; a is what a step costs outside the layers: embedding, head, sampling, the loop), with the largest
    distance of a measured point from the line (`worst_residual_ms`), and `slope_below_zero` where noise outweighed the
    layers' cost (then the extrapolation says nothing)."""
    out = {}
    for name in dict.fromkeys(r["model"] for r in results):
        rows = sorted((r for r in results if r["model"] == name), key=lambda r: r["layers"])
        xs = [r["layers"] for r in rows]
        if len(set(xs)) < 2:
            continue
        full = rows[-1]["full_layers"]
        sides = {}
        for side in ("eager", "compiled"):
            ys = [r["decode_ms_per_step"][side] for r in rows]
            slope, outside = statistics.linear_regression(xs, ys)
            sides[side] = {
                "ms_per_layer": round(slope, 3),
                "ms_outside_layers": round(outside, 2),
                "ms_per_step": round(outside + slope * full, 2),
                "worst_residual_ms": round(max(abs(y - outside - slope * x) for x, y in zip(xs, ys)), 3),
                "slope_below_zero": slope < 0,
            }
        out[name] = {
            "extrapolated": True,
            "from_layers": xs,
            "layers": full,
            **sides,
            "compiled_over_eager": round(sides["compiled"]["ms_per_step"] / sides["eager"]["ms_per_step"], 3)
            if sides["eager"]["ms_per_step"] > 0
            else None,
        }
    return out


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
            f"| {r['model']}{depth(r)} ({r['params_m']}M, {r['dtype']}) | {d['eager']} | {d['compiled']} | "
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
    for name, x in report.get("at_full_depth", {}).items():
        lines += [
            "",
            f"{name} at its {x['layers']} layers, extrapolated from {', '.join(map(str, x['from_layers']))} (not "
            f"measured): eager {x['eager']['ms_per_step']} ms per step ({x['eager']['ms_per_layer']} per layer, "
            f"worst residual {x['eager']['worst_residual_ms']}), compiled {x['compiled']['ms_per_step']} "
            f"({x['compiled']['ms_per_layer']} per layer, worst residual {x['compiled']['worst_residual_ms']}), "
            f"{x['compiled_over_eager']}x"
            + (
                " (a slope below zero: noise outweighs the layers)"
                if any(x[s]["slope_below_zero"] for s in ("eager", "compiled"))
                else ""
            )
            + ".",
        ]
    calls = report.get("many_calls")
    if calls:
        lines += [
            "",
            f"{calls['calls']} compiled calls of 16 tokens in a row ({calls['model']}, {calls['layers']} layers): "
            f"{calls['recordings']} CUDA graph recordings, {calls['cudagraph_skips']} times torch gave up on CUDA "
            f"graphs; median {calls['first_10_median_s']} s a call over the first 10, {calls['last_10_median_s']} s "
            "over the last 10.",
        ]
    lines += ["", report["verdict"]]
    return "\n".join(lines)


def depth(r: dict) -> str:
    """` at 4 of 36 layers` for a shape cut by --layers, else nothing."""
    return f" at {r['layers']} of {r['full_layers']} layers" if r.get("layers", 0) != r.get("full_layers", 0) else ""


def verdict_of(results: list[dict]) -> str:
    each = "; ".join(
        f"{r['model']}{depth(r)} {r['compiled_over_eager']}x eager's time per step after {r['compile_s']} s of "
        "compiling"
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
    parser.add_argument("--models", default=f"{SMOLLM2},qwen2-tiny")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch", type=positive_int, default=8)
    parser.add_argument("--prompt-tokens", type=positive_int, default=400)
    parser.add_argument("--new-tokens", type=positive_int, default=128)
    parser.add_argument("--reps", type=positive_int, default=3)
    parser.add_argument("--layers", default="", help="comma list: the Qwen shapes cut to these depths, same width")
    parser.add_argument(
        "--calls", type=int, default=0, help="then this many compiled calls in a row at the shallowest depth"
    )
    parser.add_argument("--out", default=OUT)
    args = parser.parse_args()
    if args.calls < 0 or (args.calls and args.calls < 10):
        parser.error(f"--calls {args.calls}: 0 (none) or at least 10, the calls each median is taken over")
    names = args.models.split(",")
    if error := shape_error(names):
        parser.error(error)
    try:
        depths: list[int | None] = [int(x) for x in args.layers.split(",")] if args.layers else [None]
    except ValueError:
        parser.error(f"--layers {args.layers!r}: give whole numbers of layers, e.g. 4,8")
    if args.layers:
        if any(n not in QWEN for n in names) or min(depths) < 1:
            parser.error(f"--layers cuts only the Qwen shapes ({', '.join(QWEN)}), to 1 layer or more")
        deepest = min(QWEN[n]["num_hidden_layers"] for n in names)
        if max(depths) > deepest:
            parser.error(f"--layers {args.layers}: at most {deepest}, the layers the shapes have")
    load_before = round(os.getloadavg()[0], 2)
    results: list[dict] = []
    report = {
        "benchmark": "compiled_generation",
        "machine": machine(("torch", "transformers")),
        "device": args.device,
        "threads": torch.get_num_threads(),
        "batch": args.batch,
        "prompt_tokens": args.prompt_tokens,
        "new_tokens": args.new_tokens,
        "reps": args.reps,
        "command": "python bench/compiled_generation.py"
        + (f" --device {args.device}" if args.device != "cpu" else "")
        + (f" --models {args.models} --layers {args.layers}" if args.layers else "")
        + (f" --new-tokens {args.new_tokens} --reps {args.reps}" if args.layers else ""),
        "load_before": load_before,
        "partial": True,  # written after each model: a run cut off by a time limit keeps what it measured
        "results": results,
    }
    for name in names:
        for layers in depths:
            results.append(
                measure(name, args.device, args.batch, args.prompt_tokens, args.new_tokens, args.reps, layers)
            )
            atomic_write_json(args.out, report)
    if args.calls:
        shallowest = min(depths, key=lambda d: d or 0)
        report["many_calls"] = many_calls(names[0], args.device, args.batch, args.prompt_tokens, shallowest, args.calls)
    del report["partial"]
    report.update(
        {
            "load_after": round(os.getloadavg()[0], 2),
            "at_full_depth": at_full_depth(results),
            "verdict": verdict_of(results),
        }
    )
    atomic_write_json(args.out, report)
    if args.out == OUT:
        update_readme_section("compiled-generation", section(report))
    print(section(report))


if __name__ == "__main__":
    main()
