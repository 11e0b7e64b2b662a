"""Does attention cost more at a shape it has not seen? cuDNN attention against the rest, at decoding's shapes.

    python bench/sdpa_shapes.py --device cuda --out OUT.json     # what the GPU checklist's `sdpa` check runs
    python bench/sdpa_shapes.py --device cpu --quick --out OUT.json   # the code paths on CPU, tiny shapes

Why (issue 52): on an H200 the 3B step's rollout decoded at about 87 ms per step against 31-39 for `generate` calls
that repeat shapes already run, and the first such call decoded at 98. torch 2.11's CUDA wheels (cuDNN 9.19) put cuDNN
attention first on sm90 and sm100, and cuDNN builds an execution graph per shape, key length included; decoding with
a KV cache meets a new key length at every step, and a rollout's widths never repeat. `TransformersBackend` now
decodes without cuDNN attention on CUDA (`decoding_attention`). This measures whether that was the cost:

1. attention alone (`attention`): `scaled_dot_product_attention` at one decode step of the 3B (8 rows, 16 heads,
   head dim 128, bf16; one query against L keys) as transformers 5.24 calls it, once per layer (36) per step, for 32
   steps of new key lengths L = 401.. and then the same 32 again; under a padding mask (the query's heads grouped by
   key head, `pack_gqa`) and without one (rows of equal length: `enable_gqa`). Per side (torch's default backends,
   and inside `decoding_attention`): the backend torch picks, ms per step new and repeated, and the process's
   resident memory gained over the new lengths (what a cache of built graphs holds on the host).
2. `generate` (`generate`): plain `model.generate` of the 3B's width cut to 4 layers (the build is per step, not per
   layer), 8 rows, 32 new tokens, at widths 400, 1,000 and 2,000, padded and equal rows; per width each side's
   first call and its repeat, the sides alternating which goes first. ms per step, prefill included.
3. training shapes (`training`): one layer's attention forward and backward over 8 rows of L = 1,501..1,508 tokens
   (new, then again), causal, under a padding mask (heads repeated, as transformers does for a query longer than 1)
   and without one: what the update's and the log-prob passes' forwards, which keep torch's defaults, pay for each
   new padded width, and the host memory each new width keeps (its `*_ms_per_step`: one layer's forward and backward).

`summary` reads them: a new shape's cost over a repeated one per side. Writes `--out` only; the GPU checklist keeps it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import time
from pathlib import Path

from _common import machine, synchronizer
from compiled_generation import generate, load, prompts
from gpu_checks import QWEN

from inspo_cli.jsonio import atomic_write_json  # noqa: E402
from inspo_cli.policy.generation import decoding_attention  # noqa: E402

SIDES = ("default", "without_cudnn")


def side_context(side: str, device: str):
    return decoding_attention(device) if side == "without_cudnn" else contextlib.nullcontext()


def backend_name(query, key, value, mask, gqa: bool) -> str:
    """The SDPA backend torch would pick for these inputs now."""
    import torch
    from torch.nn.attention import SDPBackend

    try:
        return SDPBackend(torch._fused_sdp_choice(query, key, value, mask, 0.0, False, enable_gqa=gqa)).name
    except Exception as error:  # a private function: its signature may change
        return f"unknown ({type(error).__name__})"


def order(index: int) -> tuple[str, ...]:
    """The sides in turn, the first alternating (A B, B A): what runs first in a pass pays no warm-up for the other."""
    return SIDES if index % 2 == 0 else SIDES[::-1]


def time_sides(lengths, tensors: dict, warm, step, device: str) -> dict:
    """Per side: `step(tensors[length])` at each of `lengths` met for the first time, then again (ms, median), the
    sides alternating which goes first at each length; whether cuDNN attention was on (after a warm-up step on `warm`,
    a shape outside those timed); and the resident memory gained over the first pass."""
    out = {side: {"rss_mib_gained_new": 0.0} for side in SIDES}
    for side in SIDES:
        with side_context(side, device):
            step(warm)
            out[side]["cudnn_enabled"] = torch_cudnn_enabled()
    for label in ("new", "repeated"):
        times: dict[str, list[float]] = {side: [] for side in SIDES}
        for index, length in enumerate(lengths):
            for side in order(index):
                with side_context(side, device):
                    before = rss_mib()
                    times[side].append(step(tensors[length]))
                    if label == "new":
                        out[side]["rss_mib_gained_new"] += rss_mib() - before
        for side in SIDES:
            out[side][f"{label}_ms_per_step"] = round(statistics.median(times[side]), 3)
    for side in SIDES:
        out[side]["rss_mib_gained_new"] = round(out[side]["rss_mib_gained_new"], 1)
    return out


def attention(device: str, quick: bool) -> dict:
    import torch
    import torch.nn.functional as F

    shape = QWEN["qwen2-tiny" if quick else "qwen2.5-3b"]
    rows, heads, kv_heads = 8, shape["num_attention_heads"], shape["num_key_value_heads"]
    dim, group = shape["hidden_size"] // heads, heads // kv_heads
    layers, steps, start = (2, 4, 65) if quick else (shape["num_hidden_layers"], 32, 401)
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    synchronize = synchronizer(device)
    generator = torch.Generator().manual_seed(0)

    def inputs(length: int, masked: bool):
        """transformers 5.24's SDPA call at one decode step (integrations/sdpa_attention.py): rows of equal length
        give no mask and `enable_gqa`; under a padding mask the query's heads are grouped by key head (`pack_gqa`:
        rows x key heads x group x dim) against the key heads as they are."""
        query = torch.randn(*((rows, kv_heads, group, dim) if masked else (rows, heads, 1, dim)), generator=generator)
        key, value = (torch.randn(rows, kv_heads, length, dim, generator=generator) for _ in "kv")
        mask = None
        if masked:
            mask = torch.ones(rows, 1, 1, length, dtype=torch.bool)
            for row in range(rows):
                mask[row, ..., : 3 * row] = False  # left padding, as in a rollout
            mask = mask.to(device)
        return query.to(device, dtype), key.to(device, dtype), value.to(device, dtype), mask

    def step(tensors, masked: bool) -> float:
        """ms for one decode step's attention: one call per layer."""
        query, key, value, mask = tensors
        synchronize()
        began = time.perf_counter()
        for _ in range(layers):
            F.scaled_dot_product_attention(query, key, value, attn_mask=mask, enable_gqa=not masked)
        synchronize()
        return 1000 * (time.perf_counter() - began)

    out: dict = {}
    lengths = range(start, start + steps)
    for variant, masked in (("padded_rows", True), ("equal_rows", False)):
        tensors = {length: inputs(length, masked) for length in lengths}
        warm = inputs(start - 1, masked)  # a length outside those timed: kernels loaded before any timing
        out[variant] = time_sides(lengths, tensors, warm, lambda t, masked=masked: step(t, masked), device)
        for side in SIDES:
            with side_context(side, device):
                out[variant][side]["backend"] = backend_name(*tensors[start], not masked)
    return {"rows": rows, "heads": heads, "head_dim": dim, "calls_per_step": layers, "steps": steps, **out}


