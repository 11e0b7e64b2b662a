"""A training run stops at the first optimizer update that leaves its numbers unusable, instead of saving them.

    callbacks.append(NonFiniteGuard(updates_per_step=10, learning_rate=1e-6))

After every optimizer update the policy's weights must be finite, and every logged loss and gradient norm too; if
not, the run stops there with one line (`InspoError`: the training step, the update, which value, the likely
causes) before a checkpoint or the final model is written, so the run directory keeps only its checkpoints from
before. Under several processes each checks the weights it holds and they agree by an all-reduce, so every process
stops at the same update. What it costs: one pass over the weights per update (an `isfinite` per tensor, one
synchronisation), small next to the update itself.
"""

from __future__ import annotations

import math

from transformers import TrainerCallback

from inspo_cli.errors import InspoError


class NonFiniteGuard(TrainerCallback):
    def __init__(self, updates_per_step: int, learning_rate: float):
        self.updates_per_step, self.learning_rate = updates_per_step, learning_rate

    def _stop(self, update: int, what: str) -> None:
        step = (update + self.updates_per_step - 1) // self.updates_per_step
        raise InspoError(
            f"training step {step} (optimizer update {update}): {what}; the run stops here and keeps its "
            f"checkpoints from before. Likely causes: a learning rate too high for this model "
            f"(training.learning_rate {self.learning_rate:g}), an overflow in bfloat16/float16, or a "
            "bad batch; resume from the last checkpoint with a lower learning rate or float32"
        )

    def on_optimizer_step(self, args, state, control, model=None, **kwargs):
        if model is not None and not _weights_finite(model):
            self._stop(state.global_step + 1, "the policy's weights are not finite after the update (NaN or inf)")

    def on_log(self, args, state, control, logs=None, **kwargs):
        for key in ("loss", "grad_norm"):
            value = (logs or {}).get(key)
            if isinstance(value, (int, float)) and not math.isfinite(value):
                self._stop(state.global_step, f"the {key.replace('_', ' ')} is {value}")


def _weights_finite(model) -> bool:
    import torch

    every = [p.to_local() if hasattr(p, "to_local") else p for p in model.parameters()]  # FSDP2: this process's shard
    parameters = [p for p in every if p.numel()]
    if parameters:
        finite = torch.stack([torch.isfinite(p.detach()).all() for p in parameters]).all().to(torch.int32)
    else:  # every tensor sharded away from this process
        finite = torch.ones((), dtype=torch.int32, device=every[0].device if every else "cpu")
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.all_reduce(finite, op=torch.distributed.ReduceOp.MIN)
    return bool(finite.item())
