"""Standard RAG (FlashRAG's prompt, a baseline of Table 1): one retrieval with the question, then the answer."""

from __future__ import annotations

from collections.abc import Sequence

from inspo_cli.agent.protocol import format_passages
from inspo_cli.evaluation.methods.base import MethodContext, Prediction, short_answer

RAG_INSTRUCTION = (
    "Answer the question based on the given document. Only give me the answer and do not output any "
    "other words.\nThe following are given documents.\n\n{reference}"
)


def predict(ctx: MethodContext, questions: Sequence[str]) -> list[Prediction]:
    results = ctx.search(questions)
    prompts = [
        ctx.prompt(
            RAG_INSTRUCTION.format(reference=format_passages(passages)),
            f"Question: {q}",
            prefix="" if ctx.chat else "\nAnswer:",
        )
        for q, passages in zip(questions, results, strict=True)
    ]
    responses = ctx.generate(prompts, ctx.rollout.max_tokens_per_turn, stop=["\n\n"])
    return [
        Prediction(short_answer(r), r, 1, [q], [[p.id for p in passages]])
        for q, r, passages in zip(questions, responses, results, strict=True)
    ]
