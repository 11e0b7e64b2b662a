"""How many contexts one `generate` call of the transformers backend may take: `rollout.generation_batch_size`.

Decoding with HF's eager loop is launch-bound on a GPU: a step over 64 rows costs about what one over 8 costs, so the
backend generates as many trajectories at once as memory allows, not the update's micro-batch. With
`generation_batch_size: 0` (auto) a call takes at most the step's share of trajectories, and on a CUDA device only as
many as the KV cache and the prefill's largest layer fit in the device's free memory (`rows_that_fit`); on CPU the
whole share (host memory is not measured: the CPU rollouts of every recipe are as they were before the field). A
positive value is a fixed cap on the rows of one call.
"""

from __future__ import annotations

from collections.abc import Sequence

# of the free device memory a generate call may plan to fill; the rest absorbs what is not modelled. One number for
# the backend and `inspo recipe plan`, which sizes an auto call the same way.
from inspo_cli.config.resource_plan import FREE_SHARE  # noqa: F401


def bytes_per_token(config, element_bytes: int) -> int:
    """Device memory one row's token takes while generating: its keys and values in every layer, plus the largest
    layer's prefill activations (hidden states, queries, the MLP's gate, up and product) while it is computed."""
    text = getattr(config, "text_config", config)  # multimodal configs nest the language model's
    heads = text.num_attention_heads
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // heads
    kv_heads = getattr(text, "num_key_value_heads", None) or heads
    cache = text.num_hidden_layers * 2 * kv_heads * head_dim
    prefill = 4 * text.hidden_size + heads * head_dim + 3 * text.intermediate_size
    return (cache + prefill) * element_bytes


def free_device_bytes(device) -> int | None:
    """Bytes a new allocation can get on a CUDA `device`: free on the device plus what torch's caching allocator
    holds unused. None off CUDA."""
    import torch

    if getattr(device, "type", str(device)) != "cuda" or not torch.cuda.is_available():
        return None
    free, _ = torch.cuda.mem_get_info(device)
    return int(free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device))


def rows_that_fit(
    widths: Sequence[int], budgets: Sequence[int], per_token: int, room: int, row_tokens=lambda tokens: tokens
) -> int:
    """How many of the rows (sorted by context width, shortest first) one call can take: a padded batch of n rows
    holds n x (the n-th width + the largest budget) tokens, or what `row_tokens` makes of that (a static cache's
    length: rounded up to its bucket, and never shorter than the model's earlier static caches). Always the first
    row, so a rollout advances."""
    n, longest_budget = 0, 0
    for width, budget in zip(widths, budgets):
        longest_budget = max(longest_budget, budget)
        if n and (n + 1) * row_tokens(width + longest_budget) * per_token > room:
            break
        n += 1
    return n
