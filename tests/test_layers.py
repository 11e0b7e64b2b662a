"""The architecture's layering (DESIGN.md §2), read from the imports by the shared tool: no import cycle,
retriever/ standalone, no typer or CLI console in the components. Skipped where the tool is not beside the repo."""

from __future__ import annotations

import subprocess
import sys

import pytest


def test_layering_has_no_problems(repo_root):
    tool = repo_root.parent / "shared" / "tools" / "check_layers.py"
    if not tool.is_file():
        pytest.skip(f"{tool} is not here")
    result = subprocess.run([sys.executable, str(tool), str(repo_root)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout
