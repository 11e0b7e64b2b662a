"""The search tool: the recipe's retriever (in-process or over HTTP) behind Search-R1's `<search>` element.

Exactly what the rollout engine did before tools existed: all of a turn's queries in one retriever call, the top k
passages of each rendered as Search-R1's `Doc i(Title: ...) text` lines in an `<information>` block, an empty query
searched like any other.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from inspo_cli.agent.protocol import format_passages
from inspo_cli.agent.tools.base import Observation, Tool, ToolContext
from retriever.search import Retriever


class SearchTool(Tool):
    name = tag = "search"
    description = "Search the corpus (Wikipedia) and return the top passages for a query."
    parameters = {"type": "object", "properties": {"query": {"type": "string", "description": "what to look up"}},
                  "required": ["query"]}
    argument = "query"

    def __init__(self, retriever: Retriever | None, topk: int = 3):
        self.retriever, self.topk = retriever, topk

    def call(self, arguments: Sequence[Mapping[str, Any]]) -> list[Observation]:
        if self.retriever is None:
            raise RuntimeError("the search tool has no retriever: open one (retriever section) or drop search from "
                               "agent.tools")
        results = self.retriever.search([str(a.get(self.argument, "")) for a in arguments], k=self.topk)
        return [Observation(format_passages(passages), passage_ids=[p.id for p in passages]) for passages in results]


def build(context: ToolContext) -> Tool:
    return SearchTool(context.retriever, context.topk)
