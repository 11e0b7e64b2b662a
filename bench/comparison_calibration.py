"""Can a table's "INSPO − Search-R1: +0.08 [−0.05, +0.21], p = 0.23" be trusted? (issue 28)

Simulated ablations with a known truth: two variants, S seeds each, the same Q questions. A run's chance to answer
question q is p_q + effect + a_(variant, seed) + g_(variant, q): how hard the question is (shared), the variant's
effect, its seed's luck (uniform within ± the seed spread) and the variant's own strength on that question (uniform
within ± the question spread), every term bounded so that every chance is in [0, 1] and the true difference over new
seeds and new questions is exactly `effect`. For each design and each of three intervals this measures how often
a 95% interval covers the true difference (0.05; it should be 95%) and how often a true difference of 0 is called
significant at 0.05 (it should be 5%):

- **inspo (the tables' method)**: `inspo_cli.ablation.compare.compare`: variance components of the seeds x
  questions table (method of moments), Welch-Satterthwaite degrees of freedom, Student's t.
- **hierarchical bootstrap**: resample seeds (paired: the same seed of both variants), then questions within each
  drawn run (paired: the same questions for both variants), B = 1000; 95% percentile interval, p from the share of
  resampled differences on the other side of 0.
- **seed t-test**: the paired t test over the S seed means (the questions' own error left out).

    python bench/comparison_calibration.py            # about 4 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from _common import ROOT, atomic_write_text, machine, update_readme_section
from scipy import stats

from inspo_cli.ablation.compare import RunScores, compare

RESULTS = ROOT / "bench" / "results" / "comparison_calibration.json"
# (seeds, seed spread, question spread): seeds alike to seeds apart, then the variants' per-question strengths
# dominating (where leaving the questions out shows)
DESIGNS = [
    (3, 0.0, 0.1),
    (3, 0.08, 0.1),
    (3, 0.15, 0.1),
    (5, 0.08, 0.1),
    (10, 0.08, 0.1),
    (3, 0.0, 0.3),
    (5, 0.03, 0.3),
]
QUESTIONS, EFFECT, RESAMPLES = 200, 0.05, 1000


def dataset(
    rng, seeds: int, seed_spread: float, question_spread: float, effect: float
) -> tuple[np.ndarray, np.ndarray]:
    """(variant, reference): seeds x questions tables of 0/1 answers; how hard a question is stays within the
    range that keeps every chance in [0, 1]."""
    margin = seed_spread + question_spread
    hardness = rng.uniform(margin, 1 - margin - EFFECT, QUESTIONS)
    tables = []
    for shift in (effect, 0.0):
        strength = rng.uniform(-question_spread, question_spread, QUESTIONS)
        luck = rng.uniform(-seed_spread, seed_spread, (seeds, 1))
        tables.append((rng.random((seeds, QUESTIONS)) < hardness + shift + strength + luck).astype(float))
    return tables[0], tables[1]


def ours(x_v: np.ndarray, x_r: np.ndarray) -> tuple[float, float, float]:
    def runs(x):
        return [
            RunScores(s, {"b": float(row.mean())}, {"b": {f"q{i}": v for i, v in enumerate(row)}})
            for s, row in enumerate(x)
        ]

    c = compare(runs(x_v), runs(x_r))
    return c.low, c.high, c.p


def bootstrap(rng, x_v: np.ndarray, x_r: np.ndarray) -> tuple[float, float, float]:
    d = x_v - x_r  # paired by seed and question
    s, q = d.shape
    seeds = rng.integers(0, s, (RESAMPLES, s))
    counts = rng.multinomial(q, [1 / q] * q, size=(RESAMPLES, s))  # questions within each drawn run
    means = np.einsum("bsq,bsq->b", counts, d[seeds]) / (s * q)
    low, high = np.percentile(means, [2.5, 97.5])
    p = min(1.0, 2 * min((means <= 0).mean(), (means >= 0).mean()))
    return float(low), float(high), float(p)


def seed_t(x_v: np.ndarray, x_r: np.ndarray) -> tuple[float, float, float]:
    d = x_v.mean(axis=1) - x_r.mean(axis=1)
    se = d.std(ddof=1) / np.sqrt(len(d))
    half = stats.t.ppf(0.975, len(d) - 1) * se
    p = float(2 * stats.t.sf(abs(d.mean()) / se, len(d) - 1)) if se > 0 else float(d.mean() == 0)
    return float(d.mean() - half), float(d.mean() + half), p


def measure(datasets: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    for seeds, spread, question_spread in DESIGNS:
        started = time.perf_counter()
        tally = {name: {"covered": 0, "false_positive": 0} for name in ("inspo", "bootstrap", "seed_t")}
        for _ in range(datasets):
            for effect, key in ((EFFECT, "covered"), (0.0, "false_positive")):
                x_v, x_r = dataset(rng, seeds, spread, question_spread, effect)
                for name, method in (
                    ("inspo", ours),
                    ("bootstrap", lambda a, b: bootstrap(rng, a, b)),
                    ("seed_t", seed_t),
                ):
                    low, high, p = method(x_v, x_r)
                    tally[name][key] += (low <= EFFECT <= high) if key == "covered" else (p < 0.05)
        rows.append(
            {
                "seeds": seeds,
                "seed_spread": spread,
                "question_spread": question_spread,
                "questions": QUESTIONS,
                "datasets": datasets,
                **{name: {k: v / datasets for k, v in t.items()} for name, t in tally.items()},
            }
        )
        print(
            f"S={seeds} seed spread ±{spread} question spread ±{question_spread}: "
            + "; ".join(
                f"{n} covers {r['covered']:.3f}, false positives {r['false_positive']:.3f}"
                for n, r in ((n, rows[-1][n]) for n in tally)
            )
            + f" ({time.perf_counter() - started:.0f} s)",
            flush=True,
        )
    return rows


def section(rows: list[dict], info: dict) -> str:
    lines = [
        "## Comparisons: are the intervals and p-values calibrated? (`python bench/comparison_calibration.py`)",
        "",
        f"{rows[0]['datasets']} simulated ablations per design (two variants, the same {QUESTIONS} questions, "
        "0/1 answers; each seed's luck uniform within ± the seed spread, each variant's strength on each "
        f"question within ± the question spread). Coverage of a true difference of {EFFECT} by the 95% interval "
        "(should be 0.95) and "
        "the share of true differences of 0 called significant at 0.05 (should be 0.05). Results: "
        "`bench/results/comparison_calibration.json`.",
        "",
        "| seeds | seed spread | question spread | inspo's t (coverage / false +) | hierarchical bootstrap | "
        "seed-only t test |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['seeds']} | ±{r['seed_spread']} | ±{r['question_spread']} | "
            + " | ".join(
                f"{r[n]['covered']:.3f} / {r[n]['false_positive']:.3f}" for n in ("inspo", "bootstrap", "seed_t")
            )
            + " |"
        )

    def span(name: str, key: str) -> str:
        values = [r[name][key] for r in rows]
        return f"{min(values):.3f}-{max(values):.3f}"

    lines += [
        "",
        f"The tables' method (`inspo_cli/ablation/compare.py`) covers {span('inspo', 'covered')} of the time "
        f"with {span('inspo', 'false_positive')} false positives. The bootstrap of seeds, then questions "
        f"({span('bootstrap', 'covered')}; {span('bootstrap', 'false_positive')}) counts each run's luck on a "
        "question twice (in the spread of the seed means and again in the question resample) and has no "
        "small-sample correction for the seeds: too wide when seeds agree, too narrow when they differ "
        "(McCullagh 2000: no resampling scheme is unbiased for crossed seeds x questions). The seed-only t "
        f"test ({span('seed_t', 'covered')}; {span('seed_t', 'false_positive')}) leaves the questions' own "
        "error out, which shows when the variants' per-question strengths dominate. "
        f"Machine: {info['cpu_cores']} cores, {info['cpu']}.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    info = machine(("numpy", "scipy"))
    rows = measure(args.datasets, args.seed)
    atomic_write_text(RESULTS, json.dumps({"machine": info, "designs": rows}, indent=2) + "\n")
    update_readme_section("comparison_calibration", section(rows, info))


if __name__ == "__main__":
    main()
