"""What every policy backend is: `PolicyBackend.generate` gives, for whole contexts as token ids, exactly the ids that
were sampled (`Generation`), so the loss later sees the same tokens the policy produced (no decode/re-encode drift). A
turn ends at a stop string (`</search>`, `</answer>`), at the end-of-sequence token, or at its token budget; each
context has its own budget. The backends: transformers_backend.py, vllm_backend.py; `load_backend` (backends.py)
builds the one a recipe asks for.
"""

from __future__ import annotations

import contextlib
import copy
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


@contextlib.contextmanager
def decoding_attention(device):
    """Inside the block, on a CUDA `device`, PyTorch's SDPA may not choose cuDNN attention; flash, memory-efficient
    and math attention stay as they were. Elsewhere, or with cuDNN attention already off, nothing changes.

    Why: torch 2.11's CUDA wheels (cuDNN 9.19) put cuDNN attention first on H100/H200 (`check_prefer_cudnn_attention`
    in sdp_utils.cpp; `TORCH_CUDNN_SDPA_DEPRIORITIZED` reverts it), and cuDNN builds an execution graph for each new
    shape, the key length included (the 2.11 binary's own warning: "may trigger excessive recompilation"; its opt-in
    way around, pytorch#155958, takes no attention mask). Decoding with a KV cache meets a new key length at every
    step. On an H200 (2026-11-28) a first `generate` call decoded at 98 ms per step and repeats of the same shapes at
    31-39; the 3B step's rollout, whose widths never repeat, at about 87. That cuDNN's builds are the cost is read from
    those figures and torch's code, not yet measured: bench/sdpa_shapes.py measures it on the next GPU. Flash
    attention (rows of equal length: no mask) and memory-efficient attention (a padding mask) build nothing per shape.
    Any of them computes the same attention; only the rounding of bf16 sums may differ, as between any two kernels."""
    import torch

    cuda = torch.backends.cuda
    others = cuda.flash_sdp_enabled() or cuda.mem_efficient_sdp_enabled() or cuda.math_sdp_enabled()
    if torch.device(device).type != "cuda" or not cuda.cudnn_sdp_enabled() or not others:
        yield
        return
    cuda.enable_cudnn_sdp(False)
    try:
        yield
    finally:
        cuda.enable_cudnn_sdp(True)
