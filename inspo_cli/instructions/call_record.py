"""The record of every optimizer call a run makes: `optimizer_calls.jsonl` in the run directory, one line a call.

    record = CallRecord(run.path / "optimizer_calls.jsonl")
    record.write(provider, model, parameters, prompt, completion=completion, latency_s=2.4)   # or error="..."
    prompt_hash(provider, model, parameters, prompt)        # "sha256:..." : what a replay will look calls up by

A line holds the call's content hash, provider, model and parameters (temperature, output limit, thinking budget),
the prompt, the answer (or the error), whether and why it stopped early, its tokens and its latency; never a key
(the answer was already refused if it quoted one, and an error's text is redacted before it gets here). Lines are
appended and flushed one at a time, so a run cut off mid-call loses at most its last line, which a reader skips.
Only the main process calls the optimizer, so one process writes a run's record.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any

from inspo_cli.instructions.lm_errors import Completion


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
