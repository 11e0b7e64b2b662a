"""How big a synthetic world is: the `WorldSize` counts and the named presets the CLI offers.

A preset fixes the number of countries, cities, organisations and people, the share of entities that get a
near-identical distractor twin, how far back history goes, and how many questions each split gets. Founders
(one per organisation) and heads of state (a chronological chain per country) come on top of `people`.
"""

from __future__ import annotations

from dataclasses import dataclass

from inspo_cli.errors import InspoError

SPLITS: tuple[str, ...] = ("train", "dev", "test")
LAST_YEAR = 2025  # the present of the world: the last head of state's term ends here


@dataclass(frozen=True)
class WorldSize:
    """Counts that decide how large a generated world is; validated on construction."""

    name: str
    countries: int
    cities: int
    organisations: int
    people: int  # people with an employer; founders and heads of state are generated on top
    distractor_share: float  # share of cities, organisations and people given a near-identical twin
    first_year: int  # earliest year an organisation is founded; heads of state start a little earlier
    train_questions: int
    dev_questions: int
    test_questions: int

    def __post_init__(self) -> None:
        def need(ok: bool, message: str) -> None:
            if not ok:
                raise InspoError(f"WorldSize {self.name!r}: {message}")

        need(self.countries >= 2, f"countries={self.countries}; need at least 2 (comparisons and twins use two)")
        need(
            self.cities >= 2 * self.countries,
            f"cities={self.cities}; need at least 2 per country ({2 * self.countries}); "
            "raise cities or lower countries",
        )
        need(self.organisations >= 4, f"organisations={self.organisations}; need at least 4")
        need(self.people >= 4, f"people={self.people}; need at least 4")
        need(0.0 <= self.distractor_share <= 0.5, f"distractor_share={self.distractor_share}; use a value in [0, 0.5]")
        need(
            1700 <= self.first_year <= LAST_YEAR - 60,
            f"first_year={self.first_year}; use a year between 1700 and {LAST_YEAR - 60}",
        )
        for split in SPLITS:
            count = getattr(self, f"{split}_questions")
            need(count >= 1, f"{split}_questions={count}; every split needs at least 1 question")

    @property
    def questions(self) -> dict[str, int]:
        return {split: getattr(self, f"{split}_questions") for split in SPLITS}


WORLD_SIZES: dict[str, WorldSize] = {
    size.name: size
    for size in (
        WorldSize(
            "tiny",
            countries=2,
            cities=8,
            organisations=10,
            people=12,
            distractor_share=0.15,
            first_year=1900,
            train_questions=80,
            dev_questions=20,
            test_questions=20,
        ),
        WorldSize(
            "small",
            countries=5,
            cities=36,
            organisations=80,
            people=110,
            distractor_share=0.12,
            first_year=1850,
            train_questions=480,
            dev_questions=60,
            test_questions=60,
        ),
        WorldSize(
            "default",
            countries=12,
            cities=120,
            organisations=330,
            people=450,
            distractor_share=0.12,
            first_year=1780,
            train_questions=1600,
            dev_questions=200,
            test_questions=200,
        ),
        WorldSize(
            "large",
            countries=40,
            cities=600,
            organisations=1850,
            people=2700,
            distractor_share=0.12,
            first_year=1750,
            train_questions=8000,
            dev_questions=1000,
            test_questions=1000,
        ),
    )
}


def resolve_size(size: str | WorldSize) -> WorldSize:
    """The preset called `size`, or `size` itself; an unknown name is an InspoError listing the presets."""
    if isinstance(size, WorldSize):
        return size
    if size not in WORLD_SIZES:
        raise InspoError(f"unknown world size {size!r}; use one of: {', '.join(WORLD_SIZES)} (or pass a WorldSize)")
    return WORLD_SIZES[size]
