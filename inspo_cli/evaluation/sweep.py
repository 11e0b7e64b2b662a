"""Retriever robustness as an axis: one policy and instruction evaluated under each retriever setting, compared
question by question with the recipe's own setting.

    sweeps = parse_sweeps(["retriever.topk=1,3,5", "retriever.index=idx/bm25,idx/dense"])
    for setting in settings(sweeps): ...                   # every combination, the first key slowest
    table = compare_settings(results, reference)           # EM and the paired difference per setting
    write_sweep(out_dir, table, sweeps)                    # sweep.json, sweep.md, sweep.png

Nothing is retrained: the same checkpoint answers the same questions, only the passages it is shown change. So a
setting's difference to the reference is paired by question: the mean over questions of (EM under the setting - EM
under the reference), with a 95% interval from Student's t over those per-question differences (n - 1 degrees of
freedom). The average over benchmarks (the paper's Avg.) is the unweighted mean of the benchmarks' differences; its
variance the sum of theirs over k^2 (their questions are independent), with the smallest benchmark's degrees of
freedom.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from inspo_cli.config.loader import override_value
from inspo_cli.errors import InspoError

SWEEPABLE = "retriever."  # what --sweep may vary: the retriever only (the policy is never retrained)
MAX_SETTINGS = 64
SWEEP_JSON, SWEEP_MD, SWEEP_PNG = "sweep.json", "sweep.md", "sweep.png"
METRIC_NAMES = {"em": "EM", "judge": "LLM judge: the mean verdict of the judged predictions"}


@dataclass(frozen=True)
class Setting:
    """One combination of swept values: ((key, value), ...) in the order the sweeps were given."""

    values: tuple[tuple[str, str], ...]

    @property
    def label(self) -> str:
        return " ".join(f"{key.removeprefix(SWEEPABLE)}={value}" for key, value in self.values)

    @property
    def folder(self) -> str:
        """A directory name for its evaluation: the label with every character a name should not hold replaced."""
        text = "_".join(f"{key.removeprefix(SWEEPABLE)}-{value}" for key, value in self.values)
        safe = "".join(c if c.isalnum() or c in "._-" else "-" for c in text).strip(".-") or "setting"
        return safe[:120]

    def overrides(self) -> list[str]:
        return [f"{key}={value}" for key, value in self.values]


def parse_sweeps(specs: Sequence[str]) -> list[tuple[str, list[str]]]:
    """--sweep KEY=V1,V2,... values: a retriever key each, at least one value, no key or value twice."""
    sweeps: list[tuple[str, list[str]]] = []
    for spec in specs:
        key, sep, raw = spec.partition("=")
        key = key.strip()
        values = [value.strip() for value in raw.split(",")]
        if not sep or not key.startswith(SWEEPABLE) or len(key) == len(SWEEPABLE):
            raise InspoError(
                f"--sweep {spec!r:.80}: give a retriever field and its values, e.g. --sweep retriever.topk=1,3,5 "
                "(only retriever fields: the policy is not retrained)"
            )
        if not all(values):
            raise InspoError(f"--sweep {spec!r:.80}: an empty value; separate the values by commas, e.g. 1,3,5")
        read = [json.dumps(override_value(f"{key}={value}"), sort_keys=True, default=str) for value in values]
        if len(set(read)) != len(read):  # as the recipe reads them: "3" and "03" are one setting
            same = " and ".join(repr(v) for v, r in zip(values, read) if read.count(r) > 1)
            raise InspoError(f"--sweep {spec!r:.80}: {same:.80} are one value as the recipe reads it; give each once")
        if any(key == other for other, _ in sweeps):
            raise InspoError(f"--sweep names {key} twice; give all its values in one --sweep")
        sweeps.append((key, values))
    count = math.prod(len(values) for _, values in sweeps)
    if count > MAX_SETTINGS:
        raise InspoError(f"--sweep makes {count} settings, more than {MAX_SETTINGS}; sweep fewer values at once")
    return sweeps


def settings(sweeps: Sequence[tuple[str, list[str]]]) -> list[Setting]:
    keys = [key for key, _ in sweeps]
    return [Setting(tuple(zip(keys, combo))) for combo in itertools.product(*(values for _, values in sweeps))]


def reference_setting(candidates: Sequence[Setting], recipe_values: dict[str, str]) -> Setting:
    """The setting closest to the recipe's own: the first of those that share the most swept values with it (the
    paper's top 3 in a paper recipe; with an index swept that the recipe names otherwise, its top-k still decides);
    the first setting when none shares any."""

    def shared(setting: Setting) -> int:
        return sum(recipe_values.get(key) == value for key, value in setting.values)

    return max(candidates, key=shared)  # max keeps the first of equals


def _t(df: float) -> float:
    from scipy import stats

    return float(stats.t.ppf(0.975, df))


def paired(reference: dict[str, float], other: dict[str, float]) -> dict:
    """The mean per-question difference other - reference over the questions both answered, with its 95% t
    interval (None with fewer than two questions)."""
    ids = sorted(set(reference) & set(other))
    diffs = [other[i] - reference[i] for i in ids]
    n = len(diffs)
    if n == 0:
        return {"diff": None, "low": None, "high": None, "n": 0, "se": None, "df": None}
    mean = sum(diffs) / n
    if n < 2:
        return {"diff": mean, "low": None, "high": None, "n": n, "se": None, "df": None}
    se = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1) / n)
    half = _t(n - 1) * se
    return {"diff": mean, "low": mean - half, "high": mean + half, "n": n, "se": se, "df": n - 1}


def _average(cells: Sequence[dict]) -> dict:
    """The unweighted mean of benchmarks' paired differences, with the variance of a sum of independent terms."""
    usable = [c for c in cells if c["diff"] is not None]
    if not usable:
        return {"diff": None, "low": None, "high": None, "n": 0, "se": None, "df": None}
    k = len(usable)
    mean = sum(c["diff"] for c in usable) / k
    if any(c["se"] is None for c in usable):
        return {"diff": mean, "low": None, "high": None, "n": sum(c["n"] for c in usable), "se": None, "df": None}
    se = math.sqrt(sum(c["se"] ** 2 for c in usable)) / k
    df = min(c["df"] for c in usable)
    half = _t(df) * se
    return {"diff": mean, "low": mean - half, "high": mean + half, "n": sum(c["n"] for c in usable), "se": se, "df": df}


