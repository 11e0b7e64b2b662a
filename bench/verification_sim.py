"""The verification rules of bench/verification.py, vectorised, and their simulation at the paper's |D_B|.

`decide` is `PairedComparison.joins` and `decide_sequential` is `sequential.verify_in_chunks`, over rows of
repetitions (`check_against_library` compares them with inspo_cli's on random draws); `simulate` and `curves` give
the share of verifications that admit a candidate, by its true difference from the parent, with per-question
success rates p_q ~ Beta (see bench/verification.py's docstring).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from inspo_cli.instructions.sequential import sequential_design, verify_in_chunks
from inspo_cli.instructions.verification import paired_comparison

DELTAS = (-0.10, -0.05, 0.0, 0.05, 0.10)
# (label, rollouts per question, margin in standard errors, looks: None for the fixed rule on all of D_B); the first
# is the rule the paper recipes had
RULES = (
    ("at least the parent (before)", 1, 0.0, None),
    ("paired, margin 1.0 SE", 1, 1.0, None),
    ("paired, margin 1.645 SE (default)", 1, 1.645, None),
    ("paired, margin 2.0 SE", 1, 2.0, None),
    ("paired, margin 1.645 SE, 2 rollouts", 2, 1.645, None),
    ("sequential, 4 looks, margin 1.645 SE", 1, 1.645, 4),
    ("sequential, 8 looks, margin 1.645 SE", 1, 1.645, 8),
)
SEQUENTIAL = [rule for rule in RULES if rule[3] is not None]


def shifted(p: np.ndarray, delta: float) -> np.ndarray:
    """Success rates whose mean over the questions is that of `p` plus delta (each row its own questions)."""
    mean = p.mean(axis=-1, keepdims=True)
    if delta >= 0:
        return p + delta * (1 - p) / np.maximum(1 - mean, 1e-9)
    return p * (1 + delta / np.maximum(mean, 1e-9))


def decide(candidate: np.ndarray, parent: np.ndarray, margin: float) -> np.ndarray:
    """`PairedComparison.joins`, vectorised: rows are repetitions, columns questions (per-question mean rewards)."""
    d = candidate - parent
    n = d.shape[-1]
    se = d.std(axis=-1, ddof=1) / math.sqrt(n)
    return d.mean(axis=-1) >= -margin * se - 1e-12


def decide_sequential(
    candidate: np.ndarray, parent: np.ndarray, margin: float, looks: int
) -> tuple[np.ndarray, np.ndarray]:
    """`sequential.verify_in_chunks`, vectorised over rows (questions in the order scored): (joins, the share of the
    questions each row was scored on)."""
    n = candidate.shape[-1]
    design = sequential_design(n, looks, margin)
    d = candidate - parent
    joins = np.zeros(d.shape[0], dtype=bool)
    scored = np.ones(d.shape[0])
    open_ = np.ones(d.shape[0], dtype=bool)
    for look, end in enumerate(design.ends, start=1):
        mean = d[:, :end].mean(axis=-1)
        se = d[:, :end].std(axis=-1, ddof=1) / math.sqrt(end) if end > 1 else np.zeros_like(mean)
        if look == design.looks:
            verdict, decided = mean >= -design.final_margin * se - 1e-12, np.ones_like(open_)
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                z = np.where(se > 0, mean / np.where(se > 0, se, 1), np.sign(mean) * np.inf)
            z = np.where((se == 0) & (mean == 0), 0.0, z)
            low, high = z < design.reject_below[look - 1], z > design.accept_above[look - 1]
            verdict, decided = high, low | high
        now = open_ & decided
        joins[now], scored[now] = verdict[now], end / n
        open_ &= ~decided
    return joins, scored


def judge(candidate: np.ndarray, parent: np.ndarray, rule: tuple) -> tuple[np.ndarray, np.ndarray]:
    """(joins, share of D_B scored) per row under `rule`."""
    _, _, margin, looks = rule
    if looks is None:
        return decide(candidate, parent, margin), np.ones(candidate.shape[0])
    return decide_sequential(candidate, parent, margin, looks)


def record(row: dict, key: str, candidate: np.ndarray, parent: np.ndarray, rule: tuple) -> None:
    """The share that joins under `rule`; for a sequential rule also the share of D_B scored, how often its decision
    differs from the fixed rule's (the same margin) on the same rollouts, and its share joining minus the fixed
    rule's there (paired, so with far less noise than two rates measured apart)."""
    joins, scored = judge(candidate, parent, rule)
    row[key] = float(joins.mean())
    if rule[3] is not None:
        fixed = decide(candidate, parent, rule[2])
        row.setdefault("scored", {})[key] = float(scored.mean())
        row.setdefault("differs", {})[key] = float(np.mean(joins != fixed))
        row.setdefault("excess", {})[key] = float(joins.mean() - fixed.mean())


