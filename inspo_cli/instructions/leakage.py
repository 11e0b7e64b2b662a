"""Leakage guards around the optimizer (`population.leak_check`): what it was shown stays out of what is judged.

    guard = LeakGuard(held_out=test_question_texts)
    shown = guard.shown(prompt, buffer)               # the replay questions the prompt showed (their text is in it)
    guard.check_shown(shown)                          # a dev/test question among them: a bug, raised
    guard.leak(candidate_text, shown, buffer)         # why the candidate leaks, or None
    buffer.verification_questions(n, rng, exclude={q.key for q in shown})   # D_B without them

The reflection prompt shows each failed trajectory with its correct answer (App. E), and D_B comes from the same
replay buffer, so without a guard a candidate can be verified on questions whose answers it was shown, and an
instruction can carry answers into training. A candidate leaks when it contains, as whole words, a golden answer of
a question its prompt showed, or a verbatim span of `SPAN_WORDS` words of any question the guard knows (the replay
buffer's: training and D_B; the held-out ones: dev and test). Comparisons are on the EM normalisation (lower case,
no punctuation or articles). What it cannot see: a paraphrased answer, an answer of one or two characters or a
yes/no answer (too common in instructions to tell apart), and questions never held by the buffer or passed as held
out.

A held-out question reaches the optimizer only as a question the prompt shows, a whole question of the replay
buffer (an evaluation rollout let into it): `check_shown` raises when a shown question, normalised, *is* a held-out
question. It never looks for held-out text elsewhere in the prompt: with ~51k evaluation questions, a short one
("who wrote hamlet") is found inside longer training questions, the policy's queries and reasoning, retrieved
passages and worked examples of instructions, and a substring rule stopped runs on such matches
(bench/leak_check.py). A question the run also trains on is not held out (`training/coevolution.py`), so the rule
cannot fire on a legitimate prompt. What it cannot see: a custom proposer that puts held-out text into its prompt
from elsewhere than the buffer.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from inspo_cli.errors import InspoError
from inspo_cli.instructions.replay import ReplayBuffer, ReplayQuestion
from inspo_cli.metrics import normalize_answer

SPAN_WORDS = 8  # a verbatim span this long of a question is no coincidence in an instruction
UNCHECKABLE_ANSWERS = frozenset({"yes", "no", "true", "false"})  # in most instructions anyway


class HeldOutInPrompt(InspoError):
    """A dev or test question reached an optimizer prompt: the evaluation would no longer be held out."""


def _words(text: str) -> list[str]:
    return normalize_answer(text).split()


def _contains(haystack: Sequence[str], needle: Sequence[str]) -> bool:
    n = len(needle)
    return n > 0 and any(list(haystack[i : i + n]) == list(needle) for i in range(len(haystack) - n + 1))


def _spans(words: Sequence[str], n: int = SPAN_WORDS) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


@dataclass
class LeakGuard:
    """The questions that must not leak: `held_out` (dev and test question texts) never reach a prompt; every
    question's 8-word spans, and the shown questions' answers, never reach an admitted candidate."""

    held_out: Iterable[str] = ()
    span_words: int = SPAN_WORDS
    _held_out: dict[str, str] = field(init=False, default_factory=dict)  # normalized -> as given
    _held_out_spans: set[tuple[str, ...]] = field(init=False, default_factory=set)

    def __post_init__(self) -> None:
        for text in self.held_out:
            if text.strip():
                self._held_out[" ".join(_words(text))] = text.strip()
                self._held_out_spans |= _spans(_words(text), self.span_words)

    def check_shown(self, shown: Sequence[ReplayQuestion]) -> None:
        """Raise `HeldOutInPrompt` when a question the prompt shows is, normalised, a whole held-out question."""
        for question in shown:
            text = self._held_out.get(" ".join(_words(question.question)))
            if text is not None:
                raise HeldOutInPrompt(
                    f"a held-out (dev/test) question reached an optimizer prompt: {text[:80]!r} "
                    f"(replay question {question.key}); the optimizer may only see training "
                    "rollouts: did an evaluation rollout reach the replay buffer?"
                )

    @staticmethod
    def shown(prompt: str, buffer: ReplayBuffer) -> list[ReplayQuestion]:
        """The buffer's questions whose text the prompt shows (App. E's `Question: ...` lines), by key."""
        return [q for q in buffer.questions() if q.question.strip() and q.question.strip() in prompt]

    def leak(self, candidate: str, shown: Sequence[ReplayQuestion], buffer: ReplayBuffer) -> str | None:
        """Why `candidate` leaks ("answer 'X' of a question shown to the optimizer", "8 words of a training
        question: '...'"), or None."""
        words = _words(candidate)
        for question in shown:
            for answer in question.golden_answers:
                answer_words = _words(answer)
                if len("".join(answer_words)) <= 2 or " ".join(answer_words) in UNCHECKABLE_ANSWERS:
                    continue
                if _contains(words, answer_words):
                    return f"contains the answer {answer!r} of a question shown to the optimizer ({question.key})"
        mine = _spans(words, self.span_words)
        if not mine:
            return None
        for question in buffer.questions():
            span = mine & _spans(_words(question.question), self.span_words)
            if span:
                return (
                    f"contains {self.span_words} words of training question {question.key}: "
                    f"{' '.join(sorted(span)[0])!r}"
                )
        span = mine & self._held_out_spans
        if span:
            return f"contains {self.span_words} words of a held-out (dev/test) question: {' '.join(sorted(span)[0])!r}"
        return None
