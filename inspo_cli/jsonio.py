"""Atomic, deterministic JSON/JSONL files.

Every file a run or a generator writes goes through here: content is written to a temporary file in the
same directory and moved into place with `os.replace`, so a crash never leaves a half-written file and
a reader never sees one. JSON keeps the key order it is given, so the same data gives the same bytes.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any, Iterable, Iterator

from inspo_cli.errors import InspoError


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write `text` to `path` so that the file is either the old one or the complete new one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp"
    # Created like any new file (0666 less the process's umask, applied by the OS), unlike mkstemp's 0600.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def dumps_jsonl(rows: Iterable[dict]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def atomic_write_jsonl(path: str | os.PathLike, rows: Iterable[dict]) -> None:
    atomic_write_text(path, dumps_jsonl(rows))


def iter_jsonl(path: str | os.PathLike) -> Iterator[dict]:
    """Stream the rows of a JSONL file; a malformed line is an `InspoError` naming file and line."""
    path = Path(path)
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise InspoError(f"{path}:{lineno}: not valid JSON ({e.msg}); fix or remove that line") from None
            if not isinstance(row, dict):
                raise InspoError(f"{path}:{lineno}: expected a JSON object per line, got {type(row).__name__}")
            yield row


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    return list(iter_jsonl(path))
