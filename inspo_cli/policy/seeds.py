"""Seeds of the policy's sampling, all derived from `run.seed`: per process, per batch, per request.

`derived_seed` hashes a seed with its context (a process index, a batch number, a row and turn) into a seed for one
stream; `request_seeds` draws per-request seeds for vLLM from this process's torch generator, so that seeding it
(`transformers.set_seed`) decides vLLM's samples as it decides transformers'.
"""

from __future__ import annotations

import hashlib


def derived_seed(seed: int, *parts) -> int:
    """A seed in [0, 2**32) for `seed` and `parts` (a process index, a batch number): different inputs give unrelated
    seeds, where `seed + process` gives run seed 0 on process 1 the stream of run seed 1 on process 0. numpy, which
    vLLM seeds too, takes nothing at or above 2**32."""
    text = "\x00".join(str(part) for part in (seed, *parts))
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:4], "big")


def request_seeds(n: int) -> list[int]:
    """`n` seeds from torch's global generator, below 2**63: vLLM keeps request seeds as int64."""
    import torch

    return torch.randint(0, 2**63 - 1, (n,), dtype=torch.int64).tolist()
