"""Mean and 95% confidence interval over seeds: what every ablation table and CI band reports.

    summary = mean_ci([0.31, 0.35, 0.28])   # Interval(mean=0.3133, half_width=0.0874, n=3)
    str(summary)                              # "0.313 ± 0.087"

The interval is Student's t: mean ± t(0.975, n - 1) · s / √n with s the sample standard deviation (n - 1 in the
denominator), the interval seaborn's and the paper's shaded bands approximate for a handful of seeds. One seed has
no interval (half_width None, shown as "0.313 (n=1)"). No scipy: t's quantiles for 1-30 degrees of freedom are
tabulated, larger ones use the Cornish-Fisher expansion around the normal quantile (error below 1e-5).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

# t(0.975, df) for df = 1..30 (scipy.stats.t.ppf(0.975, df), 9 decimals)
_T975 = (12.706204736, 4.30265273, 3.182446305, 2.776445105, 2.570581836, 2.446911851, 2.364624252, 2.306004135,
         2.262157163, 2.228138852, 2.20098516, 2.17881283, 2.160368656, 2.144786688, 2.131449546, 2.119905299,
         2.109815578, 2.10092204, 2.093024054, 2.085963447, 2.079613845, 2.073873068, 2.06865761, 2.063898562,
         2.059538553, 2.055529439, 2.051830516, 2.048407142, 2.045229642, 2.042272456)
_Z975 = 1.959963984540054


def t_quantile_975(df: int) -> float:
    """The 97.5% quantile of Student's t with `df` degrees of freedom (the two-sided 95% critical value)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    if df <= len(_T975):
        return _T975[df - 1]
    z = _Z975
    return (z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df ** 2)
            + (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / (384 * df ** 3))


@dataclass(frozen=True)
class Interval:
    mean: float
    half_width: float | None  # None for a single value
    n: int

    @property
    def low(self) -> float | None:
        return None if self.half_width is None else self.mean - self.half_width

    @property
    def high(self) -> float | None:
        return None if self.half_width is None else self.mean + self.half_width

    def __str__(self) -> str:
        if self.half_width is None:
            return f"{self.mean:.3f} (n=1)"
        return f"{self.mean:.3f} ± {self.half_width:.3f}"

    def as_dict(self) -> dict:
        return {"mean": self.mean, "ci95": self.half_width, "low": self.low, "high": self.high, "n": self.n}


def mean_ci(values: Sequence[float]) -> Interval:
    """Mean of `values` and the half-width of its 95% t interval (None when there is one value)."""
    values = [float(v) for v in values]
    if not values:
        raise ValueError("mean_ci needs at least one value")
    n = len(values)
    mean = sum(values) / n
    if n == 1:
        return Interval(mean, None, 1)
    variance = sum((v - mean) ** 2 for v in values) / (n - 1)
    return Interval(mean, t_quantile_975(n - 1) * math.sqrt(variance / n), n)
