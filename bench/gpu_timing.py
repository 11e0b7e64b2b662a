"""Timing and memory probes of the GPU checklist's trainer step (bench/gpu_checks.py): every `generate` call the
step's rollout makes, the allocator's memory every 10 s, and plain `generate` of the same weights at the step's
shapes, rows of equal and of different lengths, as the reference each call is read against.

Why: on an H200 (2026-11-28) the 3B step's rollout decoded at about 87 ms per step, against 33 ms for the same batch
in bench/generation_speed.py, whose rows are all 400 tokens, so its attention mask is all ones. The step's rows differ
in length (left padding: a real mask, which changes the attention kernel and builds a mask every step) and grow from
about 300 to 2,700 tokens over its 5 calls of 500 decode steps. On 2 CPU cores (qwen2-tiny at the recipe's lengths)
the step's calls decode at plain `generate`'s rate at every width, so what remains is the GPU's own: these figures,
taken in the step's process, say whether plain `generate` slows the same way at those shapes or the rollout adds it.

torch and transformers are imported inside the functions (gpu_checks.py's rule: the checklist checks its wheels
before anything imports them).
"""

from __future__ import annotations

import time
from pathlib import Path

from _common import synchronizer
from gpu_profile import DecodeProfile, ProfilingCriterion

from inspo_cli.jsonio import atomic_write_json  # noqa: E402


def time_generate_calls(profile: dict | None = None, profile_call: int = 1) -> list[dict]:
    """From now on, every `generate` call of the transformers backend in this process is timed into the list returned:
    per batch, rows, prompt width, decode steps (the longest generation) and ms per decode step; per public call, its
    seconds, which add the sizing of batches to free memory (`torch.cuda.mem_get_info`, which the bench's backends
    with a fixed batch never call). With `profile` (a dict), batch call `profile_call` (0-based; the first with room
    for the window if that one is too short) also profiles a few of its decode steps (gpu_profile.py) into
    `profile["rollout"]`, and its timing row says `"profiled": true` (the profiler's own cost is in its figure)."""
    import torch

    from inspo_cli.policy import transformers_backend
    from inspo_cli.policy.transformers_backend import TransformersBackend

    calls: list[dict] = []
    original = TransformersBackend._generate_batch
    synchronize = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    watching: DecodeProfile | None = None  # the profile the current batch call steps, if any
    batch_calls = 0

    def timed(self, contexts, budgets, stop):
        nonlocal watching, batch_calls
        window = DecodeProfile.within(max(budgets, default=0))
        wanted = profile is not None and "rollout" not in profile and batch_calls >= profile_call
        if wanted and window.active >= 2:
            watching = window
        batch_calls += 1
        synchronize()
        started = time.perf_counter()
        try:
            results = original(self, contexts, budgets, stop)
        finally:
            if watching is not None:
                watching = None
                found = window.finish()
                if found is not None and profile is not None:
                    profile["rollout"] = {**found, "width": max(len(c) for c in contexts), "rows": len(contexts)}
        synchronize()
        seconds = time.perf_counter() - started
        steps = max((len(g.token_ids) for g in results), default=0)
        lengths = [len(c) for c in contexts]
        calls.append(
            {
                "rows": len(contexts),
                "width": max(lengths, default=0),
                "shortest": min(lengths, default=0),
                "steps": steps,
                "seconds": round(seconds, 3),
                "ms_per_step": round(1000 * seconds / max(steps, 1), 1),
                **({"profiled": True} if window.seen else {}),
            }
        )
        return results

    TransformersBackend._generate_batch = timed
    turn_end = transformers_backend._TurnEnd.__call__

    def stepped(self, input_ids, scores, **kwargs):  # once per decode step, as HF calls its stopping criteria
        if watching is not None:
            watching.step()
        return turn_end(self, input_ids, scores, **kwargs)

    transformers_backend._TurnEnd.__call__ = stepped

    public = TransformersBackend.generate  # the batches above, plus sizing them to free memory (`mem_get_info`)

    def timed_public(self, contexts, max_new_tokens, stop=()):
        started = time.perf_counter()
        out = public(self, contexts, max_new_tokens, stop)
        calls.append({"generate_call_seconds": round(time.perf_counter() - started, 3), "contexts": len(contexts)})
        return out

    TransformersBackend.generate = timed_public
    return calls


