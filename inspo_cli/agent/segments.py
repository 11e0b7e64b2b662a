"""A completion told apart by who wrote it: the loss mask's runs, and the text of each run (`run.save_rollouts`'s
rows and the evaluations' predictions.jsonl), so that a reader sees the policy's tokens and the inserted ones exactly
as the loss saw them."""

from __future__ import annotations

from collections.abc import Callable, Sequence


def mask_runs(mask: Sequence[int]) -> list[list[int]]:
    """[[value, length], ...]: the mask's runs of equal values, in order."""
    runs: list[list[int]] = []
    for value in mask:
        if runs and runs[-1][0] == value:
            runs[-1][1] += 1
        else:
            runs.append([int(value), 1])
    return runs


def segments(ids: Sequence[int], mask: Sequence[int], decode: Callable[[list[int]], str]) -> list[dict]:
    """One {"by": "policy" | "inserted", "text"} per run of the mask (1: the policy's, 0: inserted by the toolkit)."""
    out, start = [], 0
    for value, length in mask_runs(mask):
        out.append({"by": "policy" if value else "inserted", "text": decode(list(ids[start : start + length]))})
        start += length
    return out
