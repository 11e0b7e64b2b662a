"""The recipe reference: every dotted key with its type, default and help, read from the recipe's dataclasses.

    for entry in fields(): ...               # RecipeField("population.accept", "str", "beat_parent", "Which ...")
    print(explain("population.accept"))     # one key: type, default, help, the paper's value, faithfulness rows
    python -m inspo_cli.config.reference > docs/reference/recipe.md

The help is each field's `metadata["help"]` (`sections.py`, `inspo_sections.py`); the paper's values are
`PAPER_VALUES` below; the faithfulness rows are read from docs/faithfulness.md, matched by the recipe fields its
last column names. Plain functions, no typer and no torch: `inspo recipe explain` is their command line.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import re
import sys
import textwrap
from pathlib import Path
from typing import Any, Iterator, NamedTuple

from inspo_cli.config.loader import PROJECT_ROOT
from inspo_cli.config.sections import Recipe
from inspo_cli.errors import InspoError
from inspo_cli.registry import IMPORT_PATH_HINT, ORIGINS, REGISTRIES, TRAITS, Strategy

FAITHFULNESS = PROJECT_ROOT / "docs" / "faithfulness.md"
REGENERATE = "python -m inspo_cli.config.reference > docs/reference/recipe.md"

# The paper's values (App. B, §4 "Setups", App. A and C), copied from the rows `inspo recipe check --trl` compares
# (`inspo_cli.training.trl_report.appendix_b_rows`), which imports the training stack, so is not imported here;
# tests/test_recipe_explain.py keeps the two in step. Values that depend on the model size are given for both.
PAPER_VALUES: dict[str, Any] = {
    "training.steps": 300,
    "training.group_size": 5,
    "training.batch_size": 512,
    "training.mini_batch_trajectories": 256,
    "training.micro_batch_size": "8 (64 over 8 GPUs)",
    "training.learning_rate": "5e-07 (3B) / 3e-07 (7B)",
    "training.lr_scheduler": "cosine",
    "training.warmup_ratio": 0.1,
    "training.kl_beta": 0.001,
    "training.clip_epsilon": 0.2,
    "training.loss_type": "grpo",
    "training.kl_bias_correction": False,  # eq. 2: beta x k3, with no importance weight
    "training.vllm_is_correction": "off",
    "training.weight_decay": "0.01 (Search-R1's code; the paper is silent)",
    "training.entropy_coef": "0.001 (Search-R1's code; the paper is silent)",
    "training.eval_every": 100,
    "rollout.max_prompt_tokens": 4096,
    "rollout.max_tokens_per_turn": 500,
    "rollout.max_observation_tokens": 500,
    "rollout.max_turns": "4 (3B) / 6 (7B)",
    "rollout.temperature": 1.0,
    "rollout.top_p": 1.0,
    "retriever.topk": 3,
    "model.chat_template": "chat template",
    "population.size": 7,
    "population.n_parent": 1,
    "population.temperature": 0.2,
    "population.weight_window": 5,
    "population.stage": "online",
    "population.prune": True,
    "population.prune_every": 5,
    "population.evolve_every": 15,
    "population.evolve_until": 150,
    "population.proposer": "reflection",
    "population.failures_per_call": 4,
    "population.verify": True,
    "population.verify_size": 200,
    "population.verify_rollouts": 1,
    "population.candidates_per_call": 6,
    "population.max_verify_rounds": 5,
    "optimizer.model": "gemini-2.5-pro",
}


class RecipeField(NamedTuple):
    key: str  # "population.accept"
    type: str  # "str", "int | None", "list[str]"
    default: Any  # the dataclass default (a default_factory called); None shows as null
    help: str


class FaithfulnessRow(NamedTuple):
    topic: str
    paper: str  # "the paper / Search-R1"
    inspo: str  # "inspo (default)"
    why: str
    keys: tuple[str, ...]  # the recipe fields its last column names


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
        return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"
    return repr(value)


@functools.lru_cache(maxsize=1)
def faithfulness_rows(path: Path = FAITHFULNESS) -> tuple[FaithfulnessRow, ...]:
    """The rows of docs/faithfulness.md's table; none when the file is absent (an installed package)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return ()
    rows = []
    for line in text.splitlines():
        if not line.startswith("| "):
            continue
        # a cell separator has a space either side; a `|` in a cell is escaped (`\|`) or touches its text (|D_B|)
        cells = [cell.strip().replace("\\|", "|").replace("**", "")
                 for cell in re.split(r"(?<=\s)\|(?=\s)", line.strip(" |"))]
        if len(cells) != 5 or cells[0] == "topic":
            continue
        keys = tuple(dict.fromkeys(re.findall(r"`([a-z_]+\.[a-z_0-9]+)", cells[4])))
        rows.append(FaithfulnessRow(*cells[:4], keys))
    return tuple(rows)


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
        lines += ["", "  choices (inspo_cli/registry.py" + (f"; or {IMPORT_PATH_HINT}):" if registry.import_paths
                                                           else "):")]
        for name, strategy in registry.items():
            traits = "".join(f"; {trait} {getattr(strategy, trait)}" for trait in TRAITS
                             if getattr(strategy, trait) != getattr(Strategy, trait))
            lines.append(_wrap(f"{name:<{width}}  ", f"{ORIGINS[strategy.origin]}: {strategy.summary}{traits}",
                               "    "))
    for row in faithfulness_rows():
        if key in row.keys:
            lines += ["", f"  faithfulness ({_shown(FAITHFULNESS)}): {row.topic}",
                      _wrap("the paper / Search-R1: ", row.paper, "    "),
                      _wrap("inspo (default): ", row.inspo, "    "), _wrap("why: ", row.why, "    ")]
    return "\n".join(lines)


