"""The user's files and directories: the one place where an OS or encoding problem with one becomes an
`InspoError` that says what the file is for, its path, the reason and the fix (`error: <what> <path>: <reason>;
<fix>`, exit 2), instead of a traceback.

Commands read a user's file with `read_text(path, "recipe")`, stream one inside `with user_file(path, "QA file"):`,
and create an output directory with `make_dir(path, "--out")`. `describe` is also the CLI's last resort for an
`OSError` that names a file (a full disk while a run writes, say), so even a path missed here gets one line.
"""

from __future__ import annotations

import errno
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from inspo_cli.errors import InspoError

INSTRUCTION_FILE_BYTES = 8 << 20  # a population's instructions: at most a few hundred of 12,000 characters

_REASONS = {  # errno -> "reason; fix"
    errno.EISDIR: "is a directory; pass a file",
    errno.ENOTDIR: "a part of the path is a file, not a directory; check the path",
    errno.EACCES: "permission denied; change its permissions or choose another path",
    errno.EPERM: "not permitted; change its permissions or choose another path",
    errno.EROFS: "on a read-only file system; choose another path",
    errno.ENOSPC: "no space left on the device; free some or choose another path",
    errno.EDQUOT: "disk quota exceeded; free some space or choose another path",
    errno.ENAMETOOLONG: "the name is too long; choose a shorter path",
    errno.EEXIST: "exists and is not a directory; choose another path",
}


def describe(error: BaseException, what: str, path: str | os.PathLike | None = None) -> str:
    """`<what> <path>: <reason>; <fix>` for an OSError or a UnicodeDecodeError met on `path`."""
    if isinstance(error, UnicodeDecodeError):
        byte = error.object[error.start:error.start + 1]
        return f"{what} {path}: not UTF-8 text (byte 0x{byte.hex()} at offset {error.start}); save it as UTF-8"
    assert isinstance(error, OSError)
    path = path if path is not None else error.filename
    if isinstance(error, FileNotFoundError):
        return f"{what} {path}: does not exist; check the path"
    reason = _REASONS.get(error.errno) or f"{(error.strerror or str(error)).rstrip('.')}; check the path and its permissions"
    return f"{what} {path}: {reason}"


@contextmanager
def user_file(path: str | os.PathLike, what: str) -> Iterator[None]:
    """Turn OS and encoding errors met on `path` inside the block into one-line `InspoError`s."""
    try:
        yield
    except (OSError, UnicodeDecodeError) as e:
        raise InspoError(describe(e, what, path)) from None


def read_text(path: str | os.PathLike, what: str, max_bytes: int | None = None) -> str:
    """A user's UTF-8 text file (a recipe, an instruction, a sweep); `what` names it in the error. With `max_bytes`,
    a larger file is refused before it is read."""
    with user_file(path, what):
        if max_bytes is not None and (size := os.stat(path).st_size) > max_bytes:
            raise InspoError(f"{what} {path}: {size:,} bytes, more than the {max_bytes:,} it may have; check that "
                             "this is the right file")
        return Path(path).read_text(encoding="utf-8")


def not_a_directory(path: str | os.PathLike, what: str) -> str | None:
    """`<what> <path>: does not exist / is not a directory (a file, a FIFO, ...)`, or None for a directory."""
    path = Path(path)
    if path.is_dir():
        return None
    if not path.exists():
        return f"{what} {path}: does not exist; check the path"
    kind = "a file" if path.is_file() else "a FIFO, a socket or a device"
    return f"{what} {path}: is {kind}, not a directory; pass the directory"


def check_can_create(path: str | os.PathLike, what: str) -> None:
    """Refuse, before long work starts, an output directory that could not be created or written: its nearest
    existing ancestor must be a writable directory (creates nothing)."""
    path = Path(path).absolute()
    if path.exists():
        if not path.is_dir():
            raise InspoError(f"{what} {path}: is a file; choose a directory")
        existing = path
    else:
        existing = next(parent for parent in path.parents if parent.exists())
        if not existing.is_dir():
            raise InspoError(describe(NotADirectoryError(errno.ENOTDIR, "Not a directory"), what, path))
    if not os.access(existing, os.W_OK | os.X_OK):
        raise InspoError(describe(PermissionError(errno.EACCES, "Permission denied"), what, path))


def make_dir(path: str | os.PathLike, what: str) -> Path:
    """Create an output directory (and its parents) or say in one line why it cannot be."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise InspoError(f"{what} {path}: is a file; choose a directory")
    with user_file(path, what):
        path.mkdir(parents=True, exist_ok=True)
    return path


def first_missing(path: str | os.PathLike) -> Path | None:
    """The top-most of `path` and its parents that does not exist yet (what creating `path` would create), or None."""
    path = Path(path).absolute()
    missing = None
    for candidate in (path, *path.parents):
        if candidate.exists():
            break
        missing = candidate
    return missing


def remove_empty_dirs(path: str | os.PathLike, top: Path | None) -> None:
    """Remove `path` and its parents up to `top` (as `first_missing` gave it before they were created) while they
    are empty: what a failed start created, and nothing it or anyone else wrote into."""
    if top is None:
        return
    path = Path(path).absolute()
    for candidate in (path, *path.parents):
        try:
            candidate.rmdir()  # only an empty directory goes
        except OSError:
            return
        if candidate == top:
            return


@contextmanager
def output_dir(path: str | os.PathLike, what: str) -> Iterator[Path]:
    """Create a command's output directory; if the command fails before writing anything into it, remove the
    directories it created (a failed `inspo evaluate` leaves no empty `evals/<time>/`)."""
    top = first_missing(path)
    made = make_dir(path, what)
    try:
        yield made
    except BaseException:
        remove_empty_dirs(made, top)
        raise


@contextmanager
def replaced_dir(path: str | os.PathLike, what: str) -> Iterator[Path]:
    """Build a directory's whole content in a hidden sibling, then put it in place of `path` in two renames (an old
    `path` is removed after): readers see the old directory or the complete new one, never a half-written one. If
    the block fails, the sibling goes and `path` is untouched."""
    import secrets
    import shutil

    path = Path(path)
    make_dir(path.parent, what)
    building = path.parent / f".{path.name}.partial-{secrets.token_hex(4)}"
    with user_file(building, what):
        building.mkdir()
    try:
        yield building
        old = path.parent / f".{path.name}.old-{secrets.token_hex(4)}"
        with user_file(path, what):
            if path.exists():
                os.rename(path, old)
            os.rename(building, path)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
