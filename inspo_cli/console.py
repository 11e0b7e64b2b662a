"""The CLI's error boundary, and the consoles it prints to (from `inspo_cli.progress`, which components use).

`@user_errors` is the one place where an `InspoError` becomes `error: <message>` on one line of stderr and
exit code 2, with no traceback; so does an `OSError` about a file (`inspo_cli.files.describe`). Output that cannot
be written (stdout on a full disk or a closed pipe) is one line and exit code 1. Any other exception is a bug and
keeps its traceback (without local variables, which could hold secrets).
"""

from __future__ import annotations

import errno
import functools
import io
import os
import sys
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
            result = fn(*args, **kwargs)
            sys.stdout.flush()  # a full disk or closed pipe behind stdout shows here, not at exit
            return result
        except USER_ERRORS as e:
            _print_error(str(e))
            raise typer.Exit(e.exit_code) from None
        except OSError as e:
            if e.filename is None and e.errno in OUTPUT_ERRNOS:  # writing stdout: a full disk, a closed pipe
                _silence_stdout()
                _print_error(f"could not write the output ({os.strerror(e.errno)}); check where stdout goes")
                raise typer.Exit(1) from None
            if e.filename is None:  # not about a file: a bug or a network problem, which keep their traceback
                raise
            _print_error(describe(e, "file"))  # a file the commands did not foresee (a full disk while writing, ...)
            raise typer.Exit(2) from None

    return wrapper  # type: ignore[return-value]


OUTPUT_ERRNOS = (errno.ENOSPC, errno.EPIPE, errno.EIO)


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's last flush of what could not be written fails no more."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, io.UnsupportedOperation):  # a test's captured stdout has no file descriptor
        pass


def _print_error(message: str) -> None:
    err_console.print(f"[bold red]error:[/] {escape(' '.join(message.split()))}")

