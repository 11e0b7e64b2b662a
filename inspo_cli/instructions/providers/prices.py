"""What an optimizer call costs in US dollars, from its tokens: the recipe's price (optimizer.input_price_per_mtok and
optimizer.output_price_per_mtok), else the shipped table `prices.yaml` (dated, with its source pages), else unknown.

    price = price_for(recipe.optimizer)           # a Price, or None: unknown (an API model in no table, no fields)
    price.cost_usd(input_tokens, output_tokens)    # dollars; thinking tokens are output tokens already

The packaged local model costs nothing. An unknown price is never guessed from a neighbouring model: its calls are
recorded with `cost_usd: null`, and `unpriced_warning` says which fields to set.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from inspo_cli.config import OptimizerConfig

TABLE = Path(__file__).with_name("prices.yaml")
_SNAPSHOT = re.compile(r"-\d{8}$")  # claude-sonnet-4-20250514: a dated snapshot of claude-sonnet-4, same price


@dataclass(frozen=True)
class Price:
    """Dollars per million input and output tokens; above `long_context_above` input tokens, the long-context rates
    (for the whole call, as Gemini and Claude bill it)."""

    input_per_mtok: float
    output_per_mtok: float
    long_context_above: int | None = None
    long_input_per_mtok: float | None = None
    long_output_per_mtok: float | None = None

    def cost_usd(self, input_tokens: int, output_tokens: int) -> float:
        rates = (self.input_per_mtok, self.output_per_mtok)
        if self.long_context_above is not None and input_tokens > self.long_context_above:
            rates = (
                rates[0] if self.long_input_per_mtok is None else self.long_input_per_mtok,
                rates[1] if self.long_output_per_mtok is None else self.long_output_per_mtok,
            )
        return round((input_tokens * rates[0] + output_tokens * rates[1]) / 1_000_000, 9)


FREE = Price(0.0, 0.0)


def price_for(config: OptimizerConfig) -> Price | None:
    """The price of `config`'s calls: the recipe's fields when set, nothing for a local model, else the table's entry
    for the provider and model (or a dated snapshot of it); None when none of these knows it."""
    if config.input_price_per_mtok is not None and config.output_price_per_mtok is not None:
        return Price(config.input_price_per_mtok, config.output_price_per_mtok)
    if config.provider == "local":
        return FREE
    return table_price(config.provider, config.model)


def table_price(provider: str, model: str) -> Price | None:
    models = _table()["models"].get(provider) or {}
    entry = models.get(model) or models.get(_SNAPSHOT.sub("", model))
    if entry is None:
        return None
    long = entry.get("long_context") or {}
    return Price(
        float(entry["input"]),
        float(entry["output"]),
        long.get("above_input_tokens"),
        long.get("input"),
        long.get("output"),
    )


def unpriced_warning(config: OptimizerConfig, section: str = "optimizer") -> str:
    """The run-start warning for a model whose price nobody gave; `section`: the recipe section `config` stands for
    (the judge's, whose costs go into the evaluation's results.json)."""
    where = "optimizer_calls.jsonl and the run's summary" if section == "optimizer" else "results.json"
    return (
        f"warning: {section} {config.provider} model {config.model!r} has no price in inspo's table "
        f"(inspo_cli/instructions/providers/prices.yaml, read {_table()['read']}), so its calls' cost is recorded as "
        f"null (unknown) in {where}; set {section}.input_price_per_mtok and {section}.output_price_per_mtok (US "
        "dollars per million tokens) to record it"
    )


@functools.lru_cache(maxsize=1)
def _table() -> dict:
    import yaml

    return yaml.safe_load(TABLE.read_text(encoding="utf-8"))
