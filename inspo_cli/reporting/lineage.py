"""The instruction lineage of an INSPO run: every candidate, where it came from and what became of it.

    print(lineage_text(run.instructions))        # an indented tree, one line per candidate
    lineage_png(run.instructions, "lineage.png")  # the same as a picture: lifetimes, parents, weight curves

Read from instructions.jsonl (one row per candidate ever created): id, parent, proposer, step born, step pruned,
verification score and the weight after every step it was alive (eq. 6). The tree follows `parent`; the initial
population are the roots.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from inspo_cli.reporting.figures import pyplot, save_png


def _children(rows: Sequence[dict]) -> dict[str | None, list[dict]]:
    known = {r["id"] for r in rows}
    children: dict[str | None, list[dict]] = {}
    for row in rows:
        parent = row.get("parent") if row.get("parent") in known else None
        children.setdefault(parent, []).append(row)
    return children


def tree_order(rows: Sequence[dict]) -> list[tuple[int, dict]]:
    """(depth, row) in depth-first order: each candidate right after its parent's earlier children."""
    children, ordered = _children(rows), []

    def visit(row: dict, depth: int) -> None:
        ordered.append((depth, row))
        for child in children.get(row["id"], []):
            visit(child, depth + 1)

    for root in children.get(None, []):
        visit(root, 0)
    return ordered


def _describe(row: dict) -> str:
    fate = f"pruned at step {row['step_pruned']}" if row.get("step_pruned") is not None else "alive at the end"
    verified = f", verified {row['verification_score']:.3f}" if row.get("verification_score") is not None else ""
    history = row.get("weight_history") or []
    weights = f", weight {history[0][1]:.3f} -> {history[-1][1]:.3f}" if history else ", never weighted"
    return f"{row['id']} [{row['proposer']}] born at step {row['step_born']}, {fate}{verified}{weights}"


def lineage_text(rows: Sequence[dict]) -> str:
    """The tree as text; each line ends with the instruction's first 80 characters."""
    lines = []
    for depth, row in tree_order(rows):
        text = " ".join(row["text"].split())
        snippet = text[:80] + ("…" if len(text) > 80 else "")
        lines.append(f'{"    " * depth}{"└─ " if depth else ""}{_describe(row)}: "{snippet}"')
    return "\n".join(lines) + "\n"


def lineage_png(rows: Sequence[dict], path: Path, title: str = "") -> bool:
    """Top: each candidate's lifetime (born to pruned or the last step) as a bar, with a connector from its parent;
    bottom: every candidate's weight over steps. False when there are no candidates."""
    ordered = tree_order(rows)
    if not ordered:
        return False
    plt = pyplot()
    last = max(
        [s for _, r in ordered for s, _ in (r.get("weight_history") or [])] + [r["step_born"] for _, r in ordered] + [1]
    )
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(10, 3 + 0.35 * len(ordered) + 3), gridspec_kw={"height_ratios": [max(2, len(ordered)), 4]}
    )
    row_of = {row["id"]: i for i, (_, row) in enumerate(ordered)}
    for i, (_depth, row) in enumerate(ordered):
        color = colors[i % len(colors)]
        end = row["step_pruned"] if row.get("step_pruned") is not None else last
        top.plot([row["step_born"], end], [i, i], color=color, linewidth=6, solid_capstyle="butt", alpha=0.8)
        verified = f" v={row['verification_score']:.2f}" if row.get("verification_score") is not None else ""
        top.annotate(
            f"{row['id']} {row['proposer']}{verified}", (end, i), xytext=(4, -3), textcoords="offset points", fontsize=8
        )
        if row.get("parent") in row_of:
            top.annotate(
                "",
                xy=(row["step_born"], i),
                xytext=(row["step_born"], row_of[row["parent"]]),
                arrowprops={"arrowstyle": "->", "color": "grey"},
            )
        history = row.get("weight_history") or []
        if history:
            bottom.plot(
                [s for s, _ in history], [w for _, w in history], color=color, marker="o", markersize=3, label=row["id"]
            )
    top.set_yticks(range(len(ordered)), [row["id"] for _, row in ordered])
    top.invert_yaxis()
    top.set_xlim(-0.5, last + max(2, last * 0.25))
    top.set_xlabel("step (bar: alive; arrow: evolved from)")
    top.set_title(title or "Instruction lineage")
    bottom.set_xlabel("step")
    bottom.set_ylabel("weight w (eq. 6)")
    bottom.grid(alpha=0.3)
    if len(ordered) <= 12:
        bottom.legend(ncol=6, fontsize=8)
    fig.tight_layout()
    save_png(fig, path)
    plt.close(fig)
    return True
