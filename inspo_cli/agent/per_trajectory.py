"""`rollout.schedule: per-trajectory`: every trajectory advances on its own, without turn barriers.

The turn-synchronous engine (`RolloutEngine._turn`) generates turn k for every live trajectory, then makes the
turn's tool calls, then starts turn k+1: each turn waits for its longest generation and for the slowest tool call.
Here each trajectory's turn is a request of its own in vLLM's running batch: the moment a request finishes, its
turn is read (`RolloutEngine._after_generation`, the same code as the synchronous engine), its tool call goes to a
thread pool, and when the observation is in, the next turn joins the engine's batch at once, while the other
trajectories keep generating. Everything else is the synchronous engine's: sampled ids kept, masks, turn and token
limits, the corrective message, the context limit, the final turn without search, log-probs, and the order of the
trajectories returned. With `request_seeds` every turn of every trajectory has its own seed, keyed by the
trajectory's row and the turn (the same keys as the synchronous engine uses), so both schedules sample each turn
from the same seed.

    stream = backend.stream(stop_strings)        # VLLMBackend: requests added one by one, finished ones returned
    run_per_trajectory(engine, trajectories, stream, seeds)

What differs is only what a tool sees at once: one call per trajectory (a batch of the calls that finished in the
same engine step) instead of every call of a turn; the HTTP retriever takes them concurrently.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

TOOL_THREADS = 16  # tool calls in flight at once (the HTTP retriever keeps a pool of connections for them)


class GenerationStream(Protocol):
    def submit(self, key: int, context: Sequence[int], max_new_tokens: int, seed: int | None) -> None:
        """Start generating one turn for `key` (a row of the batch)."""
        ...

    def poll(self) -> list[tuple[int, object]]:
        """Advance the engine one step; the (key, Generation) of every request that finished."""
        ...

    def pending(self) -> int:
        """Requests submitted and not yet returned by `poll`."""
        ...


def run_per_trajectory(
    engine, trajectories: list, stream: GenerationStream, seed_of: Callable[[int, int], int | None]
) -> dict[str, float]:
    """Roll `trajectories` out to the end with `engine`'s rules; `seed_of(row, turn)` is each request's seed.
    Returns the wall seconds in all (`seconds`) and those spent waiting for tools with no generation in flight
    (`tool_wait_seconds`)."""
    started = time.perf_counter()
    tool_wait = 0.0
    max_turns = engine.config.max_turns

    def start(row: int) -> None:
        trajectory = trajectories[row]
        if trajectory.done:
            return
        budget = engine._budget(trajectory)
        if budget > 0:
            stream.submit(
                row, trajectory.prompt_ids + trajectory.completion_ids, budget, seed_of(row, trajectory.turns)
            )

    for row in range(len(trajectories)):
        start(row)
    calls: dict[concurrent.futures.Future, tuple[Any, list, list[int]]] = {}  # (tool, its calls, their rows)
    with concurrent.futures.ThreadPoolExecutor(TOOL_THREADS, thread_name_prefix="inspo-tool") as pool:
        while stream.pending() or calls:
            if stream.pending():
                finished = stream.poll()
            else:  # nothing generating: wait for a tool
                waited = time.perf_counter()
                concurrent.futures.wait(calls, return_when=concurrent.futures.FIRST_COMPLETED)
                tool_wait += time.perf_counter() - waited
                finished = []
            by_tool: dict[str, list[tuple[int, object]]] = {}
            for row, generation in finished:
                trajectory = trajectories[row]
                call = engine._after_generation(trajectory, generation, trajectory.turns < max_turns)
                if call is not None and call.tool is not None:
                    by_tool.setdefault(call.tool.name, []).append((row, call))
                else:
                    start(row)
            for name, batch in by_tool.items():  # the calls that finished in this engine step, one batch per tool
                tool = engine._tools_by_name[name]
                pairs = [(trajectories[row], call) for row, call in batch]
                calls[pool.submit(engine._invoke, tool, pairs)] = (tool, pairs, [row for row, _ in batch])
            for future in [f for f in calls if f.done()]:
                tool, pairs, rows = calls.pop(future)
                # observations are encoded here, in this thread: a fast tokenizer is not to be shared by threads
                observations, _ = future.result()  # a tool's failure is the engine's, as when in turn
                engine._deliver(tool, pairs, observations, 0.0)
                for row in rows:
                    start(row)
    return {"seconds": time.perf_counter() - started, "tool_wait_seconds": tool_wait}
