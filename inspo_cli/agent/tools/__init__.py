"""Tools the policy can call: the `Tool` seam, and building a recipe's `agent.tools` from the registry.

    tools = build_tools(recipe.agent.tools, ToolContext(retriever, topk=recipe.retriever.topk))
    engine = RolloutEngine(backend, retriever, tokenizer, recipe.rollout, tools=tools)

Each registered tool is one module with a `build(context) -> Tool` (`inspo_cli.registry.TOOLS`); docs/tools.md walks
through adding one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from inspo_cli.agent.tools.base import Observation, Tool, ToolContext
from inspo_cli.registry import TOOLS

if TYPE_CHECKING:
    from inspo_cli.config import Recipe
    from retriever.search import Retriever

__all__ = ["Observation", "Tool", "ToolContext", "build_tools", "recipe_tools"]


def recipe_tools(recipe: Recipe, retriever: Retriever | None) -> list[Tool]:
    """The tools of `recipe.agent.tools`, search over `retriever` with the recipe's top k."""
    return build_tools(recipe.agent.tools, ToolContext(retriever, recipe.retriever.topk))


def build_tools(names: Sequence[str], context: ToolContext) -> list[Tool]:
    """The tools `names` (registered names or import paths) built for `context`, in order."""
    tools = []
    for name in names:
        tool = TOOLS.load(name)(context)
        if not isinstance(tool, Tool):
            raise ValueError(f"tool {name}: its build() returned {type(tool).__name__}, not an "
                             "inspo_cli.agent.tools.Tool")
        tools.append(tool)
    tags = [tool.tag for tool in tools]
    if "answer" in tags or len(set(tags)) != len(tags):
        raise ValueError(f"agent.tools: the tools' tags must differ from each other and from answer (got "
                         f"{', '.join(tags)})")
    return tools
