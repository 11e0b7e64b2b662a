"""The record of every optimizer call a run makes: `optimizer_calls.jsonl` in the run directory, one line a call;
and its replay, which answers the same calls from a record, with no key and no server (`optimizer.replay`).

    record = CallRecord(run.path / "optimizer_calls.jsonl")
    record.write(provider, model, parameters, prompt, completion=completion, latency_s=2.4)   # or error="..."
    prompt_hash(provider, model, parameters, prompt)        # "sha256:..." : what a replay looks calls up by
    client = ReplayClient([path_or_directory], "gemini", "gemini-2.5-pro", parameters)   # a ProviderClient

A line holds the call's content hash, provider, model and parameters (temperature, output limit, thinking budget),
the prompt, the answer (or the error), whether and why it stopped early, its tokens and its latency; never a key
(the answer was already refused if it quoted one, and an error's text is redacted before it gets here). Lines are
appended and flushed one at a time, so a run cut off mid-call loses at most its last line, which a reader skips.
Only the main process calls the optimizer, so one process writes a run's record.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections import deque
from pathlib import Path
from typing import Any

from inspo_cli.errors import InspoError
from inspo_cli.instructions.lm_errors import AttemptFailed, Completion

logger = logging.getLogger(__name__)


def prompt_hash(provider: str, model: str, parameters: dict[str, Any], prompt: str) -> str:
    """The content hash of a call: the same provider, model, parameters and prompt give the same hash."""
    content = json.dumps([provider, model, parameters, prompt], sort_keys=True, ensure_ascii=False)
    return "sha256:" + hashlib.sha256(content.encode("utf-8")).hexdigest()


class CallRecord:
    """Appends one JSON line per optimizer call to `path` (created on the first call)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock = threading.Lock()

    def write(self, provider: str, model: str, parameters: dict[str, Any], prompt: str, *,
              completion: Completion | None = None, error: str | None = None, latency_s: float = 0.0) -> dict:
        row = {"hash": prompt_hash(provider, model, parameters, prompt), "provider": provider, "model": model,
               "parameters": parameters, "prompt": prompt,
               "answer": completion.text if completion is not None else None,
               "truncated": completion.truncated if completion is not None else None,
               "stop_reason": completion.stop_reason if completion is not None else None,
               "input_tokens": completion.input_tokens if completion is not None else 0,
               "output_tokens": completion.output_tokens if completion is not None else 0,
               "usage_estimated": completion.usage_estimated if completion is not None else False,
               "latency_s": round(latency_s, 3), "error": error}
        line = json.dumps(row, ensure_ascii=False) + "\n"
        with self._lock, open(self.path, "a", encoding="utf-8") as file:
            file.write(line)
            file.flush()
            os.fsync(file.fileno())
        return row


class ReplayMissing(InspoError):
    """A replayed run asked the optimizer something the record holds no answer to: it no longer runs as recorded."""


RECORD_ROW = {"hash": str, "prompt": str, "answer": (str, None), "truncated": (bool, None), "stop_reason": (str, None),
              "input_tokens": int, "output_tokens": int, "usage_estimated?": bool, "error": (str, None),
              "*": object}


class ReplayClient:
    """A `ProviderClient` that answers each prompt from recorded calls with the same hash, in the order they were
    recorded (the same prompt asked twice gets the two recorded answers in turn); a recorded failure fails again.
    `source` is a record file or a directory holding them (an ablation's: every `optimizer_calls.jsonl` below it).
    """

    endpoint = "a replay"

    def __init__(self, source: Path, provider: str, model: str, parameters: dict[str, Any]):
        from inspo_cli.jsonio import iter_rows

        self.provider, self.model, self.parameters, self.source = provider, model, dict(parameters), Path(source)
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
        return Completion(row["answer"], row["input_tokens"], row["output_tokens"],
                          bool(row.get("usage_estimated", False)), bool(row["truncated"]), row["stop_reason"])
