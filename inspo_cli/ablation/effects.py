"""The effects of an instruction x weights decomposition, from its evaluated cells (`decompose`), and its table.

    table = effects(plans, "inspo", "search-r1")   # {"cells": ..., "effects": [...], "per_seed": [...], ...}
    lines = markdown(table, rule_text)             # the section of a report or of ablation.md

Each effect is a weighted sum of cells, per seed and question, tested against 0 as a paired difference
(`compare.compare` against all-zero runs on the same seeds and questions): its mean is that sum of the cells' means
over the seeds whose cells were all evaluated, its interval and p those of the seeds x questions analysis. The p-values
of one decomposition are a family of tests: each is also given Holm-adjusted over the family (`p_holm`), which the
tables show; the intervals are each effect's own 95% intervals, not simultaneous ones.

Table 1's difference (total vs static) is split into an instruction share and a weights share. Changing the
instruction first (at INSPO's weights) and the weights second gives one split, the other order another whenever the
two interact; each share is the mean of its part in the two orders (the Shapley value of a two-factor change), so the
shares add up to the total and do not depend on an order.

Where some seed's run holds a distilled run (`inspo distill`), the decomposition gains the cell distilled · S, two
effects over the seeds that have it (distilled·S − trained·S, and distilled·S − trained·I*: does the student match
its teacher without I*), and the share of the instruction effect that survives without I* with Fieller's interval
(`survival`); the table says for how many seeds it is measured and why not for the others. Without one, the
decomposition is exactly what it was before distillation existed.
"""

from __future__ import annotations

from collections.abc import Sequence

from inspo_cli.ablation.cells import CELL_TEXT, DISTILLED, DISTILLED_TEXT, WEIGHTS, SeedCells
from inspo_cli.ablation.compare import Comparison, RunScores, estimate
from inspo_cli.ablation.decompose import read_cells
from inspo_cli.ablation.formatting import cell, delta_cell, signed
from inspo_cli.ablation.survival import against_zero, share
from inspo_cli.ablation.survival import text as share_text
from inspo_cli.errors import InspoError

TI, TS, II, IS, SI, SS = (
    ("trained", "evolved"),
    ("trained", "seed"),
    ("initial", "evolved"),
    ("initial", "seed"),
    ("static", "evolved"),
    ("static", "seed"),
)
# (name, what it is, {cell: weight}): each effect is the weighted sum of the cells, per seed and question
EFFECTS = (
    ("instruction | trained", "I* − S on the trained policy", {TI: 1, TS: -1}),
    ("instruction | initial", "I* − S on the initial policy", {II: 1, IS: -1}),
    ("weights | S", "trained − initial policy with S", {TS: 1, IS: -1}),
    ("weights | I*", "trained − initial policy with I*", {TI: 1, II: -1}),
    ("interaction", "(trained·I* − trained·S) − (initial·I* − initial·S)", {TI: 1, IS: 1, TS: -1, II: -1}),
    ("I* on static", "I* − S on the static baseline's policy", {SI: 1, SS: -1}),
    ("weights vs static | S", "trained·S − static·S: the two trainings' weights, both with S", {TS: 1, SS: -1}),
    ("total vs static", "trained·I* − static·S: Table 1's difference, evaluated again", {TI: 1, SS: -1}),
    (
        "instruction share",
        "½(trained·I* − trained·S) + ½(static·I* − static·S): I*'s part of the total, either order",
        {TI: 0.5, TS: -0.5, SI: 0.5, SS: -0.5},
    ),
    (
        "weights share",
        "½(trained·S − static·S) + ½(trained·I* − static·I*): the weights' part of the total, either order",
        {TS: 0.5, SS: -0.5, TI: 0.5, SI: -0.5},
    ),
)
# with a distilled run (`inspo distill`) for some seed: over the seeds that have one
DISTILLED_EFFECTS = (
    (
        "distillation | S",
        "distilled·S − trained·S: what distilling I* into the weights gained without it",
        {DISTILLED: 1, TS: -1},
    ),
    (
        "distilled vs teacher",
        "distilled·S − trained·I*: the student without I* against its teacher with it",
        {DISTILLED: 1, TI: -1},
    ),
)


