"""Opening the retriever a recipe describes: the recipe-aware side of `retriever.open_retriever`.

Why it lives here and not in `retriever`: reading a recipe's `retriever` section (a `RetrieverConfig`) and
resolving its paths the way recipes do (relative to the working directory, else to the project) is inspo's
business; the `retriever` package stands alone and never imports `inspo_cli`. Training, evaluation and the
benchmarks all open their retriever through `open_from_config`, so a recipe means the same thing everywhere.

    from inspo_cli.retrieval import open_from_config
    search = open_from_config(recipe.retriever)      # -> a `retriever.Retriever`
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from inspo_cli.config import resolve_path
from inspo_cli.errors import InspoError
from retriever import Retriever, open_retriever

if TYPE_CHECKING:
    from inspo_cli.config import RetrieverConfig

__all__ = ["open_from_config"]


def open_from_config(config: RetrieverConfig) -> Retriever:
    """The retriever a recipe's `retriever` section describes: its server URL, its index, or BM25 over its corpus."""
    if config.kind == "http" or config.url:
        if not config.url:  # RetrieverConfig refuses this; a section changed after it was checked
            raise InspoError("retriever.url is required when kind=http; set it to the server's endpoint")
        return open_retriever(config.url, timeout_s=config.timeout_s)
    spec = config.index if config.index else config.corpus
    return open_retriever(resolve_path(spec) or spec)
