"""HTML building blocks for the viewer's pages. Every string that came from a file (anything a policy, an optimizer
or a user wrote) is escaped by markupsafe: `Markup.format` and `escape` escape their arguments unless they are
`Markup` already, so a trajectory holding `<script>` is shown as text. Links are relative, so the same page works
served by `inspo view` and opened from an `--export` folder."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from typing import Any

from markupsafe import Markup, escape

# No inline script runs (the data a page needs is a JSON <script> block, which is never executed), no request leaves
# the page's own origin: a string that escaped escaping still could not run or call out.
CSP = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; base-uri 'none'"

NAV = (
    ("index.html", "overview"),
    ("trajectories.html", "trajectories"),
    ("instructions.html", "instructions"),
    ("evals.html", "evaluations"),
)


def up(depth: int) -> str:
    """The relative path from a page `depth` folders deep back to the site's root ("" at the root)."""
    return "../" * depth


def page(
    title: str,
    body: Markup,
    depth: int,
    crumbs: Sequence[tuple[str, str]] = (),
    run_nav: str | None = None,
    current: str = "",
) -> str:
    """A whole page: `crumbs` (href from the root, label) lead back to the index; `run_nav` (a run's folder from the
    root) adds the run's tabs."""
    root = up(depth)
    trail = [Markup('<a href="{}index.html">inspo view</a>').format(root)]
    trail += [Markup('<a href="{}{}">{}</a>').format(root, href, label) for href, label in crumbs]
    tabs = Markup("")
    if run_nav is not None:
        tabs = Markup('<nav class="tabs">{}</nav>').format(
            Markup("").join(
                Markup('<a class="{}" href="{}{}/{}">{}</a>').format(
                    "on" if name == current else "", root, run_nav, name, label
                )
                for name, label in NAV
            )
        )
    return str(
        Markup(
            '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta http-equiv="Content-Security-Policy" content="{csp}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            '<title>{title} · inspo view</title><link rel="stylesheet" href="{root}static/view.css">'
            '<script defer src="{root}static/view.js"></script></head>\n'
            '<body><header><div class="trail">{trail}</div>{tabs}</header>\n<main><h1>{title}</h1>\n{body}\n</main>'
            "<footer>inspo view · read-only</footer></body></html>\n"
        ).format(csp=CSP, title=title, root=root, trail=Markup(" / ").join(trail), tabs=tabs, body=body)
    )


def link(href: str, text: Any, cls: str = "") -> Markup:
    return Markup('<a href="{}"{}>{}</a>').format(href, Markup(' class="{}"').format(cls) if cls else "", text)


def number(value: Any, digits: int = 3) -> str:
    """A figure as a table shows it: a float rounded, NaN and infinities named, anything else as text."""
    if isinstance(value, bool) or value is None:
        return "-" if value is None else str(value).lower()
    if isinstance(value, float):
        return str(value) if not math.isfinite(value) else f"{value:.{digits}f}"
    return str(value)


def table(headers: Sequence[Any], rows: Iterable[Sequence[Any]], cls: str = "") -> Markup:
    head = Markup("").join(Markup("<th>{}</th>").format(h) for h in headers)
    body = Markup("").join(
        Markup("<tr>{}</tr>").format(Markup("").join(Markup("<td>{}</td>").format(c) for c in row)) for row in rows
    )
    return Markup('<table class="{}"><thead><tr>{}</tr></thead><tbody>{}</tbody></table>').format(cls, head, body)


def json_block(element_id: str, value: Any) -> Markup:
    """Data for the page's script, as a JSON block the browser never executes: `<`, `>` and `&` are written as
    \\u escapes, so no string in it can close the block."""
    text = json.dumps(value, ensure_ascii=True, allow_nan=False, default=str)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return Markup('<script type="application/json" id="{}">{}</script>').format(element_id, Markup(text))


def finite(value: Any) -> float | None:
    """A number a JSON block can hold (NaN and infinities are not JSON): the value, or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def problem(message: str) -> Markup:
    return Markup('<p class="problem">{}</p>').format(message)


def note(message: Any) -> Markup:
    return Markup('<p class="note">{}</p>').format(message)


def pre(text: str, cls: str = "") -> Markup:
    return Markup('<pre class="{}">{}</pre>').format(cls, text)


__all__ = [
    "CSP",
    "Markup",
    "escape",
    "finite",
    "json_block",
    "link",
    "note",
    "number",
    "page",
    "pre",
    "problem",
    "table",
    "up",
]
