"""The record of every optimizer call a run makes: `optimizer_calls.jsonl` in the run directory, one line a call;
its replay, which answers the same calls from a record, with no key and no server (`optimizer.replay`); and what a
resumed run takes back from it.

    record = CallRecord(run.path / "optimizer_calls.jsonl")
    record.write(provider, model, parameters, prompt, completion=completion, latency_s=2.4, cost_usd=0.0123)
    prompt_hash(provider, model, parameters, prompt)        # "sha256:..." : what a replay looks calls up by
    client = ReplayClient(path_or_directory, "gemini", "gemini-2.5-pro", parameters, record=this_runs_record)
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

A replay never mixes runs: from a directory of several (an ablation's), each run answers from the record at its own
place in it (`replay_record`), and within a record the calls with one hash are answered in the order they were made.
Every line read for an answer is checked against its hash, so a line changed after it was written is refused, not
answered to a call it does not hold.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections import deque
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from inspo_cli.errors import InspoError
from inspo_cli.instructions.providers.lm_errors import AttemptFailed, Completion
from inspo_cli.jsonio import COUNT, Range, iter_rows

if TYPE_CHECKING:
    from inspo_cli.instructions.providers.prices import Price

logger = logging.getLogger(__name__)
RECORD_NAME = "optimizer_calls.jsonl"  # a run's record; inspo_cli.runs.RunDir.OPTIMIZER_CALLS is this name


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

    def write(
        self,
        provider: str,
        model: str,
        parameters: dict[str, Any],
        prompt: str,
        *,
        completion: Completion | None = None,
        error: str | None = None,
        latency_s: float = 0.0,
        cost_usd: float | None = None,
        replayed: bool = False,
    ) -> dict:
        row = {
            "hash": prompt_hash(provider, model, parameters, prompt),
            "provider": provider,
            "model": model,
            "parameters": parameters,
            "prompt": prompt,
            "answer": completion.text if completion is not None else None,
            "truncated": completion.truncated if completion is not None else None,
            "stop_reason": completion.stop_reason if completion is not None else None,
            "input_tokens": completion.input_tokens if completion is not None else 0,
            "output_tokens": completion.output_tokens if completion is not None else 0,
            "usage_estimated": completion.usage_estimated if completion is not None else False,
            "cost_usd": cost_usd,
            "latency_s": round(latency_s, 3),
            "error": error,
        }
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
            logger.warning(
                "%s:%d: removed its last line, which is cut short (the run was killed while writing it); "
                "the calls before it are kept",
                path,
                tail_line,
            )
            os.truncate(path, whole)
            return rows
        with open(path, "ab") as file:
            file.write(b"\n")
        return rows + 1


class ReplayMissing(InspoError):
    """A replayed run asked the optimizer something the record holds no answer to: it no longer runs as recorded."""


RECORD_ROW = {
    "hash": str,
    "prompt": str,
    "answer": (str, None),
    "truncated": (bool, None),
    "stop_reason": (str, None),
    "input_tokens": COUNT,
    "output_tokens": COUNT,
    "usage_estimated?": bool,
    "error": (str, None),
    "cost_usd?": (Range(0.0), None),
    "replayed?": bool,
    "*": object,
}
# A line that answers a call (a replay's, a resumed run's) holds what its hash is of, and is checked against it
ANSWER_ROW = {**RECORD_ROW, "provider": str, "model": str, "parameters": {str: object}}


def _hash_problem(row: dict) -> str | None:
    """What is wrong with a line whose hash is not the hash of its provider, model, parameters and prompt: it was
    changed after it was written, and would answer a call it does not hold."""
    content = prompt_hash(row["provider"], row["model"], row["parameters"], row["prompt"])
    if row["hash"] == content:
        return None
    return (
        f"its hash {row['hash']} is not the hash of its provider, model, parameters and prompt ({content}), so the "
        "line was changed after it was written"
    )


def answers_by_hash(path: Path, fix: str, skip: int = 0) -> tuple[dict[str, deque[dict]], int]:
    """The lines of the record at `path` after its first `skip`, by hash in the order the calls were made, and how
    many; each checked against its hash. A last line cut short is left out (and said); any other damage is an
    `InspoError` naming the line and `fix`."""
    answers: dict[str, deque[dict]] = {}
    count = 0
    for row in iter_rows(path, ANSWER_ROW, fix, on_cut_tail=logger.warning, check=_hash_problem, skip=skip):
        answers.setdefault(row["hash"], deque()).append(row)
        count += 1
    return answers, count


class ReplayClient:
    """A `ProviderClient` that answers each prompt from recorded calls with the same hash, in the order they were
    recorded (the same prompt asked twice gets the two recorded answers in turn); a recorded failure fails again.
    `source` is a record file or a directory holding this run's (`replay_record`: a run's, or an ablation's with
    `record`, the path this run writes its own record to, picking the run's record out of several).
    An answer comes back marked `replayed`, with the cost it had when it was asked: the recorded `cost_usd`, or for a
    line from before costs were recorded, its tokens at `price` (None: unknown).
    """

    endpoint = "a replay"

    def __init__(
        self,
        source: Path,
        provider: str,
        model: str,
        parameters: dict[str, Any],
        price: Price | None = None,
        record: Path | None = None,
    ):
        self.provider, self.model, self.parameters, self.source = provider, model, dict(parameters), Path(source)
        self.price = price
        self.path = replay_record(self.source, record)
        self._answers: dict[str, deque[dict]] = {}
        if self.path.is_file():  # else the run's directory is there, and its run never called the optimizer
            self._answers, _ = answers_by_hash(self.path, "the run wrote it whole: copy it again from where it ran")

    def __repr__(self) -> str:
        return f"ReplayClient({self.path})"

    def pass_over(self, prompts: Iterable[str] = (), hashes: Iterable[str] = ()) -> None:
        """Calls this run made (before its checkpoint, or answered from its own record since): the next answer of
        each is not theirs to give again, so that every call takes the recorded answers of its hash in turn."""
        keys = [*hashes, *(prompt_hash(self.provider, self.model, self.parameters, p) for p in prompts)]
        for key in keys:
            if self._answers.get(key):
                self._answers[key].popleft()

    def attempt(self, prompt: str) -> Completion:
        key = prompt_hash(self.provider, self.model, self.parameters, prompt)
        recorded = self._answers.get(key)
        if not recorded:
            where = (
                f"the optimizer record {self.path}"
                if self.path.is_file()
                else f"the recorded run {self.path.parent} made no optimizer calls: it"
            )
            raise ReplayMissing(
                f"{where} holds no answer to this prompt ({key}, {self.provider} {self.model}); it "
                "replays only the run it recorded, with the same recipe, seed and optimizer settings"
            )
        row = recorded.popleft()
        if row["answer"] is None:
            raise AttemptFailed(f"failed as recorded: {row['error']}", retryable=False)
        return completion_of(row, self.price, replayed=True)


def replay_record(source: Path, record: Path | None = None) -> Path:
    """The record a run replays (`optimizer.replay`): `source` itself when it is a file. In a directory, the
    directory below it (or it itself) whose place in it ends the place of `record`, this run's own record, the most
    specific when several do: a run directory's own record answers any run, an ablation's runs/<variant>-s<seed>/
    answers only the run of that name (and each stage its stage), so that no run is answered with another's calls; a
    path that is not there when that run's directory is there without a record (it never called the optimizer).
    Anything else is an `InspoError` naming the run and the directory."""
    source = Path(source).resolve()
    if source.is_file():
        return source
    if not source.is_dir():
        raise InspoError(
            f"optimizer.replay: {source} is neither a record file ({RECORD_NAME}) nor a directory "
            "holding some; give a run or ablation directory"
        )
    records = sorted(source.rglob(RECORD_NAME))
    if not records:
        raise InspoError(
            f"optimizer.replay: {source} holds no {RECORD_NAME}; give the directory of a run that called the optimizer"
        )
    if record is not None:
        own = Path(record).resolve().parent  # this run's directory, made before it asks: never its own source
        place = own.parts[1:]  # without the root, which joinpath would start over at
        for start in range(len(place)):  # the longest ending of this run's place that is a directory of the source
            candidate = source.joinpath(*place[start:])
            if candidate.is_dir() and candidate.resolve() != own and own not in candidate.resolve().parents:
                return candidate / RECORD_NAME
        if (source / RECORD_NAME).is_file():  # one run's directory: it answers a run of any name
            return source / RECORD_NAME
    elif len(records) == 1:
        return records[0]
    shown = ", ".join(str(file.relative_to(source)) for file in records[:3]) + (", ..." if len(records) > 3 else "")
    this = "this run" if record is None else f"the run {Path(record).parent.name} ({record})"
    raise InspoError(
        f"optimizer.replay: {source} holds no record of {this}, only {shown}; a directory of several "
        "runs answers each from the record at its own place (an ablation's runs/<variant>-s<seed>/): "
        "replay into the same plan, or give one run's directory or its optimizer_calls.jsonl"
    )


def completion_of(row: dict, price: Price | None, *, replayed: bool = False) -> Completion:
    """The answer a record line holds, with its cost: as recorded, or (a line from before costs were recorded) its
    tokens at `price`."""
    cost = (
        row["cost_usd"]
        if "cost_usd" in row
        else (None if price is None else price.cost_usd(row["input_tokens"], row["output_tokens"]))
    )
    return Completion(
        row["answer"],
        row["input_tokens"],
        row["output_tokens"],
        bool(row.get("usage_estimated", False)),
        bool(row["truncated"]),
        row["stop_reason"],
        replayed=replayed,
        cost_usd=cost,
    )


RESUME_FIX = (
    "the run wrote its lines whole: delete this line and the ones after it (the resumed run then asks the "
    "optimizer again for those calls), or move the file away"
)


def recorded_after(path: Path, rows: int) -> tuple[dict[str, deque[dict]], int]:
    """The calls `path` recorded after its first `rows` lines, by hash in the order they were made, and how many:
    what a run resumed from a checkpoint that saw `rows` lines asks again. None from a missing file; a last line cut
    short is left out (and said); any other damage after line `rows` is an `InspoError` naming the line (the lines
    before it are not read)."""
    if not Path(path).is_file():
        return {}, 0
    return answers_by_hash(path, RESUME_FIX, skip=rows)


def recorded_hashes(path: Path, rows: int) -> list[str]:
    """The hashes of the first `rows` calls `path` recorded, in order: the calls a resumed run made before its
    checkpoint."""
    hashes: list[str] = []
    if rows > 0 and Path(path).is_file():
        for row in iter_rows(path, RECORD_ROW, RESUME_FIX, on_cut_tail=logger.warning):
            hashes.append(row["hash"])
            if len(hashes) == rows:
                break
    return hashes


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
    totals = {
        "calls": 0,
        "answered_calls": 0,
        "failed_calls": 0,
        "replayed_calls": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "total_tokens": 0,
        "unpriced_calls": 0,
    }
    nano = 0  # billionths of a dollar: whole numbers, so the total does not depend on the order of the lines
    for row in iter_rows(
        path, RECORD_ROW, "the run wrote its lines whole: copy it again from where it ran", on_cut_tail=logger.warning
    ):
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