def _combined(plan: SeedCells, terms: dict) -> RunScores | None:
    """The effect's per-seed scores: the weighted sum of its cells, per benchmark and question."""
    scores: list[RunScores] = []
    for key in terms:
        spec = plan.cells.get(key)
        if spec is None or spec.scores is None:
            return None
        scores.append(spec.scores)
    signs = [float(weight) for weight in terms.values()]
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


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the order given: the i-th smallest of m is multiplied by m − i (i from
    0), kept at least the one before it and at most 1; rejecting where the adjusted p < alpha keeps the chance of
    any false rejection in the family at most alpha."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted, running = [0.0] * len(p_values), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def effects(plans: Sequence[SeedCells], variant: str, static: str | None) -> dict:
    """The cells (mean over seeds with 95% intervals) and the effects (difference, interval, p), over the seeds
    whose cells were all evaluated. Reads the cells; evaluates nothing."""
    read_cells(plans)
    for plan in plans:  # the cells' means and the effects' differences must be over the same questions
        evaluated = {"·".join(k): sorted(s.scores.em) for k, s in plan.cells.items() if s.scores is not None}
        if len({tuple(v) for v in evaluated.values()}) > 1:
            shown = "; ".join(f"{cell} on {', '.join(v)}" for cell, v in evaluated.items())
            raise InspoError(
                f"--decompose: the cells of {plan.run} were evaluated on different benchmarks ({shown}); a "
                "decomposition compares cells on the same questions: evaluate the runs with one evaluation setting"
            )
    distilled = any(p.distilled or p.distilled_note for p in plans)  # else exactly as without distillation
    cells: dict[str, dict | None] = {}
    for key in list(CELL_TEXT) + ([DISTILLED] if distilled else []):
        runs = [score for p in plans if key in p.cells and (score := p.cells[key].scores) is not None]
        cells["·".join(key)] = estimate(runs).as_dict() | {"seeds": [r.seed for r in runs]} if runs else None
    effects = []
    for name, what, terms in EFFECTS + (DISTILLED_EFFECTS if distilled else ()):
        runs = [r for p in plans if (r := _combined(p, terms)) is not None]
        if not runs:
            effects.append({"effect": name, "what": what, "n": 0})
            continue
        c: Comparison = against_zero(runs)
        c.bounds = (-2.0, 2.0) if name == "interaction" else c.bounds
        effects.append({"effect": name, "what": what, **c.as_dict()})
    tested = [e for e in effects if e.get("p") is not None]
    for effect, adjusted in zip(tested, holm([float(e["p"]) for e in tested])):  # type: ignore[arg-type]
        effect["p_holm"] = adjusted
    per_seed = [
        {
            "seed": p.seed,
            "run": p.run,
            "step": p.step,
            "static_run": p.static_run,
            "cells": {
                "·".join(k): (None if s.scores is None else sum(s.scores.em.values()) / len(s.scores.em))
                for k, s in p.cells.items()
            },
        }
        for p in plans
    ]
    return {
        "variant": variant,
        "static": static,
        "cells": cells,
        "effects": effects,
        "per_seed": per_seed,
        "missing": [f"{p.run}: {s.name}" for p in plans for s in p.cells.values() if s.scores is None],
    } | ({"distilled": _distilled(plans)} if distilled else {})


def _no_distilled_run(plan: SeedCells) -> str:
    """Why a seed has no distilled run: its I* is S (nothing to distil, `inspo distill` refuses it), else not made."""
    seed, evolved = plan.cells.get(TS), plan.cells.get(TI)
    if seed is not None and evolved is not None and seed.text == evolved.text:
        return "its I* is the seed instruction S: nothing to distil (`inspo distill` refuses it)"
    return f"no distilled run (`inspo distill {plan.run}` makes one)"


def _distilled(plans: Sequence[SeedCells]) -> dict:
    """The distilled weights: which seeds they are measured for (and why not for the others), and the share of
    the instruction effect that survives without I* over those seeds (`survival.share`)."""
    pairs = [
        (n, d)
        for p in plans
        if (n := _combined(p, {DISTILLED: 1, TS: -1})) is not None and (d := _combined(p, {TI: 1, TS: -1})) is not None
    ]
    not_measured = []
    for p in plans:
        spec = p.cells.get(DISTILLED)
        if spec is None:
            why = p.distilled_note or _no_distilled_run(p)
        elif spec.scores is None:
            why = "not evaluated yet"
        elif any(p.cells.get(k) is None or p.cells[k].scores is None for k in (TS, TI)):
            why = "trained · S or trained · I* not evaluated"
        else:
            continue
        not_measured.append({"seed": p.seed, "run": p.run, "why": why})
    return {
        "seeds": [n.seed for n, _ in pairs],
        "of": len(plans),
        "runs": [{"seed": p.seed, **p.distilled} for p in plans if p.distilled],
        "not_measured": not_measured,
        "share": share([n for n, _ in pairs], [d for _, d in pairs]),
    }


