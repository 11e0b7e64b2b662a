"""The user's files and directories: the one place where an OS or encoding problem with one becomes an
`InspoError` that says what the file is for, its path, the reason and the fix (`error: <what> <path>: <reason>;
<fix>`, exit 2), instead of a traceback.

Commands read a user's file with `read_text(path, "recipe")`, stream one with `open_regular(path, "QA file")`
inside `with user_file(path, "QA file"):`, and create an output directory with `make_dir(path, "--out")`.
`describe` is also the CLI's last resort for an `OSError` that names a file (a full disk while a run writes, say),
so even a path missed here gets one line.

Every read is bounded by the bytes actually read, not by the file's size: `st_size` is 0 for a FIFO or a device
(`/dev/zero` never ends, a FIFO without a writer blocks `open`), so a file that must be a regular file is checked
to be one on the open descriptor (opened non-blocking), and a file read whole is read to at most `max_bytes` + 1.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from inspo_cli.errors import InspoError
from retriever.checked import iter_lines as checked_lines

INSTRUCTION_FILE_BYTES = 8 << 20  # a population's instructions: at most a few hundred of 12,000 characters
TEXT_FILE_BYTES = 16 << 20  # any other text file read whole (a launcher config, an `extends:` parent): generous
LINE_BYTES = 16 << 20  # one line of a streamed JSONL file: a run's rows are kilobytes, a QA row or a passage less

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
        byte = error.object[error.start : error.start + 1]
        return f"{what} {path}: not UTF-8 text (byte 0x{byte.hex()} at offset {error.start}); save it as UTF-8"
    assert isinstance(error, OSError)
    path = path if path is not None else error.filename
    if isinstance(error, FileNotFoundError):
        return f"{what} {path}: does not exist; check the path"
    reason = (error.errno is not None and _REASONS.get(error.errno)) or (
        f"{(error.strerror or str(error)).rstrip('.')}; check the path and its permissions"
    )
    return f"{what} {path}: {reason}"


@contextmanager
def user_file(path: str | os.PathLike, what: str) -> Iterator[None]:
    """Turn OS and encoding errors met on `path` inside the block into one-line `InspoError`s."""
    try:
        yield
    except (OSError, UnicodeDecodeError) as e:
        raise InspoError(describe(e, what, path)) from None


_KINDS = (
    (stat.S_ISFIFO, "a FIFO (a named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def not_regular(path: str | os.PathLike, what: str, mode: int) -> str | None:
    """`<what> <path>: is a FIFO ..., not a regular file; pass a file`, or None for a regular file's `mode`."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return f"{what} {path}: {_REASONS[errno.EISDIR]}"
    kind = next((name for test, name in _KINDS if test(mode)), "something else")
    return f"{what} {path}: is {kind}, not a regular file; pass a file"


