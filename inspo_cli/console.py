"""The CLI's error boundary, and the consoles it prints to (from `inspo_cli.progress`, which components use).

`@user_errors` is the one place where an `InspoError` becomes `error: <message>` on one line of stderr and
exit code 2, with no traceback; so does an `OSError` about a file (`inspo_cli.files.describe`). Any other exception
is a bug and keeps its traceback (without local variables, which could hold secrets).

Output that cannot be written (stdout closed, on a full disk, a pipe gone) is one line and exit code 1, wherever it
happens, `--help` included (`run_cli`). A failed write only says `No space left on device`, not to what, so while a
command runs stdout and stderr are wrapped to mark their own errors: a full disk behind stdout is then never taken for
one under a file the command writes, which names that file (its writers attach the name) and exits 2. A standard
descriptor closed at start (`>&-`) is first pointed at /dev/null, so that no file the command opens takes its number
and receives what a library prints to it, and stdout is made to refuse writes, so the lost output is not silent.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import io
import os
import sys
from collections.abc import Callable, Iterator
from typing import TypeVar

import typer
from rich.markup import escape

from inspo_cli.envvars import check_environment
from inspo_cli.errors import USER_ERRORS
from inspo_cli.files import describe
from inspo_cli.progress import console, err_console, progress_bar

__all__ = ["console", "err_console", "progress_bar", "run_cli", "user_errors"]

F = TypeVar("F", bound=Callable)
STREAM = "inspo_stream"  # the attribute a write error of stdout or stderr carries: "stdout" or "stderr"
WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO)  # a write that failed, file or output


def user_errors(fn: F) -> F:
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            with marked_streams():
                result = fn(*args, **kwargs)
                _flush_stdout()  # a full disk or closed pipe behind stdout shows here, not at exit
            return result
        except USER_ERRORS as e:
            _print_error(str(e))
            raise typer.Exit(e.exit_code) from None
        except OSError as e:
            code = report_os_error(e)
            if code is None:  # not about a file or the output: a bug or a network problem, which keep their traceback
                raise
            raise typer.Exit(code) from None

    return wrapper  # type: ignore[return-value]


def run_cli(app: Callable[[], object]) -> None:
    """Run the CLI: check the environment variables, then `app()`, with output errors (`inspo --help > /dev/full`,
    `inspo env >&-`) one line and exit code 1 also outside the commands, and stdout flushed before the exit code is
    decided, so that output lost at the very end is not an exit code 0."""
    _occupy_closed_descriptors()
    code: int | str | None = 0
    with marked_streams():
        try:
            if not _diagnosing(sys.argv[1:]):
                check_environment()
            app()  # a click app in standalone mode always ends in SystemExit
        except SystemExit as e:
            code = e.code
        except USER_ERRORS as e:
            _print_error(str(e))
            code = e.exit_code
        except OSError as e:
            code = report_os_error(e)
            if code is None:
                raise
        try:
            _flush_stdout()
        except OSError as e:
            if code:  # a failure already said (a full stdout, say): what is left of the output goes with it
                _silence(sys.stdout)
            elif (code := report_os_error(e)) is None:
                raise
    sys.exit(code)


def _diagnosing(args: list[str]) -> bool:
    """`--help`, `--version` and `inspo env` run whatever the INSPO_* variables say: they are how a bad one is found."""
    return (
        bool({"--help", "-h", "--version"} & set(args))
        or next((a for a in args if not a.startswith("-")), None) == "env"
    )


def report_os_error(error: OSError) -> int | None:
    """Print the one line an `OSError` deserves and return the exit code; None when it deserves a traceback."""
    stream = getattr(error, STREAM, None)
    if stream == "stderr":  # nowhere to say anything: the exit code is the message
        _silence(sys.stderr)
        return 1
    if stream == "stdout":
        _silence(sys.stdout)
        _print_error(
            f"could not write the output ({_reason(error)}); check where stdout goes (a full disk, a closed "
            "descriptor or pipe)"
        )
        return 1
    if error.filename is not None:
        _print_error(describe(error, "file"))  # a file the commands did not foresee (a full disk while writing, ...)
        return 2
    if error.errno in WRITE_ERRNOS:  # a write whose writer did not name its file (every writer of ours does)
        _print_error(
            f"could not write a file ({_reason(error)}); free some space on the disk of the command's "
            "output, or choose another place for it"
        )
        return 2
    return None


def _reason(error: OSError) -> str:
    return error.strerror or (os.strerror(error.errno) if error.errno else str(error))


class _MarkedStream:
    """stdout or stderr, passed through, except that an OSError raised writing it is marked with its name."""

    def __init__(self, stream, name: str):
        self._stream, self._name = stream, name

    def _mark(self, method: str, *args):
        try:
            return getattr(self._stream, method)(*args)
        except OSError as e:
            setattr(e, STREAM, self._name)
            raise

    def write(self, text):
        return self._mark("write", text)

    def writelines(self, lines):
        return self._mark("writelines", lines)

    def flush(self):
        return self._mark("flush")

    def __getattr__(self, name):
        return getattr(self._stream, name)


@contextlib.contextmanager
def marked_streams() -> Iterator[None]:
    """Mark write errors of sys.stdout and sys.stderr (as they are now) while the block runs."""
    saved = sys.stdout, sys.stderr
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, _MarkedStream):
            setattr(sys, name, _MarkedStream(stream, name))
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


class _ClosedStdout(io.TextIOBase):
    """What stdout is when it was closed at start: every write fails, as it would on the closed descriptor."""

    encoding = "utf-8"

    def writable(self) -> bool:
        return True

    def write(self, text) -> int:
        if not text:
            return 0
        raise OSError(errno.EBADF, "stdout is closed")


def _occupy_closed_descriptors() -> None:
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            if os.open(os.devnull, os.O_RDWR) != fd:  # the lowest free number: this one, as the lower are open
                return  # cannot happen; leave things as they are rather than guess
            if fd == 1:
                sys.stdout = _ClosedStdout()
            elif fd == 2:  # errors thrown away by the user's choice: the exit code still says them
                sys.stderr = open(fd, "w", closefd=False)


def _flush_stdout() -> None:
    if sys.stdout is not None:
        sys.stdout.flush()


def _silence(stream) -> None:
    """Point the descriptor behind a standard stream at /dev/null, so that the interpreter's last flush of what could
    not be written fails no more (and prints no 'Exception ignored' lines)."""
    try:
        fd = stream.fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):  # a test's captured stream has no descriptor
        pass


def _print_error(message: str) -> None:
    try:
        err_console.print(f"[bold red]error:[/] {escape(' '.join(message.split()))}")
    except OSError:  # stderr itself is full or gone: the exit code is all that is left to say it
        _silence(sys.stderr)
