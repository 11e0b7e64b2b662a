"""What a recipe's batch numbers mean for one training step, computed once and passed down to TRL.

    plan = batch_plan(recipe, processes=8)   # the paper: 512 questions x 5 = 2,560 trajectories, 10 updates of 256
    plan.updates_per_step, plan.accumulation, plan.steps_per_generation, plan.max_updates

GRPO follows Search-R1's scripts, which App. B quotes: `batch_size` counts *questions* per step (each gets
`group_size` rollouts), `mini_batch_trajectories` counts *trajectories* per optimizer update over all processes,
`micro_batch_size` counts *trajectories per device* in one forward/backward pass. One step generates
`batch_size x group_size` trajectories and makes `batch_size x group_size / mini_batch_trajectories` updates on them
(512 x 5 / 256 = 10). In TRL's terms:

    per_device_train_batch_size = micro_batch_size
    gradient_accumulation_steps = mini_batch_trajectories / (micro_batch_size x processes)
    steps_per_generation        = gradient_accumulation_steps x updates per pass
    max_steps                   = steps x updates per pass x num_iterations       (optimizer updates)

`training.num_iterations` passes over each generated batch (veRL's ppo_epochs; 1 in the paper) multiply the updates
of a step, as TRL generates anew every steps_per_generation x num_iterations passes.

SFT (and rejection sampling's SFT phase) counts `batch_size` *examples* per update, one update per step.
"""

from __future__ import annotations

from dataclasses import dataclass

from inspo_cli.errors import InspoError
from inspo_cli.registry import is_sft


@dataclass(frozen=True)
class BatchPlan:
    processes: int
    micro_batch: int  # per device and forward/backward pass: trajectories (GRPO) or examples (SFT)
    accumulation: int  # passes per optimizer update on each device (gradient_accumulation_steps)
    updates_per_step: int  # optimizer updates per logged training step (all passes over its batch)
    steps_per_generation: int  # TRL's: passes per device over one generated batch (GRPO; 1 for SFT)
    max_updates: int  # optimizer updates over the whole run (TRL's max_steps)

    @property
    def generation_batch_per_process(self) -> int:
        """Trajectories each process generates at once (GRPO): one step's share."""
        return self.steps_per_generation * self.micro_batch

    @property
    def generation_batch(self) -> int:
        """Trajectories all processes generate for one step: batch_size x group_size (GRPO)."""
        return self.generation_batch_per_process * self.processes


def batch_plan(recipe, processes: int = 1) -> BatchPlan:
    """The plan for `recipe` over `processes`; a batch that does not divide is an `InspoError` naming the fields."""
    t = recipe.training
    per_pass = t.micro_batch_size * processes
    if is_sft(t.algorithm):
        if t.batch_size % per_pass:
            raise InspoError(
                f"training.micro_batch_size={t.micro_batch_size} × {processes} process(es) = {per_pass} "
                f"examples per pass must divide training.batch_size={t.batch_size} (SFT counts examples); "
                f"choose a micro_batch_size that divides {t.batch_size // processes}"
            )
        return BatchPlan(processes, t.micro_batch_size, t.batch_size // per_pass, 1, 1, t.steps)
    trajectories = t.mini_batch_trajectories
    if trajectories % per_pass:
        raise InspoError(
            f"training.micro_batch_size={t.micro_batch_size} × {processes} process(es) = {per_pass} trajectories per "
            f"pass must divide training.mini_batch_trajectories={trajectories}; choose a micro_batch_size and a "
            f"number of processes whose product divides {trajectories}"
        )
    accumulation = trajectories // per_pass
    updates = t.batch_size * t.group_size // trajectories  # per pass over the batch
    per_process = accumulation * updates * t.micro_batch_size
    if t.dynamic_sampling and per_process % t.group_size:
        raise InspoError(
            f"training.dynamic_sampling needs whole groups on each process: {per_process} trajectories per process "
            f"(batch_size {t.batch_size} x group_size {t.group_size} over {processes} process(es)) do not divide into "
            f"groups of {t.group_size}; choose a number of processes that divides batch_size"
        )
    per_step = updates * t.num_iterations
    return BatchPlan(processes, t.micro_batch_size, accumulation, per_step, accumulation * updates, t.steps * per_step)
