"""What we change in TRL, and why: every place this package overrides or patches TRL's (or transformers')
internals. TRL is pinned exactly (pyproject.toml) because of them; `tests/training/test_trainer.py`,
`tests/commands/test_train_runs.py`, `tests/commands/test_train_inspo_and_resume.py`,
`tests/training/test_generation_path.py` and `tests/policy/test_vllm.py` cover them.

In `PatchedGRPOTrainer` (here), which `SearchGRPOTrainer` builds on:
- `_get_per_token_logps_and_entropies` runs under `score_only_labelled_positions_on_cpu`, which swaps TRL's
  module-level `trl.trainer.utils._use_triton`: on CPU the LM head scores the completion only (same log-probs).
- `_hold_reference_in_compute_dtype`: TRL builds the KL reference in the policy's loading dtype (float32 under mixed
  precision); a one-process or DDP launch holds it in the compute dtype, halving its memory.
- `_mask_truncated` and `_count_loss_tokens` rewrite TRL's generation output (`tool_mask`, `num_items_in_batch`):
  `training.mask_truncated_completions` for multi-turn rollouts, whose rows TRL's own switch does not see.
- `_sync_vllm_weights` and `_vllm_awake` drive TRL's vLLM generation (`_last_loaded_step`,
  `_llm_weights_sleeping`) from outside its `generate`, which a `rollout_func` trainer never calls.
- `input_grads_hook_once`: each of the policy's transformers models registers its input-embedding hook once, however
  often TRL turns gradient checkpointing off and on (`enable_input_require_grads`, on the instance).

In `SearchGRPOTrainer` (trainer.py), the overrides that are the trainer's purpose:
- `_generate_and_score_completions`: an instruction per question group before TRL generates (and dynamic sampling,
  `dynamic_sampling_trainer.py`);
- `_calculate_rewards`: each group's rewards back to the instruction source and the replay buffer;
- `num_generations`, set to an instruction block's rows while TRL forms advantages (`population.baseline:
  instruction`, `instruction_blocks.advantage_groups`): with a `rollout_func`, TRL 1.16 reads it in
  `_generate_and_score_completions` only to group rewards for the advantages;
- `_save_checkpoint`: the population written into a checkpoint before HF marks it complete;
- `training_step` and `log`: the phase timing.
The rollouts themselves go through TRL's public `rollout_func`.
"""

from __future__ import annotations

import contextlib

import torch
from trl import GRPOTrainer


@contextlib.contextmanager
def score_only_labelled_positions_on_cpu():
    """TRL's fused LM head scores only labelled positions (the completion) on Triton devices, but every position,
    prompt and padding included, elsewhere, to keep tile shapes fixed for compilers. Nothing is compiled on CPU,
    so score only the completion there too: the LM-head work of a CPU update shrinks to the completion tokens, and
    the log-probs are the same (each position is computed on its own; tests/training/test_trainer.py compares them).
    TRL reads the choice from a module-level function, so it is swapped only while this trainer computes
    log-probs, and put back after."""
    from trl.trainer import utils as trl_utils

    original = trl_utils._use_triton
    trl_utils._use_triton = lambda device: device.type == "cpu" or original(device)
    try:
        yield
    finally:
        trl_utils._use_triton = original


class _InputGradsHookOnce:
    """A model's `enable_input_require_grads` that removes the hooks the model registered before (transformers keeps
    their handles) and registers again. An object holding its model, not a bound function, so that a deep copy or a
    pickled copy of the model calls it on itself."""

    def __init__(self, model):
        self.model = model

    def __call__(self) -> None:
        self.model.disable_input_require_grads()
        type(self.model).enable_input_require_grads(self.model)


def input_grads_hook_once(model) -> None:
    """transformers 5.24's `gradient_checkpointing_enable` registers a forward hook on the input embeddings
    (`enable_input_require_grads`) every time it runs, and `gradient_checkpointing_disable` removes them only for its
    own adapters. TRL turns checkpointing off and on around each generation (`unwrap_model_for_generation`) and each
    log-prob pass (`disable_gradient_checkpointing`), so a run with `model.gradient_checkpointing` gained two hooks a
    step without end, each called at every forward, decode steps included (about 0.2 us a hook on 2 CPU cores: 0.12
    ms a forward after 300 steps). Here each transformers model in `model` removes the hooks it registered before
    registering again: one hook, always."""
    from transformers import PreTrainedModel

    for module in model.modules():
        if isinstance(module, PreTrainedModel) and "enable_input_require_grads" not in vars(module):
            module.enable_input_require_grads = _InputGradsHookOnce(module)


