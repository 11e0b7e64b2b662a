"""The fact graph of a synthetic world, generated: which entities exist and every fact that links them.

Everything a question can ask is decided here, before any text is written: a person's birth city and year,
occupation and employer; an organisation's founding year, founder, headquarters and field; a city's country,
founding year and population; a country's capital and its chronological chain of heads of state. Distractor
twins are separate entities whose names differ by a letter or a suffix and whose facts all differ.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from typing import Any

from inspo_cli.world.entities import City, Country, Entities, LeaderTerm, Organisation, Person
from inspo_cli.world.flavours import FLAVOURS, Flavour
from inspo_cli.world.names import NameRegistry
from inspo_cli.world.sizes import LAST_YEAR, WorldSize

# kind: (name suffixes, fields, founder occupations, staff occupations); suffix pairs below make twins.
ORGANISATION_KINDS: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "company": (
        ("Company", "Works", "Industries", "& Co.", "Manufacturing Company"),
        (
            "glassware",
            "railway signals",
            "textile dyes",
            "precision optics",
            "marine engines",
            "printing presses",
            "porcelain",
            "clockwork instruments",
            "farm machinery",
            "copper wire",
        ),
        ("industrialist", "engineer", "merchant"),
        ("engineer", "chemist", "accountant", "draughtsman"),
    ),
    "university": (
        ("University", "College", "Institute of Technology"),
        ("natural philosophy", "law and medicine", "engineering", "agricultural science", "languages"),
        ("scholar", "philosopher", "theologian"),
        ("mathematician", "historian", "linguist", "botanist"),
    ),
    "orchestra": (
        ("Philharmonic", "Symphony Orchestra", "Chamber Orchestra"),
        ("symphonic repertoire", "chamber music", "choral works", "contemporary music", "opera"),
        ("conductor", "composer"),
        ("cellist", "violinist", "oboist", "conductor", "composer"),
    ),
    "observatory": (
        ("Observatory", "Astronomical Observatory"),
        ("solar flares", "variable stars", "comets", "planetary surfaces", "double stars"),
        ("astronomer",),
        ("astronomer", "instrument maker", "mathematician"),
    ),
    "shipyard": (
        ("Shipyard", "Shipbuilding Company", "Dockyards"),
        ("fishing trawlers", "river ferries", "icebreakers", "sailing yachts", "cargo steamers"),
        ("shipbuilder", "merchant"),
        ("shipwright", "naval architect", "engineer", "rigger"),
    ),
    "institute": (
        ("Institute", "Research Institute"),
        ("marine biology", "tropical medicine", "metallurgy", "soil science", "acoustics"),
        ("physician", "chemist"),
        ("chemist", "biologist", "geologist", "physician"),
    ),
    "publisher": (
        ("Press", "Publishing House"),
        ("atlases", "scientific journals", "children's books", "poetry", "dictionaries"),
        ("printer", "bookseller"),
        ("editor", "novelist", "illustrator", "typesetter"),
    ),
    "museum": (
        ("Museum", "Gallery"),
        ("natural history", "maritime history", "folk costume", "clocks and automata", "ceramics"),
        ("collector", "naturalist"),
        ("curator", "archivist", "painter", "conservator"),
    ),
    "bank": (
        ("Bank", "Savings Bank"),
        ("agricultural credit", "shipping insurance", "small savings", "railway bonds", "trade finance"),
        ("banker", "merchant"),
        ("banker", "economist", "accountant", "clerk"),
    ),
}
KIND_WEIGHTS = {
    "company": 4,
    "university": 2,
    "orchestra": 2,
    "observatory": 1,
    "shipyard": 2,
    "institute": 2,
    "publisher": 2,
    "museum": 1,
    "bank": 2,
}
TWIN_SUFFIXES = {
    "Institute": "Institution",
    "Works": "Workshops",
    "Industries": "Industrial",
    "Company": "Companies",
    "Shipyard": "Shipyards",
    "Press": "Presse",
    "Philharmonic": "Philharmonia",
    "College": "Collegium",
    "Observatory": "Observatorium",
    "Museum": "Musaeum",
    "Bank": "Banking House",
    "Gallery": "Galleries",
    "Dockyards": "Dockyard",
}
# Suffixes generic enough that the bare root is a natural short answer ("Velmora" for "Velmora Company").
GENERIC_SUFFIXES = ("Company", "Works", "Industries", "& Co.")
LEADER_OCCUPATIONS = ("politician", "lawyer", "diplomat", "general", "judge", "journalist")
STATE_FORMS = (
    ("Republic of {}", "President"),
    ("Federal Republic of {}", "Chancellor"),
    ("Commonwealth of {}", "First Minister"),
    ("Principality of {}", "Prime Minister"),
    ("Union of {}", "Premier"),
    ("Grand Duchy of {}", "Chancellor"),
    ("Free State of {}", "President"),
)


class _Builder:
    """Builds the fact graph in dependency order with one shared random stream."""

    def __init__(self, rng: random.Random, size: WorldSize):
        self.rng, self.size = rng, size
        self.names = NameRegistry(rng)
        self.countries: list[Country] = []
        self.cities: list[City] = []
        self.organisations: list[Organisation] = []
        self.people: list[Person] = []
        self.twins: list[tuple[object, object]] = []

    # -- places -------------------------------------------------------------------------------------------------
    def add_countries(self) -> None:
        flavours = list(FLAVOURS)
        self.rng.shuffle(flavours)
        for i in range(self.size.countries):
            flavour = flavours[i % len(flavours)]
            name = self.names.country(flavour)
            form, title = self.rng.choice(STATE_FORMS)
            self.names.claim_full(form.format(name))
            self.countries.append(
                Country(f"country-{i}", name, form.format(name), title, flavour, round(self.rng.uniform(0.8, 45.0), 1))
            )

    def new_city(self, country: Country, name: str | None = None) -> City:
        flavour = country.flavour if self.rng.random() < 0.85 else self.rng.choice(FLAVOURS)
        city = City(
            f"city-{len(self.cities)}",
            name or self.names.place(flavour),
            country,
            self.rng.randint(820, 1880),
            self.rng.randrange(3_000, 400_000, 100),
        )
        self.cities.append(city)
        country.cities.append(city)
        return city

    def add_cities(self) -> None:
        homes = [country for country in self.countries for _ in range(2)]
        homes += [self.rng.choice(self.countries) for _ in range(self.size.cities - len(homes))]
        for country in homes:
            self.new_city(country)
        for country in self.countries:
            capital = self.rng.choice(country.cities)
            largest = max(city.population for city in country.cities)
            capital.population = largest + self.rng.randrange(20_000, 600_000, 1000)
            country.capital = capital

    # -- people ---------------------------------------------------------------------------------------------------
    def person_name(self, flavour: Flavour, gender: str, middle_share: float) -> tuple[str, str | None, str]:
        """A free (given, middle initial or None, family), claimed; with an initial, the short form is claimed too."""
        for _ in range(200):
            given, family = self.names.given_name(flavour, gender), self.names.family(flavour)
            middle = self.rng.choice("ABCDEFGHJKLMNPRSTVW") + "." if self.rng.random() < middle_share else None
            if middle is None:
                if self.names.claim_full(f"{given} {family}"):
                    return given, None, family
            elif not self.names.is_taken(f"{given} {family}") and self.names.claim_full(f"{given} {middle} {family}"):
                self.names.claim_full(f"{given} {family}")
                return given, middle, family
        raise RuntimeError("could not find a free person name")  # a bug: the generator is too narrow

    def new_person(
        self,
        birth_year: int,
        birth_city: City,
        occupation: str,
        middle_share: float = 0.0,
        name: tuple[str, str | None, str] | None = None,
        gender: str | None = None,
    ) -> Person:
        """A person born in `birth_city`; `name` (already claimed) is given for twins, else one is made up."""
        gender = gender or self.rng.choice(("female", "male"))
        flavour = birth_city.country.flavour if self.rng.random() < 0.8 else self.rng.choice(FLAVOURS)
        given, middle, family = name or self.person_name(flavour, gender, middle_share)
        person = Person(f"person-{len(self.people)}", given, family, middle, gender, birth_year, birth_city, occupation)
        self.people.append(person)
        return person

    def city_in_or_near(self, country: Country, home_share: float) -> City:
        return self.rng.choice(country.cities) if self.rng.random() < home_share else self.rng.choice(self.cities)

    def add_leaders(self) -> None:
        for country in self.countries:
            year = self.size.first_year - self.rng.randint(10, 25)
            while year < LAST_YEAR:
                end = min(year + self.rng.choice((3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 16, 18)), LAST_YEAR)
                if LAST_YEAR - end < 3:
                    end = LAST_YEAR
                person = self.new_person(
                    year - self.rng.randint(34, 62),
                    self.rng.choice(country.cities),
                    self.rng.choice(LEADER_OCCUPATIONS),
                )
                person.term = LeaderTerm(person, country, year, end)
                country.leaders.append(person.term)
                year = end

    # -- organisations --------------------------------------------------------------------------------------------
    def new_organisation(self, kind: str, root: str, suffix: str, founded_year: int, hq: City) -> Organisation:
        specialities = ORGANISATION_KINDS[kind][1]
        org = Organisation(
            f"org-{len(self.organisations)}", root, suffix, kind, self.rng.choice(specialities), founded_year, hq
        )
        self.names.claim_full(org.name)
        founder_home = self.city_in_or_near(hq.country, 0.6)
        org.founder = self.new_person(
            founded_year - self.rng.randint(24, 58), founder_home, self.rng.choice(ORGANISATION_KINDS[kind][2])
        )
        org.founder.founded = org
        self.organisations.append(org)
        return org

    def add_organisations(self) -> None:
        kinds = list(KIND_WEIGHTS)
        weights = [KIND_WEIGHTS[kind] for kind in kinds]
        for _ in range(self.size.organisations):
            kind = self.rng.choices(kinds, weights)[0]
            hq = self.rng.choice(self.cities)
            flavour = hq.country.flavour if self.rng.random() < 0.7 else self.rng.choice(FLAVOURS)
            self.new_organisation(
                kind,
                self.names.root(flavour),
                self.rng.choice(ORGANISATION_KINDS[kind][0]),
                self.rng.randint(self.size.first_year, LAST_YEAR - 10),
                hq,
            )

    def staff_birth_year(self, org: Organisation) -> int:
        earliest = max(self.size.first_year - 40, org.founded_year - 45)
        return self.rng.randint(earliest, min(2001, org.founded_year + 150))

    def add_staff(self) -> None:
        for _ in range(self.size.people):
            org = self.rng.choice(self.organisations)
            person = self.new_person(
                self.staff_birth_year(org),
                self.city_in_or_near(org.hq.country, 0.6),
                self.rng.choice(ORGANISATION_KINDS[org.kind][3]),
                middle_share=0.15,
            )
            person.employer = org

    # -- distractor twins -------------------------------------------------------------------------------------------
    def other_year(self, year: int, low: int, high: int) -> int:
        choices = [y for y in range(low, high + 1) if abs(y - year) >= 2]
        return self.rng.choice(choices)

    def twin_city(self, city: City) -> City | None:
        name = self.names.twin_word(city.name)
        if name is None:
            return None
        others = [country for country in self.countries if country is not city.country]
        twin = self.new_city(self.rng.choice(others), name)
        twin.founded_year = self.other_year(city.founded_year, 820, 1880)
        twin.twin_of = city
        return twin

    def twin_organisation(self, org: Organisation) -> Organisation | None:
        root, suffix = org.root, TWIN_SUFFIXES.get(org.suffix)
        if suffix is None or self.names.is_taken(f"{root} {suffix}") or self.rng.random() < 0.4:
            twin_root = self.names.twin_word(org.root)
            if twin_root is None:
                return None
            root, suffix = twin_root, org.suffix
        hq = self.rng.choice([city for city in self.cities if city is not org.hq])
        founded = self.other_year(org.founded_year, self.size.first_year, LAST_YEAR - 10)
        twin = self.new_organisation(org.kind, root, suffix, founded, hq)
        twin.twin_of = org
        return twin

    def twin_person(self, person: Person) -> Person | None:
        change_given = self.rng.random() < 0.5
        word = self.names.twin_word(person.given if change_given else person.family)
        if word is None:
            return None
        given, family = (word, person.family) if change_given else (person.given, word)
        if person.middle and (
            self.names.is_taken(f"{given} {family}") or not self.names.claim_full(f"{given} {person.middle} {family}")
        ):
            return None
        if not self.names.claim_full(f"{given} {family}"):
            return None
        org = self.rng.choice([o for o in self.organisations if o is not person.employer])
        city = self.rng.choice([c for c in self.cities if c is not person.birth_city])
        occupation = self.rng.choice(ORGANISATION_KINDS[org.kind][3])
        birth_year = self.staff_birth_year(org)
        if birth_year == person.birth_year:
            birth_year += 1
        twin = self.new_person(birth_year, city, occupation, name=(given, person.middle, family), gender=person.gender)
        twin.employer, twin.twin_of = org, person
        if occupation != person.occupation and self.rng.random() < 0.5:
            person.disambiguation, twin.disambiguation = person.occupation, occupation
        return twin

    def add_twins(self) -> None:
        share = self.size.distractor_share
        staff = [person for person in self.people if person.employer is not None]
        makers: tuple[tuple[list[Any], Callable[[Any], object | None]], ...] = (
            (list(self.cities), self.twin_city),
            (list(self.organisations), self.twin_organisation),
            (staff, self.twin_person),
        )
        for pool, make in makers:
            for original in self.rng.sample(pool, round(share * len(pool))):
                twin = make(original)
                if twin is not None:
                    self.twins.append((original, twin))

    def finish(self) -> Entities:
        roots = Counter(org.root for org in self.organisations)
        for org in self.organisations:
            org.short_alias = org.suffix in GENERIC_SUFFIXES and roots[org.root] == 1
        return Entities(self.countries, self.cities, self.organisations, self.people, self.twins)


def build_entities(rng: random.Random, size: WorldSize) -> Entities:
    """Generate every entity and fact of a world of `size`, drawing only from `rng`."""
    builder = _Builder(rng, size)
    builder.add_countries()
    builder.add_cities()
    builder.add_leaders()
    builder.add_organisations()
    builder.add_staff()
    builder.add_twins()
    return builder.finish()