def open_regular(path: str | os.PathLike, what: str) -> BinaryIO:
    """`path` opened for binary reading, or an `InspoError` when it is not a regular file. Opened non-blocking, so a
    FIFO without a writer is refused instead of hanging; OS errors are left for `user_file` to word."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        if (problem := not_regular(path, what, os.fstat(fd).st_mode)) is not None:
            raise InspoError(problem)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def too_big(path: str | os.PathLike, what: str, size: int | None, max_bytes: int) -> InspoError:
    said = f"{size:,} bytes, more" if size is not None else "more"
    return InspoError(f"{what} {path}: {said} than the {max_bytes:,} it may have; check that this is the right file")


def read_bytes(path: str | os.PathLike, what: str, max_bytes: int) -> bytes:
    """A regular file's bytes, at most `max_bytes` of them (counted as read, so a file that grows or lies about its
    size is bounded too); anything else is one `InspoError` naming `what` and `path`."""
    with user_file(path, what), open_regular(path, what) as f:
        size = os.fstat(f.fileno()).st_size
        if size > max_bytes:
            raise too_big(path, what, size, max_bytes)
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise too_big(path, what, None, max_bytes)
    return data


def iter_lines(
    f: BinaryIO, path: str | os.PathLike, fix: str, max_bytes: int = LINE_BYTES
) -> Iterator[tuple[int, bytes]]:
    """(line number, line) of a file opened in binary, streamed; a line of more than `max_bytes` is an `InspoError`
    `<path>:<line>: ...; <fix>` before it is held whole (the retriever's reader, which stands alone, with our error)."""

    return checked_lines(f, path, fix, max_bytes, InspoError)


def read_text(path: str | os.PathLike, what: str, max_bytes: int = TEXT_FILE_BYTES) -> str:
    """A user's UTF-8 text file (a recipe, an instruction, a sweep); `what` names it in the error. A file of more
    than `max_bytes`, or one that is not a regular file, is refused without being read whole; so is one holding a NUL
    byte, which no text a person wrote has (a file a crash left zeroed, a binary given by mistake)."""
    data = read_bytes(path, what, max_bytes)
    if (at := data.find(b"\0")) >= 0:
        raise InspoError(
            f"{what} {path}: a NUL byte at offset {at:,}, so not a text file (zeroed by a crash, or "
            "binary); check that this is the right file"
        )
    with user_file(path, what):
        return data.decode("utf-8")


def not_a_directory(path: str | os.PathLike, what: str) -> str | None:
    """`<what> <path>: does not exist / is not a directory (a file, a FIFO, ...)`, or None for a directory."""
    path = Path(path)
    if path.is_dir():
        return None
    if not path.exists():
        return f"{what} {path}: does not exist; check the path"
    kind = "a file" if path.is_file() else "a FIFO, a socket or a device"
    return f"{what} {path}: is {kind}, not a directory; pass the directory"


def lock_directory(path: str | os.PathLike) -> int | None:
    """An exclusive flock on the directory itself, held until the returned descriptor is closed or the process ends
    however it ends; None when another process holds it. flock works on local disks and on NFSv4."""
    import fcntl

    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


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
def replaced_dir(
    path: str | os.PathLike, what: str, check: Callable[[Path, Path], None] | None = None
) -> Iterator[Path]:
    """Build a directory's whole content in a hidden sibling, then put it in place of `path` in two renames (an old
    `path` is removed after): readers see the old directory or the complete new one, never a half-written one. If
    the block fails, the sibling goes and `path` is untouched. `check(path, location)` raises unless what `path`
    held, now at `location`, may go: it runs before the build, and again on the old directory once it has been
    moved aside, where nothing can change it any more (if refused, it is put back); a link is never replaced."""
    import secrets
    import shutil

    path = Path(path)
    check = check or (lambda shown, location: None)
    check(path, path)
    make_dir(path.parent, what)
    building = path.parent / f".{path.name}.partial-{secrets.token_hex(4)}"
    with user_file(building, what):
        building.mkdir()
    try:
        yield building
        with user_file(path, what):
            _swap(path, building, check)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise


def _swap(path: Path, building: Path, check: Callable[[Path, Path], None]) -> None:
    """Put `building` in place of `path`. Two commands replacing one directory at once both succeed: the last one's
    stays, and the other's goes only after it was checked like any old `path`."""
    import secrets
    import shutil

    for _ in range(8):
        if path.is_symlink():
            raise InspoError(f"{path} is a symbolic link; pass the directory it points to, or another path")
        aside = path.parent / f".{path.name}.old-{secrets.token_hex(4)}"
        old: Path | None = aside
        try:
            os.rename(path, aside)  # taken aside first, then checked: nothing can change what was checked
        except FileNotFoundError:
            old = None
        if old is not None:
            try:
                check(path, old)
            except BaseException:
                _put_back(old, path)
                raise
        try:
            os.rename(building, path)
        except OSError as error:
            raced = error.errno in (errno.ENOTEMPTY, errno.EEXIST)  # another command put its directory there
            if old is not None and not raced:
                _put_back(old, path)
            elif old is not None:  # checked, so it may go; the newcomer is taken aside and checked next round
                shutil.rmtree(old, ignore_errors=True)
            if not raced:
                raise
            continue
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        return
    raise InspoError(f"{path} kept being replaced by another command while this one tried to; run one at a time")


def _put_back(old: Path, path: Path) -> None:
    """Return what was taken aside to `path`; if something took its place meanwhile, say where it is."""
    try:
        os.rename(old, path)
    except OSError:
        raise InspoError(
            f"{path} was replaced by another command while this one checked it; what was there is now "
            f"{old}: move it back by hand"
        ) from None
