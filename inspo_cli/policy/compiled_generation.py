"""Compiled decoding for `TransformersBackend` (`model.compile_generation`).

transformers' `generate` compiles the model's decoding forward with torch.compile when its KV cache is static
(`cache_implementation="static"`); `CompileConfig`'s default mode, reduce-overhead, also captures CUDA graphs on a
GPU, which is what takes launch-bound decoding (issue 52: ~35 ms per step for a 3B model at batch 8 on an H100) to
the speed of the hardware. On its own transformers compiles only on accelerators; `compile_generation` asks for it
on CPU too, where it is for tests and measurement (bench/compiled_generation.py, 2 cores: SmolLM2-135M decodes
1.5x slower compiled, after 80 s of compiling; a 3M-parameter model 5% faster).

The prefill stays eager; only the one-token decode step is compiled. Its shapes are the batch and the static cache's
length. torch.compile compiles the first shape as it is and, at the first change of either, once more with that
dimension symbolic (dynamo's automatic dynamic shapes), so a run compiles about three times whatever its batches and
widths (measured on the tiny Qwen shape: bench/README.md). The cache length is rounded up to a multiple of
`CACHE_BUCKET`, and transformers sizes each call's cache to the longest length asked for so far, so after a rollout's
longest turn the length stays put.

On a GPU a `generate` call may record its CUDA graphs again: transformers 5.24 makes a new static cache for every
call (`_prepare_static_cache`), whose tensors it marks as static addresses, and a mixed-precision rollout's bf16
weights are fresh copies (generation_weights.py); CUDA graph trees re-record (a capture; the warm-up only the first
time) whenever a static input's address changed, which the caching allocator may or may not avoid by handing back the
same blocks (torch/_inductor/cudagraph_trees.py, `check_invariants`). bench/compiled_generation.py's compiled ms per
step includes it. Torch 2.13 does not count these re-records toward `cudagraph_unexpected_rerecord_limit` (128, after
which a function runs without CUDA graphs for good); older releases may (pytorch#182531, May 2026), which a run of
more than 128 calls would show as graphs skipped: not measured on a GPU.

Nothing about what is sampled changes: the same logits processors and the same draws from the same generator, on
logits from the same computation (compiled kernels may round differently in the last bits; measured identical ids
on the tiny model, greedy and seeded sampling, in tests/policy/test_compiled_generation.py).
"""

from __future__ import annotations

CACHE_BUCKET = 256  # tokens
# Every model's forward is one code object to dynamo (transformers wraps it), so a policy, the trainer's unwrapped
# copy of it and a reference model share one recompile limit (8 by default, then dynamo falls back to eager for
# good); each takes about three compiles.
RECOMPILE_LIMIT = 32


def cache_length(width: int, max_new_tokens: int) -> int:
    """The static cache's length for a batch of `width` prompt tokens and `max_new_tokens`: rounded up to a bucket."""
    needed = width + max_new_tokens
    return -(-needed // CACHE_BUCKET) * CACHE_BUCKET


def allocated_cache_length(model, tokens: int) -> int:
    """The static cache `generate` allocates per row for a batch of `tokens` (prompt and new tokens): its bucket, and
    never shorter than the model's earlier static caches (transformers' `_prepare_static_cache` keeps the longest
    length it was asked for, so a short call after a long one gets the long one's cache)."""
    earlier = getattr(model, "_previous_max_cache_length", 0)
    return max(cache_length(tokens, 0), earlier if isinstance(earlier, int) else 0)


def decoding_compile_config():
    """transformers' default compile settings (reduce-overhead: CUDA graphs on a GPU), on every device. Raises
    dynamo's process-wide recompile limit to `RECOMPILE_LIMIT` if it is lower."""
    import torch
    from transformers import CompileConfig

    config = CompileConfig()
    config._compile_all_devices = True  # transformers' own switch for compiling off accelerators (CPU)
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, RECOMPILE_LIMIT)
    return config


def static_cache_kwargs(compile_config, width: int, max_new_tokens: int) -> dict:
    """`generate` keyword arguments for a compiled decode of one batch: a static cache sized to a bucket."""
    return {
        "cache_implementation": "static",
        "compile_config": compile_config,
        "max_cache_len": cache_length(width, max_new_tokens),
    }
