"""Reading a JSONL file (a corpus or a QA file) back as rows, for the index tests."""

from __future__ import annotations

import json
from pathlib import Path


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
