"""The record of every optimizer call a run makes: `optimizer_calls.jsonl` in the run directory, one line a call;
its replay, which answers the same calls from a record, with no key and no server (`optimizer.replay`); and what a
resumed run takes back from it.

    record = CallRecord(run.path / "optimizer_calls.jsonl")
    record.write(provider, model, parameters, prompt, completion=completion, latency_s=2.4, cost_usd=0.0123)
    prompt_hash(provider, model, parameters, prompt)        # "sha256:..." : what a replay looks calls up by
    client = ReplayClient([path_or_directory], "gemini", "gemini-2.5-pro", parameters)   # a ProviderClient
    answers, n = recorded_after(path, rows)                 # the calls made after a checkpoint saw `rows` lines
    summarize_record(path)                                  # calls, tokens and cost, for a report's table

A line holds the call's content hash, provider, model and parameters (temperature, output limit, thinking budget),
the prompt, the answer (or the error), whether and why it stopped early, its tokens, its cost in US dollars
(`cost_usd`, from the tokens and the price, `prices.py`; null when the price is unknown) and its latency; never a key
(the answer was already refused if it quoted one, and an error's text is redacted before it gets here). A replayed
call's line says `"replayed": true` and carries the cost its answer had when it was first asked. Lines are appended
and flushed one at a time, so a run cut off mid-call loses at most its last line, which a reader skips and the next
`CallRecord` on the file removes before it appends. Only the main process calls the optimizer, so one process writes
a run's record.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any

from inspo_cli.errors import InspoError
from inspo_cli.instructions.lm_errors import AttemptFailed, Completion
from inspo_cli.jsonio import COUNT, Range, iter_rows

if TYPE_CHECKING:
    from inspo_cli.instructions.prices import Price

logger = logging.getLogger(__name__)


def prompt_hash(provider: str, model: str, parameters: dict[str, Any], prompt: str) -> str:
    """The content hash of a call: the same provider, model, parameters and prompt give the same hash."""
    content = json.dumps([provider, model, parameters, prompt], sort_keys=True, ensure_ascii=False)
    return "sha256:" + hashlib.sha256(content.encode("utf-8")).hexdigest()


class CallRecord:
    """Appends one JSON line per optimizer call to `path` (created on the first call). `rows` counts its lines: those
    already there (a resumed run's, a last line cut off mid-write removed first) and those written since."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        self.rows = _seal(self.path)

    def write(self, provider: str, model: str, parameters: dict[str, Any], prompt: str, *,
              completion: Completion | None = None, error: str | None = None, latency_s: float = 0.0,
              cost_usd: float | None = None, replayed: bool = False) -> dict:
        row = {"hash": prompt_hash(provider, model, parameters, prompt), "provider": provider, "model": model,
               "parameters": parameters, "prompt": prompt,
               "answer": completion.text if completion is not None else None,
               "truncated": completion.truncated if completion is not None else None,
               "stop_reason": completion.stop_reason if completion is not None else None,
               "input_tokens": completion.input_tokens if completion is not None else 0,
               "output_tokens": completion.output_tokens if completion is not None else 0,
               "usage_estimated": completion.usage_estimated if completion is not None else False,
               "cost_usd": cost_usd, "latency_s": round(latency_s, 3), "error": error}
        if replayed:
            row["replayed"] = True
        line = json.dumps(row, ensure_ascii=False) + "\n"
        with self._lock, open(self.path, "a", encoding="utf-8") as file:
            file.write(line)
            file.flush()
            os.fsync(file.fileno())
            self.rows += 1
        return row


def _seal(path: Path) -> int:
    """The rows (lines that are not blank) of the record at `path`, 0 when there is none yet. A last line without its
    newline (a run killed while writing it) would have the next line glued to it: it gets its newline when it is a
    whole JSON line, and is removed (and said) when it is cut short, as every reader of the record leaves it out."""
    from inspo_cli.files import user_file

    if not path.is_file():
        return 0
    rows = whole = 0
    tail, tail_line = b"", 0
    with user_file(path, "the optimizer record"):
        with open(path, "rb") as file:
            for number, line in enumerate(file, 1):
                if line.endswith(b"\n"):
                    rows += bool(line.strip())
                    whole += len(line)
                else:
                    tail, tail_line = line, number
        if not tail.strip():
            return rows
        try:
            json.loads(tail.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            logger.warning("%s:%d: removed its last line, which is cut short (the run was killed while writing it); "
                           "the calls before it are kept", path, tail_line)
            os.truncate(path, whole)
            return rows
        with open(path, "ab") as file:
            file.write(b"\n")
        return rows + 1


class ReplayMissing(InspoError):
    """A replayed run asked the optimizer something the record holds no answer to: it no longer runs as recorded."""


RECORD_ROW = {"hash": str, "prompt": str, "answer": (str, None), "truncated": (bool, None), "stop_reason": (str, None),
              "input_tokens": COUNT, "output_tokens": COUNT, "usage_estimated?": bool, "error": (str, None),
              "cost_usd?": (Range(0.0), None), "replayed?": bool, "*": object}


class ReplayClient:
    """A `ProviderClient` that answers each prompt from recorded calls with the same hash, in the order they were
    recorded (the same prompt asked twice gets the two recorded answers in turn); a recorded failure fails again.
    `source` is a record file or a directory holding them (an ablation's: every `optimizer_calls.jsonl` below it).
    An answer comes back marked `replayed`, with the cost it had when it was asked: the recorded `cost_usd`, or for a
    line from before costs were recorded, its tokens at `price` (None: unknown).
    """

    endpoint = "a replay"

    def __init__(self, source: Path, provider: str, model: str, parameters: dict[str, Any],
                 price: Price | None = None):
        self.provider, self.model, self.parameters, self.source = provider, model, dict(parameters), Path(source)
        self.price = price
        if self.source.is_dir():
            files = sorted(self.source.rglob("optimizer_calls.jsonl"))
        elif self.source.is_file():
            files = [self.source]
        else:
            raise InspoError(f"optimizer.replay: {self.source} is neither a record file (optimizer_calls.jsonl) nor "
                             "a directory holding some; give a run or ablation directory")
        if not files:
            raise InspoError(f"optimizer.replay: {self.source} holds no optimizer_calls.jsonl; give the directory of "
                             "a run that called the optimizer")
        self._answers: dict[str, deque[dict]] = {}
        for file in files:  # a last line cut off mid-write (a killed run) is left out, and said
            for row in iter_rows(file, RECORD_ROW, "the run wrote it whole: copy it again from where it ran",
                                 on_cut_tail=logger.warning):
                self._answers.setdefault(row["hash"], deque()).append(row)

    def __repr__(self) -> str:
        return f"ReplayClient({self.source})"

    def attempt(self, prompt: str) -> Completion:
        key = prompt_hash(self.provider, self.model, self.parameters, prompt)
        recorded = self._answers.get(key)
        if not recorded:
            raise ReplayMissing(f"the optimizer record {self.source} holds no answer to this prompt ({key}, "
                                f"{self.provider} {self.model}); it replays only the run it recorded, with the same "
                                "recipe, seed and optimizer settings")
        row = recorded.popleft()
        if row["answer"] is None:
            raise AttemptFailed(f"failed as recorded: {row['error']}", retryable=False)
        return completion_of(row, self.price, replayed=True)


def completion_of(row: dict, price: Price | None, *, replayed: bool = False) -> Completion:
    """The answer a record line holds, with its cost: as recorded, or (a line from before costs were recorded) its
    tokens at `price`."""
    cost = row["cost_usd"] if "cost_usd" in row else (
        None if price is None else price.cost_usd(row["input_tokens"], row["output_tokens"]))
    return Completion(row["answer"], row["input_tokens"], row["output_tokens"], bool(row.get("usage_estimated", False)),
                      bool(row["truncated"]), row["stop_reason"], replayed=replayed, cost_usd=cost)


RESUME_FIX = ("the run wrote its lines whole: delete this line and the ones after it (the resumed run then asks the "
              "optimizer again for those calls), or move the file away")


def recorded_after(path: Path, rows: int) -> tuple[dict[str, deque[dict]], int]:
    """The calls `path` recorded after its first `rows` lines, by hash in the order they were made, and how many:
    what a run resumed from a checkpoint that saw `rows` lines asks again. None from a missing file; a last line cut
    short is left out (and said); any other damage after line `rows` is an `InspoError` naming the line (the lines
    before it are not read)."""
    if not Path(path).is_file():
        return {}, 0
    answers: dict[str, deque[dict]] = {}
    count = 0
    for row in iter_rows(path, RECORD_ROW, RESUME_FIX, on_cut_tail=logger.warning, skip=rows):
        answers.setdefault(row["hash"], deque()).append(row)
        count += 1
    return answers, count


def summarize_record(path: Path) -> dict:
    """The totals of a record (a run's optimizer_calls.jsonl), for a report's table: `calls` (its lines),
    `answered_calls`, `failed_calls`, `replayed_calls` (answered from another record by `--replay-optimizer`),
    `input_tokens`, `output_tokens`, `total_tokens` and `cost_usd`, with `unpriced_calls` (answered calls whose cost
    is unknown: a model with no price, or a line from before costs were recorded). `cost_usd` is None when any answered
    call's cost is unknown, never a partial sum; a failed call counts no tokens and no cost.

    Costs are the original ones: a replayed line carries the cost its answer had when it was first asked (nothing was
    paid for it again), so a replayed run's record totals what the run it replays cost. And a resumed run's record
    holds each call once: the calls it took back from the record after the checkpoint are not written again. A last
    line cut short (a killed run) is left out, as every reader of the record does."""
    totals = {"calls": 0, "answered_calls": 0, "failed_calls": 0, "replayed_calls": 0, "input_tokens": 0,
              "output_tokens": 0, "total_tokens": 0, "unpriced_calls": 0}
    nano = 0  # billionths of a dollar: whole numbers, so the total does not depend on the order of the lines
    for row in iter_rows(path, RECORD_ROW, "the run wrote its lines whole: copy it again from where it ran",
                         on_cut_tail=logger.warning):
        totals["calls"] += 1
        if row["answer"] is None:
            totals["failed_calls"] += 1
            continue
        totals["answered_calls"] += 1
        totals["replayed_calls"] += bool(row.get("replayed", False))
        totals["input_tokens"] += row["input_tokens"]
        totals["output_tokens"] += row["output_tokens"]
        if row.get("cost_usd") is None:
            totals["unpriced_calls"] += 1
        else:
            nano += round(row["cost_usd"] * 1_000_000_000)
    totals["total_tokens"] = totals["input_tokens"] + totals["output_tokens"]
    return {**totals, "cost_usd": None if totals["unpriced_calls"] else round(nano / 1e9, 9)}
