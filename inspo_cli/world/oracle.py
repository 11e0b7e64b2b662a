"""Oracle trajectories for the synthetic world: what a policy that searches well would write.

Every world question carries `searches`, one query per hop, naming only what the question names or what an earlier
hop's passage reveals (the bridge entity, the year of a birth), and `supporting_ids`, the passages that hold each
hop's fact; an arithmetic question also its `calculation`. The oracle writes, turn by turn, `<search> query
</search>` for each hop, then (with the calculator among the agent's tools) `<calculate> calculation </calculate>`,
and then `<answer> gold </answer>` (with `agent.protocol: function-calling`, each call as a `<tool_call>`
instead); the rollout engine runs those turns exactly as it runs a policy's (the recipe's
retriever answers each search, observations are inserted, cut and masked out of the loss), so the result is token
for token a trajectory the policy could have produced. A trajectory is kept only if it is grounded: every supporting
passage was among the retrieved ones and (except for comparisons, whose answer is named in the question) the answer
is in the observations as they were cut to `rollout.max_observation_tokens`; an arithmetic trajectory when both
years were in its observations (in whichever passages) and the calculator computed it.

    trajectories = oracle_trajectories(engine, instruction, questions)   # [(question key, Trajectory)]
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from inspo_cli.agent.rollout import RolloutEngine
from inspo_cli.errors import InspoError
from inspo_cli.metrics import normalize_answer
from inspo_cli.policy.generation import Generation

if TYPE_CHECKING:
    from inspo_cli.agent.rollout import Trajectory


def oracle_turns(
    write_call, search, searches: Sequence[str], answer: str, calculation: tuple[str | None, object] | None = None
) -> list[str]:
    """The oracle's turns, each call written by `write_call(tool, argument)` (the agent's protocol): a call of the
    `search` tool per hop, then (an arithmetic question, with the calculator: `calculation` is (its expression, the
    calculator tool)) the calculation, then the answer."""
    turns = [write_call(search, query) for query in searches]
    if calculation and calculation[0]:
        expression, calculator = calculation
        turns.append(write_call(calculator, expression))
    return turns + [f"<answer> {answer} </answer>"]


class OraclePolicy:
    """A policy backend that writes scripted turns: for the context that starts with prompt P, the next of P's
    turns (one per call, in order). Prompts must be distinct."""

    def __init__(self, tokenizer, scripts: dict[tuple[int, ...], list[str]]):
        self.tokenizer = tokenizer
        self.scripts = {
            prompt: [tokenizer(t, add_special_tokens=False)["input_ids"] for t in turns]
            for prompt, turns in scripts.items()
        }
        self.lengths = sorted({len(prompt) for prompt in scripts})
        self.turn: Counter[tuple[int, ...]] = Counter()

    def _prompt(self, context: Sequence[int]) -> tuple[int, ...]:
        for n in self.lengths:
            prompt = tuple(context[:n])
            if prompt in self.scripts:
                return prompt
        raise KeyError("a context that starts with none of the oracle's prompts")

    def generate(self, contexts, max_new_tokens, stop=()) -> list[Generation]:
        out = []
        for context, budget in zip(contexts, max_new_tokens):
            prompt = self._prompt(context)
            turns = self.scripts[prompt]
            ids = turns[min(self.turn[prompt], len(turns) - 1)]
            self.turn[prompt] += 1
            out.append(Generation(list(ids[:budget]), "stop" if len(ids) <= budget else "length"))
        return out

    def generating_with(self, model):
        return contextlib.nullcontext()  # scripted: no weights


def oracle_trajectories(engine, instruction: str, questions) -> list[tuple[str, Trajectory]]:
    """(question key, trajectory) for every world question whose oracle trajectory is grounded and fits the
    recipe's limits (`rollout.max_turns` >= its hops, `max_total_tokens`)."""

    missing = [q.key for q in questions if "searches" not in q.metadata or "supporting_ids" not in q.metadata]
    if missing:
        raise InspoError(
            f"data.trajectories=world-oracle needs world questions with searches and supporting_ids; "
            f"{missing[0]} has none (data.train must be the world: regenerate it with "
            "`inspo data world --out DIR --force` if it predates oracle searches)"
        )
    prompts, scripts = [], {}
    # an arithmetic question's calculation goes to the calculator when the agent has it; without it, its trajectory
    # answers after the searches and is kept only if the answer is in what was retrieved (it never is)
    by_name = {tool.name: tool for tool in engine.tools}
    if "search" not in by_name:
        raise InspoError("data.trajectories=world-oracle searches: agent.tools must include search")
    calculator = by_name.get("calculator")
    for q in questions:
        prompt = tuple(engine.prompt_ids(instruction, q.question)[-engine.config.max_prompt_tokens :])
        prompts.append(prompt)
        calculation = (q.metadata.get("calculation"), calculator) if calculator is not None else None
        scripts[prompt] = oracle_turns(
            engine.format.write_call, by_name["search"], q.metadata["searches"], q.golden_answers[0], calculation
        )
    if len(scripts) != len(questions):
        raise InspoError("two world questions have the same prompt; the oracle cannot tell them apart")
    oracle = RolloutEngine(
        OraclePolicy(engine.tokenizer, scripts),
        engine.retriever,
        engine.tokenizer,
        engine.config,
        topk=engine.topk,
        chat=engine.chat,
        tools=engine.tools,
        protocol=engine.protocol,
    )
    return [(q.key, t) for q, t in zip(questions, oracle.run_prompts(prompts)) if grounded(q, t, engine.tokenizer)]


def grounded(question, trajectory, tokenizer) -> bool:
    if trajectory.stop_reason != "answer":
        return False
    if question.metadata.get("type") == "arithmetic":  # both years were found (in any passage), then computed
        seen = normalize_answer(
            tokenizer.decode([i for i, m in zip(trajectory.completion_ids, trajectory.completion_mask) if not m])
        )
        years = question.metadata["calculation"].split(" - ")
        return (
            all(f" {year} " in f" {seen} " for year in years)
            and trajectory.tool_calls.get("calculator", 0) >= 1
            and not trajectory.tool_errors
        )
    retrieved = {pid for ids in trajectory.retrieved for pid in ids}
    if not set(question.metadata["supporting_ids"]) <= retrieved:
        return False
    if question.metadata.get("type") == "comparison":
        return True
    seen = tokenizer.decode([i for i, m in zip(trajectory.completion_ids, trajectory.completion_mask) if not m])
    return f" {normalize_answer(question.golden_answers[0])} " in f" {normalize_answer(seen)} "


def coverage(questions, kept: Sequence[tuple[str, object]]) -> dict[str, tuple[int, int]]:
    """(kept, total) per question type."""
    keys = {key for key, _ in kept}
    total: Counter[str] = Counter()
    good: Counter[str] = Counter()
    for q in questions:
        qtype = q.metadata.get("type", "?")
        total[qtype] += 1
        good[qtype] += q.key in keys
    return {qtype: (good[qtype], total[qtype]) for qtype in total}
