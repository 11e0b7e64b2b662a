"""Fictional names that read naturally and never collide.

The world is only contamination-free if no name exists outside it, so every name comes from a syllable
generator with a few language "flavours" (Nordic, Romance, Slavic, Anglo, Hellenic, Germanic: `flavours`) and is
checked against a blocklist of real countries, cities and famous surnames. `NameRegistry` hands out names
and remembers every one it gave (normalised with SQuAD's `normalize_answer`, the same rule EM uses), so two
entities never share a name and a question naming an entity is never ambiguous. `twin_variants` makes the
near-identical names of distractor entities ("Aldric Varn" / "Aldrik Varn").
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from inspo_cli.metrics import normalize_answer
from inspo_cli.world.flavours import Flavour

# Real places and famous people a generator could plausibly spell; any name containing one as a word is rejected.
BLOCKLIST: frozenset[str] = frozenset(
    """
afghanistan albania algeria andorra angola argentina armenia australia austria belgium bolivia bosnia brazil
bulgaria canada chile china colombia croatia cuba cyprus czechia denmark egypt england estonia ethiopia finland
france georgia germany ghana greece hungary iceland india indonesia iran iraq ireland israel italy jamaica japan
jordan kenya korea latvia lebanon libya lithuania luxembourg malta mexico moldova monaco mongolia morocco nepal
netherlands nigeria norway oman pakistan panama peru poland portugal qatar romania russia rwanda scotland serbia
slovakia slovenia somalia spain sudan sweden switzerland syria taiwan togo tonga tunisia turkey uganda ukraine
uruguay venezuela vietnam wales yemen zambia chad mali niger laos fiji samoa benin gabon guinea kosovo tibet
berlin paris london rome roma madrid lisbon vienna prague warsaw moscow oslo stockholm helsinki copenhagen dublin
athens sofia riga tallinn vilnius kiev kyiv minsk budapest bucharest belgrade zagreb milan milano turin torino
naples napoli venice venezia verona genoa genova florence firenze parma pisa siena padova padua bari palermo
bologna modena lima quito bogota caracas havana boston austin dallas denver chicago houston phoenix seattle
bergen malmo uppsala lund trondheim stavanger aarhus odense hamburg munich bremen dresden leipzig cologne bonn
frankfurt stuttgart nuremberg hanover hannover augsburg freiburg heidelberg salzburg graz linz innsbruck zurich
geneva basel bern lyon marseille nice nantes lille bordeaux toulouse porto seville sevilla valencia malaga
granada bilbao oxford cambridge bristol preston bolton burton clifton milton ashford bradford stafford watford
norwich ipswich warwick berwick brighton kingston stockton hampton southampton northampton wellington ashton
bath york leeds derby dover exeter chester lancaster winchester salisbury durham carlisle sheffield wakefield
lichfield hereford guildford oxford chelmsford sparta thebes corinth patras larissa kalamata delphi olympia
troy crete rhodes smyrna izmir ankara istanbul kazan omsk tomsk samara perm ufa krakow gdansk poznan lodz
brno ostrava plzen kosice split zadar novi sad nis varna burgas plovdiv ruse kaunas tartu narva turku tampere
espoo vaasa odessa lviv kharkiv dnipro minsk gomel brest slavonia serbia bohemia moravia silesia bavaria saxony
prussia hesse flanders wallonia holland zealand jutland lapland finnmark denmark iceland greenland ireland
scotland england normandy brittany provence tuscany sicily sardinia corsica lombardy
einstein newton darwin mozart bach beethoven chopin verdi puccini vivaldi wagner brahms handel haydn liszt
shakespeare dickens austen bronte keats byron shelley wordsworth milton chaucer tolstoy dostoevsky chekhov
pushkin goethe schiller kafka hesse mann tesla edison curie pasteur galileo kepler copernicus plato socrates
aristotle homer napoleon caesar lincoln washington jefferson churchill stalin lenin hitler gandhi picasso
rembrandt vermeer monet renoir dali kahlo nobel hawking turing lovelace babbage faraday maxwell bohr planck
heisenberg schrodinger fermi dirac euler gauss riemann hilbert leibniz descartes pascal fermat laplace
lagrange fourier ampere volta ohm watt kelvin joule hertz celsius fahrenheit linnaeus mendel humboldt
amundsen nansen ibsen grieg sibelius strindberg andersen kierkegaard nielsen larsson petersen hansen johansen
olsen jensen andersson karlsson nilsson eriksson svensson gustafsson rossi russo ferrari esposito bianchi
romano colombo ricci marino greco bruno gallo conti costa ivanov petrov smirnov sidorov popov kuznetsov
novak horvat kovac nowak kowalski wisniewski smith jones taylor brown wilson evans thomas johnson roberts
walker wright robinson thompson white hughes edwards green hall wood harris martin jackson clarke lewis
papadopoulos georgiou mueller muller schmidt schneider fischer weber meyer wagner becker schulz hoffmann
koch richter klein wolf schroder neumann zimmermann braun kruger hartmann lange werner krause lehmann
maria anna john peter paul mary george james david michael elena ivan olga sophia
""".split()
)

# Fragments that must not appear anywhere inside a generated word (offensive or confusing substrings).
BAD_FRAGMENTS: tuple[str, ...] = (
    "nazi",
    "shit",
    "fuck",
    "cunt",
    "dick",
    "cock",
    "rape",
    "porn",
    "slut",
    "nig",
    "fag",
    "kill",
    "sex",
    "anal",
    "piss",
    "hitl",
    "jew",
    "cum",
    "tit",
    "ass",
    "damn",
    "poo",
    "puke",
    "kkk",
    "isis",
    "gay",
    "negr",
    "homo",
    "dead",
    "die",
    "hell",
)

_VOWELS = "aeiouy"


def _clean(word: str, min_len: int = 4, max_len: int = 11) -> bool:
    """A generated word is usable if it is short, pronounceable-looking and neither real nor offensive."""
    lower = word.lower()
    if not min_len <= len(lower) <= max_len or lower in BLOCKLIST:
        return False
    if any(fragment in lower for fragment in BAD_FRAGMENTS):
        return False
    run = 0
    for i, ch in enumerate(lower):
        if i >= 2 and ch == lower[i - 1] == lower[i - 2]:
            return False
        run = 0 if ch in _VOWELS else run + 1
        if run > 3:
            return False
    return not any(pair in lower for pair in ("aa", "ii", "uu", "yy", "yi", "iy", "uo", "oe", "ao"))


def _join(stem: str, ending: str) -> str:
    """Glue a stem and an ending, dropping the stem's last vowel when both meet on a vowel (Vela+ano -> Velano)."""
    if ending and stem and stem[-1] in _VOWELS and ending[0] in _VOWELS:
        stem = stem[:-1]
    return stem + ending


