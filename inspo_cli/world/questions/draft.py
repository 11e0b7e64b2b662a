"""What every question builder makes and draws from: a `QuestionDraft`, its golden answers, and the `Picker` that
draws an entity from a pool and a phrasing from its templates out of the world's one random stream."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from inspo_cli.world.entities import City, Country, Entities, Organisation, Person


@dataclass
class QuestionDraft:
    key: tuple  # what is asked, independent of wording: each fact is asked once in the whole world
    text: str
    answers: list[str]
    support: list[tuple[str, str]]  # (entity id, fact) per hop
    searches: list[str]  # the oracle's query per hop: only names in the question or found at an earlier hop
    calculation: str | None = None  # arithmetic: the expression of the found numbers that gives the answer


def answers_for(value: object) -> list[str]:
    """The golden answers for an entity or a year: the name plus unambiguous aliases."""
    if isinstance(value, Person):
        return [value.name, value.short_name] if value.middle else [value.name]
    if isinstance(value, Organisation):
        return [value.name, value.root] if value.short_alias else [value.name]
    if isinstance(value, Country):
        return [value.name, value.formal_name]
    if isinstance(value, City):
        return [value.name]
    return [str(value)]


def phrase(template: str, **names: str) -> str:
    """`template` filled with `names`, its first letter capitalised (a template may open on a name placeholder)."""
    text = template.format(**names)
    return text[:1].upper() + text[1:]


class Picker:
    """The world's entities, the pools builders draw from, and the random stream every draw comes out of."""

    def __init__(self, rng: random.Random, entities: Entities):
        self.rng, self.ents = rng, entities
        self.staff = [p for p in entities.people if p.employer is not None]
        self.founders = [p for p in entities.people if p.founded is not None]
        self.leaders = entities.leaders

    def pick(
        self, pool: Sequence[Any]
    ) -> Any:  # Any: a pool guarantees the links its builders follow (staff: employer)
        return self.rng.choice(pool) if pool else None

    def wording(self, *templates: str) -> str:
        return self.rng.choice(templates)


# A question builder draws what it asks about and returns a draft, or None when the draw cannot make one.
Builder = Callable[[Picker], "QuestionDraft | None"]
