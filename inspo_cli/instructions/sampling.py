"""Which instruction each question is rolled out with: the seam between the trainer and the population.

    source = StaticInstruction(SEARCH_R1_INSTRUCTION)
    picks = source.sample(["world:q1", "world:q2"], step=3)     # one Pick per question
    source.observe(picks, [0.4, 0.0])                           # mean group reward each pick earned
    source.end_step(3)                                          # fold the step's rewards into the weights

The trainer asks once per question *group* (all `group_size` rollouts of a question share an instruction,
so GRPO's group baseline compares like with like) and reports each group's mean reward back; with
`population.instructions_per_question` k > 1 a group is k blocks of rollouts in a row, one instruction each, and
each block's mean reward goes back to its own instruction (eq. 6 then counts blocks as groups). The static
baseline ignores the rewards; the INSPO population (`population.py`) implements the same three calls with
softmax sampling over importance weights.

Sampling must agree across processes without communication: with several GPUs, one question's group can be
split over two ranks, so a source must give the same answer for the same (step, key) on every rank (seed any
randomness from them with a stable hash, not Python's per-process `hash`).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Pick:
    instruction_id: str
    text: str


class InstructionSource(Protocol):
    def sample(self, keys: Sequence[str], step: int, group_size: int | None = None) -> list[Pick]:
        """One instruction per question key, the same on every process for the same (step, key); a question's rows
        may get several (`population.instructions_per_question`), one per block of rows in a row."""
        ...

    def observe(
        self, picks: Sequence[Pick], group_rewards: Sequence[float], categories: Sequence[str] | None = None
    ) -> None:
        """The mean reward each (question group, instruction) pair earned this step (and the question's category)."""
        ...

    def end_step(self, step: int) -> None:
        """The step is over: fold the rewards observed during it into the sampling weights."""
        ...

    def best_pick(self) -> Pick:
        """The instruction inference would use now (INSPO's I* = argmax w)."""
        ...


def question_groups(keys: Sequence[str], group_size: int | None = None) -> list[tuple[str, int]]:
    """(key, rows) per question group of `keys`: each run of consecutive equal keys, cut into `group_size` rows at
    a time when given (TRL's sampler puts a question's rollouts in a row; a question drawn twice in a row makes a
    run of two groups)."""
    groups: list[tuple[str, int]] = []
    for key in keys:
        if groups and groups[-1][0] == key and (group_size is None or groups[-1][1] < group_size):
            groups[-1] = (key, groups[-1][1] + 1)
        else:
            groups.append((key, 1))
    return groups


def block_rows(picks: Sequence[Pick], group_size: int) -> int:
    """Rows per instruction block in `picks`, whole question groups of `group_size` rows in a row: one number for
    the batch, since the population splits every group of a step alike."""
    sizes: set[int] = set()
    for start in range(0, len(picks), group_size):
        group = [pick.instruction_id for pick in picks[start : start + group_size]]
        runs, length = [], 0
        for i, instruction_id in enumerate(group):
            length += 1
            if i + 1 == len(group) or group[i + 1] != instruction_id:
                runs.append(length)
                length = 0
        sizes.update(runs)
    if len(picks) % group_size or len(sizes) != 1:
        raise RuntimeError(
            f"{len(picks)} picks in question groups of {group_size} rollouts, in blocks of {sorted(sizes)} rows: "
            "the picks must be whole groups, every block of them the same number of rows"
        )
    return sizes.pop()


def stable_random(seed: int, step: int, key: str) -> random.Random:
    """The same generator for the same (seed, step, key) in every process (Python's hash() is salted per process)."""
    digest = hashlib.sha256(f"{seed}\x00{step}\x00{key}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


class StaticInstruction:
    """Search-R1's setting: one fixed instruction for every question (the paper's main baseline)."""

    def __init__(self, text: str, instruction_id: str = "i0"):
        self.pick = Pick(instruction_id, text)

    def sample(self, keys: Sequence[str], step: int, group_size: int | None = None) -> list[Pick]:
        return [self.pick] * len(keys)

    def observe(
        self, picks: Sequence[Pick], group_rewards: Sequence[float], categories: Sequence[str] | None = None
    ) -> None:
        return None

    def end_step(self, step: int) -> None:
        return None

    def best_pick(self) -> Pick:
        return self.pick
