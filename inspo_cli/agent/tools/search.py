"""The search tool: the recipe's retriever (in-process or over HTTP) behind Search-R1's `<search>` element.

Exactly what the rollout engine did before tools existed: all of a turn's queries in one retriever call, the top k
passages of each rendered as Search-R1's `Doc i(Title: ...) text` lines in an `<information>` block, an empty query
searched like any other. A query the retriever refuses for what it is (`QueryRefused`: longer than a server's
`--max-query-chars`) is an error observation telling the policy so, and the turn's other queries are searched; any
other retriever failure (a server down, a wrong URL) stops the run, as it is not the policy's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from inspo_cli.agent.protocol import format_passages
from inspo_cli.agent.tools.base import Observation, Tool, ToolContext
from retriever.search import Retriever, search_each


class SearchTool(Tool):
    name = tag = "search"
    description = "Search the corpus (Wikipedia) and return the top passages for a query."
    parameters = {
        "type": "object",
        "properties": {"query": {"type": "string", "description": "what to look up"}},
        "required": ["query"],
    }
    argument = "query"

    def __init__(self, retriever: Retriever | None, topk: int = 3):
        self.retriever, self.topk = retriever, topk

    def call(self, arguments: Sequence[Mapping[str, Any]]) -> list[Observation]:
        if self.retriever is None:
            raise RuntimeError(
                "the search tool has no retriever: open one (retriever section) or drop search from agent.tools"
            )
        answers = search_each(self.retriever, [str(a.get(self.argument, "")) for a in arguments], self.topk)
        return [
            Observation(f"error: {answer}", error=True)
            if isinstance(answer, str)
            else Observation(format_passages(answer), passage_ids=[p.id for p in answer])
            for answer in answers
        ]


def build(context: ToolContext) -> Tool:
    return SearchTool(context.retriever, context.topk)
