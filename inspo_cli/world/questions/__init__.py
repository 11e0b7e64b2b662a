"""Questions over the world's fact graph: single-hop, bridge, comparison and temporal, with their evidence, and (a
world option) arithmetic: two searched years and a subtraction.

Every question names its entities exactly and has one correct answer, given with natural aliases. Its
support names one (entity, fact) per hop, for which the splits (`inspo_cli.world.splits`) pick a passage of the
`FactIndex` (so the fact is literally in that passage), and `searches` the oracle's query per hop. Questions
whose answer appears in their own text are discarded, and no single answer may account for more than a small share
of a type, so guessing without searching does not pay.
Each type's builders live in a module of its own (`single_hop`, `bridge`, `comparison`, `temporal`, `arithmetic`),
each builder next to the phrasings it fills; `QuestionMaker` draws from them and keeps the drafts that pass.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

from inspo_cli.errors import InspoError
from inspo_cli.metrics import normalize_answer
from inspo_cli.world.entities import Entities
from inspo_cli.world.questions import arithmetic, bridge, comparison, single_hop, temporal
from inspo_cli.world.questions.draft import Builder, Picker, QuestionDraft, answers_for

__all__ = ["QUESTION_TYPES", "QuestionDraft", "QuestionMaker", "answers_for", "question_types"]

# (type, share of all questions, hops)
QUESTION_TYPES: tuple[tuple[str, float, int], ...] = (
    ("single_hop", 0.35, 1),
    ("bridge", 0.25, 2),
    ("comparison", 0.15, 2),
    ("temporal", 0.25, 2),
)
ARITHMETIC = ("arithmetic", 2)  # (type, hops): asked only when a world's arithmetic share is above 0
MAX_ANSWER_SHARE = 0.01  # no golden answer may answer more than this share of one type's questions
# (builder, weight) per type; the order is part of the world: the same seed must draw the same builders
BUILDERS: dict[str, list[tuple[Builder, float]]] = {
    "single_hop": single_hop.BUILDERS,
    "bridge": bridge.BUILDERS,
    "comparison": comparison.BUILDERS,
    "temporal": temporal.BUILDERS,
    "arithmetic": arithmetic.BUILDERS,
}


def question_types(arithmetic_share: float = 0.0) -> tuple[tuple[str, float, int], ...]:
    """The types and shares a world is made with: QUESTION_TYPES, or, with an arithmetic share, those scaled by
    (1 - share) and the arithmetic type after them."""
    if arithmetic_share <= 0:
        return QUESTION_TYPES
    return tuple((qtype, share * (1 - arithmetic_share), hops) for qtype, share, hops in QUESTION_TYPES) + (
        (ARITHMETIC[0], arithmetic_share, ARITHMETIC[1]),
    )


class QuestionMaker(Picker):
    """Builds candidate questions at random; `make(qtype, n)` keeps n that pass every check."""

    def __init__(self, rng: random.Random, entities: Entities):
        super().__init__(rng, entities)
        self.seen_keys: dict[tuple, None] = {}
        self.seen_texts: dict[str, None] = {}

    def acceptable(self, qtype: str, draft: QuestionDraft, answer_counts: dict[str, int], cap: int) -> bool:
        if draft.key in self.seen_keys or draft.text in self.seen_texts:
            return False
        if qtype == "comparison":
            return True
        # check the text with and without possessives: "Vask's employer" names "Vask" too
        plain = draft.text.replace("'s ", " ")
        question = f" {normalize_answer(draft.text)} | {normalize_answer(plain)} "
        if any(f" {normalize_answer(answer)} " in question for answer in draft.answers):
            return False
        return answer_counts.get(normalize_answer(draft.answers[0]), 0) < cap

    def make(self, qtype: str, count: int, tick: Callable[[], None]) -> list[QuestionDraft]:
        builders = [builder for builder, _ in BUILDERS[qtype]]
        weights = [weight for _, weight in BUILDERS[qtype]]
        cap = max(2, math.ceil(MAX_ANSWER_SHARE * count))
        drafts: list[QuestionDraft] = []
        answer_counts: dict[str, int] = {}
        attempts = 0
        while len(drafts) < count:
            attempts += 1
            if attempts > 200 * count + 5000:
                raise InspoError(
                    f"this world is too small for {count} {qtype} questions (made {len(drafts)}); "
                    "use a larger size or fewer questions"
                )
            draft = self.rng.choices(builders, weights)[0](self)
            if draft is None or not self.acceptable(qtype, draft, answer_counts, cap):
                continue
            self.seen_keys[draft.key] = None
            self.seen_texts[draft.text] = None
            answer = normalize_answer(draft.answers[0])
            answer_counts[answer] = answer_counts.get(answer, 0) + 1
            drafts.append(draft)
            tick()
        return drafts
