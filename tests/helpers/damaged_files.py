"""Damaging a file the toolkit reads, and the one-line refusal expected of it: cut short, a field changed, or
replaced by a special file (a FIFO, /dev/zero, 3 GB of NUL bytes, a file of NUL bytes)."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.cli_helpers import assert_one_line_error

CUTS = (0.3, 0.6, 0.9)


def cut(path: Path, keep: float) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def edit(path: Path, change) -> None:
    """Apply `change` to the JSON object of a .json file, or to the first row of a .jsonl file."""
    if path.suffix == ".jsonl":
        lines = path.read_text().splitlines()
        row = json.loads(lines[0])
        change(row)
        path.write_text("\n".join([json.dumps(row), *lines[1:]]) + "\n")
    else:
        data = json.loads(path.read_text())
        change(data)
        path.write_text(json.dumps(data))


def assert_refused(result, file: str) -> None:
    assert_one_line_error(result, Path(file).name)


HUGE = 3 << 30


def fifo(path) -> None:
    """Put a FIFO at `path`. Should a reader block opening it, a thread opens and closes its other end after 10 s
    (each time one waits, for a minute): the reader then sees an empty file and the test fails instead of hanging."""
    import os
    import threading
    import time

    path.unlink(missing_ok=True)
    os.mkfifo(path)

    def unblock():
        deadline = time.monotonic() + 60
        time.sleep(10)
        while time.monotonic() < deadline and path.exists():
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))  # succeeds only while a reader waits
            except OSError:
                pass
            time.sleep(0.2)

    threading.Thread(target=unblock, daemon=True).start()


def device(path) -> None:
    """`path` becomes a symbolic link to /dev/zero: a character device that never ends."""
    path.unlink(missing_ok=True)
    path.symlink_to("/dev/zero")


def huge(path) -> None:
    """`path` becomes 3 GB of NUL bytes (sparse: it takes no disk space), one line with no newline."""
    path.unlink(missing_ok=True)
    with open(path, "wb") as f:
        f.truncate(HUGE)


def nul(path) -> None:
    """`path` keeps its size (4 KiB at least) but every byte is NUL: what a crash can leave of a file."""
    size = max(path.stat().st_size if path.is_file() else 0, 4096)
    path.unlink(missing_ok=True)
    path.write_bytes(b"\0" * size)


SPECIAL = {"fifo": fifo, "dev-zero": device, "3gb-of-nul": huge, "nul-bytes": nul}