class PatchedGRPOTrainer(GRPOTrainer):
    """TRL's GRPOTrainer with the changes the module docstring lists; `SearchGRPOTrainer` is the one built."""

    def _hold_reference_in_compute_dtype(self) -> None:
        """TRL builds the KL reference with the policy's loading dtype, which is float32 when the policy keeps fp32
        master weights under bf16/fp16 autocast (`training.trainer_inputs.training_precision`). The reference never
        trains, so in a one-process or DDP launch it is held in the autocast dtype (as verl holds Search-R1's reference
        in bf16), which halves its memory; it computes under the same autocast either way. ZeRO-3 holds it in bf16
        itself; FSDP shards it in float32 (computing in bf16): both are left as they are."""
        dtype = torch.bfloat16 if self.args.bf16 else torch.float16 if self.args.fp16 else None
        if (
            dtype is None
            or self.ref_model is None
            or self.is_deepspeed_enabled
            or self.is_fsdp_enabled
            or self.args.cast_lm_head_to_fp32
        ):
            return
        self.ref_model.to(dtype)

    def _mask_truncated(self, output: dict) -> None:
        """`training.mask_truncated_completions`: the truncated trajectories' rows of the loss mask (TRL's tool_mask,
        which the loss multiplies in) become 0, so they leave the loss and the token count that dapo, cispo and vespo
        divide by, as TRL's own switch does for its rows; done after TRL measured the completions' lengths, so its
        length metrics still count them."""
        rows = torch.tensor(self._truncated, dtype=torch.bool, device=output["tool_mask"].device)
        output["tool_mask"] = output["tool_mask"].masked_fill(rows.unsqueeze(1), 0)
        self._count_loss_tokens(output)

    def _count_loss_tokens(self, output: dict) -> None:
        """`num_items_in_batch` again after the loss mask or the rows changed: the tokens in the loss over all
        processes, as TRL counts them (completion mask times tool mask), which dapo, cispo and vespo divide by."""
        loss_mask = output["completion_mask"] * output.get("tool_mask", 1)
        output["num_items_in_batch"] = self.accelerator.gather(loss_mask.sum()).sum()

    def _sync_vllm_weights(self) -> None:
        """Push the current weights into vLLM unless they are there already. TRL does this only when it generates,
        i.e. before the step's updates; verification and evaluation run after them, and would otherwise roll out
        the previous step's policy. Collective under ZeRO-3 and in server mode: every process calls it."""
        if self.state.global_step != self._last_loaded_step:
            self.vllm_generation.sync_weights()
            self._last_loaded_step = self.state.global_step

    @contextlib.contextmanager
    def _vllm_awake(self):
        """`model.vllm_enable_sleep_mode`: TRL puts its colocated engine to sleep (level 2: weights and KV cache
        freed) and wakes it inside its own `generate`, which a `rollout_func` trainer never calls; its weight sync
        wakes the weights only. So the KV cache is woken here around every rollout (training's, verification's,
        evaluation's), and the engine goes back to sleep after it, with its weights marked gone so that the next
        rollout pushes them again (level 2 discards them)."""
        generation = self.vllm_generation
        if not (self.vllm_mode == "colocate" and getattr(generation, "enable_sleep_mode", False)):
            yield
            return
        generation.llm.wake_up(tags=["kv_cache"])
        try:
            yield
        finally:
            generation.llm.sleep(level=2)
            generation._llm_weights_sleeping = True
            self._last_loaded_step = -1  # TRL's tag for "not in vLLM": the next rollout syncs the weights again

    def _get_per_token_logps_and_entropies(self, *args, **kwargs):
        with score_only_labelled_positions_on_cpu() if self.compact_cpu_logprobs else contextlib.nullcontext():
            return super()._get_per_token_logps_and_entropies(*args, **kwargs)
