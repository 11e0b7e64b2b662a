"""Write a generated world to disk: the corpus, the three question splits and a manifest.

    out_dir/corpus.jsonl    {"id", "contents": "\"Title\"\ntext"} per passage (Search-R1's corpus format)
    out_dir/{train,dev,test}.jsonl   FlashRAG QA rows plus type, hops and supporting_ids
    out_dir/world.json      seed, size, counts and generator version (no timestamps: same world, same bytes)

All files go through `inspo_cli.jsonio`'s atomic writers, so a crash never leaves a half-written world.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from inspo_cli.files import make_dir
from inspo_cli.jsonio import atomic_write_json, atomic_write_jsonl
from inspo_cli.world.sizes import SPLITS

if TYPE_CHECKING:
    from inspo_cli.world import World

WORLD_FILES = ("corpus.jsonl", *(f"{split}.jsonl" for split in SPLITS), "world.json")


def write_world(world: World, out_dir: str | os.PathLike) -> dict:
    """Write `world` under `out_dir` (created if needed) and return the world.json manifest."""
    out = make_dir(out_dir, "--out")
    atomic_write_jsonl(out / "corpus.jsonl", (passage.to_row() for passage in world.passages))
    for split in SPLITS:
        atomic_write_jsonl(out / f"{split}.jsonl", world.splits[split])
    manifest = world.metadata()
    atomic_write_json(out / "world.json", manifest)
    return manifest
