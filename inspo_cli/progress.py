"""Terminal output for long work, shared by the CLI and the components below it (no typer here).

`console` is stdout (results, tables); `err_console` is stderr (progress, step lines, errors), so a command's
stdout can be piped while its progress stays visible. `progress_bar()` is the bar every long-running piece of
work shows; when stderr is not a terminal (a CI log, a pipeline, `nohup`), it prints a plain line per task instead,
at most every `INSPO_PROGRESS_SECONDS` (default 30) and when the task finishes, with counts, rate and ETA.
"""

from __future__ import annotations

import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from inspo_cli.envvars import env_seconds

console = Console(highlight=False, emoji=False)  # a path or an instruction with ":x:" stays as written
err_console = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)


def progress_bar(transient: bool = False) -> Progress:
    """The progress bar every long-running command uses (plain lines when stderr is not a terminal)."""
    if not err_console.is_terminal:
        return PlainProgress(console=err_console)
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err_console,
        transient=transient,
    )


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


class PlainProgress(Progress):
    """A `Progress` that renders nothing live and prints `description: done/total (pct) rate/s, elapsed, ETA`
    lines instead: for each task at most every `interval` seconds, and once when it completes."""

    def __init__(self, console: Console, interval: float | None = None):
        super().__init__(console=console, disable=True)
        self.interval = env_seconds("INSPO_PROGRESS_SECONDS") if interval is None else interval
        self._printed: dict = {}  # task id -> (monotonic time of its last line, completed count then)

    def update(self, task_id, **kwargs) -> None:
        super().update(task_id, **kwargs)
        self._maybe_print(task_id)

    def advance(self, task_id, advance: float = 1) -> None:
        super().advance(task_id, advance)
        self._maybe_print(task_id)

    def _maybe_print(self, task_id) -> None:
        task = self._tasks[task_id]
        now = time.monotonic()
        last, last_done = self._printed.get(task_id, (task.start_time or now, None))
        finished = task.total is not None and task.completed >= task.total
        if finished and last_done == task.completed:
            return  # said already
        if not finished and now - last < self.interval:
            return
        self._printed[task_id] = (now, task.completed)
        self.console.print(
            plain_line(task.description, task.completed, task.total, task.elapsed), soft_wrap=True, markup=False
        )


def plain_line(description: str, done: float, total: float | None, elapsed: float | None) -> str:
    """`evaluating nq: 120/500 (24%)  2.1/s  elapsed 0:00:57  ETA 0:03:01`."""
    elapsed = elapsed or 0.0
    rate = done / elapsed if elapsed > 0 else None
    text = f"{description}: {done:g}" + (f"/{total:g} ({100 * done / total:.0f}%)" if total else "")
    text += f"  {rate:.2f}/s" if rate else ""
    eta = (total - done) / rate if total and rate and done < total else None
    return text + f"  elapsed {_clock(elapsed)}" + (f"  ETA {_clock(eta)}" if eta is not None else "")