def generate_calls(device: str, quick: bool) -> list[dict]:
    name, layers = ("qwen2-tiny", None) if quick else ("qwen2.5-3b", 4)
    model, tokenizer = load(name, device, layers)
    widths, new_tokens = ([64, 100], 8) if quick else ([400, 1000, 2000], 32)
    for side in SIDES:  # kernels loaded, on 4 rows (other shapes than those timed), padded and equal rows
        with side_context(side, device):
            warm = prompts(tokenizer, 4, widths[0])
            generate(model, tokenizer, warm, 2, None, as_backend=False)
            generate(model, tokenizer, [c[: len(warm[-1])] for c in warm], 2, None, as_backend=False)
    results = []
    for index, width in enumerate(widths):
        for padded in (True, False):
            contexts = prompts(tokenizer, 8, width)  # rows of `width` down to `width` - 21 tokens
            if not padded:
                contexts = [c[: width - 21] for c in contexts]  # a mask of ones: no mask, 2 key heads (GQA)
            seconds: dict[str, dict] = {side: {} for side in SIDES}
            for label, sides in (("new", order(index)), ("repeated", order(index + 1))):
                for side in sides:  # a call of one side builds nothing the other uses
                    with side_context(side, device):
                        took, _ = generate(model, tokenizer, contexts, new_tokens, None, as_backend=False)
                        seconds[side]["cudnn_enabled"] = torch_cudnn_enabled()
                    seconds[side][f"{label}_ms_per_step"] = round(1000 * took / new_tokens, 2)
            results.append({"width": max(len(c) for c in contexts), "padded": padded, **seconds})
    return results


def rss_mib() -> float:
    """This process's resident memory (Linux; 0 elsewhere)."""
    try:
        with open("/proc/self/status", encoding="utf-8") as f:
            return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmRSS:"))
    except (OSError, StopIteration, ValueError):
        return 0.0


