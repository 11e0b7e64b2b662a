"""docs/reference/recipe.md: every recipe key with its type, default and help, one table per section, from the
recipe's dataclasses (`inspo_cli.config.reference.fields`, which `inspo recipe explain` prints one of)."""

from __future__ import annotations

import textwrap

from inspo_cli.config.reference import fields, format_value, sections
from inspo_cli.docs_gen.markdown import REGENERATE, cell

PAGE = "reference/recipe.md"


def _code(text: str) -> str:
    """A code span in a table cell: one line, `|` escaped for GitHub (docs/hooks/code_pipes.py undoes it)."""
    return "`" + " ".join(text.split()).replace("|", "\\|") + "`"


def markdown() -> str:
    """The whole reference: one `## section` per recipe section, a table of its keys."""
    intro = (
        "Every key of a recipe YAML file, section by section: its type, its default and what it does; a run "
        "overrides one with `--set section.key=value`. The training defaults are the paper's (INSPO §4 and "
        "App. B). This page is generated from the help text of the recipe's dataclasses "
        "(`inspo_cli/config/sections.py`, `inspo_cli/config/inspo_sections.py`) by "
        f"`{REGENERATE}`; do not edit it by hand. `inspo recipe explain FIELD` prints one entry, with the "
        "paper's value and its row of [the faithfulness table](../faithfulness.md) where there is one; "
        "`inspo recipe explain --list` lists every key with its default."
    )
    out = ["# Recipe reference", "", textwrap.fill(intro, width=116, break_long_words=False, break_on_hyphens=False)]
    entries = list(fields())
    for name, help_text, _ in sections():
        out += [
            "",
            f"## {name}",
            "",
            " ".join(help_text.split()),
            "",
            "| field | type | default | help |",
            "|---|---|---|---|",
        ]
        for entry in entries:
            if entry.key.startswith(f"{name}."):
                out.append(
                    f"| `{entry.key}` | {_code(entry.type)} | "
                    f"{_code(format_value(entry.default))} | {cell(entry.help)} |"
                )
    return "\n".join(out) + "\n"
