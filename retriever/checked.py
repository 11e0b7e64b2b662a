"""Reading the files an index is made of, bounded and checked: the corpus, index.json and offsets.npy.

`retriever` stands alone (it never imports `inspo_cli`), so it has this small reader of its own, doing what
`inspo_cli.files` and `inspo_cli.jsonio` do for the toolkit: a file that must be a regular file is checked to be
one on the open descriptor (opened non-blocking: a FIFO would block the open, `/dev/zero` never ends, and both
have `st_size` 0); a file read whole is read to a bound counted in bytes read; a corpus is streamed a line at a
time, with a line cap; and what was read is checked against the shape its readers rely on. Anything else is one
`RetrieverError` naming the file (and line) and the fix.

    with open_regular(path, "corpus") as f:
        for lineno, line in iter_lines(f, path, "fix or remove that line"): ...
    meta = read_json_object(index_dir / "index.json", "index description", 1 << 20, "rebuild the index")
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from retriever.errors import RetrieverError

LINE_BYTES = 16 << 20  # a corpus passage is about a kilobyte: a line this long is not a passage


def describe_os_error(error: OSError, what: str, path: str | os.PathLike) -> str:
    if isinstance(error, FileNotFoundError):
        return f"{what} {path}: does not exist; check the path"
    return f"{what} {path}: {(error.strerror or str(error)).rstrip('.').lower()}; check the path and its permissions"


def open_regular(path: str | os.PathLike, what: str) -> BinaryIO:
    """`path` opened for binary reading; a `RetrieverError` when it cannot be, or is not a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise RetrieverError(describe_os_error(e, what, path)) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a directory" if stat.S_ISDIR(mode) else "a FIFO, a device or a socket"
            raise RetrieverError(f"{what} {path}: is {kind}, not a regular file; pass the file itself")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def iter_lines(
    f: BinaryIO, path: str | os.PathLike, fix: str, max_bytes: int = LINE_BYTES, error: type[Exception] = RetrieverError
) -> Iterator[tuple[int, bytes]]:
    """(line number, line) of a file opened in binary, streamed; a line of more than `max_bytes` (newline left out)
    is an `error` `<path>:<line>: ...; <fix>` before it is held whole: a 3 GB file of NUL bytes is one line.
    (`inspo_cli.files.iter_lines` is this, raising `InspoError`.)"""
    lineno = 0
    while line := f.readline(max_bytes + 2):
        lineno += 1
        if len(line) - line.endswith(b"\n") > max_bytes:
            raise error(
                f"{path}:{lineno}: a line of more than {max_bytes:,} bytes (no line of this kind is that long: "
                f"is it the right file?); {fix}"
            )
        yield lineno, line


def read_json_object(path: str | os.PathLike, what: str, max_bytes: int, fix: str) -> dict:
    """A JSON object read whole from a regular file of at most `max_bytes` (counted as read)."""
    with open_regular(path, what) as f:
        try:
            data = f.read(max_bytes + 1)
        except OSError as e:
            raise RetrieverError(describe_os_error(e, what, path)) from None
    if len(data) > max_bytes:
        raise RetrieverError(f"{what} {path}: more than {max_bytes:,} bytes, not one this toolkit wrote; {fix}")
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        why = (
            f"line {e.lineno}: {e.msg.removesuffix(' at').lower()}"
            if isinstance(e, json.JSONDecodeError)
            else "nested too deeply"
            if isinstance(e, RecursionError)
            else "not UTF-8 JSON"
        )
        raise RetrieverError(f"{path}: not valid JSON ({why}); {fix}") from None
    if not isinstance(value, dict):
        raise RetrieverError(f"{path}: expected a JSON object, got {type(value).__name__}; {fix}")
    return value


def shape_problem(value: Any, shape: Any, at: str = "") -> str | None:
    """What about `value` does not fit `shape`, or None. A shape is a type (int, float, str, bool: exact, no bool
    for a number), a tuple of them (any of), a `Positive` / `NonNegative` integer, or a dict of key -> shape
    (a key ending in "?" may be missing; other keys are allowed)."""
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            return f"{at or 'the file'}: expected an object, got {_show(value)}"
        for key, item_shape in shape.items():
            name = key.removesuffix("?")
            if name not in value:
                if key.endswith("?"):
                    continue
                return f"{at + ' -> ' if at else ''}no {json.dumps(name)}"
            if problem := shape_problem(value[name], item_shape, f"{at + ' -> ' if at else ''}{json.dumps(name)}"):
                return problem
        return None
    options = shape if isinstance(shape, tuple) else (shape,)
    if any(_fits(value, option) for option in options):
        return None
    return f"{at}: expected {' or '.join(_NAMES.get(o, str(o)) for o in options)}, got {_show(value)}"


class Positive:
    """An integer >= 1 (a dimension, a count that cannot be 0)."""


class NonNegative:
    """An integer >= 0 (a size in bytes, a number of passages)."""


_NAMES = {
    int: "an integer",
    float: "a number",
    str: "a string",
    bool: "true or false",
    None: "null",
    Positive: "an integer >= 1",
    NonNegative: "an integer >= 0",
}


def _fits(value: Any, shape: Any) -> bool:
    if shape is None:
        return value is None
    if shape in (int, Positive, NonNegative):
        low = {int: None, Positive: 1, NonNegative: 0}[shape]
        return type(value) is int and (low is None or value >= low)
    if shape is float:
        return type(value) in (int, float)
    return type(value) is shape


def _show(value: Any) -> str:
    return "null" if value is None else f"{type(value).__name__} {json.dumps(value)[:40]}"


def engine_files(paths: list[Path], rebuild: str) -> None:
    """Refuse, before an engine's own reader (bm25s, faiss) opens them, index files that are not regular files: a
    FIFO would block it. `paths` are files or folders (every file under them)."""
    for path in paths:
        for file in [path, *sorted(path.rglob("*"))] if path.is_dir() else [path]:
            if not file.is_dir() and not file.is_file():
                what = "is missing" if not os.path.lexists(file) else "is a FIFO, a device or a socket, not a file"
                raise RetrieverError(f"index file {file} {what}; {rebuild}")


def engine_error(error: BaseException, where: Path, rebuild: str) -> RetrieverError:
    """An engine's own reader failed on damaged files (bm25s: ValueError, EOFError; faiss: RuntimeError)."""
    first = (str(error).strip().splitlines() or [""])[0][:160]
    return RetrieverError(f"{where}: the index files are damaged ({type(error).__name__}: {first}); {rebuild}")
