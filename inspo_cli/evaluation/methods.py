"""The paper's inference methods behind one signature: questions in, predictions out, batched.

    method = METHODS["rag"]
    predictions = method(ctx, ["who founded Hokin Works?", ...])

`direct` and `rag` use FlashRAG's prompts (the baselines of Search-R1's and INSPO's Table 1); `agent` runs the
Search-R1 protocol with an instruction through the rollout engine; `ircot` and `search-o1` are in their own
modules. Every method reads its limits from the recipe's `rollout` section and searches through `ctx.retriever`.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

from jinja2.exceptions import TemplateError

from inspo_cli.agent import RolloutEngine
from inspo_cli.agent.protocol import format_passages
from inspo_cli.config import RolloutConfig
from inspo_cli.rewards import extract_answer
from retriever.search import Retriever

DIRECT_INSTRUCTION = "Answer the question based on your own knowledge. Only give me the answer and do not output any other words."
RAG_INSTRUCTION = ("Answer the question based on the given document. Only give me the answer and do not output any "
                   "other words.\nThe following are given documents.\n\n{reference}")


@dataclass
class Prediction:
    answer: str | None
    response: str
    searches: int = 0
    queries: list[str] = field(default_factory=list)
    retrieved: list[list[str]] = field(default_factory=list)
    stop_reason: str | None = None


@dataclass
class MethodContext:
    """What every method needs: the policy backend and its tokenizer, the retriever, and the limits."""

    backend: object  # PolicyBackend
    tokenizer: object
    retriever: Retriever
    rollout: RolloutConfig
    topk: int = 3
    chat: bool = True
    instruction: str = ""  # the agent method's instruction
    retrieval_seconds: float = 0.0

    def prompt(self, system: str, user: str, prefix: str = "") -> str:
        """A prompt whose reply starts after `prefix`: a chat turn for instruct models, plain text otherwise."""
        if not self.chat:
            return f"{system}\n\n{user}{prefix}"
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        try:
            text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        except TemplateError:  # some templates reject a system turn (they raise from the template): fold it in
            text = self.tokenizer.apply_chat_template([{"role": "user", "content": f"{system}\n\n{user}"}],
                                                      tokenize=False, add_generation_prompt=True)
        return text + prefix

    def generate(self, prompts: Sequence[str], max_new_tokens: int, stop: Sequence[str] = ()) -> list[str]:
        """Text in, text out (for the baselines; the agent works on token ids to keep them exact)."""
        if not prompts:
            return []
        encoded = [self.tokenizer(p, add_special_tokens=not self.chat)["input_ids"][-self.rollout.max_prompt_tokens:]
                   for p in prompts]
        budgets = [max(1, min(max_new_tokens, self.rollout.max_total_tokens - len(ids))) for ids in encoded]
        generations = self.backend.generate(encoded, budgets, list(stop))
        return [self.tokenizer.decode(g.token_ids, skip_special_tokens=True) for g in generations]

    def search(self, queries: Sequence[str]):
        started = time.perf_counter()
        results = self.retriever.search(list(queries), k=self.topk)
        self.retrieval_seconds += time.perf_counter() - started
        return results


_LEAD_IN = re.compile(r"^\s*(the\s+)?(final\s+)?answer(\s+to\s+(this|the)\s+question)?\b(\s+is\b\s*[:：]?|\s*[:：])\s*",
                      re.IGNORECASE)


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


def direct(ctx: MethodContext, questions: Sequence[str]) -> list[Prediction]:
    prompts = [ctx.prompt(DIRECT_INSTRUCTION, f"Question: {q}", prefix="" if ctx.chat else "\nAnswer:") for q in questions]
    responses = ctx.generate(prompts, ctx.rollout.max_tokens_per_turn, stop=["\n\n"])
    return [Prediction(short_answer(r), r) for r in responses]


def rag(ctx: MethodContext, questions: Sequence[str]) -> list[Prediction]:
    results = ctx.search(questions)
    prompts = [ctx.prompt(RAG_INSTRUCTION.format(reference=format_passages(passages)), f"Question: {q}",
                          prefix="" if ctx.chat else "\nAnswer:") for q, passages in zip(questions, results)]
    responses = ctx.generate(prompts, ctx.rollout.max_tokens_per_turn, stop=["\n\n"])
    return [Prediction(short_answer(r), r, 1, [q], [[p.id for p in passages]])
            for q, r, passages in zip(questions, responses, results)]


def agent(ctx: MethodContext, questions: Sequence[str]) -> list[Prediction]:
    engine = RolloutEngine(ctx.backend, ctx.retriever, ctx.tokenizer, ctx.rollout, topk=ctx.topk, chat=ctx.chat)
    trajectories = engine.run([ctx.instruction] * len(questions), questions)
    ctx.retrieval_seconds += engine.retrieval_seconds
    return [Prediction(t.answer, t.response, t.num_searches, t.queries, t.retrieved, t.stop_reason)
            for t in trajectories]


def _methods() -> dict[str, Callable[[MethodContext, Sequence[str]], list[Prediction]]]:
    from inspo_cli.evaluation.ircot import ircot
    from inspo_cli.evaluation.search_o1 import search_o1

    return {"direct": direct, "rag": rag, "ircot": ircot, "search-o1": search_o1, "agent": agent}


METHOD_NAMES = ("direct", "rag", "ircot", "search-o1", "agent")  # the paper's Table 1 order


def get_method(name: str):
    return _methods()[name]
