"""The recipe reference: every dotted key with its type, default and help, read from the recipe's dataclasses.

    for entry in fields(): ...               # RecipeField("population.accept", "str", "beat_parent", "Which ...")
    print(explain("population.accept"))     # one key: type, default, help, the paper's value, faithfulness rows

The help is each field's `metadata["help"]` (`sections.py`, `inspo_sections.py`); the paper's values and the
faithfulness rows come from `paper.yaml` (`paper.py`), a row matched by the recipe fields its last column names.
Plain functions, no typer and no torch: `inspo recipe explain` is their command line, and docs/reference/recipe.md
is written from `fields()` by `python -m inspo_cli.docs_gen`.
"""

from __future__ import annotations

import dataclasses
import difflib
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from inspo_cli.config.loader import PROJECT_ROOT
from inspo_cli.config.paper import PAPER_VALUES, FaithfulnessRow, faithfulness_rows
from inspo_cli.config.sections import Recipe
from inspo_cli.errors import InspoError
from inspo_cli.registry import IMPORT_PATH_HINT, ORIGINS, REGISTRIES

FAITHFULNESS = PROJECT_ROOT / "docs" / "faithfulness.md"  # generated from paper.yaml
__all__ = [
    "PAPER_VALUES",
    "FaithfulnessRow",
    "RecipeField",
    "explain",
    "faithfulness_rows",
    "fields",
    "format_value",
    "sections",
]


class RecipeField(NamedTuple):
    key: str  # "population.accept"
    type: str  # "str", "int | None", "list[str]"
    default: Any  # the dataclass default (a default_factory called); None shows as null
    help: str


def sections() -> Iterator[tuple[str, str, type]]:
    """(name, help, dataclass) of each recipe section, in the recipe's order."""
    for section in dataclasses.fields(Recipe):
        yield section.name, section.metadata.get("help", ""), section.default_factory  # type: ignore[misc]


def fields() -> Iterator[RecipeField]:
    """Every dotted recipe key, section by section, in the dataclasses' order."""
    for name, _, cls in sections():
        for f in dataclasses.fields(cls):
            default = f.default_factory() if f.default is dataclasses.MISSING else f.default  # type: ignore[misc]
            type_name = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
            yield RecipeField(f"{name}.{f.name}", type_name, default, f.metadata.get("help", ""))


def format_value(value: Any, limit: int = 60) -> str:
    """A default as YAML would write it, compactly: null, true, [a, b]; long strings cut to `limit` with "…"."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_value(v, limit) for v in value) + "]"
    if isinstance(value, str):
        text = " ".join(value.split())
        if not text:
            return '""'
        return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
    return repr(value)


def explain(key: str) -> str:
    """A short plain-text block about one recipe key (or a section: its help and keys)."""
    entries = {entry.key: entry for entry in fields()}
    key = key.strip()
    if key not in entries:
        return _explain_section(key, entries)
    entry = entries[key]
    lines = [key, f"  type:     {entry.type}", f"  default:  {format_value(entry.default)}"]
    if key in PAPER_VALUES:
        lines.append(f"  paper:    {format_value(PAPER_VALUES[key])}")
    lines.append(_wrap("help:     ", entry.help, "  "))
    registry = next((r for r in REGISTRIES if r.key == key), None)
    if registry is not None:  # the strategies, one per line with where each comes from (inspo_cli.registry)
        width = max(map(len, registry))
        lines += [
            "",
            "  choices (inspo_cli/registry.py" + (f"; or {IMPORT_PATH_HINT}):" if registry.import_paths else "):"),
        ]
        for name, strategy in registry.items():
            traits = "".join(f"; {trait} {value}" for trait, value in strategy.traits().items())
            lines.append(_wrap(f"{name:<{width}}  ", f"{ORIGINS[strategy.origin]}: {strategy.summary}{traits}", "    "))
    for row in faithfulness_rows():
        if key in row.keys:
            lines += [
                "",
                f"  faithfulness ({_shown(FAITHFULNESS)}): {row.topic}",
                _wrap("the paper / Search-R1: ", row.paper, "    "),
                _wrap("inspo (default): ", row.inspo, "    "),
                _wrap("why: ", row.why, "    "),
            ]
    return "\n".join(lines)


def _explain_section(name: str, entries: dict[str, RecipeField]) -> str:
    for section, help_text, _ in sections():
        if section == name:
            keys = [k for k in entries if k.startswith(f"{name}.")]
            width = max(map(len, keys))
            return "\n".join(
                [
                    name,
                    _wrap("", help_text, "  "),
                    "",
                    *(f"  {k:<{width}}  {format_value(entries[k].default)}" for k in keys),
                ]
            )
    same_name = [k for k in entries if k.split(".", 1)[1] == name]  # "accept" -> population.accept
    close = same_name or difflib.get_close_matches(name, list(entries), n=3, cutoff=0.6)
    hint = f" (did you mean {', '.join(close[:-1]) + ' or ' if close[1:] else ''}{close[-1]}?)" if close else ""
    raise InspoError(f"unknown recipe key {name!r}{hint}; `inspo recipe explain --list` shows all")


def _wrap(label: str, text: str, indent: str, width: int = 100) -> str:
    return textwrap.fill(
        " ".join(text.split()),
        width=width,
        initial_indent=indent + label,
        subsequent_indent=indent + " " * len(label),
        break_long_words=False,
        break_on_hyphens=False,
    )


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(PROJECT_ROOT))
    except ValueError:
        return str(path)
