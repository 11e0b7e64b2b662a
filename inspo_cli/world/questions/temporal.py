"""Temporal questions: who led a country in the year something happened (an organisation's founding, a birth); the
first search finds the year, the second the head of state whose term holds it."""

from __future__ import annotations

from inspo_cli.world.entities import City, Country, Organisation, Person
from inspo_cli.world.questions.draft import Builder, Picker, QuestionDraft, answers_for, phrase


def country_for(d: Picker, home: Country) -> Country:
    return home if d.rng.random() < 0.7 else d.rng.choice(d.ents.countries)


def temporal(
    d: Picker,
    subject: Organisation | Person | City,
    year: int,
    fact: str,
    country: Country,
    templates: tuple[str, ...],
    search: str,
    **names: str,
) -> QuestionDraft | None:
    inside = [term for term in country.leaders if term.start < year < term.end]
    if len(inside) != 1:  # the year is before the chain or on a hand-over year
        return None
    leader = inside[0].person
    text = phrase(d.wording(*templates), k=country.name, title=country.leader_title, **names)
    return QuestionDraft(
        ("temporal", subject.id, country.id),
        text,
        answers_for(leader),
        [(subject.id, fact), (leader.id, "term")],
        [search, f"{country.leader_title} of {country.name} {year}"],
    )


def leader_when_founded(d: Picker) -> QuestionDraft | None:
    o = d.pick(d.ents.organisations)
    return temporal(
        d,
        o,
        o.founded_year,
        "founded_year",
        country_for(d, o.hq.country),
        (
            "Who led {k} in the year {o} was founded?",
            "Who was the {title} of {k} when {o} was founded?",
            "Who was {k}'s head of state in the year {o} was established?",
            "When {o} was founded, who was the {title} of {k}?",
        ),
        f"{o.ref} founded",
        o=o.ref,
    )


def leader_when_born(d: Picker) -> QuestionDraft | None:
    p = d.pick(d.ents.people)
    return temporal(
        d,
        p,
        p.birth_year,
        "birth_year",
        country_for(d, p.birth_city.country),
        (
            "Who was the {title} of {k} in the year {p} was born?",
            "Who led {k} when {p} was born?",
            "Who was head of state of {k} in the year of {p}'s birth?",
        ),
        f"{p.name} born",
        p=p.name,
    )


def leader_when_city(d: Picker) -> QuestionDraft | None:
    c = d.pick(d.ents.cities)
    return temporal(
        d,
        c,
        c.founded_year,
        "founded_year",
        country_for(d, c.country),
        (
            "Who led {k} in the year {c} was founded?",
            "Who was the {title} of {k} when the city of {c} was founded?",
        ),
        f"{c.name} founded",
        c=c.name,
    )


BUILDERS: list[tuple[Builder, float]] = [(leader_when_founded, 3), (leader_when_born, 2), (leader_when_city, 0.5)]
