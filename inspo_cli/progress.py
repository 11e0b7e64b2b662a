"""Terminal output for long work, shared by the CLI and the components below it (no typer here).

`console` is stdout (results, tables); `err_console` is stderr (progress, step lines, errors), so a command's
stdout can be piped while its progress stays visible. `progress_bar()` is the bar every long-running piece of
work shows.
"""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


def progress_bar(transient: bool = False) -> Progress:
    """The progress bar every long-running command uses."""
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    TimeRemainingColumn(), console=err_console, transient=transient)
