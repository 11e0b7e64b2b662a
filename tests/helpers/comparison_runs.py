"""Per-question results of runs for the comparison tests."""

from __future__ import annotations

import numpy as np

from inspo_cli.ablation.compare import RunScores


def runs_of(ems: dict[int, list[float]]) -> list[RunScores]:
    return [
        RunScores(seed, {"world": float(np.mean(a))}, {"world": {f"q{i}": x for i, x in enumerate(a)}})
        for seed, a in ems.items()
    ]
