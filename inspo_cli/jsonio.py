"""Atomic, deterministic JSON/JSONL files.

Every file a run or a generator writes goes through here: content is written to a temporary file in the
same directory and moved into place with `os.replace`, so a crash never leaves a half-written file and
a reader never sees one. JSON keeps the key order it is given, so the same data gives the same bytes.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import secrets
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inspo_cli.errors import InspoError
from inspo_cli.files import iter_lines, open_regular, read_bytes, user_file

TOO_DEEP = "JSON nested deeper than Python's parser can follow (a file no writer of this toolkit makes)"
JSON_BYTES = 256 << 20  # a JSON file read back whole: a run's largest, coevolution.json, is a few MB


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write `text` to `path` so that the file is either the old one or the complete new one."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp"
    # Created like any new file (0666 less the process's umask, applied by the OS), unlike mkstemp's 0600.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(e, OSError) and e.filename is None:  # a failed write names no file; else a full disk here
            e.filename = str(path)  # would read as one behind stdout (console.report_os_error)
        raise


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def dumps_jsonl(rows: Iterable[dict]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def atomic_write_jsonl(path: str | os.PathLike, rows: Iterable[dict]) -> None:
    atomic_write_text(path, dumps_jsonl(rows))


def atomic_write_jsonl_gz(path: str | os.PathLike, rows: Iterable[dict]) -> None:
    """JSONL, gzip-compressed (no name or time in the header, so the same rows give the same bytes), atomically.
    ASCII-escaped, so that any text (a lone surrogate a model's output could hold) is written and reads back."""
    text = "".join(json.dumps(row) + "\n" for row in rows)
    atomic_write_bytes(path, gzip.compress(text.encode("ascii"), compresslevel=6, mtime=0))


def iter_jsonl(path: str | os.PathLike) -> Iterator[dict]:
    """Stream the rows of a JSONL file of objects; a malformed line is an `InspoError` naming file and line."""
    return iter_rows(path, dict, "fix or remove that line")


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    return list(iter_jsonl(path))


# -- reading back what the toolkit wrote --------------------------------------------------------------------------
#
# A file a run wrote can still be damaged when it is read back: cut short by a partial copy from a cluster, edited by
# hand, written by another version. Each file kind has one reader (next to its writer) that checks the file against
# a shape and says `<file>: <what is wrong>; <fix>` in one line. A shape is
#   int, float (any number), str, bool, dict, list, object (anything), None (null), a tuple (any of them),
#   [shape] (a list of), [shape, shape, ...] (a list of exactly these), {str: shape} (an object with any keys),
#   {"key": shape, "opt?": shape, "*": shape} (an object with these keys; "opt?" may be missing, "*" is the shape of
#   every other key), Range(lo, hi) (a finite number within bounds: a type alone lets EM 1.5 or NaN into a mean),
#   NonEmpty(shape) (a list or object with at least one item: an empty score map averages to nothing).


@dataclass(frozen=True)
class Range:
    """A finite number in [lo, hi] (an integer with `integer`)."""

    lo: float = -math.inf
    hi: float = math.inf
    integer: bool = False


@dataclass(frozen=True)
class NonEmpty:
    shape: Any


UNIT = Range(0.0, 1.0)  # a proportion: EM, F1
COUNT = Range(0, integer=True)  # a step, a number of things
POSITIVE = Range(1, integer=True)  # questions scored: n = 0 with a score is a score of nothing

_NAMES = {
    int: "an integer",
    float: "a number",
    str: "a string",
    bool: "true or false",
    dict: "an object",
    list: "a list",
    None: "null",
    object: "anything",
}


def _expected(shape: Any) -> str:
    if isinstance(shape, Range):
        kind, lo, hi = ("an integer" if shape.integer else "a finite number"), _bound(shape.lo), _bound(shape.hi)
        if math.isinf(shape.hi):
            return kind if math.isinf(shape.lo) else f"{kind} >= {lo}"
        return f"{kind} in [{lo}, {hi}]"
    if isinstance(shape, NonEmpty):
        return f"a non-empty {_expected(shape.shape).removeprefix('an ').removeprefix('a ')}"
    if isinstance(shape, tuple):
        return " or ".join(_expected(s) for s in shape)
    if isinstance(shape, list):
        return "a list"
    if isinstance(shape, dict):
        return "an object"
    return _NAMES[shape]


def _bound(value: float) -> str:
    return str(int(value)) if math.isfinite(value) and value == int(value) else f"{value:g}"


def _matches(value: Any, shape: Any) -> bool:
    if isinstance(shape, Range):
        return (
            _matches(value, int if shape.integer else float) and math.isfinite(value) and shape.lo <= value <= shape.hi
        )
    if isinstance(shape, NonEmpty):
        return _matches(value, shape.shape) and len(value) > 0
    if isinstance(shape, tuple):
        return any(_matches(value, s) for s in shape)
    if shape is object:
        return True
    if shape is None:
        return value is None
    if isinstance(shape, list):
        return isinstance(value, list)
    if isinstance(shape, dict):
        return isinstance(value, dict)
    if shape is bool:
        return isinstance(value, bool)
    if shape is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if shape is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, shape)


