"""What a report wrote, so that replacing it can never delete anything else.

A report replaces its `--out` whole. A folder is taken for an earlier report only when it carries the marker the
report writes last, `.inspo-report.json`: its kind, its version, and every file the report wrote with its size and
SHA-256. It is replaced only when it holds nothing else: no file the marker does not list, none changed since (an
edited table1.md is the user's work now), no link. An empty folder or a new path is fine; anything else, a folder
with an `index.md` included (a MkDocs docs/, a paper's folder, an earlier inspo's report without a marker), is
refused in one line before any work.

    seal(building)                           # last, in the directory that becomes the report
    check_replaceable(Path("reports/fig2"))  # raises InspoError unless empty, new or an unchanged report
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import NoReturn

from inspo_cli.errors import InspoError
from inspo_cli.files import user_file
from inspo_cli.jsonio import atomic_write_json

MARKER = ".inspo-report.json"
KIND = "inspo-report"
VERSION = 1
MARKER_BYTES = 16 << 20  # a report of thousands of runs lists a few hundred kB; more is not a marker
_REPLACE = "a report replaces its --out whole"


def _sha256(path: Path) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            sha.update(chunk)
    return sha.hexdigest()


def _walk(directory: Path):
    """os.walk that never follows a link and raises what it meets (os.walk skips an unreadable folder silently)."""

    def fail(error: OSError) -> None:
        raise error

    return os.walk(directory, onerror=fail)


def seal(directory: Path) -> None:
    """Write the marker into a finished report directory: every file in it with its size and SHA-256."""
    files = {}
    for root, _, names in _walk(directory):
        for path in map(Path(root).joinpath, names):
            if stat.S_ISREG(path.lstat().st_mode):  # the report writes no link; unlisted, one is never replaced
                files[path.relative_to(directory).as_posix()] = {"bytes": path.stat().st_size, "sha256": _sha256(path)}
    files = dict(sorted(files.items()))
    atomic_write_json(directory / MARKER, {"kind": KIND, "version": VERSION, "files": files})


def _marker(directory: Path, out: Path) -> dict | None:
    """The marker's file list, or None when there is no marker at all; a marker inspo did not write is refused."""
    path = directory / MARKER
    try:
        info = path.lstat()
    except FileNotFoundError:
        return None
    bad = f"--out {out} has a {MARKER} that is not a report's marker"
    fix = f"{_REPLACE}, so delete the folder yourself if it is a report, or choose another --out"
    if not stat.S_ISREG(info.st_mode):
        raise InspoError(f"{bad} (it is not a regular file); {fix}")
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))  # swapped for a FIFO: no hang
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InspoError(f"{bad} (it is not a regular file); {fix}")
        data = f.read(MARKER_BYTES + 1)
    if len(data) > MARKER_BYTES:
        raise InspoError(f"{bad} (over {MARKER_BYTES:,} bytes); {fix}")
    try:
        marker = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise InspoError(f"{bad} (not valid JSON); {fix}") from None
    files = marker.get("files") if isinstance(marker, dict) else None
    if (
        not isinstance(marker, dict)
        or marker.get("kind") != KIND
        or type(marker.get("version")) is not int
        or marker["version"] < 1
        or not isinstance(files, dict)
        or not all(
            isinstance(v, dict) and type(v.get("bytes")) is int and isinstance(v.get("sha256"), str)
            for v in files.values()
        )
    ):
        raise InspoError(
            f"{bad} (kind {marker.get('kind') if isinstance(marker, dict) else None!r:.40}, or "
            f"its version or file list is not one inspo writes); {fix}"
        )
    if marker["version"] > VERSION:
        raise InspoError(
            f"--out {out} is a report of a newer inspo (marker version {marker['version']}, this one "
            f"writes {VERSION}); upgrade inspo, or choose another --out"
        )
    return files


def report_files(out: Path) -> list[str]:
    """The files the report in `out` wrote (its marker's list), or [] where `out` holds no marked report."""
    try:
        return sorted(_marker(out, out) or {}) if out.is_dir() else []
    except (OSError, InspoError):
        return []  # check_replaceable refuses such an out in its own words


ATTEMPTS = 5  # reads of an `out` other reports keep replacing, before the early check gives up


def check_replaceable(out: Path, location: Path | None = None) -> None:
    """Refuse, in one line naming the first thing in the way, an `out` (its content now at `location`, where
    `files.replaced_dir` took it aside) that a report may not replace: anything but a new path, an empty directory,
    or a report (marked) holding only the files it wrote, unchanged."""
    out = Path(out)
    location = Path(location) if location is not None else out
    with user_file(out, "--out"):
        for attempt in range(ATTEMPTS):
            before = _identity(location)
            try:
                return _check(out, location)
            except FileNotFoundError:
                # what was read went away mid-check: another report replaced `out` (this check is the early one;
                # `replaced_dir` checks again what it takes aside, where nothing can change it), so read it again
                if location != out:
                    raise
                if attempt == ATTEMPTS - 1:
                    return
            except (OSError, InspoError):
                # another report put in place of `out` while it was read: read the new one (a refusal stands)
                if location != out or attempt == ATTEMPTS - 1 or (before is not None and _identity(location) == before):
                    raise


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        info = path.lstat()
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _check(out: Path, location: Path) -> None:
    try:
        info = location.lstat()
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode):
        raise InspoError(
            f"--out {out} is a symbolic link (to {_shown(os.readlink(location))}); {_REPLACE}, "
            "so pass the directory itself, or another --out"
        )
    if not stat.S_ISDIR(info.st_mode):
        raise InspoError(f"--out {out}: is a file, not a directory; choose a directory")
    if not any(location.iterdir()):
        return
    files = _marker(location, out)
    if files is None:
        raise InspoError(
            f"--out {out} holds files but no report of this inspo (no {MARKER}), and {_REPLACE}: "
            "choose a new or empty directory (an earlier inspo's report there: delete it yourself)"
        )
    wanted_dirs = {parent for name in files for parent in Path(name).parents}
    for root, dirs, names in _walk(location):
        for name in dirs:
            relative = (Path(root) / name).relative_to(location)
            if (Path(root) / name).is_symlink() or relative not in wanted_dirs:
                _refuse_extra(out, relative)
        for name in names:
            path = Path(root) / name
            relative = path.relative_to(location).as_posix()
            if relative == MARKER:
                continue
            entry, info = files.get(relative), path.lstat()
            if entry is None or not stat.S_ISREG(info.st_mode):
                _refuse_extra(out, relative)
            if info.st_size != entry["bytes"] or _sha256(path) != entry["sha256"]:
                raise InspoError(
                    f"--out {out}: {_shown(relative)} changed since the report there was written, and "
                    f"{_REPLACE}; keep your copy elsewhere and delete the folder, or choose another "
                    "--out"
                )


def _refuse_extra(out: Path, relative) -> NoReturn:
    raise InspoError(
        f"--out {out} holds {_shown(relative)}, which the report there did not write, and {_REPLACE}; "
        "move it out, or choose another --out"
    )


def _shown(relative) -> str:
    """A name as the one-line error can hold it (a newline in a file name is quoted, not printed)."""
    name = str(relative)
    return name if name.isprintable() else ascii(name)
