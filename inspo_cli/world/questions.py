"""Questions over the world's fact graph: single-hop, bridge, comparison and temporal, with their evidence, and (a
world option) arithmetic: two searched years and a subtraction.

Every question names its entities exactly and has one correct answer, given with natural aliases. Its
support names one (entity, fact) per hop, for which the splits (`inspo_cli.world.splits`) pick a passage of the
`FactIndex` (so the fact is literally in that passage), and `searches` the oracle's query per hop. Questions
whose answer appears in their own text are discarded, and no single answer may account for more than a small share
of a type, so guessing without searching does not pay.
Templates for each phrasing live next to the builder that fills them.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass

from inspo_cli.errors import InspoError
from inspo_cli.metrics import normalize_answer
from inspo_cli.world.entities import City, Country, Entities, Organisation, Person

# (type, share of all questions, hops)
QUESTION_TYPES: tuple[tuple[str, float, int], ...] = (
    ("single_hop", 0.35, 1),
    ("bridge", 0.25, 2),
    ("comparison", 0.15, 2),
    ("temporal", 0.25, 2),
)
ARITHMETIC = ("arithmetic", 2)  # (type, hops): asked only when a world's arithmetic share is above 0
MAX_ANSWER_SHARE = 0.01  # no golden answer may answer more than this share of one type's questions


def question_types(arithmetic_share: float = 0.0) -> tuple[tuple[str, float, int], ...]:
    """The types and shares a world is made with: QUESTION_TYPES, or, with an arithmetic share, those scaled by
    (1 - share) and the arithmetic type after them."""
    if arithmetic_share <= 0:
        return QUESTION_TYPES
    return tuple((qtype, share * (1 - arithmetic_share), hops) for qtype, share, hops in QUESTION_TYPES) + (
        (ARITHMETIC[0], arithmetic_share, ARITHMETIC[1]),
    )


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


def _q(template: str, **names: str) -> str:
    text = template.format(**names)
    return text[:1].upper() + text[1:]


class QuestionMaker:
    """Builds candidate questions at random; `make(qtype, n)` keeps n that pass every check."""

    def __init__(self, rng: random.Random, entities: Entities):
        self.rng, self.ents = rng, entities
        self.staff = [p for p in entities.people if p.employer is not None]
        self.founders = [p for p in entities.people if p.founded is not None]
        self.leaders = entities.leaders
        self.builders: dict[str, list[tuple[Callable[[], QuestionDraft | None], float]]] = {
            "single_hop": [
                (self.org_founded_year, 3),
                (self.org_founder, 3),
                (self.org_hq, 2),
                (self.birth_city, 3),
                (self.birth_year, 3),
                (self.employer, 2),
                (self.founded_org, 1),
                (self.city_country, 1.5),
                (self.city_founded, 1),
                (self.capital, 0.3),
                (self.term_start, 1),
                (self.led_country, 0.4),
            ],
            "bridge": [
                (self.founder_birth_city, 3),
                (self.founder_birth_year, 2),
                (self.org_hq_country, 1),
                (self.employer_founder, 3),
                (self.employer_founded, 2),
                (self.employer_hq, 2),
                (self.birth_country, 1),
                (self.capital_founded, 0.3),
                (self.city_capital, 0.5),
                (self.founded_org_year, 1),
                (self.founded_org_hq, 1),
                (self.leader_birth_city, 1),
            ],
            "comparison": [(self.older_organisation, 3), (self.older_person, 3), (self.older_city, 1)],
            "temporal": [(self.leader_when_founded, 3), (self.leader_when_born, 2), (self.leader_when_city, 0.5)],
            "arithmetic": [
                (self.born_after_founding, 3),
                (self.founded_after_birth, 2),
                (self.founding_gap, 2),
                (self.birth_gap, 2),
            ],
        }
        self.seen_keys: dict[tuple, None] = {}
        self.seen_texts: dict[str, None] = {}

    def pick(self, pool: list):
        return self.rng.choice(pool) if pool else None

    def t(self, *templates: str) -> str:
        return self.rng.choice(templates)

    # -- single hop ---------------------------------------------------------------------------------------------------
    def org_founded_year(self):
        o = self.pick(self.ents.organisations)
        text = _q(
            self.t(
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

    def org_founder(self):
        o = self.pick(self.ents.organisations)
        text = _q(
            self.t(
                "Who founded {o}?", "Who was the founder of {o}?", "Who established {o}?", "{o} was founded by whom?"
            ),
            o=o.ref,
        )
        return QuestionDraft(("founder", o.id), text, answers_for(o.founder), [(o.id, "founder")], [f"{o.ref} founder"])

    def org_hq(self):
        o = self.pick(self.ents.organisations)
        text = _q(
            self.t(
                "In which city is {o} based?",
                "Where is {o} headquartered?",
                "Which city is home to the headquarters of {o}?",
                "In what city does {o} have its headquarters?",
            ),
            o=o.ref,
        )
        return QuestionDraft(("hq", o.id), text, answers_for(o.hq), [(o.id, "hq")], [f"{o.ref} headquarters"])

    def birth_city(self):
        p = self.pick(self.ents.people)
        text = _q(
            self.t(
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

    def birth_year(self):
        p = self.pick(self.ents.people)
        text = _q(self.t("In which year was {p} born?", "When was {p} born?", "What year was {p} born in?"), p=p.name)
        return QuestionDraft(
            ("birth_year", p.id), text, answers_for(p.birth_year), [(p.id, "birth_year")], [f"{p.name} born"]
        )

    def employer(self):
        p = self.pick(self.staff)
        text = _q(
            self.t(
                "Which organisation did {p} work for?",
                "For which organisation did {p} work?",
                "Which organisation employed {p}?",
            ),
            p=p.name,
        )
        return QuestionDraft(
            ("employer", p.id), text, answers_for(p.employer), [(p.id, "employer")], [f"{p.name} employed"]
        )

    def founded_org(self):
        p = self.pick(self.founders)
        text = _q(
            self.t(
                "Which organisation did {p} found?",
                "Which organisation was founded by {p}?",
                "What organisation did {p} establish?",
            ),
            p=p.name,
        )
        return QuestionDraft(
            ("founded", p.id), text, answers_for(p.founded), [(p.id, "founded")], [f"{p.name} founded"]
        )

    def city_country(self):
        c = self.pick(self.ents.cities)
        text = _q(
            self.t(
                "In which country is {c}?",
                "{c} is a city in which country?",
                "Which country is {c} located in?",
                "In what country is the city of {c}?",
            ),
            c=c.name,
        )
        return QuestionDraft(("country", c.id), text, answers_for(c.country), [(c.id, "country")], [f"{c.name} city"])

    def city_founded(self):
        c = self.pick(self.ents.cities)
        text = _q(
            self.t(
                "In which year was {c} founded?",
                "When was the city of {c} founded?",
                "What year was the city of {c} founded in?",
            ),
            c=c.name,
        )
        return QuestionDraft(
            ("city_founded", c.id), text, answers_for(c.founded_year), [(c.id, "founded_year")], [f"{c.name} founded"]
        )

    def capital(self):
        k = self.pick(self.ents.countries)
        text = _q(
            self.t(
                "What is the capital of {k}?",
                "Which city is the capital of {k}?",
                "What city serves as the capital of {k}?",
            ),
            k=k.name,
        )
        return QuestionDraft(
            ("capital", k.id), text, answers_for(k.capital), [(k.id, "capital")], [f"{k.name} capital"]
        )

    def term_start(self):
        p = self.pick(self.leaders)
        term = p.term
        text = _q(
            self.t(
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

    def led_country(self):
        p = self.pick(self.leaders)
        text = _q(self.t("Which country did {p} lead?", "Of which country was {p} head of state?"), p=p.name)
        return QuestionDraft(
            ("led", p.id),
            text,
            answers_for(p.term.country),
            [(p.id, "term")],
            [f"{p.name} {p.term.country.leader_title}"],
        )

    # -- bridge -------------------------------------------------------------------------------------------------------
    def founder_birth_city(self):
        o = self.pick(self.ents.organisations)
        text = _q(
            self.t(
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

    def founder_birth_year(self):
        o = self.pick(self.ents.organisations)
        text = _q(
            self.t("In which year was the founder of {o} born?", "When was the person who founded {o} born?"), o=o.ref
        )
        return QuestionDraft(
            ("founder_birth_year", o.id),
            text,
            answers_for(o.founder.birth_year),
            [(o.id, "founder"), (o.founder.id, "birth_year")],
            [f"{o.ref} founder", f"{o.founder.name} born"],
        )

    def org_hq_country(self):
        o = self.pick(self.ents.organisations)
        text = _q(
            self.t(
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

    def employer_founder(self):
        p = self.pick(self.staff)
        text = _q(
            self.t(
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

    def employer_founded(self):
        p = self.pick(self.staff)
        text = _q(
            self.t(
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

    def employer_hq(self):
        p = self.pick(self.staff)
        text = _q(
            self.t(
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

    def birth_country(self):
        p = self.pick(self.ents.people)
        text = _q(self.t("In which country was {p} born?", "{p} was born in which country?"), p=p.name)
        return QuestionDraft(
            ("birth_country", p.id),
            text,
            answers_for(p.birth_city.country),
            [(p.id, "birth_city"), (p.birth_city.id, "country")],
            [f"{p.name} born", f"{p.birth_city.name} city"],
        )

    def capital_founded(self):
        k = self.pick(self.ents.countries)
        text = _q(
            self.t("In which year was the capital of {k} founded?", "When was the capital city of {k} founded?"),
            k=k.name,
        )
        return QuestionDraft(
            ("capital_founded", k.id),
            text,
            answers_for(k.capital.founded_year),
            [(k.id, "capital"), (k.capital.id, "founded_year")],
            [f"{k.name} capital", f"{k.capital.name} founded"],
        )

    def city_capital(self):
        c = self.pick(self.ents.cities)
        text = _q(
            self.t(
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

    def founded_org_year(self):
        p = self.pick(self.founders)
        text = _q(
            self.t(
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

    def founded_org_hq(self):
        p = self.pick(self.founders)
        text = _q(
            self.t(
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

    def leader_birth_city(self):
        p = self.pick(self.leaders)
        term = p.term
        text = _q(
            self.t(
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

    # -- comparison ---------------------------------------------------------------------------------------------------
    def pair(self, pool: list, year: Callable[[object], int]):
        """Two entities with different years; sometimes an entity and its distractor twin."""
        twins = [(a, b) for a, b in self.ents.twins if isinstance(a, type(pool[0]))]
        a, b = self.rng.choice(twins) if twins and self.rng.random() < 0.15 else self.rng.sample(pool, 2)
        if year(a) == year(b):
            return None
        return (a, b) if self.rng.random() < 0.5 else (b, a)

    def comparison(
        self,
        kind: str,
        pool: list,
        year: Callable[[object], int],
        fact: str,
        name: Callable,
        earlier: tuple[str, ...],
        later: tuple[str, ...],
    ):
        pair = self.pair(pool, year)
        if pair is None:
            return None
        a, b = pair
        want_later = self.rng.random() < 0.25
        winner = max(pair, key=year) if want_later else min(pair, key=year)
        text = _q(self.t(*(later if want_later else earlier)), a=name(a), b=name(b))
        key = ("compare", kind) + tuple(sorted((a.id, b.id)))
        word = "born" if fact == "birth_year" else "founded"
        return QuestionDraft(
            key, text, answers_for(winner), [(a.id, fact), (b.id, fact)], [f"{name(a)} {word}", f"{name(b)} {word}"]
        )

    def older_organisation(self):
        return self.comparison(
            "organisation",
            self.ents.organisations,
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

    def older_person(self):
        return self.comparison(
            "person",
            self.ents.people,
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

    def older_city(self):
        return self.comparison(
            "city",
            self.ents.cities,
            lambda c: c.founded_year,
            "founded_year",
            lambda c: c.name,
            ("Which city was founded first, {a} or {b}?", "Which is the older city, {a} or {b}?"),
            ("Which city was founded more recently, {a} or {b}?",),
        )

    # -- temporal -----------------------------------------------------------------------------------------------------
    def country_for(self, home: Country) -> Country:
        return home if self.rng.random() < 0.7 else self.rng.choice(self.ents.countries)

    def temporal(
        self,
        subject: object,
        year: int,
        fact: str,
        country: Country,
        templates: tuple[str, ...],
        search: str,
        **names: str,
    ):
        inside = [term for term in country.leaders if term.start < year < term.end]
        if len(inside) != 1:  # the year is before the chain or on a hand-over year
            return None
        leader = inside[0].person
        text = _q(self.t(*templates), k=country.name, title=country.leader_title, **names)
        return QuestionDraft(
            ("temporal", subject.id, country.id),
            text,
            answers_for(leader),
            [(subject.id, fact), (leader.id, "term")],
            [search, f"{country.leader_title} of {country.name} {year}"],
        )

    def leader_when_founded(self):
        o = self.pick(self.ents.organisations)
        return self.temporal(
            o,
            o.founded_year,
            "founded_year",
            self.country_for(o.hq.country),
            (
                "Who led {k} in the year {o} was founded?",
                "Who was the {title} of {k} when {o} was founded?",
                "Who was {k}'s head of state in the year {o} was established?",
                "When {o} was founded, who was the {title} of {k}?",
            ),
            f"{o.ref} founded",
            o=o.ref,
        )

    def leader_when_born(self):
        p = self.pick(self.ents.people)
        return self.temporal(
            p,
            p.birth_year,
            "birth_year",
            self.country_for(p.birth_city.country),
            (
                "Who was the {title} of {k} in the year {p} was born?",
                "Who led {k} when {p} was born?",
                "Who was head of state of {k} in the year of {p}'s birth?",
            ),
            f"{p.name} born",
            p=p.name,
        )

    def leader_when_city(self):
        c = self.pick(self.ents.cities)
        return self.temporal(
            c,
            c.founded_year,
            "founded_year",
            self.country_for(c.country),
            (
                "Who led {k} in the year {c} was founded?",
                "Who was the {title} of {k} when the city of {c} was founded?",
            ),
            f"{c.name} founded",
            c=c.name,
        )

    # -- arithmetic: two years found by searching, one subtraction ----------------------------------------------------
    def arithmetic(
        self,
        key: tuple,
        templates: tuple[str, ...],
        later: int,
        earlier: int,
        searches: list[str],
        support: list[tuple[str, str]],
        **names: str,
    ):
        if later <= earlier:
            return None
        text = _q(self.t(*templates), **names)
        years = later - earlier
        return QuestionDraft(
            ("arithmetic", *key), text, [str(years), f"{years} years"], support, searches, f"{later} - {earlier}"
        )

    def born_after_founding(self):
        o, p = self.pick(self.ents.organisations), self.pick(self.ents.people)
        return self.arithmetic(
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

    def founded_after_birth(self):
        p, o = self.pick(self.ents.people), self.pick(self.ents.organisations)
        return self.arithmetic(
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

    def founding_gap(self):
        return self.gap(
            "founding_gap",
            self.ents.organisations,
            "founded_year",
            lambda o: o.ref,
            "founded",
            (
                "How many years apart were {a} and {b} founded?",
                "How many years separate the founding of {a} and that of {b}?",
            ),
        )

    def birth_gap(self):
        return self.gap(
            "birth_gap",
            self.ents.people,
            "birth_year",
            lambda p: p.name,
            "born",
            ("How many years apart were {a} and {b} born?", "How many years separate the births of {a} and {b}?"),
        )

    def gap(self, kind: str, pool: list, fact: str, name: Callable, relation: str, templates: tuple[str, ...]):
        """The years between two entities' `fact` (a founding, a birth): the later minus the earlier."""
        a, b = self.pick(pool), self.pick(pool)
        if a is b:
            return None
        first, second = sorted((a, b), key=lambda entity: entity.id)
        later, earlier = max(getattr(a, fact), getattr(b, fact)), min(getattr(a, fact), getattr(b, fact))
        return self.arithmetic(
            (kind, first.id, second.id),
            templates,
            later,
            earlier,
            [f"{name(a)} {relation}", f"{name(b)} {relation}"],
            [(a.id, fact), (b.id, fact)],
            a=name(a),
            b=name(b),
        )

    # -- selection ----------------------------------------------------------------------------------------------------
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
        builders = [builder for builder, _ in self.builders[qtype]]
        weights = [weight for _, weight in self.builders[qtype]]
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
            draft = self.rng.choices(builders, weights)[0]()
            if draft is None or not self.acceptable(qtype, draft, answer_counts, cap):
                continue
            self.seen_keys[draft.key] = None
            self.seen_texts[draft.text] = None
            answer = normalize_answer(draft.answers[0])
            answer_counts[answer] = answer_counts.get(answer, 0) + 1
            drafts.append(draft)
            tick()
        return drafts
