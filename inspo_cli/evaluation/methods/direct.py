"""Direct generation (FlashRAG's prompt, a baseline of Table 1): the model answers from its own knowledge."""

from __future__ import annotations

from collections.abc import Sequence

from inspo_cli.evaluation.methods.base import MethodContext, Prediction, short_answer

DIRECT_INSTRUCTION = (
    "Answer the question based on your own knowledge. Only give me the answer and do not output any other words."
)


def predict(ctx: MethodContext, questions: Sequence[str]) -> list[Prediction]:
    prompts = [
        ctx.prompt(DIRECT_INSTRUCTION, f"Question: {q}", prefix="" if ctx.chat else "\nAnswer:") for q in questions
    ]
    responses = ctx.generate(prompts, ctx.rollout.max_tokens_per_turn, stop=["\n\n"])
    return [Prediction(short_answer(r), r) for r in responses]
