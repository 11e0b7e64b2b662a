"""The CLI's error boundary, and the consoles it prints to (from `inspo_cli.progress`, which components use).

`@user_errors` is the one place where an `InspoError` becomes `error: <message>` on one line of stderr and
exit code 2, with no traceback; so does an `OSError` about a file (`inspo_cli.files.describe`). Any other
exception is a bug and keeps its traceback (without local variables, which could hold secrets).
"""

from __future__ import annotations

import functools
from typing import Callable, TypeVar

import typer
from rich.markup import escape

from inspo_cli.errors import USER_ERRORS
from inspo_cli.files import describe
from inspo_cli.progress import console, err_console, progress_bar

__all__ = ["console", "err_console", "progress_bar", "user_errors"]

F = TypeVar("F", bound=Callable)


def user_errors(fn: F) -> F:
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except USER_ERRORS as e:
            _print_error(str(e))
            raise typer.Exit(e.exit_code) from None
        except OSError as e:
            if e.filename is None:  # not about a file: a bug or a network problem, which keep their traceback
                raise
            _print_error(describe(e, "file"))  # a file the commands did not foresee (a full disk while writing, ...)
            raise typer.Exit(2) from None

    return wrapper  # type: ignore[return-value]


def _print_error(message: str) -> None:
    err_console.print(f"[bold red]error:[/] {escape(' '.join(message.split()))}")

