"""A scripted rollout source and the rows a round keeps, shared by the dynamic sampling tests."""

from __future__ import annotations

import torch

from inspo_cli.training.dynamic_sampling import Round


class Script:
    """A generation seam: round r's groups are informative as `plan[r]` says; each output row carries its
    (round, row) so the test can see which rows the batch kept."""

    def __init__(self, plan, group_size=2):
        self.plan, self.group_size, self.rounds, self.draws = plan, group_size, [], []

    def generate(self, rows):
        r = len(self.rounds)
        self.rounds.append(len(rows))
        flags = self.plan[r] if r < len(self.plan) else [False] * (len(rows) // self.group_size)
        assert len(flags) == len(rows) // self.group_size
        tag = torch.tensor([[r, i] for i in range(len(rows))])
        return Round({"completion_ids": tag, "advantages": torch.zeros(len(rows))}, list(flags))

    def draw(self, count, round_):
        self.draws.append((count, round_))
        return [{"prompt": f"extra{round_}.{i}"} for i in range(count)]


def one_process(values, how):
    return list(values)


def kept_rows(output):
    return [tuple(row) for row in output["completion_ids"].tolist()]