def _stem(rng: random.Random, flavour: Flavour, syllables: int) -> str:
    """Onset + vowel, then (consonants + single vowel) per extra syllable: diphthongs only come first."""
    stem = rng.choice(flavour.onsets) + rng.choice(flavour.vowels)
    for _ in range(syllables - 1):
        stem += rng.choice(flavour.middles) + rng.choice([v for v in flavour.vowels if len(v) == 1])
    return stem


@dataclass(frozen=True)
class WordShape:
    """How long one kind of name is: stem syllable counts to draw from, and length bounds."""

    syllables: tuple[int, ...]
    min_len: int
    max_len: int


SHAPES = {
    "place": WordShape((1, 2, 2), 5, 10),
    "country": WordShape((1, 2, 2), 5, 10),
    "family": WordShape((1, 1, 2), 4, 10),
    "given": WordShape((1, 1, 1, 2), 4, 8),
    "root": WordShape((2,), 5, 9),
}


def make_word(rng: random.Random, flavour: Flavour, endings: tuple[str, ...], syllables: int) -> str:
    """One capitalised word: a stem of `syllables` syllables plus a flavour ending (the caller checks it)."""
    word = _join(_stem(rng, flavour, syllables), rng.choice(endings))
    return word[:1].upper() + word[1:]


def normalize_name(name: str) -> str:
    return normalize_answer(name)