def training(device: str, quick: bool) -> dict:
    import torch
    import torch.nn.functional as F

    shape = QWEN["qwen2-tiny" if quick else "qwen2.5-3b"]
    rows, heads, kv_heads = (2 if quick else 8), shape["num_attention_heads"], shape["num_key_value_heads"]
    dim = shape["hidden_size"] // heads
    lengths = range(33, 37) if quick else range(1501, 1509)
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    synchronize = synchronizer(device)
    generator = torch.Generator().manual_seed(0)

    def inputs(length: int, masked: bool):
        key_heads = heads if masked else kv_heads  # repeat_kv under a mask; `enable_gqa` without
        query = torch.randn(rows, heads, length, dim, generator=generator)
        key, value = (torch.randn(rows, key_heads, length, dim, generator=generator) for _ in "kv")
        mask = None
        if masked:
            mask = torch.ones(length, length, dtype=torch.bool).tril().expand(rows, 1, length, length).clone()
            for row in range(rows):
                mask[row, ..., : 7 * row] = False  # left padding
                mask[row, :, : 7 * row, 7 * row] = True  # padded queries see one key: no row of -inf
            mask = mask.to(device)
        leaves = [t.to(device, dtype).requires_grad_() for t in (query, key, value)]
        return (*leaves, mask)

    def step(tensors, masked: bool) -> float:
        query, key, value, mask = tensors
        synchronize()
        began = time.perf_counter()
        out = F.scaled_dot_product_attention(
            query, key, value, attn_mask=mask, is_causal=not masked, enable_gqa=not masked
        )
        out.float().sum().backward()
        synchronize()
        for t in (query, key, value):
            t.grad = None
        return 1000 * (time.perf_counter() - began)

    out: dict = {}
    for variant, masked in (("padded_rows", True), ("equal_rows", False)):
        tensors = {length: inputs(length, masked) for length in lengths}
        warm = inputs(lengths[0] - 1, masked)
        out[variant] = time_sides(lengths, tensors, warm, lambda t, masked=masked: step(t, masked), device)
    return {"rows": rows, "heads": heads, "head_dim": dim, "lengths": [lengths[0], lengths[-1]], **out}


def torch_cudnn_enabled() -> bool:
    import torch

    return torch.backends.cuda.cudnn_sdp_enabled()


def summary(result: dict) -> dict:
    """Per side, a first call's (new shapes') ms per step over a repeat's, for attention and for `generate`; and
    what a new shape costs without cuDNN against with it. The cuDNN builds are the cost if the default side's ratios
    are well above 1 and the other side's near 1."""

    def ratio(a, b):
        return round(a / b, 2) if a and b else None

    read: dict = {"attention": {}, "generate": {}, "training": {}}
    for part in ("attention", "training"):
        for variant, sides in result.get(part, {}).items():
            if isinstance(sides, dict):  # beside the shape: rows, heads, head_dim, ...
                read[part][variant] = {
                    **{
                        side: ratio(sides[side]["new_ms_per_step"], sides[side]["repeated_ms_per_step"])
                        for side in SIDES
                    },
                    "without_over_default_new": ratio(
                        sides["without_cudnn"]["new_ms_per_step"], sides["default"]["new_ms_per_step"]
                    ),
                    "rss_mib_gained_new": [sides[side].get("rss_mib_gained_new") for side in SIDES],
                }
                if part == "attention":
                    read[part][variant]["backends"] = [sides[side]["backend"] for side in SIDES]
    for row in result.get("generate", []):
        key = f"{row['width']}_{'padded' if row['padded'] else 'equal'}"
        read["generate"][key] = {
            **{side: ratio(row[side]["new_ms_per_step"], row[side]["repeated_ms_per_step"]) for side in SIDES},
            "without_over_default_new": ratio(
                row["without_cudnn"]["new_ms_per_step"], row["default"]["new_ms_per_step"]
            ),
        }
    return read


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--quick", action="store_true", help="the tiny Qwen shape: the code paths only")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    import os

    import torch

    try:
        kind = torch.device(args.device).type
    except (RuntimeError, ValueError):
        parser.error(f"--device {args.device!r}: give cpu, cuda or cuda:N")
    if kind == "cuda" and not torch.cuda.is_available():
        parser.error(f"--device {args.device}: no CUDA device here; use cpu (with --quick)")
    if kind == "cuda" and (torch.device(args.device).index or 0) >= torch.cuda.device_count():
        parser.error(f"--device {args.device}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    result: dict = {
        "machine": machine(("torch", "transformers")),
        "cudnn_version": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "capability": list(torch.cuda.get_device_capability(args.device)) if kind == "cuda" else None,
        "TORCH_CUDNN_SDPA_DEPRIORITIZED": os.environ.get("TORCH_CUDNN_SDPA_DEPRIORITIZED"),
    }
    for part, measure in (("attention", attention), ("generate", generate_calls), ("training", training)):
        print(f"sdpa_shapes: {part}", flush=True)
        result[part] = measure(args.device, args.quick)
        result["summary"] = summary(result)
        atomic_write_json(args.out, result)  # after each part: a check cut off keeps the first
    print(json.dumps(result["summary"], indent=1), flush=True)


if __name__ == "__main__":
    main()