def markdown(d: dict, rule_text: str) -> list[str]:
    """A decomposition as a markdown section: the cells, the effects, and the cells per seed."""
    static = d["static"]
    labels = {
        "initial": "initial policy (the recipe's model)",
        "trained": f"trained: {d['variant']}",
        "static": f"trained: {static} (static)",
    }
    lines = [
        f"## Where the gain lives: {d['variant']}, instruction × weights" + (f", beside {static}" if static else ""),
        "",
        f"EM (average over benchmarks) at {rule_text}, all cells on the same test questions and every cell "
        "evaluated here (none read from Table 1's evaluation, so trained · I* and static · S may differ from "
        "Table 1 by what the two evaluations differ in): mean over seeds ± 95% interval over seeds and "
        "questions. S: the seed instruction (the recipe's first, the static baseline's); I*: the instruction "
        "each seed's run reports (its best).",
        "",
        "| policy | with S | with I* |",
        "|---|---|---|",
    ]
    for weights in WEIGHTS:
        if weights == "static" and not static:
            continue
        lines.append(
            f"| {labels[weights]} | {cell(d['cells'].get(f'{weights}·seed'))} | "
            f"{cell(d['cells'].get(f'{weights}·evolved'))} |"
        )
        if weights == "trained" and "distilled" in d:
            lines.append(f"| distilled weights ({_measured(d)}) | {cell(d['cells'].get('distilled·seed'))} | - |")
    if "distilled" in d:
        lines += ["", _distilled_text(d)]
    tested = sum(1 for e in d["effects"] if e.get("p") is not None)
    lines += [
        "",
        f"Effects: paired differences over seeds and questions, each with its own 95% interval; p two-sided "
        f"and Holm-adjusted over the {tested} effects tested here. The two shares split the total whichever "
        "change is made first (the mean of both orders) and add up to it.",
        "",
        "| effect | difference | Δ EM [95% interval], Holm-adjusted p | seeds |",
        "|---|---|---|---|",
    ]
    for e in d["effects"]:
        if e["n"]:
            cells = [e["effect"], e["what"]]  # "instruction | trained": a pipe would split the table's cell
            shown = delta_cell({**e, "p": e.get("p_holm", e.get("p"))})
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + f" | {shown} | {e['n']} |")
    if "distilled" in d:
        lines += ["", _share_text(d["distilled"])]
    columns = {**CELL_TEXT, **({DISTILLED: DISTILLED_TEXT} if "distilled" in d else {})}
    lines += [
        "",
        "Per seed (EM, average over benchmarks):",
        "",
        "| seed | run | step | " + " | ".join(columns.values()) + " |",
        "|" + "---|" * (3 + len(columns)),
    ]
    for p in d["per_seed"]:
        values = [p["cells"].get("·".join(k)) for k in columns]
        lines.append(
            f"| {p['seed']} | {p['run']} | {p['step']} | "
            + " | ".join("-" if v is None else f"{v:.3f}" for v in values)
            + " |"
        )
    if d["missing"]:
        lines += ["", "Not evaluated yet (`inspo report --decompose` evaluates them): " + "; ".join(d["missing"])]
    return lines + [""]


def _measured(d: dict) -> str:
    """How many seeds the distilled weights were evaluated for, of how many: "2 of 3 seeds"."""
    found = d["cells"].get("·".join(DISTILLED))
    return f"{len(found['seeds']) if found else 0} of {d['distilled']['of']} seeds"


def _distilled_text(d: dict) -> str:
    """What the distilled row is, for how many seeds, and why not for the others."""
    distilled = d["distilled"]
    text = (
        f"Distilled weights: each seed's trained policy after `inspo distill` taught it to answer without I* (its "
        "weights trained on what it answered with I*, prompted with S), evaluated here with the instruction it was "
        f"taught under; measured for {_measured(d)}, and the effects and the share that involve it are over those "
        "seeds only."
    )
    other = [r for r in distilled["runs"] if not r["student_is_seed"]]
    if other:
        text += (
            " Taught under another instruction than S (their cell is evaluated with it): "
            + "; ".join(
                f"seed {r['seed']} ({r['student_instruction']!r})"
                if r["student_instruction"]
                else f"seed {r['seed']} (none)"
                for r in other
            )
            + "."
        )
    if distilled["not_measured"]:
        text += " Not measured: " + "; ".join(f"seed {m['seed']}: {m['why']}" for m in distilled["not_measured"]) + "."
    return text


def _share_text(distilled: dict) -> str:
    """The share of the instruction effect that survives without I*, with its interval or why it has none."""
    s = distilled["share"]
    head = (
        "Share of the instruction effect that survives without I*, (distilled·S − trained·S) / (trained·I* − "
        f"trained·S) over the {s['n']} seed{'s' * (s['n'] != 1)} with a distilled run"
    )
    if not s["n"]:
        return head + ": not measured."
    effect = signed(s["denominator"])
    if s["denominator_low"] is not None:
        effect += f" [{signed(s['denominator_low'])}, {signed(s['denominator_high'])}]"
    return f"{head} (the instruction effect over them: {effect}): **{share_text(s)}**" + (
        " (Fieller's 95% interval: the ratios the paired test over seeds and questions does not reject)."
        if s["low"] is not None
        else "."
    )
