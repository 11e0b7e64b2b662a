"""How tables write numbers: an interval as a cell, a difference with its interval and p-value.

cell({"mean": 0.3, "ci95": 0.05, "low": 0.25, "high": 0.35})      # "0.300 ± 0.050"
delta_cell({"diff": 0.08, "low": -0.05, "high": 0.21, "p": 0.23})   # "+0.080 [−0.050, +0.210] p = 0.23"
"""

from __future__ import annotations


def signed(value: float) -> str:
    return f"{value:+.3f}".replace("-", "−")


def p_text(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}" if p < 0.1 else f"p = {p:.2f}"


def cell(interval: dict | None, plus: str = "±", missing: str = "-") -> str:
    """An interval as a table cell, e.g. "0.300 ± 0.248"; one seed's value alone; `missing` when there is none
    (LaTeX: plus="$\\pm$", missing="--")."""
    if interval is None:
        return missing
    if interval["ci95"] is None:
        return f"{interval['mean']:.3f}"
    mean, half = interval["mean"], interval["ci95"]
    if interval["low"] > mean - half + 1e-12 or interval["high"] < mean + half - 1e-12:  # clipped to [0, 1]
        return f"{mean:.3f} [{interval['low']:.3f}, {interval['high']:.3f}]"
    return f"{mean:.3f} {plus} {half:.3f}"


def delta_cell(c: dict | None) -> str:
    """A difference with its interval and p-value, e.g. "+0.080 [−0.050, +0.210] p = 0.23"."""
    if c is None:
        return "-"
    if c["p"] is None:
        return signed(c["diff"])
    return f"{signed(c['diff'])} [{signed(c['low'])}, {signed(c['high'])}] {p_text(c['p'])}"
