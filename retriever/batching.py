"""Coalesce the queries of concurrent HTTP requests into one `Retriever.search` call.

During RL rollouts hundreds of agents send one or two queries each at nearly the same moment. A search
engine answers a batch of 500 queries far faster than 500 batches of one (one encoder forward pass, one
matrix product), so the server queues every request's queries, lets a short window collect the requests
that arrive together, and searches them at once in a worker thread. The event loop only moves bytes and
never runs a search, so `/health` stays responsive while a slow batch is in flight.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from retriever.corpus import Passage
from retriever.search import Retriever


@dataclass(eq=False)  # compared by identity: two requests with the same queries are still two
class _Job:
    """One request: its queries are searched in one or more batches (a request larger than a batch is split)."""

    queries: Sequence[str]
    k: int
    future: asyncio.Future
    taken: int = 0  # queries handed to batches so far
    results: list = field(default_factory=list)  # per query, filled as its batches finish
    missing: int = 0  # queries whose results are not in yet

    def __post_init__(self) -> None:
        self.results = [None] * len(self.queries)
        self.missing = len(self.queries)


@dataclass
class BatcherStats:
    requests: int = 0
    queries: int = 0
    searches: int = 0  # calls to retriever.search
    largest_batch: int = 0  # queries in the largest single call
    failed_searches: int = 0
    search_seconds: float = 0.0  # wall time inside retriever.search, summed

    def to_dict(self) -> dict:
        return {**self.__dict__, "search_seconds": round(self.search_seconds, 3)}


@dataclass
class MicroBatcher:
    """Queue requests and search them in batches of up to `max_batch` queries, fairly.

    A batch closes when `max_batch` queries are waiting or `window_s` after its first request arrived,
    whichever is first; `window_s=0` takes only what is already queued. The window is only waited while
    requests are evidently concurrent (the previous batch held more than one): a lone caller sending one
    request after another would otherwise pay the whole window on every call. A request with more queries than
    fit in a batch is split, and requests not served yet go before the rest of one already split, so a request
    of thousands of queries delays a small one by at most one batch, never by all of its own. `workers` batches
    can be searched at the same time, each in its own thread.
    """

    retriever: Retriever
    max_batch: int = 512
    window_s: float = 0.002
    workers: int = 1
    stats: BatcherStats = field(default_factory=BatcherStats)

    def __post_init__(self) -> None:
        if self.max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {self.max_batch}")
        if self.window_s < 0:
            raise ValueError(f"window_s must be >= 0, got {self.window_s}")
        if self.workers < 1:
            raise ValueError(f"workers must be >= 1, got {self.workers}")
        self._jobs: deque[_Job] = deque()  # requests with queries not yet handed to a batch, in turn order
        self._arrived: asyncio.Event | None = None
        self._tasks: list[asyncio.Task] = []
        self._executor: ThreadPoolExecutor | None = None
        self._last_batch_requests = 0

    async def start(self) -> None:
        """Start the worker tasks on the running event loop (the server calls this at startup)."""
        self._arrived = asyncio.Event()
        self._executor = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="retriever-search")
        self._tasks = [asyncio.create_task(self._work(), name=f"batcher-{i}") for i in range(self.workers)]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None

    async def search(self, queries: Sequence[str], k: int) -> list[list[Passage]]:
        """Top-`k` passages per query; waits while the request is batched with others."""
        if self._arrived is None:
            raise RuntimeError("MicroBatcher.start() was not called")
        future = asyncio.get_running_loop().create_future()
        self.stats.requests += 1
        self.stats.queries += len(queries)
        if not queries:
            return []
        self._jobs.append(_Job(queries, k, future))
        self._arrived.set()
        return await future

    def _waiting(self) -> int:
        return sum(len(job.queries) - job.taken for job in self._jobs if not job.future.done())

    async def _collect(self) -> list[tuple[_Job, int, int]]:
        """The next batch: (request, first query, end) pieces, at most `max_batch` queries in all."""
        while True:
            pieces = await self._collect_once()
            if pieces:  # empty when another worker took what was waiting
                return pieces

    async def _collect_once(self) -> list[tuple[_Job, int, int]]:
        assert self._arrived is not None
        loop = asyncio.get_running_loop()
        while not self._waiting():
            self._jobs.clear()  # only finished or abandoned requests are left
            self._arrived.clear()
            await self._arrived.wait()
        concurrent = self._last_batch_requests > 1 or len(self._jobs) > 1
        deadline = loop.time() + (self.window_s if concurrent else 0.0)
        while self._waiting() < self.max_batch and (remaining := deadline - loop.time()) > 0:
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), remaining)
            except asyncio.TimeoutError:  # the builtin TimeoutError from 3.11 on
                break
        # requests not served yet first, in arrival order, then those already split, in turn
        jobs = sorted((job for job in self._jobs if not job.future.done()), key=lambda job: job.taken > 0)
        pieces, size = [], 0
        for job in jobs:
            if size >= self.max_batch:
                break
            n = min(len(job.queries) - job.taken, self.max_batch - size)
            pieces.append((job, job.taken, job.taken + n))
            job.taken += n
            size += n
        served = [job for job, _, _ in pieces]
        # what has more to search goes behind everything else waiting
        self._jobs = deque(
            [*(job for job in jobs if job not in served), *(job for job in served if job.taken < len(job.queries))]
        )
        self._last_batch_requests = len(pieces)
        return pieces

    async def _work(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            pieces = await self._collect()
            queries = [q for job, start, end in pieces for q in job.queries[start:end]]
            k = max(job.k for job, _, _ in pieces)  # one search at the largest k; smaller asks are truncated
            self.stats.searches += 1
            self.stats.largest_batch = max(self.stats.largest_batch, len(queries))
            started = time.perf_counter()
            try:
                results = await loop.run_in_executor(self._executor, self.retriever.search, queries, k)
                if len(results) != len(queries):
                    raise RuntimeError(f"retriever returned {len(results)} result lists for {len(queries)} queries")
            except Exception as error:  # noqa: BLE001 - handed to every waiting request, which answers 500
                self.stats.failed_searches += 1
                for job, _, _ in pieces:
                    if not job.future.done():
                        job.future.set_exception(error)
                continue
            finally:
                self.stats.search_seconds += time.perf_counter() - started
            offset = 0
            for job, start, end in pieces:
                job.results[start:end] = [hits[: job.k] for hits in results[offset : offset + end - start]]
                offset += end - start
                job.missing -= end - start
                if job.missing == 0 and not job.future.done():
                    job.future.set_result(job.results)
