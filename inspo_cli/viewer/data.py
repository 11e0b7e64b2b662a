"""The viewer's reads of a run's files, streamed and checked: kept rollouts (`run.save_rollouts`) a page of rows at a
time, evaluations' predictions, and per-step counts cached by file identity (path, size, modification time), so a
100k-trajectory run is read one row at a time and each file is counted once."""

from __future__ import annotations

import itertools
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from inspo_cli.evaluation.report import PREDICTION_SHAPE
from inspo_cli.jsonio import COUNT, UNIT, Range, iter_rows
from inspo_cli.runs import RunDir
from inspo_cli.runs.file_shapes import DAMAGED
from inspo_cli.training.rollout_log import step_files

PAGE_ROWS = 100  # trajectories (or predictions) per page
NUMBER = Range()
SEGMENTS = [{"by": str, "text": str}]
# a kept rollout as the viewer reads it (inspo_cli/training/rollout_log.py writes it): the fields a page shows
ROLLOUT_SHAPE = {
    "step": COUNT,
    "group": COUNT,
    "qid": str,
    "question": str,
    "golden_answers": [str],
    "instruction_id": (str, None),
    "prompt?": str,
    "segments": SEGMENTS,
    "searches": [str],
    "answer": (str, None),
    "stop_reason?": (str, None),
    "truncated": bool,
    "invalid_actions": COUNT,
    "turns?": COUNT,
    "reward": NUMBER,
    "score?": (NUMBER, None),
    "em": UNIT,
    "format_bonus?": (NUMBER, None),
    "type?": str,
    "tool_errors?": {str: (int, float)},
}
PREDICTION_VIEW_SHAPE = {
    **PREDICTION_SHAPE,
    "question?": str,
    "golden_answers?": [str],
    "prediction?": (str, None),
    "f1?": UNIT,
    "searches?": COUNT,
    "queries?": [str],
    "response?": str,
    "segments?": SEGMENTS,
    "stop_reason?": (str, None),
    "invalid_actions?": COUNT,
}


@dataclass
class StepStats:
    """One step's kept rollouts, counted: what the trajectory index and the instruction pages show."""

    rows: int = 0
    groups: set = field(default_factory=set)
    em: float = 0.0
    reward: float = 0.0
    wrong: int = 0
    truncated: int = 0
    invalid: int = 0
    instructions: Counter = field(default_factory=Counter)
    types: Counter = field(default_factory=Counter)
    pages_by_instruction: dict = field(default_factory=dict)  # instruction id -> sorted page numbers holding it

    def add(self, index: int, row: dict) -> None:
        self.rows += 1
        self.groups.add(row["group"])
        self.em += row["em"]
        self.reward += row["reward"]
        self.wrong += row["em"] < 1
        self.truncated += bool(row["truncated"])
        self.invalid += row["invalid_actions"] > 0
        iid = row["instruction_id"] or "-"
        self.instructions[iid] += 1
        self.types[row.get("type") or "-"] += 1
        pages = self.pages_by_instruction.setdefault(iid, [])
        page = index // PAGE_ROWS + 1
        if not pages or pages[-1] != page:
            pages.append(page)

    @property
    def pages(self) -> int:
        return max(1, -(-self.rows // PAGE_ROWS))


def file_key(path: Path) -> tuple:
    stat = os.stat(path)
    return (str(path), stat.st_size, stat.st_mtime_ns)


class RunData:
    """Reads of one run's files for the pages, with the counts cached."""

    _stats: dict[tuple, StepStats] = {}  # shared by every run: keyed by file identity

    def __init__(self, run: RunDir):
        self.run = run

    def rollout_steps(self) -> dict[int, Path]:
        return dict(step_files(self.run))

    def rollouts(self, step: int, page: int = 1) -> list[dict]:
        """Page `page` (from 1) of step `step`'s kept trajectories; rows before it are skipped unparsed."""
        path = self.rollout_steps().get(step)
        if path is None:
            return []
        rows = iter_rows(path, ROLLOUT_SHAPE, DAMAGED, skip=(page - 1) * PAGE_ROWS)
        return list(itertools.islice(rows, PAGE_ROWS))

    def step_stats(self, step: int) -> StepStats:
        path = self.rollout_steps()[step]
        key = file_key(path)
        if key not in self._stats:
            stats = StepStats()
            for index, row in enumerate(iter_rows(path, ROLLOUT_SHAPE, DAMAGED)):
                stats.add(index, row)
            if len(self._stats) > 4096:  # a bound on the cache, never reached by one run's steps
                self._stats.clear()
            self._stats[key] = stats
        return self._stats[key]

    def evaluation_files(self) -> dict[int, Path]:
        """Evaluated step -> its predictions.jsonl."""
        found = {}
        for step in self.run.evaluated_steps():
            file = self.run.evaluation_dir(step) / "predictions.jsonl"
            if file.is_file():
                found[step] = file
        return found

    def predictions(self, step: int, page: int | None = 1) -> Iterator[dict]:
        """Step `step`'s predictions: page `page` (from 1), or all of them streamed (`page=None`)."""
        file = self.evaluation_files().get(step)
        if file is None:
            return iter(())
        if page is None:
            return iter_rows(file, PREDICTION_VIEW_SHAPE, DAMAGED)
        rows = iter_rows(file, PREDICTION_VIEW_SHAPE, DAMAGED, skip=(page - 1) * PAGE_ROWS)
        return itertools.islice(rows, PAGE_ROWS)

    def prediction_count(self, step: int) -> int:
        file = self.evaluation_files().get(step)
        if file is None:
            return 0
        key = ("count",) + file_key(file)
        if key not in self._stats:
            stats = StepStats()
            stats.rows = sum(1 for _ in iter_rows(file, PREDICTION_VIEW_SHAPE, DAMAGED))
            self._stats[key] = stats
        return self._stats[key].rows
