"""The trainer's side of dynamic sampling (`training.dynamic_sampling`; the batch logic is dynamic_sampling.py): the
rounds generated through `SearchGRPOTrainer._generate_round`, the further questions they draw, and TRL's metrics of
the rounds pooled into one value each.
"""

from __future__ import annotations

import random

import torch

from inspo_cli.policy.seeds import derived_seed
from inspo_cli.training.dynamic_sampling import DynamicSampling, pooled
from inspo_cli.training.instruction_blocks import informative_questions
from inspo_cli.training.trl_patches import PatchedGRPOTrainer


class DynamicSamplingTrainer(PatchedGRPOTrainer):
    """Dynamic sampling's steps, for `SearchGRPOTrainer` (which defines `_generate_round` and the settings)."""

    @property
    def _baseline_rows(self) -> int:
        """Rows that share an advantage baseline: a question's group, or with `population.baseline: instruction` one
        instruction's block of it (`instruction_blocks.py`)."""
        return self._block if self.baseline == "instruction" else self.group_size

    def _local_informative(self, rows: int) -> list[bool]:
        """Per group of this process's latest rows: do some of its rewards that share a baseline differ?"""
        index, rewards = self.accelerator.process_index, self._round_rewards
        assert rewards is not None, "rewards are set by _calculate_rewards before they are read"
        return informative_questions(rewards[index * rows : (index + 1) * rows], self.group_size, self._baseline_rows)

    def _dynamically_sampled(self, inputs) -> dict:
        """`training.dynamic_sampling`: the batch of `inputs`, less its groups of equal rewards, filled from further
        questions (`dynamic_sampling.DynamicSampling`). TRL's metrics of the rounds become one value each
        (`dynamic_sampling.pooled`): means weighted by the rollouts of each round, so that `reward` stays the mean
        over every rollout generated; the extremes of minima and maxima; standard deviations over all the rounds."""
        metrics = self._metrics["train"]
        before = {key: len(values) for key, values in metrics.items()}
        sizes: list[int] = []

        def generate(rows):
            sizes.append(len(rows) * self.accelerator.num_processes)  # TRL's metrics are over every process's rows
            return self._generate_round(rows)

        sampler = DynamicSampling(self.group_size, self.dynamic_sampling_rounds, self.processing_class.pad_token_id)
        output, extra = sampler.fill(inputs, generate, self._further_questions, self._reduce)
        rounds = {key: values[before.get(key, 0) :] for key, values in metrics.items()}
        for key, new in rounds.items():
            if len(new) > 1:
                del metrics[key][before.get(key, 0) :]
                metrics[key].append(pooled(key, new, sizes, rounds))
        self._count_loss_tokens(output)
        for name, value in extra.items():
            metrics[name].append(value)
        metrics["groups/equal_rewards"].append(extra["dynamic_sampling/unfilled"])
        return output

    def _further_questions(self, count: int, round_: int) -> list[dict]:
        """`count` training questions at random for dynamic sampling's round `round_` of this step: a stream of its
        own, seeded by the run seed, the step, the process and the round, so a resumed run draws the same."""
        generator = random.Random(
            derived_seed(self.args.seed, "dynamic-sampling", self.step, self.accelerator.process_index, round_)
        )
        dataset = self.train_dataset
        return [dict(dataset[i]) for i in generator.choices(range(len(dataset)), k=count)]

    def _reduce(self, values: list[float], how: str) -> list[float]:
        gathered = self.accelerator.gather(torch.tensor([values], dtype=torch.float64, device=self.accelerator.device))
        combined = gathered.sum(dim=0) if how == "sum" else gathered.amax(dim=0)
        return combined.tolist()
