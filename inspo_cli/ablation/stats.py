"""The bands of the report's curves: the mean over seeds and a bootstrap percentile interval, within the metric's range.

    band = seed_band([0.31, 0.35, 0.28], bounds=(0.0, 1.0))   # Band(mean=0.3133, low=0.28, high=0.35, n=3)

At each training step the band is the 95% percentile interval of `scipy.stats.bootstrap` over the seeds that logged
that step (resampling seeds; fixed random state, so a report is reproducible), clipped to what the metric can be: a
rate within [0, 1], a count or length at least 0. One seed has a line and no band. With few seeds a percentile
band is narrow (three seeds give at most ten distinct resamples): it shows the spread of the seeds, and the legend
says n; the tables' intervals (`compare.py`) are the ones that carry tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

RESAMPLES = 2000


@dataclass(frozen=True)
class Band:
    mean: float
    low: float | None  # None for a single seed
    high: float | None
    n: int


def seed_band(values: Sequence[float], bounds: tuple[float | None, float | None] = (None, None)) -> Band:
    """Mean of `values` (one per seed) and the 95% bootstrap percentile interval, clipped to `bounds`."""
    from scipy import stats

    data = np.asarray([float(v) for v in values])
    if data.size == 0:
        raise ValueError("seed_band needs at least one value")
    mean = float(data.mean())
    if data.size == 1:
        return Band(mean, None, None, 1)
    if np.all(data == data[0]):
        low = high = mean
    else:
        result = stats.bootstrap(
            (data,),
            np.mean,
            confidence_level=0.95,
            n_resamples=RESAMPLES,
            method="percentile",
            random_state=np.random.default_rng(0),
            vectorized=True,
        )
        low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    lower, upper = bounds
    if lower is not None:
        low, high = max(low, lower), max(high, lower)
    if upper is not None:
        low, high = min(low, upper), min(high, upper)
    return Band(mean, low, high, int(data.size))
