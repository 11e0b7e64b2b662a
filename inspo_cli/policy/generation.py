"""What every policy backend is: `PolicyBackend.generate` gives, for whole contexts as token ids, exactly the ids that
were sampled (`Generation`), so the loss later sees the same tokens the policy produced (no decode/re-encode drift). A
turn ends at a stop string (`</search>`, `</answer>`), at the end-of-sequence token, or at its token budget; each
context has its own budget. The backends: transformers_backend.py, vllm_backend.py; `load_backend` (backends.py)
builds the one a recipe asks for.
"""

from __future__ import annotations

import contextlib
import copy
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass
class Generation:
    token_ids: list[int]
    finish: str  # "stop" (a stop string), "eos" or "length"
    logprobs: list[float] | None = None


class PolicyBackend(Protocol):
    def generate(
        self, contexts: Sequence[Sequence[int]], max_new_tokens: Sequence[int], stop: Sequence[str]
    ) -> list[Generation]:
        """One continuation per context, each at most `max_new_tokens[i]` tokens, ending at a stop string or EOS."""
        ...

    def generating_with(self, model) -> contextlib.AbstractContextManager:
        """Generate with `model` inside the block (the trainer's policy, unwrapped for generation), the backend's
        own model again after it. A backend holding its own copy of the weights (vLLM) ignores it: the trainer
        pushes new weights into it instead."""
        ...


class Sampling:
    """`with_sampling`: the same backend (model, server, caches shared) with other sampling settings, e.g. greedy
    decoding for evaluation during training."""

    temperature: float
    top_p: float

    def with_sampling(self, temperature: float, top_p: float = 1.0):
        clone = copy.copy(self)
        clone.temperature, clone.top_p = temperature, top_p
        return clone

    def generating_with(self, model) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()  # the weights live in the engine; see PolicyBackend.generating_with


def stop_token_ids(tokenizer, model_eos) -> set[int]:
    """The ids that end a turn as EOS: the model's generation config's (one or several) and the tokenizer's."""
    ids = set()
    for value in (model_eos, tokenizer.eos_token_id):
        if value is None:
            continue
        ids.update(value if isinstance(value, (list, tuple)) else [value])
    return ids


_cudnn_off = {"blocks": 0, "restore": False}  # the decoding blocks open now, and whether the last to close turns it on
_cudnn_lock = threading.Lock()


@contextlib.contextmanager
def decoding_attention(device):
    """Inside the block, on a CUDA `device`, PyTorch's SDPA may not choose cuDNN attention; flash, memory-efficient
    and math attention stay as they were. Elsewhere, with cuDNN attention already off, or with neither
    memory-efficient nor math attention on (flash attention takes no padding mask), nothing changes. The switch is
    process-wide: blocks open at once, in any threads, share it, and the last to close puts it back.

    Why: torch 2.11's CUDA wheels (cuDNN 9.19) put cuDNN attention first on H100/H200 (`check_prefer_cudnn_attention`
    in sdp_utils.cpp; `TORCH_CUDNN_SDPA_DEPRIORITIZED` reverts it), and cuDNN builds an execution graph for each new
    shape, the key length included (the 2.11 binary's own warning: "may trigger excessive recompilation"; its opt-in
    way around, pytorch#155958, takes no attention mask). Decoding with a KV cache meets a new key length at every
    step. On an H200 (2026-11-28) a first `generate` call decoded at 98 ms per step and repeats of the same shapes at
    31-39; the 3B step's rollout, whose widths never repeat, at 80-100. That cuDNN's builds are the cost is read from
    those figures and torch's code, not yet measured: bench/sdpa_shapes.py measures it on the next GPU. Flash
    attention (rows of equal length: no mask) and memory-efficient attention (a padding mask) build nothing per shape.
    Any of them computes the same attention; only the rounding of bf16 sums may differ, as between any two kernels.
    A decoding step compiled inside the block (`model.compile_generation`) keeps the attention it was traced with."""
    import torch

    if torch.device(device).type != "cuda":
        yield
        return
    cuda = torch.backends.cuda
    with _cudnn_lock:
        if _cudnn_off["blocks"] == 0:
            masked = cuda.mem_efficient_sdp_enabled() or cuda.math_sdp_enabled()
            _cudnn_off["restore"] = cuda.cudnn_sdp_enabled() and masked
            if _cudnn_off["restore"]:
                cuda.enable_cudnn_sdp(False)
        _cudnn_off["blocks"] += 1
    try:
        yield
    finally:
        with _cudnn_lock:
            _cudnn_off["blocks"] -= 1
            if _cudnn_off["blocks"] == 0 and _cudnn_off["restore"]:
                cuda.enable_cudnn_sdp(True)