# Letter swaps that keep a name looking almost the same; applied anywhere but the first letter.
_SWAPS: tuple[tuple[str, str], ...] = (
    ("c", "k"),
    ("k", "c"),
    ("v", "w"),
    ("i", "y"),
    ("y", "i"),
    ("s", "z"),
    ("f", "ph"),
    ("ph", "f"),
    ("a", "e"),
    ("e", "a"),
    ("o", "u"),
    ("u", "o"),
    ("ll", "l"),
    ("l", "ll"),
    ("nn", "n"),
    ("n", "nn"),
    ("t", "th"),
    ("th", "t"),
    ("d", "t"),
    ("ei", "ie"),
    ("ie", "ei"),
    ("ia", "ai"),
)


def twin_variants(word: str) -> list[str]:
    """Spellings one letter (or one letter pair) away from `word`: Aldric -> Aldrik, Velmora -> Velmara.

    The first two letters are kept (so the twin starts like the original), and doubled consonants only
    follow a vowel (Varn -> Varrn, never Klla).
    """
    out: list[str] = []
    for old, new in _SWAPS:
        start = 2
        while (i := word.find(old, start)) != -1:
            doubled = len(new) == 2 and new[0] == new[1]
            if not doubled or word[i - 1].lower() in _VOWELS:
                variant = word[:i] + new + word[i + len(old) :]
                if variant != word and variant not in out:
                    out.append(variant)
            start = i + 1
    return out


class NameRegistry:
    """Hands out unique, clean names and remembers them all (by normalised form).

    Two namespaces: `words` (cities, countries, organisation roots, family names: each used once) and
    `given` (given names: shared by many people, but never equal to a word). Full person names and organisation
    names live in `full` so no two entities, and no alias, share a normalised name.
    """

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.words: dict[str, str] = {}
        self.given: dict[str, str] = {}
        self.full: dict[str, str] = {}

    def _free_word(self, word: str, shape: WordShape) -> bool:
        key = normalize_name(word)
        return (
            _clean(word, shape.min_len, shape.max_len)
            and key not in self.words
            and key not in self.given
            and key not in self.full
        )

    def claim_word(self, word: str, shape: WordShape = SHAPES["place"]) -> bool:
        if not self._free_word(word, shape):
            return False
        self.words[normalize_name(word)] = word
        return True

    def claim_full(self, name: str) -> bool:
        key = normalize_name(name)
        if key in self.full or key in self.words or any(part in BLOCKLIST for part in key.split()):
            return False
        self.full[key] = name
        return True

    def is_taken(self, name: str) -> bool:
        key = normalize_name(name)
        return key in self.full or key in self.words

    def new_word(self, flavour: Flavour, endings: tuple[str, ...], shape: WordShape) -> str:
        for _ in range(1000):
            word = make_word(self.rng, flavour, endings, self.rng.choice(shape.syllables))
            if self.claim_word(word, shape):
                return word
        raise RuntimeError(f"name generator exhausted for flavour {flavour.name}")  # a bug: too many names

    def place(self, flavour: Flavour) -> str:
        return self.new_word(flavour, flavour.places, SHAPES["place"])

    def country(self, flavour: Flavour) -> str:
        return self.new_word(flavour, flavour.countries, SHAPES["country"])

    def family(self, flavour: Flavour) -> str:
        return self.new_word(flavour, flavour.families, SHAPES["family"])

    def root(self, flavour: Flavour) -> str:
        return self.new_word(flavour, flavour.roots, SHAPES["root"])

    def given_name(self, flavour: Flavour, gender: str) -> str:
        endings = flavour.female if gender == "female" else flavour.male
        shape = SHAPES["given"]
        for _ in range(1000):
            word = make_word(self.rng, flavour, endings, self.rng.choice(shape.syllables))
            key = normalize_name(word)
            if key in self.given:
                return word
            if _clean(word, shape.min_len, shape.max_len) and key not in self.words and key not in self.full:
                self.given[key] = word
                return word
        raise RuntimeError(f"given-name generator exhausted for flavour {flavour.name}")

    def twin_word(self, word: str) -> str | None:
        """A free near-identical spelling of `word`, claimed; None if every variant is taken."""
        variants = twin_variants(word)
        self.rng.shuffle(variants)
        shape = WordShape((1,), 3, 12)  # a twin may be one letter longer than its original
        for variant in variants:
            if self.claim_word(variant, shape):
                return variant
        return None