def question_scores(rows: Sequence[dict], metric: str = "em") -> dict[str, dict[str, dict[str, float]]]:
    """{method: {benchmark: {question id: score}}} from an evaluation's prediction rows."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for row in rows:
        value = row.get(metric)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out.setdefault(row["method"], {}).setdefault(row["benchmark"], {})[str(row["id"])] = float(value)
    return out


def compare_settings(results: Sequence[tuple[Setting, list[dict]]], reference: Setting, metric: str = "em") -> dict:
    """Per setting and method: the metric per benchmark and on average, and the paired difference to `reference`."""
    by_setting = {setting: question_scores(rows, metric) for setting, rows in results}
    base = by_setting[reference]
    table = []
    for setting, scores in by_setting.items():
        for method, per_benchmark in scores.items():
            means = {b: sum(q.values()) / len(q) for b, q in per_benchmark.items() if q}
            diffs = {b: paired(base.get(method, {}).get(b, {}), q) for b, q in per_benchmark.items()}
            table.append(
                {
                    "setting": setting.label,
                    "values": dict(setting.values),
                    "reference": setting == reference,
                    "method": method,
                    "scores": means,
                    "scored": sum(len(q) for q in per_benchmark.values()),  # predictions with a score (a verdict)
                    "average": sum(means.values()) / len(means) if means else None,
                    "difference": diffs,
                    "average_difference": _average(list(diffs.values())),
                }
            )
    return {"metric": metric, "reference": reference.label, "rows": table}


def pct(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{100 * value:+.1f}" if signed else f"{100 * value:.1f}"


def markdown(table: dict, command: str | None, level: int = 1) -> str:
    """The table as Markdown under a heading of `level`, with the command that made it when given."""
    benchmarks = sorted({b for row in table["rows"] for b in row["scores"]})
    judge = table["metric"] == "judge"  # a setting's mean is over its own judged predictions, a difference is not
    header = ["Setting", "Method", *benchmarks, "Avg.", "Avg. - reference [95% CI]", "Questions", *(["Judged"] * judge)]
    lines = [
        f"{'#' * level} Retriever sweep ({METRIC_NAMES.get(table['metric'], table['metric'])}, %)",
        "",
        *([f"`{command}`", ""] if command else []),
        f"The same policy and instruction under each retriever setting; the reference is `{table['reference']}`. "
        "Differences are paired by question (the mean of the per-question differences, Student's t)."
        + (
            " Each setting's judge score is the mean verdict of its own judged predictions (Judged); its difference "
            "to the reference is over the questions judged under both (Questions), so it can differ from the "
            "difference of the two averages."
            if judge
            else ""
        ),
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for row in table["rows"]:
        d = row["average_difference"]
        interval = f"{pct(d['diff'], True)} [{pct(d['low'], True)}, {pct(d['high'], True)}]"
        ci = "reference" if row["reference"] else interval
        cells = [row["setting"], row["method"], *(pct(row["scores"].get(b)) for b in benchmarks), pct(row["average"])]
        judged = [str(row.get("scored", "-"))] if judge else []
        lines.append("| " + " | ".join([*cells, ci, str(d["n"]), *judged]) + " |")
    return "\n".join(lines) + "\n"


def figure(table: dict, sweeps: Sequence[tuple[str, list[str]]], path: Path) -> None:
    """The metric's average against the last swept key's values (in the order given), a line per combination of the
    other keys and method, with the paired 95% interval of each point's difference drawn around it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    last, xs = sweeps[-1][0], sweeps[-1][1]
    lines: dict[str, dict[str, dict]] = {}
    for row in table["rows"]:
        rest = " ".join(f"{k.removeprefix(SWEEPABLE)}={v}" for k, v in row["values"].items() if k != last)
        lines.setdefault(f"{rest} {row['method']}".strip(), {})[row["values"][last]] = row
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for name, points in lines.items():
        shown = [x for x in xs if x in points and points[x]["average"] is not None]
        ys = [100 * points[x]["average"] for x in shown]
        halves = [points[x]["average_difference"] for x in shown]
        err = None if any(h["low"] is None for h in halves) else [100 * (h["diff"] - h["low"]) for h in halves]
        ax.errorbar(shown, ys, yerr=err, marker="o", capsize=3, label=name)
    ax.set_xlabel(last)
    ax.set_ylabel(f"{table['metric'].upper()} (%), average over benchmarks")
    ax.set_title(f"Retriever sweep (bars: paired 95% CI vs {table['reference']})", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
