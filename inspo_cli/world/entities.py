"""The entities of a synthetic world: countries, cities, organisations and people, and how they link
(`fact_graph` generates them).

Entities refer to each other directly (no id lookups); they compare by identity and their reprs stop at
references so cycles (country -> capital -> country) print fine.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from inspo_cli.world.flavours import Flavour

# Organisations whose names read better with "the" in running text ("at the Velmora Philharmonic").
ARTICLE_KINDS = ("orchestra", "observatory", "institute", "museum", "shipyard")


@dataclass(eq=False)
class Country:
    id: str
    name: str
    formal_name: str
    leader_title: str
    flavour: Flavour = field(repr=False)
    population_millions: float
    capital: City | None = field(default=None, repr=False)
    leaders: list[LeaderTerm] = field(default_factory=list, repr=False)
    cities: list[City] = field(default_factory=list, repr=False)

    @property
    def title(self) -> str:
        return self.name


@dataclass(eq=False)
class City:
    id: str
    name: str
    country: Country = field(repr=False)
    founded_year: int
    population: int
    twin_of: City | None = field(default=None, repr=False)

    @property
    def title(self) -> str:
        return self.name


@dataclass(eq=False)
class Organisation:
    id: str
    root: str
    suffix: str
    kind: str
    speciality: str  # what it makes, studies or plays: "precision optics", "variable stars"
    founded_year: int
    hq: City = field(repr=False)
    founder: Person | None = field(default=None, repr=False)
    twin_of: Organisation | None = field(default=None, repr=False)
    short_alias: bool = False  # whether the bare root is a safe alias (generic suffix, root used by no one else)

    @property
    def name(self) -> str:
        return f"{self.root} {self.suffix}"

    @property
    def title(self) -> str:
        return self.name

    @property
    def ref(self) -> str:
        """How running text names it: with "the" for orchestras, observatories and the like."""
        return f"the {self.name}" if self.kind in ARTICLE_KINDS else self.name


@dataclass(eq=False)
class LeaderTerm:
    person: Person = field(repr=False)
    country: Country = field(repr=False)
    start: int
    end: int


@dataclass(eq=False)
class Person:
    id: str
    given: str
    family: str
    middle: str | None  # an initial like "T." for some people; the name without it is an alias
    gender: str
    birth_year: int
    birth_city: City = field(repr=False)
    occupation: str
    employer: Organisation | None = field(default=None, repr=False)
    founded: Organisation | None = field(default=None, repr=False)
    term: LeaderTerm | None = field(default=None, repr=False)
    twin_of: Person | None = field(default=None, repr=False)
    disambiguation: str | None = None  # Wikipedia-style title suffix, e.g. "painter"

    @property
    def name(self) -> str:
        return f"{self.given} {self.middle} {self.family}" if self.middle else f"{self.given} {self.family}"

    @property
    def short_name(self) -> str:
        return f"{self.given} {self.family}"

    @property
    def title(self) -> str:
        return f"{self.name} ({self.disambiguation})" if self.disambiguation else self.name


@dataclass
class Entities:
    countries: list[Country]
    cities: list[City]
    organisations: list[Organisation]
    people: list[Person]  # everyone: staff, founders, heads of state, twins
    twins: list[tuple[object, object]]  # (original, distractor twin)

    @property
    def leaders(self) -> list[Person]:
        return [person for person in self.people if person.term is not None]

    def counts(self) -> dict[str, int]:
        return {
            "countries": len(self.countries),
            "cities": len(self.cities),
            "organisations": len(self.organisations),
            "people": len(self.people),
            "heads_of_state": len(self.leaders),
            "distractor_twins": len(self.twins),
        }
