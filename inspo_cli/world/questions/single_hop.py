"""Single-hop questions: one fact of one named entity, found with one search."""

from __future__ import annotations

from inspo_cli.world.questions.draft import Builder, Picker, QuestionDraft, answers_for, phrase


def org_founded_year(d: Picker) -> QuestionDraft:
    o = d.pick(d.ents.organisations)
    text = phrase(
        d.wording(
            "In which year was {o} founded?",
            "When was {o} established?",
            "What year was {o} founded in?",
            "In what year was {o} established?",
        ),
        o=o.ref,
    )
    return QuestionDraft(
        ("founded_year", o.id), text, answers_for(o.founded_year), [(o.id, "founded_year")], [f"{o.ref} founded"]
    )


def org_founder(d: Picker) -> QuestionDraft:
    o = d.pick(d.ents.organisations)
    text = phrase(
        d.wording(
            "Who founded {o}?", "Who was the founder of {o}?", "Who established {o}?", "{o} was founded by whom?"
        ),
        o=o.ref,
    )
    return QuestionDraft(("founder", o.id), text, answers_for(o.founder), [(o.id, "founder")], [f"{o.ref} founder"])


def org_hq(d: Picker) -> QuestionDraft:
    o = d.pick(d.ents.organisations)
    text = phrase(
        d.wording(
            "In which city is {o} based?",
            "Where is {o} headquartered?",
            "Which city is home to the headquarters of {o}?",
            "In what city does {o} have its headquarters?",
        ),
        o=o.ref,
    )
    return QuestionDraft(("hq", o.id), text, answers_for(o.hq), [(o.id, "hq")], [f"{o.ref} headquarters"])


def birth_city(d: Picker) -> QuestionDraft:
    p = d.pick(d.ents.people)
    text = phrase(
        d.wording(
            "In which city was {p} born?",
            "Where was {p} born?",
            "What is the birthplace of {p}?",
            "Which city was {p} born in?",
        ),
        p=p.name,
    )
    return QuestionDraft(
        ("birth_city", p.id), text, answers_for(p.birth_city), [(p.id, "birth_city")], [f"{p.name} born"]
    )


def birth_year(d: Picker) -> QuestionDraft:
    p = d.pick(d.ents.people)
    text = phrase(
        d.wording("In which year was {p} born?", "When was {p} born?", "What year was {p} born in?"), p=p.name
    )
    return QuestionDraft(
        ("birth_year", p.id), text, answers_for(p.birth_year), [(p.id, "birth_year")], [f"{p.name} born"]
    )


def employer(d: Picker) -> QuestionDraft:
    p = d.pick(d.staff)
    text = phrase(
        d.wording(
            "Which organisation did {p} work for?",
            "For which organisation did {p} work?",
            "Which organisation employed {p}?",
        ),
        p=p.name,
    )
    return QuestionDraft(
        ("employer", p.id), text, answers_for(p.employer), [(p.id, "employer")], [f"{p.name} employed"]
    )


def founded_org(d: Picker) -> QuestionDraft:
    p = d.pick(d.founders)
    text = phrase(
        d.wording(
            "Which organisation did {p} found?",
            "Which organisation was founded by {p}?",
            "What organisation did {p} establish?",
        ),
        p=p.name,
    )
    return QuestionDraft(("founded", p.id), text, answers_for(p.founded), [(p.id, "founded")], [f"{p.name} founded"])


def city_country(d: Picker) -> QuestionDraft:
    c = d.pick(d.ents.cities)
    text = phrase(
        d.wording(
            "In which country is {c}?",
            "{c} is a city in which country?",
            "Which country is {c} located in?",
            "In what country is the city of {c}?",
        ),
        c=c.name,
    )
    return QuestionDraft(("country", c.id), text, answers_for(c.country), [(c.id, "country")], [f"{c.name} city"])


def city_founded(d: Picker) -> QuestionDraft:
    c = d.pick(d.ents.cities)
    text = phrase(
        d.wording(
            "In which year was {c} founded?",
            "When was the city of {c} founded?",
            "What year was the city of {c} founded in?",
        ),
        c=c.name,
    )
    return QuestionDraft(
        ("city_founded", c.id), text, answers_for(c.founded_year), [(c.id, "founded_year")], [f"{c.name} founded"]
    )


def capital(d: Picker) -> QuestionDraft:
    k = d.pick(d.ents.countries)
    text = phrase(
        d.wording(
            "What is the capital of {k}?",
            "Which city is the capital of {k}?",
            "What city serves as the capital of {k}?",
        ),
        k=k.name,
    )
    return QuestionDraft(("capital", k.id), text, answers_for(k.capital), [(k.id, "capital")], [f"{k.name} capital"])


def term_start(d: Picker) -> QuestionDraft:
    p = d.pick(d.leaders)
    term = p.term
    text = phrase(
        d.wording(
            "In which year did {p} become {title} of {k}?",
            "When did {p} take office as {title} of {k}?",
            "In what year did {p}'s term as {title} of {k} begin?",
        ),
        p=p.name,
        title=term.country.leader_title,
        k=term.country.name,
    )
    return QuestionDraft(
        ("term_start", p.id),
        text,
        answers_for(term.start),
        [(p.id, "term")],
        [f"{p.name} {term.country.leader_title}"],
    )


def led_country(d: Picker) -> QuestionDraft:
    p = d.pick(d.leaders)
    text = phrase(d.wording("Which country did {p} lead?", "Of which country was {p} head of state?"), p=p.name)
    return QuestionDraft(
        ("led", p.id),
        text,
        answers_for(p.term.country),
        [(p.id, "term")],
        [f"{p.name} {p.term.country.leader_title}"],
    )


BUILDERS: list[tuple[Builder, float]] = [  # (builder, weight): how often each kind of question is drawn
    (org_founded_year, 3),
    (org_founder, 3),
    (org_hq, 2),
    (birth_city, 3),
    (birth_year, 3),
    (employer, 2),
    (founded_org, 1),
    (city_country, 1.5),
    (city_founded, 1),
    (capital, 0.3),
    (term_start, 1),
    (led_country, 0.4),
]
