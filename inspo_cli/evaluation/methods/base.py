"""What every inference method shares: its signature, the context it runs in, and what it returns.

`MethodContext` carries the policy backend and its tokenizer, the retriever and the recipe's `rollout` limits;
every method reads its limits from there and searches through `ctx.search`, which times retrieval.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from jinja2.exceptions import TemplateError

from inspo_cli.config import RolloutConfig
from inspo_cli.metrics import extract_answer
from inspo_cli.policy.generation import PolicyBackend
from retriever.search import Retriever, search_each


@dataclass
class Prediction:
    answer: str | None
    response: str
    searches: int = 0
    queries: list[str] = field(default_factory=list)
    retrieved: list[list[str]] = field(default_factory=list)
    stop_reason: str | None = None
    turns: int = 0  # the agent's policy turns, and how many of them held no valid action (no tag)
    invalid_actions: int = 0
    tool_calls: dict[str, int] = field(default_factory=dict)  # the agent's calls per tool (agent.tools)
    segments: list[dict] | None = None  # the agent's completion per run of the loss mask (agent/segments.py)


class MethodTokenizer(Protocol):
    """What the methods use of a Hugging Face tokenizer."""

    def apply_chat_template(
        self, conversation: list[dict[str, str]], *, tokenize: bool, add_generation_prompt: bool
    ) -> str: ...

    def __call__(self, text: str, *, add_special_tokens: bool) -> Mapping[str, list[int]]: ...

    def decode(self, token_ids: Sequence[int], *, skip_special_tokens: bool) -> str: ...


@dataclass
class MethodContext:
    """What every method needs: the policy backend and its tokenizer, the retriever, and the limits."""

    backend: PolicyBackend
    tokenizer: MethodTokenizer
    retriever: Retriever
    rollout: RolloutConfig
    topk: int = 3
    chat: bool = True
    instruction: str = ""  # the agent method's instruction
    retrieval_seconds: float = 0.0
    tools: Sequence[Any] | None = None  # the agent's tools (agent.tools built); None: search over `retriever`
    protocol: str = "search-r1"  # how the agent calls them (agent.protocol)

    def prompt(self, system: str, user: str, prefix: str = "") -> str:
        """A prompt whose reply starts after `prefix`: a chat turn for instruct models, plain text otherwise."""
        if not self.chat:
            return f"{system}\n\n{user}{prefix}"
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        try:
            text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        except TemplateError:  # some templates reject a system turn (they raise from the template): fold it in
            text = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": f"{system}\n\n{user}"}], tokenize=False, add_generation_prompt=True
            )
        return text + prefix

    def generate(self, prompts: Sequence[str], max_new_tokens: int, stop: Sequence[str] = ()) -> list[str]:
        """Text in, text out (for the baselines; the agent works on token ids to keep them exact)."""
        if not prompts:
            return []
        encoded = [
            self.tokenizer(p, add_special_tokens=not self.chat)["input_ids"][-self.rollout.max_prompt_tokens :]
            for p in prompts
        ]
        budgets = [max(1, min(max_new_tokens, self.rollout.max_total_tokens - len(ids))) for ids in encoded]
        generations = self.backend.generate(encoded, budgets, list(stop))
        return [self.tokenizer.decode(g.token_ids, skip_special_tokens=True) for g in generations]

    def search(self, queries: Sequence[str]):
        started = time.perf_counter()
        # a query the model wrote that the retriever refuses (too long for the server) finds nothing; the rest
        # are searched: what a policy writes never stops an evaluation
        results = [
            [] if isinstance(found, str) else found for found in search_each(self.retriever, list(queries), self.topk)
        ]
        self.retrieval_seconds += time.perf_counter() - started
        return results


class Method(Protocol):
    """An inference method: one prediction per question, generated in batches through `ctx`."""

    def __call__(self, ctx: MethodContext, questions: Sequence[str]) -> list[Prediction]: ...


_LEAD_IN = re.compile(
    r"^\s*(the\s+)?(final\s+)?answer(\s+to\s+(this|the)\s+question)?\b(\s+is\b\s*[:：]?|\s*[:：])\s*", re.IGNORECASE
)


def short_answer(response: str) -> str | None:
    """An `<answer>` if there is one, else the first non-empty line without an "Answer:"-style lead-in.

    FlashRAG scores the raw output; small models often write "The answer is: X", so the lead-in is dropped.
    """
    tagged = extract_answer(response)
    if tagged is not None:
        return tagged
    for line in response.splitlines():
        line = _LEAD_IN.sub("", line, count=1).strip().strip('"').strip()
        if line:
            return line
    return None
