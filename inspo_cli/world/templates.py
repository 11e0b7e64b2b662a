"""The wording of the world's facts: sentence templates per fact, chronology lines and organisation leads (the
fact-free filler sentences are `fillers`).

Many templates per fact keep passages from sharing one lexical pattern a policy (or BM25) could latch on to.
Placeholders: the subject is {S}/{s} (sentence start / inside a sentence), {p}/{P} its possessive, {pr}/{Pr}
its pronoun and {o} its object form; the other fields are fact values filled in by `passages.py`. A template
that names {S}/{s} before any pronoun can open a passage (the passage then names its entity first).
"""

from __future__ import annotations

FACT_TEMPLATES: dict[str, dict[tuple[str, ...], tuple[str, ...]]] = {
    "person": {
        ("occupation",): (
            "{S} was {a_adj_occ}.",
            "{S} worked as {a_occ} for most of {p} life.",
            "By profession {s} was {a_occ}.",
            "{S} is remembered above all as {a_adj_occ}.",
            "{S} made a living as {a_occ}, a trade {pr} took up young.",
        ),
        ("occupation", "birth_year"): (
            "{S} (born {birth_year}) was {a_adj_occ}.",
            "{S}, born in {birth_year}, was {a_occ}.",
        ),
        ("birth_year",): (
            "{S} was born in {birth_year}.",
            "{S} was born in the year {birth_year}.",
            "Parish records show that {s} was born in {birth_year}.",
            "{S} was born in {birth_year}, the youngest of several children.",
        ),
        ("birth_city",): (
            "{S} was born in {birth_city}.",
            "{S} was born and raised in {birth_city}.",
            "{S} was a native of {birth_city}, where {pr} was born.",
            "{S} was born in the city of {birth_city}.",
        ),
        ("birth_year", "birth_city"): (
            "{S} was born in {birth_city} in {birth_year}.",
            "{S} was born in {birth_year} in the city of {birth_city}.",
            "Born in {birth_city} in {birth_year}, {s} spent {p} early years there.",
        ),
        ("employer",): (
            "{S} worked for {employer}.",
            "{S} spent much of {p} career at {employer}.",
            "For many years {s} was employed by {employer}.",
            "{S} later joined the staff of {employer}.",
            "{S} held a post at {employer} for over a decade.",
        ),
        ("founded",): (
            "{S} founded {org}.",
            "{S} is best known as the founder of {org}.",
            "In later life {s} established {org}.",
            "{S} was the founder of {org}.",
        ),
        ("term",): (
            "{S} served as {title} of {country} from {start} to {end}.",
            "From {start} to {end}, {s} was the {title} of {country}.",
            "{S} held the office of {title} of {country} between {start} and {end}.",
            "{S} led {country} as its {title} from {start} until {end}.",
        ),
    },
    "organisation": {
        ("founded_year",): (
            "{S} was founded in {year}.",
            "{S} was established in {year}.",
            "{S} was formally founded in {year}.",
            "The foundation of {s} dates to {year}.",
            "{S} opened its doors in {year}, the year it was founded.",
        ),
        ("founder",): (
            "{S} was founded by {founder}.",
            "{founder} founded {s}.",
            "{S} owes its existence to {founder}, who founded it.",
            "Its founder was {founder}.",
        ),
        ("founded_year", "founder"): (
            "{S} was founded in {year} by {founder}.",
            "{S} was established by {founder} in {year}.",
            "{founder} founded {s} in {year}.",
            "In {year}, {founder} founded {s}.",
        ),
        ("hq",): (
            "{S} is based in {city}.",
            "{S} is headquartered in {city}.",
            "{S} has its headquarters in {city}.",
            "Its headquarters are in {city}.",
            "The main offices of {s} are in {city}.",
        ),
    },
    "city": {
        ("country",): (
            "{S} is a city in {country}.",
            "{S} is a town in the {region} part of {country}.",
            "{S} is a city located in {country}.",
            "{S} is one of the older cities of {country}.",
        ),
        ("capital",): (
            "{S} is the capital of {country}.",
            "{S} is the capital and largest city of {country}.",
        ),
        ("founded_year",): (
            "{S} was founded in {year}.",
            "{S} was founded in {year} as a small market town.",
            "According to the town chronicle, {s} was founded in {year}.",
            "{S} was founded in {year} by settlers from the surrounding valleys.",
        ),
        ("population",): (
            "{S} has a population of about {pop}.",
            "About {pop} people live in {s}.",
            "{S} is home to roughly {pop} inhabitants.",
        ),
    },
    "country": {
        ("formal_name",): (
            "{S}, officially the {formal}, is a sovereign state.",
            "{S} (officially the {formal}) is a country with a long parliamentary tradition.",
            "The {formal}, usually called {s}, is a small sovereign state.",
        ),
        ("capital",): (
            "The capital of {s} is {capital}.",
            "{S} is governed from its capital, {capital}.",
            "{capital} is the capital of {s}.",
        ),
        ("leader_title",): (
            "The head of state of {s} holds the title of {title}.",
            "{S} is led by a {title}, chosen for a term of varying length.",
        ),
        ("population",): (
            "{S} has roughly {pop} million inhabitants.",
            "About {pop} million people live in {s}.",
        ),
    },
}

# How one head of state reads inside a country's chronology passage.
CHRONOLOGY_OPENERS = (
    "The following people served as {title} of {s} between {first} and {last}.",
    "Between {first} and {last}, {s} was led by a succession of heads of state.",
    "This is part of the chronology of the heads of state of {s}, covering {first} to {last}.",
)
CHRONOLOGY_LINES = (  # the last two need a predecessor in the same passage
    "{name} served as {title} from {start} to {end}.",
    "{name} held the office from {start} to {end}.",
    "{name} was {title} from {start} until {end}.",
    "{name} followed, serving from {start} to {end}.",
    "{name} succeeded to the office in {start} and held it until {end}.",
)

# Kind-specific opening descriptions of an organisation (its "speciality" fact).
ORGANISATION_LEADS: dict[str, tuple[str, ...]] = {
    "company": (
        "{S} is a company that manufactures {speciality}.",
        "{S} is a manufacturing firm specialising in {speciality}.",
        "{S} is a family-run business producing {speciality}.",
    ),
    "university": (
        "{S} is a university known for its teaching of {speciality}.",
        "{S} is a public university with a strong tradition in {speciality}.",
    ),
    "orchestra": (
        "{S} is an orchestra devoted mainly to {speciality}.",
        "{S} is a professional orchestra known for its performances of {speciality}.",
    ),
    "observatory": (
        "{S} is an astronomical observatory that specialises in the study of {speciality}.",
        "{S} is an observatory best known for its observations of {speciality}.",
    ),
    "shipyard": (
        "{S} is a shipyard that builds {speciality}.",
        "{S} is a shipbuilding yard specialising in {speciality}.",
    ),
    "institute": (
        "{S} is a research institute working in {speciality}.",
        "{S} is a scientific institute dedicated to {speciality}.",
    ),
    "publisher": (
        "{S} is a publishing house known for its {speciality}.",
        "{S} is a publisher specialising in {speciality}.",
    ),
    "museum": ("{S} is a museum devoted to {speciality}.", "{S} is a museum whose collections focus on {speciality}."),
    "bank": ("{S} is a bank specialising in {speciality}.", "{S} is a financial institution known for {speciality}."),
}