def one_round(row: dict, copies: list[tuple[np.ndarray, np.ndarray]], sequential: bool) -> None:
    """App. C's one round: all six copies join; sequential, the share of the evolution's rollouts made (the parent
    is scored until its last copy is decided)."""
    row["one_round"] = float(np.logical_and.reduce([joins for joins, _ in copies]).mean())
    if sequential:
        shares = np.array([scored for _, scored in copies])
        row["one_round_scored"] = float(((shares.sum(axis=0) + shares.max(axis=0)) / (len(copies) + 1)).mean())


def check_against_library(rng: np.random.Generator, sequential_rng: np.random.Generator) -> None:
    """The vectorised rules are the ones evolution applies: compare on a few random draws."""
    for margin in (0.0, 1.645):
        c, p = rng.integers(0, 2, (20, 50)).astype(float), rng.integers(0, 2, (20, 50)).astype(float)
        ours = decide(c, p, margin)
        theirs = [paired_comparison(list(ci), list(pi)).joins(margin) for ci, pi in zip(c, p)]
        assert list(ours) == theirs, "bench/verification_sim.py's rule differs from inspo_cli.instructions.verification"
    rng = sequential_rng
    p = rng.integers(0, 2, (40, 200)).astype(float)
    c = np.where(rng.random(p.shape) < np.linspace(0, 0.6, 40)[:, None], rng.integers(0, 2, p.shape), p)
    c[:10] = np.clip(c[:10] - (rng.random((10, 200)) < 0.4), 0, 1)  # a few clearly worse
    for _, _, margin, looks in SEQUENTIAL:
        joins, scored = decide_sequential(c, p, margin, looks)
        for ci, pi, j, f in zip(c, p, joins, scored):

            def score(texts, questions, ci=ci, pi=pi):
                return [[float({"P": pi, "C": ci}[t][q]) for q in questions] for t in texts]

            verdict = verify_in_chunks(score, "P", ["C"], list(range(200)), margin, looks)[0]
            assert (verdict.joins, verdict.comparison.questions) == (j, round(f * 200)), (
                "bench/verification_sim.py's sequential rule differs from inspo_cli.instructions.sequential"
            )


def simulate(
    concentration: float,
    questions: int,
    repetitions: int,
    rng: np.random.Generator,
    rules: Sequence[tuple],
    mean: float = 0.45,
) -> dict:
    rows = {}
    for rule in rules:
        label, k = rule[:2]
        if math.isinf(concentration):
            p = np.full((repetitions, questions), mean)
        else:
            p = rng.beta(mean * concentration, (1 - mean) * concentration, (repetitions, questions))
        parent = rng.binomial(k, p) / k
        row: dict = {}
        for delta in DELTAS:
            record(row, f"{delta:+.2f}", rng.binomial(k, np.clip(shifted(p, delta), 0, 1)) / k, parent, rule)
        # App. C's one round: six copies of the parent verified against the same parent rollouts all join
        one_round(row, [judge(rng.binomial(k, p) / k, parent, rule) for _ in range(6)], rule[3] is not None)
        rows[label] = row
    return rows


def curves(questions: int, repetitions: int, rng: np.random.Generator, rules: Sequence[tuple]) -> dict:
    out = {}
    for rule in rules:
        label, k = rule[:2]
        points = []
        for delta in np.linspace(-0.15, 0.15, 13):
            p = rng.beta(0.45 * 2, 0.55 * 2, (repetitions, questions))
            parent = rng.binomial(k, p) / k
            candidate = rng.binomial(k, np.clip(shifted(p, float(delta)), 0, 1)) / k
            points.append((float(delta), float(judge(candidate, parent, rule)[0].mean())))
        out[label] = points
    return out
