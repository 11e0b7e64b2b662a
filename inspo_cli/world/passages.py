"""Turn the fact graph into a Wikipedia-like corpus, remembering which passage states which fact.

Each entity gets 1-4 short passages titled with its name; each passage opens by naming the entity, states
one to three facts in varied wording, and is padded with fact-free filler to 40-120 words. Heads of state
are also listed in chronology passages of their country. The returned `FactIndex` maps
(entity id, fact) to the ids of the passages whose text states that fact literally, which is how questions
pick their `supporting_ids`.
"""

from __future__ import annotations

import functools
import random
import string
from collections.abc import Callable

from inspo_cli.world.entities import City, Country, Entities, Organisation, Person
from inspo_cli.world.fillers import FILLER_WORDS, FILLERS
from inspo_cli.world.templates import CHRONOLOGY_LINES, CHRONOLOGY_OPENERS, FACT_TEMPLATES, ORGANISATION_LEADS
from retriever.corpus import Passage

FactIndex = dict[tuple[str, str], list[str]]  # (entity id, fact) -> passage ids, in corpus order
COMBOS = {
    "person": (("occupation", "birth_year"), ("birth_year", "birth_city")),
    "organisation": (("founded_year", "founder"),),
}
PRONOUN_MARKS = ("{p}", "{P}", "{pr}", "{Pr}", "{o}")
SUBJECT_SLOTS = ("S", "s", "p", "P", "pr", "Pr", "o")
MIN_WORDS, MAX_WORDS, MAX_FILLERS = 40, 120, 4


@functools.cache
def _slots(template: str) -> tuple[str, ...]:
    return tuple(name for _, name, _, _ in string.Formatter().parse(template) if name)


def _capitalise(text: str) -> str:
    return text[:1].upper() + text[1:]


def _with_article(word: str) -> str:
    return f"an {word}" if word[:1].lower() in "aeiou" else f"a {word}"


def _opens_with_subject(template: str) -> bool:
    """True if the template names its subject ({S}/{s}) before any pronoun, so it can open a passage."""
    first_subject = min((i for i in (template.find("{S}"), template.find("{s}")) if i >= 0), default=-1)
    if first_subject < 0:
        return False
    return all(not (0 <= template.find(mark) < first_subject) for mark in PRONOUN_MARKS)


def _kind(entity: object) -> str:
    return {Person: "person", Organisation: "organisation", City: "city", Country: "country"}[type(entity)]


def subject_forms(entity: object, by_name: bool) -> dict[str, str]:
    """The words that refer to `entity`: by name, or by pronoun / noun phrase ("she", "the orchestra")."""
    if isinstance(entity, Person):
        he, his, him = ("she", "her", "her") if entity.gender == "female" else ("he", "his", "him")
        subject = entity.name if by_name else he
        return {
            "S": _capitalise(subject),
            "s": subject,
            "p": his,
            "P": _capitalise(his),
            "pr": he,
            "Pr": _capitalise(he),
            "o": him,
        }
    if isinstance(entity, Organisation):
        subject = entity.ref if by_name else f"the {entity.kind}"
    else:
        subject = entity.name if by_name else f"the {_kind(entity)}"
    return {"S": _capitalise(subject), "s": subject, "p": "its", "P": "Its", "pr": "it", "Pr": "It", "o": "it"}


