"""A run's overview: its recipe against the paper's values, summary.json, every metric's curve with the evolutions
marked, and its figures. The page a run opens on: it imports little (the tree, the diffs and the kept rollouts are
instructions.py's and data.py's)."""

from __future__ import annotations

from typing import Any

from inspo_cli.config.paper import PAPER_VALUES, model_size, paper_value
from inspo_cli.errors import InspoError
from inspo_cli.jsonio import read_json
from inspo_cli.runs import RunDir
from inspo_cli.runs.file_shapes import DAMAGED, EVOLUTIONS_SHAPE
from inspo_cli.viewer.html import Markup, finite, json_block, note, number, page, pre, problem, table
from inspo_cli.viewer.sources import SAFE_PART, RunSource

DEFAULT_CURVES = ("reward", "em", "search/searches_per_trajectory", "completions/mean_length", "kl", "step_seconds")


def read_evolutions(run: RunDir) -> list[dict]:
    """evolutions.json, checked ([] before a run has finished, or without a population)."""
    return read_json(run.evolutions_file, EVOLUTIONS_SHAPE, DAMAGED) if run.evolutions_file.exists() else []


def _recipe_rows(source: RunSource) -> tuple[list, str]:
    recipe = source.run.recipe()
    size = model_size(recipe.model.name_or_path)
    rows = []
    for key in PAPER_VALUES:
        value: Any = recipe
        for part in key.split("."):
            value = getattr(value, part, None)
        paper = paper_value(key, size)
        if value is None or isinstance(paper, str) and not isinstance(value, str):
            continue  # a field this recipe kind has not, or a paper value that is a description, not a value
        same = value == paper or (
            isinstance(value, float)
            and isinstance(paper, (int, float))
            and abs(value - paper) <= 1e-12 * max(1.0, abs(paper))
        )
        if not same:
            rows.append((Markup("<code>{}</code>").format(key), str(value), str(paper)))
    text = source.run.recipe_file.read_text(encoding="utf-8", errors="replace")
    return rows, text


def _curves(run: RunDir, evolution_steps: list[int]) -> Markup:
    metrics = run.metrics()
    if not metrics:
        return note(f"No metrics yet ({RunDir.METRICS} is written after each step).")
    names = sorted({k for row in metrics for k, v in row.items() if k != "step" and finite(v) is not None})
    series = {
        name: [[row["step"], finite(row.get(name))] for row in metrics if finite(row.get(name)) is not None]
        for name in names
    }
    chosen = [n for n in DEFAULT_CURVES if n in series] or names[:4]
    checks = Markup("").join(
        Markup('<label><input type="checkbox" value="{}"{}> {}</label> ').format(
            n, Markup(" checked") if n in chosen else "", n
        )
        for n in names
    )
    return Markup(
        '<section class="curves"><details><summary>metrics ({} of them)</summary>'
        '<div class="metric-list">{}</div></details><div class="charts"></div>{}</section>'
    ).format(len(names), checks, json_block("curves-data", {"series": series, "evolutions": evolution_steps}))


def overview_page(source: RunSource) -> str:
    run, rid, title = source.run, source.id, source.label
    parts = []
    try:
        info = run.info()
        facts = [
            ("seed", info.get("seed")),
            ("created", info.get("created", "-")),
            ("command", " ".join(info.get("command") or [])),
            ("ablation", f"{source.variant}, seed {source.seed}" if source.variant else "-"),
        ]
        parts.append(table(("", ""), [(k, str(v)) for k, v in facts], "facts"))
    except InspoError as error:
        parts.append(problem(str(error)))
    try:
        summary = run.summary()
    except InspoError as error:
        summary = None
        parts.append(problem(str(error)))
    if summary is None:
        parts.append(note(f"Not finished: no {RunDir.SUMMARY} yet."))
    else:
        scalar = [
            (k, number(v))
            for k, v in summary.items()
            if not isinstance(v, (dict, list)) and k not in ("best_instruction",)
        ]
        evaluations = [(f"EM at step {e['step']}", number(e["em"])) for e in summary.get("evaluations") or []]
        parts.append(Markup("<h2>Summary</h2>{}").format(table((RunDir.SUMMARY, ""), scalar + evaluations)))
        parts.append(
            Markup("<h2>Best instruction ({})</h2>{}").format(
                summary.get("best_instruction_id", "-"), pre(summary["best_instruction"], "instruction")
            )
        )
    try:
        steps = sorted({e["step"] for e in read_evolutions(run)})
    except InspoError as error:
        steps = []
        parts.append(problem(str(error)))
    parts.append(Markup("<h2>Curves</h2>"))
    try:
        parts.append(_curves(run, steps))
    except InspoError as error:
        parts.append(problem(str(error)))
    if steps:
        parts.append(note(f"Evolutions (dashed lines): steps {', '.join(map(str, steps))}"))
    plots = (
        sorted(p.name for p in run.plots_dir.glob("*.png") if SAFE_PART.match(p.name)) if run.plots_dir.is_dir() else []
    )
    if plots:
        parts.append(
            Markup("<h2>Figures</h2>{}").format(
                Markup("").join(
                    Markup(
                        '<figure><img src="files/{}/{}" alt="{}" width="640"><figcaption>{}</figcaption></figure>'
                    ).format(RunDir.PLOTS, p, p, p)
                    for p in plots
                )
            )
        )
    try:
        differences, text = _recipe_rows(source)
        parts.append(Markup("<h2>Recipe</h2>"))
        parts.append(
            table(("field", "this run", "the paper's"), differences)
            if differences
            else note("Every field the paper fixes has the paper's value.")
        )
        parts.append(Markup("<details><summary>{}</summary>{}</details>").format(RunDir.RECIPE, pre(text)))
    except (InspoError, OSError) as error:
        parts.append(problem(str(error)))
    return page(title, Markup("").join(parts), 2, [], f"run/{rid}", "index.html")
