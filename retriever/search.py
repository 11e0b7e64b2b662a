"""The one seam between the agent and any search engine.

The rollout engine sees only `Retriever`: a batch of queries in, the top-k passages per query out (best
first, each with its score). In-process indexes, the HTTP client and test fakes all implement it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from retriever.corpus import Passage
from retriever.errors import QueryRefused


@runtime_checkable
class Retriever(Protocol):
    def search(self, queries: Sequence[str], k: int) -> list[list[Passage]]:
        """Top-`k` passages for each query, best first, with `Passage.score` set."""
        ...


def checked_queries(queries: Sequence[str], k: int) -> list[str]:
    """The argument checks every implementation shares: a list of queries (not one string) and k >= 1."""
    if isinstance(queries, str):
        raise TypeError("search() takes a list of queries, not one string")
    if k < 1:
        raise ValueError(f"k must be >= 1 (got {k})")
    return list(queries)


def search_each(retriever: Retriever, queries: Sequence[str], k: int) -> list[list[Passage] | str]:
    """`retriever.search(queries, k)`, with each query the retriever refuses for what it is (`QueryRefused`: longer
    than a server's `--max-query-chars`) answered by the reason instead (a string), and the others searched in one
    more request: what a policy wrote must not stop a search of the rest. Any other failure is raised."""

    answers: dict[int, list[Passage] | str] = {}
    pending = list(range(len(queries)))
    while pending:  # each round drops at least one refused query, or ends
        try:
            found = list(retriever.search([queries[i] for i in pending], k=k))
        except QueryRefused as refused:
            reasons = {pending[i]: why for i, why in refused.reasons.items() if 0 <= i < len(pending)}
            if not reasons:  # names no query of this batch: not one the caller's text can fix
                raise
            answers.update(reasons)
            pending = [i for i in pending if i not in reasons]
            continue
        if len(found) != len(pending):
            raise RuntimeError(f"the retriever answered {len(found)} result lists for {len(pending)} queries")
        answers.update(zip(pending, found))
        break
    return [answers[i] for i in range(len(queries))]
