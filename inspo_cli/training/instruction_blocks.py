"""`population.instructions_per_question` in the trainer: a question's group of rollouts split into blocks of rows in
a row, one instruction each (the population draws them: `InstructionPopulation.sample`), and what the blocks change
downstream of sampling.

- Sampling sees every process's rows. A process may hold part of a question's group (without dynamic sampling a
  generation batch need not split at group boundaries), and cannot tell which block its rows fall in, so with k > 1
  the question keys of all processes are gathered, sampled once (the same list gives the same picks on every
  process) and each process keeps its own slice: TRL concatenates the processes in order, process p's rows being
  rows p*n to (p+1)*n - 1 of the generation batch, as its own `process_slice` reads them. With k = 1 every process
  samples its own rows, as before (a key's pick is the same everywhere).
- `population.baseline: instruction`: TRL forms its advantage groups of `num_generations` rows in
  `_generate_and_score_completions`, which (with a `rollout_func`) reads the attribute there and nowhere else, so the
  trainer sets it to a block's rows while TRL scores and puts it back after (`advantage_groups`). TRL's own formula,
  with its `scale_rewards` (the block's deviation, the batch's, or none), NaN rows and epsilon, then runs per block,
  for every loss type alike: they all read the advantages it returns.
- Eq. 6 gets one mean reward per block; dynamic sampling and `groups/equal_rewards` count a question as informative
  when some rows that share a baseline differ (`informative_questions`): the whole group under `baseline: question`,
  a block under `instruction` (a question whose blocks are each all-equal has zero advantage everywhere there).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence

import torch

from inspo_cli.instructions.sampling import InstructionSource, Pick, block_rows
from inspo_cli.training.dynamic_sampling import informative_groups


def sample_blocks(
    source: InstructionSource,
    keys: Sequence[str],
    step: int,
    group_size: int,
    process_index: int,
    gather: Callable[[list], list],
) -> tuple[list[Pick], int]:
    """(this process's picks, rows per block): the keys of every process gathered, sampled together, sliced back."""
    every = gather(list(keys))
    picks = source.sample(every, step, group_size=group_size)
    start = process_index * len(keys)
    return picks[start : start + len(keys)], block_rows(picks, group_size)


def informative_questions(rewards: torch.Tensor, group_size: int, baseline_rows: int) -> list[bool]:
    """Per question group of `group_size` consecutive rewards: does a non-zero advantage arise anywhere in it, i.e. do
    the rewards of some `baseline_rows` rows that share a baseline differ?"""
    flags = informative_groups(rewards, baseline_rows)
    per_question = group_size // baseline_rows
    return [any(flags[i : i + per_question]) for i in range(0, len(flags), per_question)]


@contextlib.contextmanager
def advantage_groups(trainer, rows: int):
    """TRL's advantage groups of `rows` rows while it scores a generation batch; its own count is restored after."""
    group_size = trainer.num_generations
    trainer.num_generations = rows
    try:
        yield
    finally:
        trainer.num_generations = group_size
