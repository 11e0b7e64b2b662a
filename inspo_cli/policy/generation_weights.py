"""Rollouts of a mixed-precision trainer from its weights cast once to the compute dtype, outside autocast.

With `model.dtype: bfloat16` (or float16) the trainer keeps float32 master weights and accelerate wraps the policy's
`forward` in autocast (`training.trainer_inputs.training_precision`); TRL's unwrapping for generation keeps that
wrapper. Under it every decode step re-casts every weight (autocast keeps no cast cache under no_grad): on an H100,
Qwen2.5-3B at batch 8 decoded at 109 ms per step against 35 ms for plain `generate` of the same weights (as issue 52
reported it, 2026-11-28; 46.7 against 36.2 on an H200, bench/README.md), and `bench/generation_speed.py`
measures the same on CPU. So around each rollout every floating
weight held in another dtype is cast once into the compute dtype (bf16 matmuls rounded them to it anyway), and the
model's own forward runs without the wrapper: what `generate` of bf16 weights does, and what Search-R1's vLLM does with
the weights synced from its float32 FSDP masters. The casts are freed when the rollout ends, so an update's memory is
unchanged; the rollout holds 2 bytes per parameter more (`inspo recipe plan` counts them).

ZeRO-3 holds the weights in bf16 already, and FSDP2 all-gathers them in its own compute dtype: both are left alone.
"""

from __future__ import annotations

import contextlib


def generation_dtype(args, sharded: bool):
    """The dtype rollouts cast the weights to, from TRL's config: bf16 or fp16 with mixed precision on an unsharded
    launch, else None (generate from the weights as they are)."""
    import torch

    if sharded or getattr(args, "cast_lm_head_to_fp32", False):
        return None
    return torch.bfloat16 if args.bf16 else torch.float16 if args.fp16 else None


@contextlib.contextmanager
def in_compute_dtype(model, dtype):
    """Inside the block `model`'s floating weights are `dtype` copies and its forward is its own, not accelerate's
    autocast wrapper; both are put back after it, whatever happens inside. The parameters stay the same objects (the
    optimizer's and DDP's references hold), only their data is swapped. `dtype` None: nothing changes."""
    if dtype is None:
        yield model
        return
    params = [p for p in model.parameters() if p.is_floating_point() and p.dtype != dtype]
    masters = [p.data for p in params]
    wrapped = model.__dict__.get("forward")  # accelerate's autocast wrapper, set on the instance
    own = getattr(model, "_original_forward", None)
    try:
        for p in params:
            p.data = p.data.to(dtype)
        if wrapped is not None and own is not None:
            model.forward = own
        yield model
    finally:
        for p, master in zip(params, masters):
            p.data = master
        if wrapped is not None and own is not None:
            model.forward = wrapped
