"""The effects of an instruction x weights decomposition, from its evaluated cells (`decompose`), and its table.

    table = effects(plans, "inspo", "search-r1")   # {"cells": ..., "effects": [...], "per_seed": [...], ...}
    lines = markdown(table, rule_text)             # the section of a report or of ablation.md

Each effect is a sum of cells less others, per seed and question, tested against 0 as a paired difference
(`compare.compare` against all-zero runs on the same seeds and questions): its mean is the difference of the cells'
means over the seeds whose cells were all evaluated, its interval and p those of the seeds x questions analysis.
"""

from __future__ import annotations

from typing import Sequence

from inspo_cli.ablation.compare import Comparison, RunScores, compare, estimate
from inspo_cli.ablation.decompose import CELL_TEXT, WEIGHTS, SeedCells, read_cells

# (name, what it is, plus cells, minus cells): each effect is sum(plus) − sum(minus), per seed and question
EFFECTS = (
    ("instruction | trained", "I* − S on the trained policy", [("trained", "evolved")], [("trained", "seed")]),
    ("instruction | initial", "I* − S on the initial policy", [("initial", "evolved")], [("initial", "seed")]),
    ("weights | S", "trained − initial policy with S", [("trained", "seed")], [("initial", "seed")]),
    ("weights | I*", "trained − initial policy with I*", [("trained", "evolved")], [("initial", "evolved")]),
    ("interaction", "(trained·I* − trained·S) − (initial·I* − initial·S)",
     [("trained", "evolved"), ("initial", "seed")], [("trained", "seed"), ("initial", "evolved")]),
    ("I* on static", "I* − S on the static baseline's policy", [("static", "evolved")], [("static", "seed")]),
    ("weights vs static | S", "trained·S − static·S: the two trainings' weights, both with S",
     [("trained", "seed")], [("static", "seed")]),
    ("total vs static", "trained·I* − static·S: Table 1's difference = instruction | trained + weights vs static | S",
     [("trained", "evolved")], [("static", "seed")]),
)


def _combined(plan: SeedCells, plus: list, minus: list) -> RunScores | None:
    """The effect's per-seed scores: sum of the plus cells less the minus cells, per benchmark and question."""
    scores: list[RunScores] = []
    for key in (*plus, *minus):
        spec = plan.cells.get(key)
        if spec is None or spec.scores is None:
            return None
        scores.append(spec.scores)
    signs = [1.0] * len(plus) + [-1.0] * len(minus)
    benchmarks = [b for b in scores[0].em if all(b in s.em for s in scores)]
    em = {b: sum(sign * s.em[b] for sign, s in zip(signs, scores)) for b in benchmarks}
    tables = [s.questions for s in scores]
    questions: dict[str, dict[str, float]] = {}
    for b in benchmarks:
        per = [t.get(b) if t is not None else None for t in tables]
        ids = list(per[0] or {})
        if any(q is None or set(q) != set(ids) for q in per):  # some cell kept none, or answered other questions
            return RunScores(plan.seed, em, None)
        questions[b] = {i: sum(sign * q[i] for sign, q in zip(signs, per) if q is not None) for i in ids}
    return RunScores(plan.seed, em, questions)


def _zero(runs: list[RunScores]) -> list[RunScores]:
    """Runs that score 0 everywhere on the same questions: what an effect is tested against."""
    return [RunScores(r.seed, dict.fromkeys(r.em, 0.0),
                      None if r.questions is None else {b: dict.fromkeys(q, 0.0) for b, q in r.questions.items()})
            for r in runs]


def effects(plans: Sequence[SeedCells], variant: str, static: str | None) -> dict:
    """The cells (mean over seeds with 95% intervals) and the effects (difference, interval, p), over the seeds
    whose cells were all evaluated. Reads the cells; evaluates nothing."""
    read_cells(plans)
    cells: dict[str, dict | None] = {}
    for key in CELL_TEXT:
        runs = [score for p in plans if key in p.cells and (score := p.cells[key].scores) is not None]
        cells["·".join(key)] = estimate(runs).as_dict() | {"seeds": [r.seed for r in runs]} if runs else None
    effects = []
    for name, what, plus, minus in EFFECTS:
        runs = [r for p in plans if (r := _combined(p, plus, minus)) is not None]
        if not runs:
            effects.append({"effect": name, "what": what, "n": 0})
            continue
        c: Comparison = compare(runs, _zero(runs))
        c.bounds = (-2.0, 2.0) if name == "interaction" else c.bounds
        effects.append({"effect": name, "what": what, **c.as_dict()})
    per_seed = [{"seed": p.seed, "run": p.run, "step": p.step, "static_run": p.static_run,
                 "cells": {"·".join(k): (None if s.scores is None else sum(s.scores.em.values()) / len(s.scores.em))
                           for k, s in p.cells.items()}} for p in plans]
    return {"variant": variant, "static": static, "cells": cells, "effects": effects, "per_seed": per_seed,
            "missing": [f"{p.run}: {s.name}" for p in plans for s in p.cells.values() if s.scores is None]}


def markdown(d: dict, rule_text: str) -> list[str]:
    """A decomposition as a markdown section: the cells, the effects, and the cells per seed."""
    from inspo_cli.ablation.formatting import cell, delta_cell

    static = d["static"]
    labels = {"initial": "initial policy (the recipe's model)", "trained": f"trained: {d['variant']}",
              "static": f"trained: {static} (static)"}
    lines = [f"## Where the gain lives: {d['variant']}, instruction × weights"
             + (f", beside {static}" if static else ""), "",
             f"EM (average over benchmarks) at {rule_text}, all cells on the same test questions: mean over seeds "
             "± 95% interval over seeds and questions. S: the seed instruction (the recipe's first, the static "
             "baseline's); I*: the instruction each seed's run reports (its best).", "",
             "| policy | with S | with I* |", "|---|---|---|"]
    for weights in WEIGHTS:
        if weights == "static" and not static:
            continue
        lines.append(f"| {labels[weights]} | {cell(d['cells'].get(f'{weights}·seed'))} | "
                     f"{cell(d['cells'].get(f'{weights}·evolved'))} |")
    lines += ["", "Effects: paired differences over seeds and questions (95% interval, two-sided p).", "",
              "| effect | difference | Δ EM | seeds |", "|---|---|---|---|"]
    for e in d["effects"]:
        if e["n"]:
            cells = [e["effect"], e["what"]]  # "instruction | trained": a pipe would split the table's cell
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + f" | {delta_cell(e)} | {e['n']} |")
    lines += ["", "Per seed (EM, average over benchmarks):", "",
              "| seed | run | step | " + " | ".join(CELL_TEXT.values()) + " |", "|" + "---|" * (3 + len(CELL_TEXT))]
    for p in d["per_seed"]:
        values = [p["cells"].get("·".join(k)) for k in CELL_TEXT]
        lines.append(f"| {p['seed']} | {p['run']} | {p['step']} | "
                     + " | ".join("-" if v is None else f"{v:.3f}" for v in values) + " |")
    if d["missing"]:
        lines += ["", "Not evaluated yet (`inspo report --decompose` evaluates them): " + "; ".join(d["missing"])]
    return lines + [""]
