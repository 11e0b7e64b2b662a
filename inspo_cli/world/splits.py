"""The world's question splits: how many questions of each type each split gets, and which.

Each type's questions are made in one pool (`QuestionMaker.make`), so a fact is asked at most once across all
splits, then dealt out to train/dev/test by the type shares of `QUESTION_TYPES` and shuffled. Each row is
FlashRAG's QA format plus `type`, `hops`, `supporting_ids` (one passage per fact, in hop order) and `searches`
(the oracle's query per hop).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

from inspo_cli.world.entities import Entities
from inspo_cli.world.passages import FactIndex
from inspo_cli.world.questions import QUESTION_TYPES, QuestionDraft, QuestionMaker, question_types
from inspo_cli.world.sizes import SPLITS, WorldSize


def type_counts(total: int, types: tuple[tuple[str, float, int], ...] = QUESTION_TYPES) -> dict[str, int]:
    """Split `total` over the question types by their shares (largest remainder, ties in type order)."""
    exact = {qtype: share * total for qtype, share, _ in types}
    counts = {qtype: math.floor(value) for qtype, value in exact.items()}
    by_remainder = sorted(exact, key=lambda qtype: -(exact[qtype] - counts[qtype]))
    for qtype in by_remainder[: total - sum(counts.values())]:
        counts[qtype] += 1
    return counts


def make_splits(
    rng: random.Random,
    entities: Entities,
    index: FactIndex,
    size: WorldSize,
    tick: Callable[[], None] = lambda: None,
    arithmetic_share: float = 0.0,
) -> dict[str, list[dict]]:
    """Question rows per split, stratified by type; each fact is asked at most once across all splits (an
    arithmetic question asks two facts other types may ask too). An arithmetic row also holds `calculation`."""
    types = question_types(arithmetic_share)
    per_split = {split: type_counts(count, types) for split, count in size.questions.items()}
    maker = QuestionMaker(rng, entities)
    hops = {qtype: hop for qtype, _, hop in types}
    rows: dict[str, list[tuple[str, QuestionDraft]]] = {split: [] for split in SPLITS}
    for qtype, _, _ in types:
        pool = maker.make(qtype, sum(per_split[split][qtype] for split in SPLITS), tick)
        for split in SPLITS:
            taken, pool = pool[: per_split[split][qtype]], pool[per_split[split][qtype] :]
            rows[split] += [(qtype, draft) for draft in taken]
    splits: dict[str, list[dict]] = {}
    for split in SPLITS:
        rng.shuffle(rows[split])
        width = max(4, len(str(len(rows[split]))))
        splits[split] = [
            {
                "id": f"world-{split}-{i:0{width}d}",
                "question": draft.text,
                "golden_answers": draft.answers,
                "type": qtype,
                "hops": hops[qtype],
                "supporting_ids": [rng.choice(index[fact]) for fact in draft.support],
                "searches": draft.searches,
                **({"calculation": draft.calculation} if draft.calculation else {}),
            }
            for i, (qtype, draft) in enumerate(rows[split], start=1)
        ]
    return splits
