"""The CLI's error boundary, and the consoles it prints to (from `inspo_cli.progress`, which components use).

`@user_errors` is the one place where an `InspoError` becomes `error: <message>` on one line of stderr and
exit code 2, with no traceback. Any other exception is a bug and keeps its traceback (without local
variables, which could hold secrets).
"""

from __future__ import annotations

import functools
from typing import Callable, TypeVar

import typer
from rich.markup import escape

from inspo_cli.errors import USER_ERRORS
from inspo_cli.progress import console, err_console, progress_bar

__all__ = ["console", "err_console", "progress_bar", "user_errors"]

F = TypeVar("F", bound=Callable)


def user_errors(fn: F) -> F:
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except USER_ERRORS as e:
            err_console.print(f"[bold red]error:[/] {escape(' '.join(str(e).split()))}")
            raise typer.Exit(e.exit_code) from None

    return wrapper  # type: ignore[return-value]

