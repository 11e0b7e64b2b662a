"""Arithmetic questions (a world option): two years found by searching and one subtraction, the answer being the
years between them, for an agent with the calculator tool."""

from __future__ import annotations

from collections.abc import Callable

from inspo_cli.world.questions.draft import Builder, Picker, QuestionDraft, phrase


def arithmetic(
    d: Picker,
    key: tuple,
    templates: tuple[str, ...],
    later: int,
    earlier: int,
    searches: list[str],
    support: list[tuple[str, str]],
    **names: str,
) -> QuestionDraft | None:
    """The question `later - earlier` answers, or None when the years are not in that order."""
    if later <= earlier:
        return None
    text = phrase(d.wording(*templates), **names)
    years = later - earlier
    return QuestionDraft(
        ("arithmetic", *key), text, [str(years), f"{years} years"], support, searches, f"{later} - {earlier}"
    )


def born_after_founding(d: Picker) -> QuestionDraft | None:
    o, p = d.pick(d.ents.organisations), d.pick(d.ents.people)
    return arithmetic(
        d,
        ("born_after", o.id, p.id),
        (
            "How many years after {o} was founded was {p} born?",
            "{p} was born how many years after the founding of {o}?",
        ),
        p.birth_year,
        o.founded_year,
        [f"{o.ref} founded", f"{p.name} born"],
        [(o.id, "founded_year"), (p.id, "birth_year")],
        o=o.ref,
        p=p.name,
    )


def founded_after_birth(d: Picker) -> QuestionDraft | None:
    p, o = d.pick(d.ents.people), d.pick(d.ents.organisations)
    return arithmetic(
        d,
        ("founded_after", p.id, o.id),
        (
            "How many years after {p} was born was {o} founded?",
            "{o} was founded how many years after the birth of {p}?",
        ),
        o.founded_year,
        p.birth_year,
        [f"{p.name} born", f"{o.ref} founded"],
        [(p.id, "birth_year"), (o.id, "founded_year")],
        o=o.ref,
        p=p.name,
    )


def founding_gap(d: Picker) -> QuestionDraft | None:
    return gap(
        d,
        "founding_gap",
        d.ents.organisations,
        "founded_year",
        lambda o: o.ref,
        "founded",
        (
            "How many years apart were {a} and {b} founded?",
            "How many years separate the founding of {a} and that of {b}?",
        ),
    )


def birth_gap(d: Picker) -> QuestionDraft | None:
    return gap(
        d,
        "birth_gap",
        d.ents.people,
        "birth_year",
        lambda p: p.name,
        "born",
        ("How many years apart were {a} and {b} born?", "How many years separate the births of {a} and {b}?"),
    )


def gap(
    d: Picker, kind: str, pool: list, fact: str, name: Callable, relation: str, templates: tuple[str, ...]
) -> QuestionDraft | None:
    """The years between two entities' `fact` (a founding, a birth): the later minus the earlier."""
    a, b = d.pick(pool), d.pick(pool)
    if a is b:
        return None
    first, second = sorted((a, b), key=lambda entity: entity.id)
    later, earlier = max(getattr(a, fact), getattr(b, fact)), min(getattr(a, fact), getattr(b, fact))
    return arithmetic(
        d,
        (kind, first.id, second.id),
        templates,
        later,
        earlier,
        [f"{name(a)} {relation}", f"{name(b)} {relation}"],
        [(a.id, fact), (b.id, fact)],
        a=name(a),
        b=name(b),
    )


BUILDERS: list[tuple[Builder, float]] = [
    (born_after_founding, 3),
    (founded_after_birth, 2),
    (founding_gap, 2),
    (birth_gap, 2),
]