def plain_reference(
    model_dir: Path, device: str, dtype: str, widths: list[int], rows: int, steps: int, profile: dict | None = None
) -> list[dict]:
    """ms per decode step of plain `model.generate` (sampling, the KV cache, no stopping criteria) of `model_dir` in
    `dtype`, `rows` rows at each width: all rows that long (an all-ones mask, as bench/generation_speed.py) and rows
    from 60% of it to all of it, left-padded (as the step's rollout). Decode alone: a call of `steps` new tokens less
    a call of 1 (the prefill and the first token), over `steps - 1`; every call forced to its length. With `profile`
    (a dict), one more call of padded rows at each width, and of equal rows at the widest, profiles a few decode
    steps (gpu_profile.py) into `profile["plain_padded_WIDTH"]` and `profile["plain_equal_WIDTH"]`."""
    import random

    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=getattr(torch, dtype), device_map=device).eval()
    where = model.device
    synchronize = synchronizer(where)
    rng = random.Random(0)
    top = min(model.config.vocab_size, 30_000)

    def seconds(model, ids, mask, new_tokens: int, criteria=()) -> float:
        synchronize()
        started = time.perf_counter()
        with torch.no_grad():
            model.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=new_tokens,
                min_new_tokens=new_tokens,
                do_sample=True,
                top_k=0,
                top_p=1.0,
                temperature=1.0,
                pad_token_id=0,
                stopping_criteria=list(criteria),
            )
        synchronize()
        return time.perf_counter() - started

    results = []
    for width in widths:
        for ragged in (False, True):
            lengths = [rng.randint(int(0.6 * width), width) if ragged else width for _ in range(rows)]
            lengths[-1] = width
            ids = torch.zeros((rows, width), dtype=torch.long)
            mask = torch.zeros((rows, width), dtype=torch.long)
            for row, length in enumerate(lengths):
                ids[row, width - length :] = torch.tensor([rng.randrange(100, top) for _ in range(length)])
                mask[row, width - length :] = 1
            ids, mask = ids.to(device), mask.to(device)
            seconds(model, ids, mask, 2)  # warm-up: kernels, allocator
            first, full = seconds(model, ids, mask, 1), seconds(model, ids, mask, steps)
            results.append(
                {
                    "rows": rows,
                    "width": width,
                    "padded": ragged,
                    "steps": steps,
                    "decode_ms_per_step": decode_ms(first, full, steps),
                    "prefill_seconds": round(first, 3),
                }
            )
            if profile is not None and (ragged or width == max(widths)):
                window = DecodeProfile()
                try:
                    seconds(model, ids, mask, window.skip + window.active + 1, [ProfilingCriterion(window)])
                finally:
                    found = window.finish()
                if found is not None:
                    shape = {"width": width, "rows": rows, "padded": ragged}
                    profile[f"plain_{'padded' if ragged else 'equal'}_{width}"] = {**found, **shape}
    del model
    if where.type == "cuda":
        torch.cuda.empty_cache()
    return results


def decode_ms(first: float, full: float, steps: int) -> float:
    """ms per decode step, the prefill left out: a call of `steps` new tokens (`full` s) less a call of 1 (`first` s:
    the prefill and the first token), over the `steps - 1` steps between."""
    return round(1000 * (full - first) / (steps - 1), 1)


def against_plain(calls: list[dict], reference: list[dict]) -> list[dict]:
    """Each timed batch of the step beside plain `generate`'s padded rate at the nearest width measured (its prefill,
    one of 500 steps, is left in the call's figure): the ratio above 1 is what the rollout, or the step's shapes,
    cost beyond plain `generate`. Plain `generate` keeps torch's default attention while the rollout decodes without
    cuDNN attention on CUDA (`decoding_attention`): there a ratio well below 1 is what cuDNN's builds per new shape
    cost plain `generate` (bench/sdpa_shapes.py)."""
    padded = [r for r in reference if r["padded"]]
    rows = []
    for call in calls:
        if "rows" not in call or not padded:
            continue
        nearest = min(padded, key=lambda r: abs(r["width"] - call["width"]))
        rows.append(
            {
                **({"profiled": True} if call.get("profiled") else {}),  # its figure holds the profiler's cost
                "width": call["width"],
                "ms_per_step": call["ms_per_step"],
                "plain_width": nearest["width"],
                "plain_ms_per_step": nearest["decode_ms_per_step"],
                "ratio": round(call["ms_per_step"] / nearest["decode_ms_per_step"], 2)
                if nearest["decode_ms_per_step"] > 0
                else None,
            }
        )
    return rows


def sample_memory(result: dict, out: Path, started: float, every: float = 10.0):
    """Every `every` s, the allocator's current and peak GiB, written to `out` beside what `result` held at the
    start: what a check that runs out of time leaves behind. Returns the function that stops it, which the final
    write waits for, so the two never write `out` at once."""
    import threading

    import torch

    partial = {**result, "partial": True, "memory_samples": []}
    stop = threading.Event()

    def sample():
        while not stop.wait(every):
            partial["memory_samples"].append(
                {
                    "seconds": round(time.time() - started),
                    "allocated_gib": torch.cuda.memory_allocated() / 2**30,
                    "peak_gib": torch.cuda.max_memory_allocated() / 2**30,
                }
            )
            try:
                atomic_write_json(out, partial)
            except RuntimeError:  # the step added to a list or dict of it meanwhile: written at the next tick
                pass

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()

    def finish() -> list:
        stop.set()
        thread.join()
        return partial["memory_samples"]

    return finish
