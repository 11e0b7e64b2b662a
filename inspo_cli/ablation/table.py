"""The ablation table: one row per variant, EM per benchmark and their average, and each variant against a reference.

    table = collect(ablation, rule="best", reference=None)   # reads each run's evaluation; never loads a model
    write_table(ablation, table)   # table_files.py: ablation.md, ablation.json, ablation.csv

A run's result is its evaluation at the step `rule` picks (`results.choose_step`: App. B's checkpoint before any
reward collapse by default, or the final one), question by question where predictions were kept. A cell is a
variant's mean over its seeds with a 95% interval over seeds and questions (`compare.estimate`); "avg." is the
average over benchmarks (the paper's Avg. column). Every other variant is compared with the reference (default:
the static-instruction baseline "search-r1" when the plan has one, else the first variant without an instruction
population, else the first variant): the difference per benchmark and on the average with its interval and
p-value, a plain sentence, what was paired, and what the design could detect (80% power at alpha 0.05) and how many
seeds `target_diff` would need. A difference is always that of the two rows' cells (`compare.compare`); where the
rows average different benchmarks there is no difference of averages. Runs without a result are listed with why.
"""

from __future__ import annotations

from collections.abc import Sequence

from inspo_cli.ablation.cells import CELLS_DIR
from inspo_cli.ablation.compare import AVERAGE, Comparison, compare, estimate
from inspo_cli.ablation.cost import cost_line, run_cost, variant_cost
from inspo_cli.ablation.decompose import Variant, build, choose, has_cells
from inspo_cli.ablation.directory import ABSENT, PARTIAL, AblationDir
from inspo_cli.ablation.effects import effects
from inspo_cli.ablation.formatting import p_text, signed
from inspo_cli.ablation.plan import SEARCH_R1, PlannedRun, run_name
from inspo_cli.ablation.results import METRICS, check_one_judge, check_same_benchmarks, read_result
from inspo_cli.config import load_recipe
from inspo_cli.errors import InspoError

TARGET_DIFF = 0.05  # the difference whose seed count the power line gives, unless told another (--target-diff)
RULE_TEXT = {
    "best": "App. B's checkpoint: the final one before any reward collapse",
    "final": "each run's final checkpoint",
}


def collect(
    ablation: AblationDir,
    rule: str = "best",
    reference: str | None = None,
    target_diff: float = TARGET_DIFF,
    metric: str = "em",
) -> dict:
    plan, failures = ablation.plan, ablation.failures()
    rows, variants = [], []
    for variant in plan.variants:
        results, missing, runs, costs = [], [], [], []
        for seed in plan.seeds:
            run = PlannedRun(run_name(variant.name, seed), variant.name, seed)
            result, why = read_result(ablation.run_dir(run), seed, rule, metric)
            if result is None:
                missing.append({"run": run.name, "seed": seed, "why": _why(ablation, run, failures, why)})
            else:
                results.append(result)
                runs.append((ablation.run_dir(run), result))
                costs.append(run_cost(ablation.run_dir(run)))
        static = _static(ablation, variant.name)
        rows.append(
            {
                "variant": variant.name,
                "bars": variant.bars,
                "recipe": variant.recipe,
                "overrides": variant.overrides,
                "static": static,
                "results": results,
                "missing": missing,
                "costs": costs,
            }
        )
        variants.append(Variant(variant.name, static, runs))
    table = {"name": plan.name, "seeds": plan.seeds, **summarize(rows, rule, reference, target_diff, metric)}
    table["decompositions"] = cached_decompositions(variants, table["reference"])
    return table


def cached_decompositions(variants: list[Variant], reference: str | None) -> list[dict]:
    """The instruction x weights decomposition of each variant whose cells an earlier `inspo report --decompose`
    evaluated (`decompose`); evaluates nothing. A run whose policy cannot be found any more is left out, said."""
    if not any((run.path / CELLS_DIR).is_dir() for v in variants for run, _ in v.runs):
        return []
    found = []
    for variant, static in choose(variants, None, reference):
        try:
            ((name, against, cells),) = build([(variant, static)])
        except InspoError as error:
            found.append({"variant": variant.name, "error": str(error)})
            continue
        if has_cells(cells):
            found.append(effects(cells, name, against))
    return found


