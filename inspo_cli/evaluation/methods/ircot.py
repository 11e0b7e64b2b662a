"""IRCoT (Trivedi et al., 2023): interleave one chain-of-thought sentence with one retrieval, as FlashRAG runs it.

Step 0 retrieves with the question. Each later step writes the next thought with every passage gathered so
far in the prompt, and retrieves with that thought. It stops when a thought says "So the answer is:", or
after `rollout.max_turns` thoughts, when the answer is asked for directly.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from inspo_cli.evaluation.methods.base import MethodContext, Prediction
from retriever import Passage

IRCOT_INSTRUCTION = (
    "You serve as an intelligent assistant, adept at facilitating users through complex, multi-hop reasoning "
    "across multiple documents. Your task is to generate one thought for the current step, DON'T generate the whole "
    'thoughts at once! If you reach what you believe to be the final step, start with "So the answer is:".'
)
ANSWER_MARK = "So the answer is:"
_MARK_RE = re.compile(r"so the answer is\s*:?", re.IGNORECASE)


def _documents(passages) -> str:
    return "\n\n".join(f"Wikipedia Title: {p.title}\n{p.text}" for p in passages)


def _first_sentence(text: str) -> str:
    text = text.strip().split("\n")[0]
    if _MARK_RE.search(text):
        return text
    match = re.match(r"(.+?[.!?])(\s|$)", text)
    return (match.group(1) if match else text).strip()


def _answer_after_mark(thought: str) -> str | None:
    match = _MARK_RE.search(thought)
    if match is None:
        return None
    answer = thought[match.end() :].strip().rstrip(".").strip()
    return answer or None


def predict(ctx: MethodContext, questions: Sequence[str]) -> list[Prediction]:
    n = len(questions)
    passages: list[list[Passage]] = [[] for _ in range(n)]
    seen: list[set[str]] = [set() for _ in range(n)]
    thoughts: list[list[str]] = [[] for _ in range(n)]
    queries: list[list[str]] = [[q] for q in questions]
    answers: list[str | None] = [None] * n
    retrieved: list[list[list[str]]] = [[] for _ in range(n)]

    def add_results(rows: list[int], results) -> None:
        for row, hits in zip(rows, results, strict=True):
            retrieved[row].append([p.id for p in hits])
            for p in hits:
                if p.id not in seen[row]:
                    seen[row].add(p.id)
                    passages[row].append(p)

    def prompts(rows: list[int], suffix: str = "") -> list[str]:
        return [
            ctx.prompt(
                IRCOT_INSTRUCTION,
                f"{_documents(passages[r])}\n\nQuestion: {questions[r]}",
                prefix="Thought: " + " ".join(thoughts[r]) + (" " if thoughts[r] else "") + suffix,
            )
            for r in rows
        ]

    add_results(list(range(n)), ctx.search(questions))
    open_rows = list(range(n))
    for _ in range(ctx.rollout.max_turns):
        if not open_rows:
            break
        outputs = ctx.generate(prompts(open_rows), ctx.rollout.max_tokens_per_turn, stop=["\n"])
        next_rows, next_queries = [], []
        for row, output in zip(open_rows, outputs, strict=True):
            thought = _first_sentence(output)
            thoughts[row].append(thought)
            answers[row] = _answer_after_mark(thought)
            if answers[row] is None and thought:
                next_rows.append(row)
                next_queries.append(thought)
        if next_rows:
            for row, query in zip(next_rows, next_queries, strict=True):
                queries[row].append(query)
            add_results(next_rows, ctx.search(next_queries))
        open_rows = next_rows
    if open_rows:  # out of steps: ask for the answer
        outputs = ctx.generate(prompts(open_rows, suffix=ANSWER_MARK), 32, stop=["\n"])
        for row, output in zip(open_rows, outputs, strict=True):
            thoughts[row].append(f"{ANSWER_MARK} {output.strip()}")
            answers[row] = output.strip().rstrip(".").strip() or None
    return [
        Prediction(
            answers[r],
            " ".join(thoughts[r]),
            len(queries[r]),
            queries[r],
            retrieved[r],
            "answer" if answers[r] is not None else "max_turns",
        )
        for r in range(n)
    ]
