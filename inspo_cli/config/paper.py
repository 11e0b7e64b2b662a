"""The paper's values and the faithfulness rows, read from one data file, `paper.yaml` beside this module.

    paper_value("population.size")                 # 7: what `inspo recipe check --trl` compares the recipe with
    paper_value("training.learning_rate", "3b")    # 5e-07; without a size: "5e-07 (3B) / 3e-07 (7B)"
    PAPER_VALUES["training.weight_decay"]          # "0.01 (Search-R1's code; the paper is silent)", as explain shows
    faithfulness_rows()                            # the table of docs/faithfulness.md, one FaithfulnessRow each

Everything that states what the paper (or Search-R1's code) does reads it here: docs/faithfulness.md is generated
from it (`python -m inspo_cli.docs_gen`, from `source()`), `inspo recipe explain` shows a key's paper value and
rows, and the paper column of `inspo recipe check --trl` takes its values from it. The file ships inside the
package, so an installed inspo explains the same as a checkout.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any, NamedTuple

import yaml

DATA = Path(__file__).with_name("paper.yaml")


class FaithfulnessRow(NamedTuple):
    topic: str
    paper: str  # "the paper / Search-R1"
    inspo: str  # "inspo (default)"
    why: str
    keys: tuple[str, ...]  # the recipe fields its last column names
    fields: str = ""  # that column as written (Markdown)


@functools.lru_cache(maxsize=1)
def _data() -> dict:
    return yaml.safe_load(DATA.read_text(encoding="utf-8"))


def source() -> dict:
    """paper.yaml as written: `intro`, `rows` (Markdown cells, bold included) and `paper_values`."""
    return _data()


def _shown(value: Any) -> Any:
    """A paper value as `inspo recipe explain` shows it."""
    if isinstance(value, dict) and "by_size" in value:
        return " / ".join(f"{v:g} ({k.upper()})" for k, v in value["by_size"].items())
    if isinstance(value, dict):
        shown = (
            "null"
            if value["value"] is None
            else f"{value['value']:g}"
            if isinstance(value["value"], float)
            else value["value"]
        )
        return f"{shown} ({value['note']})"
    return value


def model_size(name: str) -> str | None:
    """'3b' or '7b' for the paper's Qwen2.5 sizes (from the model name), else None."""
    match = re.search(r"(?<![\d.])([37])b\b", name.lower())
    return f"{match.group(1)}b" if match else None


def paper_value(key: str, size: str | None = None) -> Any:
    """The paper's value of recipe key `key`, as `--trl` compares it: by model size ("3b", "7b") where it depends on
    it (both, as text, without a size); a value with a note is the value alone."""
    value = _data()["paper_values"][key]
    if isinstance(value, dict) and "by_size" in value:
        return value["by_size"][size] if size else _shown(value)
    return value["value"] if isinstance(value, dict) else value


PAPER_VALUES: dict[str, Any] = {key: _shown(value) for key, value in _data()["paper_values"].items()}


def _plain(cell: str) -> str:
    return cell.replace("**", "")


@functools.lru_cache(maxsize=1)
def faithfulness_rows() -> tuple[FaithfulnessRow, ...]:
    """The rows of the faithfulness table, in order; `keys` are the recipe fields each one's last column names."""
    return tuple(
        FaithfulnessRow(
            _plain(row["topic"]),
            _plain(row["paper"]),
            _plain(row["inspo"]),
            _plain(row["why"]),
            tuple(dict.fromkeys(re.findall(r"`([a-z_]+\.[a-z_0-9]+)", row["fields"]))),
            row["fields"],
        )
        for row in _data()["rows"]
    )