def check_reference(reference: str | None, names: Sequence[str]) -> None:
    """--reference names a variant of the table (or is left out), else a one-line error."""
    if reference is not None and reference not in names:
        raise InspoError(f"--reference {reference!r} is not a variant here; choose from {', '.join(names)}")


def default_reference(rows: Sequence[dict]) -> str:
    """The static-instruction baseline: the variant named search-r1, else the first whose recipe has no instruction
    population ("static"); else the first variant (the base recipe)."""
    for row in rows:  # "name": the variant's own name where the label adds where it is from
        if row.get("name", row["variant"]) == SEARCH_R1[0] or SEARCH_R1[0] in row.get("bars", []):
            return row["variant"]
    return next((row["variant"] for row in rows if row.get("static")), rows[0]["variant"])


def _static(ablation: AblationDir, variant: str) -> bool:
    """Whether the variant trains with one fixed instruction (no population)."""
    file = ablation.recipe_file(variant)
    try:
        return file.is_file() and not load_recipe(file, written_by_run=True).population.enabled
    except InspoError:
        return False


def summarize(
    rows: list[dict],
    rule: str,
    reference: str | None = None,
    target_diff: float = TARGET_DIFF,
    metric: str = "em",
) -> dict:
    """Fill each row ({"variant", "bars", "results": [RunResult], "missing"}) with its estimates and runs, and
    compare every row with `reference`; returns {"benchmarks", "rows", "rule", "reference", "comparisons", ...}.
    `metric` (results.METRICS) is what the results hold; the rows keep it under "em" whatever it is, and
    "metric"/"metric_label"/"metric_text" name it."""
    check_one_judge([result for row in rows for result in row["results"]])
    benchmarks: list[str] = []
    for row in rows:
        if any(r.metric != metric for r in row["results"]):  # one table, one score
            raise ValueError(f"{row['variant']}: results read in another metric than {metric!r}")
        check_same_benchmarks(row["variant"], row["results"])
        for result in row["results"]:
            benchmarks.extend(b for b in result.em if b not in benchmarks)
    names = [row["variant"] for row in rows]
    if len(set(names)) != len(names):  # comparisons are looked up by name: a second row would show the first's
        twice = sorted({name for name in names if names.count(name) > 1})
        raise InspoError(
            f"two variants are both named {', '.join(map(repr, twice))}; every variant of a table needs its own name"
        )
    check_reference(reference, names)
    reference = reference or (default_reference(rows) if rows else None)
    by_name = {row["variant"]: row for row in rows}
    for row in rows:
        results = sorted(row.pop("results"), key=lambda r: r.seed)
        scores = row["_scores"] = [r.scores() for r in results]
        row["seeds"] = sorted(s.seed for s in scores)
        row["n"] = len(scores)
        row["em"] = {
            b: estimate([s for s in scores if b in s.em], b).as_dict()
            for b in benchmarks
            if any(b in s.em for s in scores)
        }
        row["average"] = estimate(scores, AVERAGE).as_dict() if scores else None
        row["runs"] = [r.as_dict() for r in results]
        costs = row.pop("costs", None)  # per run with a result (`cost.run_cost`), where the caller read them
        row["cost"] = variant_cost(costs) if costs else None
    comparisons = []
    base = by_name.get(reference)
    for row in rows:
        if base is None or row is base or not row["_scores"] or not base["_scores"]:
            continue
        comparisons.append(_comparison(row, base, benchmarks, target_diff))
        if row["cost"] and base["cost"]:
            comparisons[-1]["cost_line"] = cost_line(
                row["variant"],
                base["variant"],
                comparisons[-1]["average"],
                row["cost"],
                base["cost"],
                METRICS[metric][0],
            )
    for row in rows:
        del row["_scores"]
    label, text = METRICS[metric]
    return {
        "metric": metric,
        "metric_label": label,
        "metric_text": text,
        "benchmarks": benchmarks,
        "rule": rule,
        "rule_text": RULE_TEXT[rule],
        "reference": reference,
        "target_diff": target_diff,
        "rows": rows,
        "comparisons": comparisons,
    }


