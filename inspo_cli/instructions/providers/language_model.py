"""The optimizer LM as the instruction proposers see it: `LanguageModel.complete(prompt) -> str`.

    answer = ask(optimizer, prompt)      # Answer(text, truncated): stopped before the model's end?
    if answer.truncated:
        warn(f"the optimizer's answer {how_it_stopped(answer)}")

A text cut off at the output limit (or stopped by a provider's safety or recitation filter) ends inside its last
candidate, and nothing in the text says so; only the provider's finish reason does. So a language model may also
offer `answer(prompt) -> Answer`, and `ask` uses it where it exists (`OptimizerLM`, and `MainProcessLM`, which
broadcasts it); a test's fake with `complete` alone gives answers that count as whole.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol


class LanguageModel(Protocol):
    """The seam the instruction proposers call (docs/architecture.md, "Seams"); tests pass any object with it."""

    def complete(self, prompt: str) -> str: ...


@dataclasses.dataclass(frozen=True)
class Answer:
    """An optimizer's answer as evolution needs it: the text, and whether the provider stopped it at
    optimizer.max_output_tokens (then its last block, if unclosed, is where the cut fell)."""

    text: str
    truncated: bool = False
    stop_reason: str | None = None  # the provider's word for why it stopped, when truncated (None: the output limit)


def ask(lm: LanguageModel, prompt: str) -> Answer:
    """`lm`'s answer to `prompt`: through its `answer(prompt)` where it has one, else `complete` (taken as whole)."""
    answer = getattr(lm, "answer", None)
    return answer(prompt) if callable(answer) else Answer(lm.complete(prompt))


def how_it_stopped(answer: Answer) -> str:
    """For a warning: how a truncated answer was stopped, and what would help."""
    from inspo_cli.instructions.providers.lm_clients import TRUNCATED_FINISH  # SDKs are imported only by its clients

    if answer.stop_reason is None or any(answer.stop_reason in reasons for reasons in TRUNCATED_FINISH.values()):
        return (
            "was cut off at optimizer.max_output_tokens; raise optimizer.max_output_tokens or lower "
            "optimizer.thinking_budget"
        )
    return (
        f"was stopped by the provider (finish reason {answer.stop_reason}: its filter, not a limit of the "
        "recipe); try another optimizer.model if it keeps doing so"
    )
