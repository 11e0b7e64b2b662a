"""The synthetic search world: a procedurally generated, contamination-free multi-hop QA testbed.

Every fact is fictional and exists only in the generated corpus, so a policy can only answer by searching;
that makes the world the training and test ground for CPU-scale RL runs, unit tests and CI.

    from inspo_cli.world import generate_world, write_world
    write_world(generate_world(seed=0, size="default"), "data/world")    # or: inspo data world --out data/world

Generation is pure standard-library Python driven by one `random.Random(seed)`: the same seed and size give
byte-identical files. The pieces: `flavours` and `names` (fictional names), `entities` (what exists) and
`fact_graph` (generating it), `templates` and `fillers` (wording), `passages` (Wikipedia-like text plus which passage
states which fact), `questions` (a module per question type, with evidence), `writer` (files on disk), `sizes` (the
presets).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from inspo_cli.errors import InspoError
from inspo_cli.world.entities import Entities
from inspo_cli.world.fact_graph import build_entities
from inspo_cli.world.passages import render_passages
from inspo_cli.world.questions import question_types
from inspo_cli.world.sizes import SPLITS, WORLD_SIZES, WorldSize, resolve_size
from inspo_cli.world.splits import make_splits
from inspo_cli.world.writer import WORLD_FILES, write_world
from retriever.corpus import Passage

GENERATOR = "inspo-world"
GENERATOR_VERSION = 1

__all__ = ["GENERATOR_VERSION", "WORLD_FILES", "WORLD_SIZES", "World", "WorldSize", "generate_world", "write_world"]


@dataclass
class World:
    """A generated world: its corpus, its question splits, and the entities behind them."""

    seed: int
    size: WorldSize
    passages: list[Passage]
    splits: dict[str, list[dict]]  # split -> FlashRAG rows with type, hops and supporting_ids
    entities: Entities
    version: int = GENERATOR_VERSION
    arithmetic_share: float = 0.0

    def metadata(self) -> dict:
        """The world.json manifest: fixed key order, no timestamps (`arithmetic_share` only when above 0, so a world
        without arithmetic is byte for byte what it was before the option)."""
        types = Counter(row["type"] for rows in self.splits.values() for row in rows)
        extra = {"arithmetic_share": self.arithmetic_share} if self.arithmetic_share > 0 else {}
        return {
            "generator": GENERATOR,
            "version": self.version,
            "seed": self.seed,
            "size": self.size.name,
            **extra,
            "passages": len(self.passages),
            "entities": self.entities.counts(),
            "questions": {split: len(self.splits[split]) for split in SPLITS},
            "question_types": {qtype: types[qtype] for qtype, _, _ in question_types(self.arithmetic_share)},
        }


def generate_world(
    seed: int = 0,
    size: str | WorldSize = "default",
    progress: Callable[[int, int], None] | None = None,
    arithmetic_share: float = 0.0,
) -> World:
    """Generate the world for `seed` and `size` (a preset name from WORLD_SIZES or a WorldSize); with
    `arithmetic_share` > 0 that share of every split's questions is arithmetic (two searched years and a subtraction,
    for an agent with the calculator), the other types keeping their proportions.

    `progress(done, total)` is called as entities are written up and questions are made.
    """
    world_size = resolve_size(size)
    if not 0.0 <= arithmetic_share <= 0.5:
        raise InspoError(f"arithmetic share {arithmetic_share}: use a value in [0, 0.5]")
    rng = random.Random(seed)
    entities = build_entities(rng, world_size)
    n_entities = len(entities.countries) + len(entities.cities) + len(entities.organisations) + len(entities.people)
    total = n_entities + sum(world_size.questions.values())
    done = 0

    def tick() -> None:
        nonlocal done
        done += 1
        if progress is not None and (done % 64 == 0 or done == total):
            progress(done, total)

    if progress is not None:
        progress(0, total)
    passages, index = render_passages(rng, entities, tick)
    splits = make_splits(rng, entities, index, world_size, tick, arithmetic_share)
    return World(
        seed=seed,
        size=world_size,
        passages=passages,
        splits=splits,
        entities=entities,
        arithmetic_share=arithmetic_share,
    )
