"""Small deterministic `Retriever`s for the server and client tests (no index, no numpy)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from retriever.corpus import Passage

TOPICS = [
    "river",
    "castle",
    "violin",
    "harbour",
    "comet",
    "orchard",
    "glacier",
    "printing press",
    "lighthouse",
    "observatory",
    "silk road",
    "windmill",
    "library",
    "volcano",
    "railway",
    "cathedral",
    "monastery",
    "vineyard",
    "canal",
    "telescope",
]

PASSAGES = [
    Passage(
        id=f"p{i}",
        title=topic.title(),
        text=f"The {topic} of Vell was recorded in {1700 + 7 * i}. "
        f"It is known for the {TOPICS[(i + 1) % len(TOPICS)]} nearby.",
    )
    for i, topic in enumerate(TOPICS)
]


def _words(text: str) -> set[str]:
    return {w.strip('.,?!"').lower() for w in text.split()}


class OverlapRetriever:
    """Scores a passage by how many of the query's words it contains; ties go to the lower id."""

    def __init__(self, passages: Sequence[Passage] = PASSAGES):
        self.passages = list(passages)
        self._words = [_words(p.contents) for p in self.passages]
        self.calls: list[int] = []  # the number of queries in each search call
        self._lock = threading.Lock()

    def search(self, queries: Sequence[str], k: int) -> list[list[Passage]]:
        with self._lock:
            self.calls.append(len(queries))
        results = []
        for query in queries:
            q = _words(query)
            scored = sorted(((len(q & w) + 1.0 / (1 + i), i) for i, w in enumerate(self._words)), reverse=True)
            results.append([self.passages[i].with_score(s) for s, i in scored[:k]])
        return results


class SlowRetriever(OverlapRetriever):
    """Takes `delay_s` per call, so concurrent requests pile up behind it."""

    def __init__(self, delay_s: float):
        super().__init__()
        self.delay_s = delay_s

    def search(self, queries, k):
        time.sleep(self.delay_s)
        return super().search(queries, k)


class BlockingRetriever(OverlapRetriever):
    """Blocks every search until `release` is set (to show the event loop stays free)."""

    def __init__(self):
        super().__init__()
        self.entered = threading.Event()
        self.release = threading.Event()

    def search(self, queries, k):
        self.entered.set()
        self.release.wait(timeout=10)
        return super().search(queries, k)


class FailingRetriever:
    def search(self, queries, k):
        raise RuntimeError("index file is corrupt")