class PassageWriter:
    """Writes every entity's passages with one random stream; `drafts` are (title, text, facts) in entity order."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.drafts: list[tuple[str, str, list[tuple[str, str]]]] = []
        self.fact_templates = {
            kind: {
                facts: (templates, tuple(t for t in templates if _opens_with_subject(t)))
                for facts, templates in by_facts.items()
            }
            for kind, by_facts in FACT_TEMPLATES.items()
        }

    # -- fact values ------------------------------------------------------------------------------------------------
    def values(self, entity: object) -> dict[str, str]:
        rng = self.rng
        if isinstance(entity, Person):
            adj = rng.choice(
                ("noted", "prolific", "self-taught", "respected", "versatile", "little-known", "gifted", "influential")
            )
            values = {
                "occ": entity.occupation,
                "a_occ": _with_article(entity.occupation),
                "a_adj_occ": f"{_with_article(adj)} {entity.occupation}",
                "birth_year": str(entity.birth_year),
                "birth_city": entity.birth_city.name,
            }
            if entity.employer:
                values["employer"] = entity.employer.ref
            if entity.founded:
                values["org"] = entity.founded.ref
            if entity.term:
                values.update(
                    title=entity.term.country.leader_title,
                    country=entity.term.country.name,
                    start=str(entity.term.start),
                    end=str(entity.term.end),
                )
            return values
        if isinstance(entity, Organisation):
            return {
                "speciality": entity.speciality,
                "year": str(entity.founded_year),
                "founder": entity.founder.name,
                "city": entity.hq.name,
                "kind": entity.kind,
            }
        if isinstance(entity, City):
            return {
                "country": entity.country.name,
                "region": rng.choice(FILLER_WORDS["region"]),
                "year": str(entity.founded_year),
                "pop": f"{entity.population:,}",
            }
        return {
            "formal": entity.formal_name,
            "capital": entity.capital.name,
            "title": entity.leader_title,
            "pop": f"{entity.population_millions:g}",
        }

    def filler_values(self, template: str) -> dict[str, str]:
        """Random words for the slots `template` uses ({adj}, {a_animal}, ...); two slots never repeat a word."""
        rng, values = self.rng, {}
        for slot in _slots(template):
            if slot in SUBJECT_SLOTS or slot == "kind":
                continue
            pool = FILLER_WORDS[slot.removeprefix("a_").rstrip("2")]
            word = rng.choice([w for w in pool if w not in values.values()])
            values[slot] = _with_article(word) if slot in ("a_adj", "a_event") else word
        return values

    # -- planning ---------------------------------------------------------------------------------------------------
    def facts_of(self, entity: object) -> tuple[str, list[str], tuple[int, ...]]:
        """(lead fact, other facts, choices for the number of passages)."""
        if isinstance(entity, Person):
            others = ["birth_year", "birth_city"] + [
                fact
                for fact, value in (("employer", entity.employer), ("founded", entity.founded), ("term", entity.term))
                if value is not None
            ]
            return "occupation", others, (1, 2) if entity.term else (2, 2, 3)
        if isinstance(entity, Organisation):
            return "speciality", ["founded_year", "founder", "hq"], (2, 3)
        if isinstance(entity, City):
            lead = "capital" if entity.country.capital is entity else "country"
            return lead, ["founded_year", "population"], (2,)
        return "formal_name", ["capital", "leader_title", "population"], (2,)

    def plan(self, lead: str, others: list[str], counts: tuple[int, ...]) -> list[list[str]]:
        """Spread the facts over passages: the lead opens the first one, every fact appears at least once."""
        rng = self.rng
        n = min(rng.choice(counts), len(others) + 1)
        groups: list[list[str]] = [[lead]] + [[] for _ in range(n - 1)]
        rest = list(others)
        rng.shuffle(rest)
        for i, fact in enumerate(rest):
            groups[i + 1 if i + 1 < n else rng.randrange(n)].append(fact)
        if n > 1 and rng.random() < 0.25:  # some facts are stated twice, as on a real wiki
            fact = rng.choice(rest)
            rng.choice([group for group in groups if fact not in group]).append(fact)
        return groups

    def sentence_units(self, kind: str, facts: list[str]) -> list[tuple[str, ...]]:
        """Group facts into sentences, merging natural pairs ("born in X in 1843") some of the time."""
        units, left = [], list(facts)
        for combo in COMBOS.get(kind, ()):
            if all(fact in left for fact in combo) and self.rng.random() < 0.6:
                position = min(left.index(fact) for fact in combo)
                for fact in combo:
                    left.remove(fact)
                left.insert(position, combo)
        for item in left:
            units.append(item if isinstance(item, tuple) else (item,))
        return units

    # -- rendering ----------------------------------------------------------------------------------------------------
    def fact_sentence(
        self, entity: object, kind: str, unit: tuple[str, ...], values: dict[str, str], first: bool
    ) -> str:
        by_name = first or self.rng.random() < 0.3
        if unit == ("speciality",):
            template = self.rng.choice(ORGANISATION_LEADS[entity.kind])
        else:
            every, openers = self.fact_templates[kind][unit]
            template = self.rng.choice(openers if by_name else every)
        return _capitalise(template.format(**subject_forms(entity, by_name), **values))

    def recorded_facts(self, entity: object, unit: tuple[str, ...]) -> list[tuple[str, str]]:
        if unit == ("capital",) and isinstance(entity, City):  # "X is the capital of C" states both facts
            return [(entity.id, "country"), (entity.country.id, "capital")]
        return [(entity.id, fact) for fact in unit]

    def pad(self, kind: str, entity: object, sentences: list[str]) -> list[str]:
        """Insert fact-free filler after the opening sentence: up to MAX_FILLERS, more only to reach MIN_WORDS."""
        target = self.rng.randint(MIN_WORDS, 65)
        fillers = list(FILLERS[kind])
        self.rng.shuffle(fillers)
        words = sum(len(s.split()) for s in sentences)
        kind_word = {"kind": entity.kind} if isinstance(entity, Organisation) else {}
        added = 0
        while fillers and (words < MIN_WORDS or (words < target and added < MAX_FILLERS)):
            template = fillers.pop()
            text = template.format(**subject_forms(entity, False), **self.filler_values(template), **kind_word)
            if words + len(text.split()) > MAX_WORDS:
                continue
            sentences.insert(self.rng.randint(1, len(sentences)), _capitalise(text))
            words += len(text.split())
            added += 1
        return sentences

    def write_entity(self, entity: object) -> None:
        kind = _kind(entity)
        values = self.values(entity)
        lead, others, counts = self.facts_of(entity)
        for group in self.plan(lead, others, counts):
            sentences, facts = [], []
            for i, unit in enumerate(self.sentence_units(kind, group)):
                sentences.append(self.fact_sentence(entity, kind, unit, values, first=i == 0 or unit[0] == lead))
                facts += self.recorded_facts(entity, unit)
            self.drafts.append((entity.title, " ".join(self.pad(kind, entity, sentences)), facts))

    def write_chronology(self, country: Country) -> None:
        """The country's heads of state, 4-6 consecutive terms per passage."""
        terms, i = country.leaders, 0
        while i < len(terms):
            size = self.rng.randint(4, 6)
            if len(terms) - i - size < 4:  # never leave a stub of fewer than four terms for the last passage
                size = len(terms) - i
            chunk = terms[i : i + size]
            i += len(chunk)
            sentences = [
                self.rng.choice(CHRONOLOGY_OPENERS).format(
                    title=country.leader_title, s=country.name, first=chunk[0].start, last=chunk[-1].end
                )
            ]
            for j, term in enumerate(chunk):
                lines = CHRONOLOGY_LINES if j else CHRONOLOGY_LINES[:-2]  # "followed" needs a predecessor
                sentences.append(
                    self.rng.choice(lines).format(
                        name=term.person.name, title=country.leader_title, start=term.start, end=term.end
                    )
                )
            self.drafts.append((country.title, " ".join(sentences), [(term.person.id, "term") for term in chunk]))


def render_passages(
    rng: random.Random, entities: Entities, tick: Callable[[], None] = lambda: None
) -> tuple[list[Passage], FactIndex]:
    """All passages of the world in a deterministic shuffled order (ids "w0", "w1", ...) and their fact index."""
    writer = PassageWriter(rng)
    for entity in [*entities.countries, *entities.cities, *entities.organisations, *entities.people]:
        writer.write_entity(entity)
        if isinstance(entity, Country):
            writer.write_chronology(entity)
        tick()
    drafts = writer.drafts
    rng.shuffle(drafts)
    passages, index = [], {}
    for i, (title, text, facts) in enumerate(drafts):
        passages.append(Passage(id=f"w{i}", title=title, text=text))
        for fact in facts:
            index.setdefault(fact, []).append(f"w{i}")
    return passages, index
