"""The search agent (Search-R1's protocol, INSPO's and Search-R1's rows of Table 1): `ctx.instruction`, then
multi-turn `<search>`/`<answer>` rollouts through the same engine training uses."""

from __future__ import annotations

from collections.abc import Sequence

from inspo_cli.agent import RolloutEngine
from inspo_cli.agent.segments import segments
from inspo_cli.evaluation.methods.base import MethodContext, Prediction


def predict(ctx: MethodContext, questions: Sequence[str]) -> list[Prediction]:
    engine = RolloutEngine(
        ctx.backend,
        ctx.retriever,
        ctx.tokenizer,
        ctx.rollout,
        topk=ctx.topk,
        chat=ctx.chat,
        tools=ctx.tools,
        protocol=ctx.protocol,
    )
    trajectories = engine.run([ctx.instruction] * len(questions), questions)

    def decode(ids: list[int]) -> str:
        return ctx.tokenizer.decode(ids, skip_special_tokens=False)

    ctx.retrieval_seconds += engine.retrieval_seconds
    return [
        Prediction(
            t.answer,
            t.response,
            t.num_searches,
            t.queries,
            t.retrieved,
            t.stop_reason,
            t.turns,
            t.invalid_actions,
            {tool.name: t.tool_calls.get(tool.name, 0) for tool in engine.tools},
            segments(t.completion_ids, t.completion_mask, decode),
        )
        for t in trajectories
    ]
