"""A run's instruction population: the lineage as a tree (parent -> child, proposer, verification, pruned or alive,
weight over steps), every evolution's candidates with their outcome, each instruction's text with a word diff to its
parent, and links to the kept trajectories that used it."""

from __future__ import annotations

import difflib
import re

from inspo_cli.errors import InspoError
from inspo_cli.reporting.lineage import tree_order
from inspo_cli.viewer.data import RunData
from inspo_cli.viewer.html import Markup, finite, link, note, number, page, pre, problem, table
from inspo_cli.viewer.run_pages import read_evolutions
from inspo_cli.viewer.sources import RunSource


def _sparkline(history: list) -> Markup:
    points = [(s, w) for s, w in history if finite(s) is not None and finite(w) is not None]
    if len(points) < 2:
        return Markup("")
    s0, s1 = points[0][0], points[-1][0]
    lo, hi = min(w for _, w in points), max(w for _, w in points)
    xy = " ".join(
        f"{4 + 112 * (s - s0) / max(s1 - s0, 1):.1f},{20 - 16 * (w - lo) / max(hi - lo, 1e-9):.1f}" for s, w in points
    )
    return Markup(
        '<svg class="spark" width="120" height="24" role="img" aria-label="weight over steps">'
        '<polyline points="{}" fill="none" stroke="currentColor"/></svg>'
    ).format(xy)


def word_diff(parent: str, child: str) -> Markup:
    """The child's text against its parent's, word by word: deleted words struck out, inserted ones marked."""
    a, b = re.split(r"(\s+)", parent), re.split(r"(\s+)", child)
    out = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op in ("replace", "delete"):
            out.append(Markup("<del>{}</del>").format("".join(a[i1:i2])))
        if op in ("replace", "insert"):
            out.append(Markup("<ins>{}</ins>").format("".join(b[j1:j2])))
        if op == "equal":
            out.append(Markup("{}").format("".join(a[i1:i2])))
    return Markup('<pre class="diff">{}</pre>').format(Markup("").join(out))


def _fate(row: dict) -> str:
    return f"pruned at step {row['step_pruned']}" if row.get("step_pruned") is not None else "alive at the end"


def _step_stats(data: RunData) -> list:
    """(step, counts) of every readable step file, listed and looked up once for the whole page."""
    found = []
    for step in sorted(data.rollout_steps()):
        try:
            found.append((step, data.step_stats(step)))
        except InspoError:
            continue
    return found


def _used(steps: list, iid: str) -> Markup:
    links = []
    for step, stats in steps:
        if stats.instructions.get(iid):
            first = stats.pages_by_instruction[iid][0]
            links.append(
                link(
                    f"trajectories/step-{step}-{first}.html#instruction={iid}",
                    f"step {step} ({stats.instructions[iid]})",
                )
            )
    return Markup(", ").join(links) if links else Markup("none kept")


def instructions_page(source: RunSource) -> str:
    run, rid, title = source.run, source.id, source.label
    heading, crumbs = f"{title}: instructions", [(f"run/{rid}/index.html", title)]
    try:
        rows = run.instructions()
        history = read_evolutions(run)
    except InspoError as error:
        return page(heading, problem(str(error)), 2, crumbs, f"run/{rid}", "instructions.html")
    if not rows:
        return page(
            heading,
            note("No instruction population (a static-instruction run)."),
            2,
            crumbs,
            f"run/{rid}",
            "instructions.html",
        )
    data, by_id = RunData(run), {r["id"]: r for r in rows}
    steps = _step_stats(data)
    tree = []
    for depth, row in tree_order(rows):
        state = "pruned" if row.get("step_pruned") is not None else "alive"
        tree.append(
            Markup(
                '<li style="margin-left:{}em" class="{}"><a class="node" href="#{}">{}</a> [{}] born {} · {} · '
                "verified {} {}</li>"
            ).format(
                2 * depth,
                state,
                row["id"],
                row["id"],
                row["proposer"],
                row["step_born"],
                _fate(row),
                number(row.get("verification_score")),
                _sparkline(row.get("weight_history") or []),
            )
        )
    sections = []
    for _, row in tree_order(rows):
        parent = by_id.get(row.get("parent") or "")
        diff = (
            Markup("<h4>Against its parent {}</h4>{}").format(
                link(f"#{parent['id']}", parent["id"]), word_diff(parent["text"], row["text"])
            )
            if parent
            else ""
        )
        weights = ", ".join(f"{s}: {number(w)}" for s, w in row.get("weight_history") or [])
        sections.append(
            Markup(
                '<section class="instruction" id="{id}"><h3>{id} [{proposer}]</h3><p>born at step {born}, {fate}; '
                "verification score {score}; weight by step: {weights}</p>{text}{diff}<p>trajectories that used it: "
                "{used}</p></section>"
            ).format(
                id=row["id"],
                proposer=row["proposer"],
                born=row["step_born"],
                fate=_fate(row),
                score=number(row.get("verification_score")),
                weights=weights or "never weighted",
                text=pre(row["text"], "instruction"),
                diff=diff,
                used=_used(steps, row["id"]),
            )
        )
    evolution_rows = []
    for evolution in history:
        for c in evolution["candidates"]:
            made = c.get("instruction_id")
            evolution_rows.append(
                (
                    evolution["step"],
                    c.get("parent") or "-",
                    c.get("proposer", "-"),
                    link(f"#{made}", made) if made else "-",
                    number(c.get("verification_score")),
                    number(c.get("parent_score")),
                    c.get("reason", "-"),
                    Markup("<details><summary>text</summary>{}</details>").format(pre(c["text"])),
                )
            )
    body = Markup('<h2>Lineage</h2><ul class="tree">{}</ul><h2>Evolutions</h2>{}<h2>Every instruction</h2>{}').format(
        Markup("").join(tree),
        table(("step", "parent", "proposer", "became", "verified", "parent's", "outcome", "candidate"), evolution_rows)
        if evolution_rows
        else note("No evolution happened."),
        Markup("").join(sections),
    )
    return page(heading, body, 2, crumbs, f"run/{rid}", "instructions.html")
