"""`open_optimizer`: the `OptimizerLM` (optimizer_lm.py) a recipe's `optimizer:` section (or the judge's, as one)
describes, with its key, client, price and record; or, with `optimizer.replay`, the record's answers alone."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from inspo_cli.errors import InspoError
from inspo_cli.instructions.providers.api_keys import read_api_key
from inspo_cli.instructions.providers.call_record import CallRecord, ReplayClient
from inspo_cli.instructions.providers.lm_clients import build_client
from inspo_cli.instructions.providers.lm_errors import ProviderClient, in_section
from inspo_cli.instructions.providers.optimizer_lm import OptimizerLM
from inspo_cli.instructions.providers.prices import price_for, unpriced_warning

if TYPE_CHECKING:
    from inspo_cli.config import OptimizerConfig

logger = logging.getLogger(__name__)


def open_optimizer(
    config: OptimizerConfig,
    *,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
    record: Path | None = None,
    section: str = "optimizer",
    client: ProviderClient | None = None,
) -> OptimizerLM:
    """The optimizer LM a recipe's `optimizer:` section describes, ready to `complete(prompt)`; with `record`, every
    call it makes is a line of that file (`call_record.py`). `section`: the recipe section `config` stands for (the
    judge's, `JudgeConfig.as_optimizer`), which its errors name; `client`: a transport to use instead of the one
    the provider names (the judge's own local model)."""
    parameters = {
        "temperature": config.temperature,
        "max_output_tokens": config.max_output_tokens,
        "thinking_budget": config.thinking_budget,
    }
    price = price_for(config)
    if config.replay is not None:  # the record answers: no key, no server, no local model
        key, client = (
            None,
            ReplayClient(Path(config.replay), config.provider, config.model, parameters, price, record=record),
        )  # from a directory of runs, this run's own calls
    else:
        try:
            key = read_api_key(config)
        except InspoError as error:
            raise InspoError(in_section(str(error), section)) from None
        client = client if client is not None else build_client(config, key)
        if price is None:  # once, as the run starts: it pays for calls whose cost it cannot say
            logger.warning("%s", unpriced_warning(config, section))
    return OptimizerLM(
        client,
        max_retries=config.max_retries,
        max_calls=config.max_calls,
        max_total_tokens=config.max_total_tokens,
        secret=key,
        sleep=sleep,
        rng=rng,
        record=None if record is None else CallRecord(record),
        parameters=parameters,
        price=price,
        section=section,
    )
