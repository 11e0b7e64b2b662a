"""The tool seam: what the rollout engine needs of a tool the policy can call.

    class Echo(Tool):
        name, tag = "echo", "echo"
        description = "Repeats its text."
        parameters = {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        }
        argument = "text"

        def call(self, arguments):
            return [Observation(a["text"]) for a in arguments]

    def build(context: ToolContext) -> Tool:     # what the registry (`inspo_cli.registry.TOOLS`) loads
        return Echo()

A tool is called in batches: every call the unfinished trajectories made in one turn goes to `call` at once, as every
query goes to the retriever in one request, and it answers one `Observation` per call, in order. It never raises for
a bad call: an argument it cannot use is an `Observation(..., error=True)` whose text tells the policy what was wrong
(the engine counts it beside the tool's calls, and as an invalid action). `name` is the registry's, `description` and
the JSON-schema `parameters` are what a function-calling prompt shows, `tag` is the element of the Search-R1 text
protocol (`<search> query </search>` fills the parameter `argument` with the text between the tags), and the
observation is written back by `observation_parts`: by default Search-R1's `<information>` block, whose body alone
is cut to `max_observation_tokens` (None: the recipe's `rollout.max_observation_tokens`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from inspo_cli.agent.protocol import information_parts
from retriever.search import Retriever


@dataclass(frozen=True)
class Observation:
    """One call's answer: the text the policy reads, whether the call failed, and the passages it returned (the ids
    a retrieving tool read; None for a tool that does not retrieve)."""

    text: str
    error: bool = False
    passage_ids: list[str] | None = None


@dataclass(frozen=True)
class ToolContext:
    """What building a tool may use: the recipe's retriever (opened once, shared) and its top k."""

    retriever: Retriever | None = None
    topk: int = 3


class Tool(ABC):
    name: str  # as registered and as a recipe's agent.tools names it
    tag: str  # the Search-R1 protocol's element: <tag> argument </tag>
    description: str  # one or two sentences, for a function-calling prompt
    parameters: Mapping[str, Any]  # a JSON schema of an object
    argument: str  # the parameter the Search-R1 element's text fills
    max_observation_tokens: int | None = None  # None: rollout.max_observation_tokens
    timeout_s: float | None = None  # a bound on one batch of calls, which the tool itself keeps

    @abstractmethod
    def call(self, arguments: Sequence[Mapping[str, Any]]) -> list[Observation]:
        """One observation per call, in order; a call the tool cannot carry out is an error observation."""

    def observation_parts(self, observation: Observation) -> tuple[str, str, str]:
        """(opening, body, closing) as inserted into the trajectory; only the body is cut when it is too long."""
        return information_parts(observation.text)

    def schema(self) -> dict:
        """The function-calling description of the tool (OpenAI's and the chat templates' `tools=` format)."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": dict(self.parameters)},
        }