def _comparison(row: dict, base: dict, benchmarks: list[str], target_diff: float) -> dict:
    """The row against the reference, per benchmark both have and on the average; no difference of averages when
    they average other benchmarks (it would not be the difference of their avg. cells)."""
    shared = [b for b in benchmarks if b in row["em"] and b in base["em"]]
    per_benchmark = {b: compare(row["_scores"], base["_scores"], b) for b in shared}
    own, other = _averaged(row["_scores"]), _averaged(base["_scores"])
    result = {
        "variant": row["variant"],
        "reference": base["variant"],
        "em": {b: c.as_dict() for b, c in per_benchmark.items()},
    }
    if own != other:
        why = (
            f"{row['variant']} − {base['variant']}: no difference of averages: {row['variant']} is averaged over "
            f"{', '.join(own) or 'no benchmark'}, {base['variant']} over {', '.join(other) or 'no benchmark'}"
        )
        return {**result, "average": None, "sentence": why, "power": None, "power_sentence": why}
    average = compare(row["_scores"], base["_scores"], AVERAGE)
    where = shared[0] if len(shared) == 1 else f"the average over {len(shared)} benchmarks"
    return {
        **result,
        "average": average.as_dict(),
        "sentence": sentence(row["variant"], base["variant"], where, average),
        "power": {
            "detectable": average.detectable(),
            "target_diff": target_diff,
            "seeds_needed": average.seeds_needed(target_diff),
        },
        "power_sentence": power_sentence(row["variant"], base["variant"], average, target_diff),
    }


def _averaged(scores: Sequence) -> list[str]:
    """The benchmarks a row's avg. cell is over (those every seed has), sorted."""
    return sorted(b for b in scores[0].em if all(b in s.em for s in scores)) if scores else []


def design(c: Comparison) -> str:
    seeds = f"{c.seeds[0]} seeds" if c.seeds[0] == c.seeds[1] else f"{c.seeds[0]} and {c.seeds[1]} seeds"
    return f"{seeds} × {c.n_questions} questions" if c.n_questions else f"{seeds} (question-level error unknown)"


def sentence(variant: str, reference: str, where: str, c: Comparison) -> str:
    """ "inspo − search-r1 on world: +0.080 [−0.050, +0.210], p = 0.23: not significant at 0.05 with 3 seeds × 200
    questions"."""
    head = f"{variant} − {reference} on {where}: {signed(c.diff)}"
    if c.p is None:
        return f"{head}; no interval or p-value: {c.notes[-1]}"
    verdict = "significant" if c.p < 0.05 else "not significant"
    assert c.low is not None and c.high is not None  # a p-value comes with its interval
    return (
        f"{head} [{signed(c.low)}, {signed(c.high)}], {p_text(c.p)}: {verdict} at 0.05 with "
        f"{design(c)}"
        + ("" if c.paired_seeds else " (seeds not paired)")
        + (
            f" (questions not paired on {', '.join(c.unpaired_questions)}: different questions)"
            if c.unpaired_questions
            else ""
        )
    )


def power_sentence(variant: str, reference: str, c: Comparison, target: float) -> str:
    if c.se is None:
        return f"{variant} vs {reference}: no power estimate ({c.notes[-1]})"
    detectable = c.detectable()
    found = (
        f"is ±{detectable:.3f}"
        if detectable is not None
        else "does not exist: not even all questions against none would be found"
    )
    needed = c.seeds_needed(target)
    more = (
        f"a difference of {target:g} needs {needed} seeds per variant"
        if needed is not None
        else f"no number of seeds finds a difference of {target:g} with these questions (their own error is too "
        "large): evaluate on more questions"
    )
    return (
        f"{variant} vs {reference}: with {design(c)} the smallest difference found with 80% power at α = 0.05 "
        f"{found}; {more}"
    )


def _why(ablation: AblationDir, run: PlannedRun, failures: dict[str, str], why: str | None) -> str:
    if run.name in failures:
        return f"failed: {failures[run.name]}"
    status = ablation.status(run)
    if status == ABSENT:
        return "not run"
    if status == PARTIAL:
        return "unfinished"
    return why or "no result"
