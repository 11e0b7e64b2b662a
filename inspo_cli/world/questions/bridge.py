"""Bridge questions: a fact of an entity the question does not name but reaches through another (the founder of
a named organisation, the employer of a named person), found with two searches, the second for what the first found."""

from __future__ import annotations

from inspo_cli.world.questions.draft import Builder, Picker, QuestionDraft, answers_for, phrase


def founder_birth_city(d: Picker) -> QuestionDraft:
    o = d.pick(d.ents.organisations)
    text = phrase(
        d.wording(
            "In which city was the founder of {o} born?",
            "Where was the founder of {o} born?",
            "What is the birthplace of the person who founded {o}?",
        ),
        o=o.ref,
    )
    return QuestionDraft(
        ("founder_birth_city", o.id),
        text,
        answers_for(o.founder.birth_city),
        [(o.id, "founder"), (o.founder.id, "birth_city")],
        [f"{o.ref} founder", f"{o.founder.name} born"],
    )


def founder_birth_year(d: Picker) -> QuestionDraft:
    o = d.pick(d.ents.organisations)
    text = phrase(
        d.wording("In which year was the founder of {o} born?", "When was the person who founded {o} born?"), o=o.ref
    )
    return QuestionDraft(
        ("founder_birth_year", o.id),
        text,
        answers_for(o.founder.birth_year),
        [(o.id, "founder"), (o.founder.id, "birth_year")],
        [f"{o.ref} founder", f"{o.founder.name} born"],
    )


def org_hq_country(d: Picker) -> QuestionDraft:
    o = d.pick(d.ents.organisations)
    text = phrase(
        d.wording(
            "In which country is {o} headquartered?",
            "In which country are the headquarters of {o}?",
            "{o} is based in which country?",
        ),
        o=o.ref,
    )
    return QuestionDraft(
        ("hq_country", o.id),
        text,
        answers_for(o.hq.country),
        [(o.id, "hq"), (o.hq.id, "country")],
        [f"{o.ref} headquarters", f"{o.hq.name} city"],
    )


def employer_founder(d: Picker) -> QuestionDraft:
    p = d.pick(d.staff)
    text = phrase(
        d.wording(
            "Who founded the organisation {p} worked for?",
            "Who was the founder of the organisation that employed {p}?",
            "Who founded {p}'s employer?",
        ),
        p=p.name,
    )
    return QuestionDraft(
        ("employer_founder", p.id),
        text,
        answers_for(p.employer.founder),
        [(p.id, "employer"), (p.employer.id, "founder")],
        [f"{p.name} employed", f"{p.employer.ref} founder"],
    )


def employer_founded(d: Picker) -> QuestionDraft:
    p = d.pick(d.staff)
    text = phrase(
        d.wording(
            "In which year was the organisation that employed {p} founded?",
            "When was {p}'s employer founded?",
            "In what year was the organisation {p} worked for established?",
        ),
        p=p.name,
    )
    return QuestionDraft(
        ("employer_founded", p.id),
        text,
        answers_for(p.employer.founded_year),
        [(p.id, "employer"), (p.employer.id, "founded_year")],
        [f"{p.name} employed", f"{p.employer.ref} founded"],
    )


def employer_hq(d: Picker) -> QuestionDraft:
    p = d.pick(d.staff)
    text = phrase(
        d.wording(
            "In which city is the organisation {p} worked for based?", "Where is the employer of {p} headquartered?"
        ),
        p=p.name,
    )
    return QuestionDraft(
        ("employer_hq", p.id),
        text,
        answers_for(p.employer.hq),
        [(p.id, "employer"), (p.employer.id, "hq")],
        [f"{p.name} employed", f"{p.employer.ref} headquarters"],
    )


def birth_country(d: Picker) -> QuestionDraft:
    p = d.pick(d.ents.people)
    text = phrase(d.wording("In which country was {p} born?", "{p} was born in which country?"), p=p.name)
    return QuestionDraft(
        ("birth_country", p.id),
        text,
        answers_for(p.birth_city.country),
        [(p.id, "birth_city"), (p.birth_city.id, "country")],
        [f"{p.name} born", f"{p.birth_city.name} city"],
    )


def capital_founded(d: Picker) -> QuestionDraft:
    k = d.pick(d.ents.countries)
    text = phrase(
        d.wording("In which year was the capital of {k} founded?", "When was the capital city of {k} founded?"),
        k=k.name,
    )
    return QuestionDraft(
        ("capital_founded", k.id),
        text,
        answers_for(k.capital.founded_year),
        [(k.id, "capital"), (k.capital.id, "founded_year")],
        [f"{k.name} capital", f"{k.capital.name} founded"],
    )


def city_capital(d: Picker) -> QuestionDraft:
    c = d.pick(d.ents.cities)
    text = phrase(
        d.wording(
            "What is the capital of the country in which {c} lies?",
            "Which city is the capital of the country where {c} is located?",
        ),
        c=c.name,
    )
    return QuestionDraft(
        ("city_capital", c.id),
        text,
        answers_for(c.country.capital),
        [(c.id, "country"), (c.country.id, "capital")],
        [f"{c.name} city", f"{c.country.name} capital"],
    )


def founded_org_year(d: Picker) -> QuestionDraft:
    p = d.pick(d.founders)
    text = phrase(
        d.wording(
            "In which year was the organisation founded by {p} established?",
            "When was the organisation that {p} founded established?",
        ),
        p=p.name,
    )
    return QuestionDraft(
        ("founded_org_year", p.id),
        text,
        answers_for(p.founded.founded_year),
        [(p.id, "founded"), (p.founded.id, "founded_year")],
        [f"{p.name} founded", f"{p.founded.ref} founded"],
    )


def founded_org_hq(d: Picker) -> QuestionDraft:
    p = d.pick(d.founders)
    text = phrase(
        d.wording(
            "In which city is the organisation founded by {p} based?",
            "Where is the organisation that {p} founded headquartered?",
        ),
        p=p.name,
    )
    return QuestionDraft(
        ("founded_org_hq", p.id),
        text,
        answers_for(p.founded.hq),
        [(p.id, "founded"), (p.founded.id, "hq")],
        [f"{p.name} founded", f"{p.founded.ref} headquarters"],
    )


def leader_birth_city(d: Picker) -> QuestionDraft:
    p = d.pick(d.leaders)
    term = p.term
    text = phrase(
        d.wording(
            "In which city was the {title} of {k} who took office in {start} born?",
            "Where was the {title} of {k} whose term began in {start} born?",
        ),
        title=term.country.leader_title,
        k=term.country.name,
        start=term.start,
    )
    return QuestionDraft(
        ("leader_birth_city", p.id),
        text,
        answers_for(p.birth_city),
        [(p.id, "term"), (p.id, "birth_city")],
        [f"{term.country.leader_title} of {term.country.name} {term.start}", f"{p.name} born"],
    )


BUILDERS: list[tuple[Builder, float]] = [  # (builder, weight): how often each kind of question is drawn
    (founder_birth_city, 3),
    (founder_birth_year, 2),
    (org_hq_country, 1),
    (employer_founder, 3),
    (employer_founded, 2),
    (employer_hq, 2),
    (birth_country, 1),
    (capital_founded, 0.3),
    (city_capital, 0.5),
    (founded_org_year, 1),
    (founded_org_hq, 1),
    (leader_birth_city, 1),
]
