"""The generated pages, and writing or checking them all: what `python -m inspo_cli.docs_gen` does."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from inspo_cli.config.loader import PROJECT_ROOT
from inspo_cli.docs_gen import api, cli, faithfulness, layout, metrics, recipe, strategies
from inspo_cli.docs_gen.markdown import REGENERATE
from inspo_cli.jsonio import atomic_write_text

DOCS = PROJECT_ROOT / "docs"


class Page(NamedTuple):
    path: str  # under docs/
    markdown: Callable[[], str]


PAGES = tuple(
    Page(module.PAGE, module.markdown) for module in (recipe, cli, api, strategies, faithfulness, layout, metrics)
)


def stale(docs: Path = DOCS) -> list[str]:
    """The pages (paths under `docs`) whose file is missing or differs from what the code generates now."""
    out = []
    for page in PAGES:
        file = docs / page.path
        if not file.is_file() or file.read_text(encoding="utf-8") != page.markdown():
            out.append(page.path)
    return out


def write(docs: Path = DOCS) -> list[str]:
    """Write every page that changed; the paths written."""
    written = []
    for page in PAGES:
        file, text = docs / page.path, page.markdown()
        if not file.is_file() or file.read_text(encoding="utf-8") != text:
            atomic_write_text(file, text)  # an interrupted run leaves the old page, never half of one
            written.append(page.path)
    return written


def shown(docs: Path, path: str) -> str:
    """A page's file as messages name it: from the checkout's root when it is inside it ("docs/layout.md")."""
    file = docs / path
    return file.relative_to(PROJECT_ROOT).as_posix() if file.is_relative_to(PROJECT_ROOT) else str(file)


def stale_report(paths: list[str], docs: Path = DOCS) -> str:
    """The lines `--check` prints for stale pages: each page, then the one command that regenerates them."""
    return "\n".join([*(f"{shown(docs, path)} is stale" for path in paths), f"regenerate with: {REGENERATE}"])
