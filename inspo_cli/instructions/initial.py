"""The run's first instructions: the recipe's `population.instructions`, or those of `population.instruction_file`.

Both training (the population's start) and evaluation (a static run's instruction, a checkpoint without a saved
population) read them from here.
"""

from __future__ import annotations

import json
from pathlib import Path

from inspo_cli.config import Recipe
from inspo_cli.errors import InspoError
from inspo_cli.files import INSTRUCTION_FILE_BYTES, read_text


def initial_instructions(recipe: Recipe) -> list[str]:
    """The recipe's instructions, or those of `population.instruction_file` (plain text, or JSONL with "text")."""
    path = recipe.population.instruction_file
    if path is None:
        return list(recipe.population.instructions)
    text = read_text(path, "population.instruction_file", max_bytes=INSTRUCTION_FILE_BYTES)
    if Path(path).suffix != ".jsonl":
        return [text.strip()] if text.strip() else _empty(path)
    texts = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line).get("text")
        except (json.JSONDecodeError, AttributeError, RecursionError):
            value = None
        if not isinstance(value, str) or not value.strip():
            raise InspoError(f'{path}:{n}: each line must be a JSON object with a non-empty "text" field')
        texts.append(value)
    return texts or _empty(path)


def _empty(path) -> list[str]:
    raise InspoError(f"population.instruction_file {path} holds no instruction; write one or remove the key")
