"""Comparison questions: which of two named entities came first (or last), by founding or birth year; one search
each. Some pairs are an entity and its distractor twin, whose names differ by a letter."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from inspo_cli.world.questions.draft import Builder, Picker, QuestionDraft, answers_for, phrase


def pair(d: Picker, pool: list, year: Callable[[Any], int]) -> tuple[Any, Any] | None:
    """Two entities with different years; sometimes an entity and its distractor twin."""
    """Two entities with different years; sometimes an entity and its distractor twin."""
    twins = [(a, b) for a, b in d.ents.twins if isinstance(a, type(pool[0]))]
    a, b = d.rng.choice(twins) if twins and d.rng.random() < 0.15 else d.rng.sample(pool, 2)
    if year(a) == year(b):
        return None
    return (a, b) if d.rng.random() < 0.5 else (b, a)


def comparison(
    d: Picker,
    kind: str,
    pool: list,
    year: Callable[[Any], int],
    fact: str,
    name: Callable,
    earlier: tuple[str, ...],
    later: tuple[str, ...],
) -> QuestionDraft | None:
    drawn = pair(d, pool, year)
    if drawn is None:
        return None
    a, b = drawn
    want_later = d.rng.random() < 0.25
    winner = max(drawn, key=year) if want_later else min(drawn, key=year)
    text = phrase(d.wording(*(later if want_later else earlier)), a=name(a), b=name(b))
    key = ("compare", kind) + tuple(sorted((a.id, b.id)))
    word = "born" if fact == "birth_year" else "founded"
    return QuestionDraft(
        key, text, answers_for(winner), [(a.id, fact), (b.id, fact)], [f"{name(a)} {word}", f"{name(b)} {word}"]
    )


def older_organisation(d: Picker) -> QuestionDraft | None:
    return comparison(
        d,
        "organisation",
        d.ents.organisations,
        lambda o: o.founded_year,
        "founded_year",
        lambda o: o.ref,
        (
            "Which was founded earlier, {a} or {b}?",
            "Which is older, {a} or {b}?",
            "Which was established first: {a} or {b}?",
            "Of {a} and {b}, which was founded first?",
        ),
        ("Which was founded more recently, {a} or {b}?", "Which is younger, {a} or {b}?"),
    )


def older_person(d: Picker) -> QuestionDraft | None:
    return comparison(
        d,
        "person",
        d.ents.people,
        lambda p: p.birth_year,
        "birth_year",
        lambda p: p.name,
        (
            "Who was born first, {a} or {b}?",
            "Who is older, {a} or {b}?",
            "Which person was born earlier, {a} or {b}?",
            "Of {a} and {b}, who was born first?",
        ),
        ("Who was born later, {a} or {b}?", "Who is younger, {a} or {b}?"),
    )


def older_city(d: Picker) -> QuestionDraft | None:
    return comparison(
        d,
        "city",
        d.ents.cities,
        lambda c: c.founded_year,
        "founded_year",
        lambda c: c.name,
        ("Which city was founded first, {a} or {b}?", "Which is the older city, {a} or {b}?"),
        ("Which city was founded more recently, {a} or {b}?",),
    )


BUILDERS: list[tuple[Builder, float]] = [(older_organisation, 3), (older_person, 3), (older_city, 1)]