def shape_problem(value: Any, shape: Any, at: str = "") -> str | None:
    """What about `value` does not fit `shape` (naming where, e.g. `"scores" -> "nq" -> "em"`), or None."""
    where = f"{at}: " if at else ""
    if not _matches(value, shape):
        got = "null" if value is None else f"{type(value).__name__} {json.dumps(value)[:40]}"
        return f"{where}expected {_expected(shape)}, got {got}"
    if isinstance(shape, tuple):
        shape = next(s for s in shape if _matches(value, s))
    if isinstance(shape, NonEmpty):
        shape = shape.shape
    step = f"{at} -> " if at else ""
    if isinstance(shape, list) and len(shape) > 1:
        if len(value) != len(shape):
            return f"{where}expected a list of {len(shape)}, got {len(value)} items"
        for i, (item, item_shape) in enumerate(zip(value, shape)):
            if (problem := shape_problem(item, item_shape, f"{step}item {i + 1}")) is not None:
                return problem
    elif isinstance(shape, list) and shape:
        for i, item in enumerate(value):
            if (problem := shape_problem(item, shape[0], f"{step}item {i + 1}")) is not None:
                return problem
    elif isinstance(shape, dict) and set(shape) == {str}:
        for key, item in value.items():
            if (problem := shape_problem(item, shape[str], f"{step}{json.dumps(key)}")) is not None:
                return problem
    elif isinstance(shape, dict):
        for key, item_shape in shape.items():
            name = key.removesuffix("?")
            if key == "*":
                continue
            if name not in value:
                if key.endswith("?"):
                    continue
                return f"{where}no {json.dumps(name)}"
            if (problem := shape_problem(value[name], item_shape, f"{step}{json.dumps(name)}")) is not None:
                return problem
        if "*" in shape:
            named = {k.removesuffix("?") for k in shape}
            for key, item in value.items():
                if key not in named and (problem := shape_problem(item, shape["*"], f"{step}{json.dumps(key)}")):
                    return problem
    return None


def read_json(path: str | os.PathLike, shape: Any, fix: str, max_bytes: int = JSON_BYTES) -> Any:
    """A JSON file the toolkit wrote, checked against `shape`; anything else (not a regular file, more than
    `max_bytes`, not JSON, the wrong shape or range) is one `InspoError`: `<path>: <what is wrong>; <fix>`."""

    data = read_bytes(path, "file", max_bytes)
    try:
        text = data.decode("utf-8")
        value = json.loads(text)
    except UnicodeDecodeError:
        raise InspoError(f"{path}: not valid JSON (not UTF-8: cut short or corrupt); {fix}") from None
    except json.JSONDecodeError as e:
        where = "cut short" if e.pos >= len(text.rstrip()) else f"{e.msg} at line {e.lineno}"
        raise InspoError(f"{path}: not valid JSON ({where}); {fix}") from None
    except RecursionError:
        raise InspoError(f"{path}: {TOO_DEEP}; {fix}") from None
    if (problem := shape_problem(value, shape)) is not None:
        raise InspoError(f"{path}: {problem}; {fix}")
    return value


def iter_rows(
    path: str | os.PathLike,
    shape: Any,
    fix: str,
    on_cut_tail=None,
    check: Callable[[dict], str | None] | None = None,
    skip: int = 0,
) -> Iterator[dict]:
    """Stream the rows of a JSONL file the toolkit wrote, each checked against `shape` and by `check` (which says
    what is wrong with a row, given the rows before it, or None); errors name the line, and a line is never held
    whole past `files.LINE_BYTES`. With `on_cut_tail`, a last line cut short (a file being appended to when it was
    copied or killed) is left out and `on_cut_tail(message)` says so; anywhere else a bad line is an error. The first
    `skip` rows (lines that are not blank) are passed over unread: what is wrong with them is not this reader's."""

    path = Path(path)
    with user_file(path, "file"), open_regular(path, "file") as raw:
        f = gzip.GzipFile(fileobj=raw, mode="rb") if path.name.endswith(".gz") else raw
        try:
            yield from _rows(path, f, shape, fix, on_cut_tail, check, skip)
        except (EOFError, gzip.BadGzipFile, zlib.error) as e:  # a .gz file cut short or damaged
            what = "cut short" if isinstance(e, EOFError) else "not gzip data, or damaged"
            raise InspoError(f"{path}: {what}; {fix}") from None


def _rows(path: Path, f, shape, fix, on_cut_tail, check, skip) -> Iterator[dict]:
    """`iter_rows` on an open (and, for .gz, decompressing) binary file."""
    for lineno, line in iter_lines(f, path, fix):
        if not line.strip():
            continue
        if skip > 0:
            skip -= 1
            continue
        try:
            row = json.loads(line.decode("utf-8"))
        except RecursionError:
            raise InspoError(f"{path}:{lineno}: {TOO_DEEP}; {fix}") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            if on_cut_tail is not None and not line.endswith(b"\n") and not f.read(1):
                on_cut_tail(
                    f"{path}:{lineno}: left out its last line, which is cut short (copied or killed while "
                    "it was being written); the rows before it are used"
                )
                return
            reason = e.msg if isinstance(e, json.JSONDecodeError) else "not UTF-8"
            raise InspoError(f"{path}:{lineno}: not valid JSON ({reason}); {fix}") from None
        if (problem := shape_problem(row, shape)) is not None or (check and (problem := check(row))):
            raise InspoError(f"{path}:{lineno}: {problem}; {fix}")
        yield row
