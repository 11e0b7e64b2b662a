"""Tools the policy can call: the `Tool` seam, and building a recipe's `agent.tools` from the registry.

    tools = build_tools(recipe.agent.tools, ToolContext(retriever, topk=recipe.retriever.topk))
    engine = RolloutEngine(backend, retriever, tokenizer, recipe.rollout, tools=tools)

Each registered tool is one module with a `build(context) -> Tool` (`inspo_cli.registry.TOOLS`); docs/tools.md walks
through adding one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from inspo_cli.agent.tools.base import Observation, Tool, ToolContext
from inspo_cli.errors import InspoError
from inspo_cli.registry import TOOLS

if TYPE_CHECKING:
    from inspo_cli.config import Recipe
    from retriever.search import Retriever

__all__ = ["Observation", "Tool", "ToolContext", "build_tools", "recipe_tools"]


def recipe_tools(recipe: Recipe, retriever: Retriever | None) -> list[Tool]:
    """The tools of `recipe.agent.tools`, search over `retriever` with the recipe's top k."""
    return build_tools(recipe.agent.tools, ToolContext(retriever, recipe.retriever.topk))


TAG = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")  # an element name the protocol can write and find
# Elements the protocols themselves write or read, so no tool may be called by them: the answer, the observation
# block, the reasoning, function calling's (Qwen2.5's template), and "invalid", the engine's name for a turn with no
# action (protocol.Action.kind). Compared without case: <Answer> beside <answer> would only confuse the policy.
RESERVED_TAGS = ("answer", "information", "think", "tool_call", "tool_response", "tools", "invalid")


def build_tools(names: Sequence[str], context: ToolContext) -> list[Tool]:
    """The tools `names` (registered names or import paths) built for `context`, in order; InspoError (one line)
    for a tool that does not build into a usable `Tool`."""
    tools = []
    for name in names:
        try:
            build = TOOLS.load(name)
        except ValueError as error:  # the config refuses these first; a caller that built names itself gets one line
            raise InspoError(f"agent.tools: {error}") from None
        try:
            tool = build(context)
        except InspoError:
            raise
        except Exception as error:  # a tool's own code: its failure to build is one line naming it
            raise InspoError(
                f"agent.tools: {name}: build() raised {type(error).__name__}: "
                f"{str(error).splitlines()[0][:200] if str(error) else ''}"
            ) from None
        if not isinstance(tool, Tool):
            raise InspoError(
                f"agent.tools: {name}: build() returned a {type(tool).__name__}, not an "
                "inspo_cli.agent.tools.Tool (docs/tools.md)"
            )
        for attribute in ("name", "tag", "argument", "description"):
            if not isinstance(getattr(tool, attribute, None), str) or not getattr(tool, attribute):
                raise InspoError(
                    f"agent.tools: {name}: the tool has no {attribute} (a non-empty string; docs/tools.md)"
                )
        if not TAG.match(tool.tag):
            raise InspoError(
                f"agent.tools: {name}: tag {tool.tag[:80]!r} is not an element name (letters, digits, "
                "_ and -, starting with a letter)"
            )
        if tool.tag.lower() in RESERVED_TAGS:
            raise InspoError(
                f"agent.tools: {name}: tag {tool.tag!r} is the protocol's own element; a tool's tag must "
                f"be none of {', '.join(RESERVED_TAGS)}"
            )
        tools.append(tool)
    tags = [tool.tag for tool in tools]
    names_seen = [tool.name for tool in tools]
    if len(set(tags)) != len(tags) or len(set(names_seen)) != len(names_seen):
        raise InspoError(
            f"agent.tools: the tools' names and tags must differ from each other (got names "
            f"{', '.join(names_seen)}; tags {', '.join(tags)})"
        )
    return tools