def _explain_section(name: str, entries: dict[str, RecipeField]) -> str:
    for section, help_text, _ in sections():
        if section == name:
            keys = [k for k in entries if k.startswith(f"{name}.")]
            width = max(map(len, keys))
            return "\n".join([name, _wrap("", help_text, "  "), "",
                              *(f"  {k:<{width}}  {format_value(entries[k].default)}" for k in keys)])
    same_name = [k for k in entries if k.split(".", 1)[1] == name]  # "accept" -> population.accept
    close = same_name or difflib.get_close_matches(name, list(entries), n=3, cutoff=0.6)
    hint = f" (did you mean {', '.join(close[:-1]) + ' or ' if close[1:] else ''}{close[-1]}?)" if close else ""
    raise InspoError(f"unknown recipe key {name!r}{hint}; `inspo recipe explain --list` shows all")


def _wrap(label: str, text: str, indent: str, width: int = 100) -> str:
    return textwrap.fill(" ".join(text.split()), width=width, initial_indent=indent + label,
                         subsequent_indent=indent + " " * len(label), break_long_words=False, break_on_hyphens=False)


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(PROJECT_ROOT))
    except ValueError:
        return str(path)


def _cell(text: str, code: bool = False) -> str:
    """A Markdown table cell: one line, `|` escaped; in text (not code) `<tag>` shown, not read as HTML."""
    text = " ".join(text.split()).replace("|", "\\|")
    return f"`{text}`" if code else text.replace("<", "&lt;")


def markdown_reference() -> str:
    """The whole reference as Markdown: one `## section` per recipe section, a table of its keys."""
    intro = ("Every key of a recipe YAML file, section by section: its type, its default and what it does; a run "
             "overrides one with `--set section.key=value`. The training defaults are the paper's (INSPO §4 and "
             "App. B). This page is generated from the help text of the recipe's dataclasses "
             "(`inspo_cli/config/sections.py`, `inspo_cli/config/inspo_sections.py`) by "
             f"`{REGENERATE}`; do not edit it by hand. `inspo recipe explain FIELD` prints one entry, with the "
             "paper's value and its row of [the faithfulness table](../faithfulness.md) where there is one; "
             "`inspo recipe explain --list` lists every key with its default.")
    out = ["# Recipe reference", "", textwrap.fill(intro, width=116, break_long_words=False, break_on_hyphens=False)]
    entries = list(fields())
    for name, help_text, _ in sections():
        out += ["", f"## {name}", "", " ".join(help_text.split()), "", "| field | type | default | help |",
                "|---|---|---|---|"]
        for entry in entries:
            if entry.key.startswith(f"{name}."):
                out.append(f"| `{entry.key}` | {_cell(entry.type, code=True)} | "
                           f"{_cell(format_value(entry.default), code=True)} | {_cell(entry.help)} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.stdout.buffer.write(markdown_reference().encode("utf-8"))
