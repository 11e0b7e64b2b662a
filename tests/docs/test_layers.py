"""The architecture's rules (docs/architecture.md) as import-linter contracts in pyproject.toml, checked on every run
of the suite: the layers point down, retriever/ stands alone, no typer or CLI console below the commands, the
instruction machinery is torch-free, no import cycle inside a package. Each contract is also shown to fail on a
deliberately wrong import, in a copy of the code."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

LINT = [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports())"]


def lint(root) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root)}  # the copy's packages, not the installed checkout's
    return subprocess.run([*LINT, "--no-cache"], cwd=root, env=env, capture_output=True, text=True, timeout=300)


def test_the_import_contracts_hold(repo_root):
    result = lint(repo_root)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 5 kept, 0 broken." in result.stdout


@pytest.mark.parametrize(
    "module, line, broken",
    [
        ("inspo_cli/config/loader.py", "import inspo_cli.training.run", "Layers, top to bottom"),
        (
            "inspo_cli/instructions/population.py",
            "import torch",
            "inspo_cli.instructions is not allowed to import torch",
        ),
        ("retriever/kinds.py", "import inspo_cli.errors", "retriever/ stands alone"),
        ("inspo_cli/training/summary.py", "import typer", "inspo_cli.training is not allowed to import typer"),
        ("inspo_cli/instructions/population.py", "import inspo_cli.instructions.evolution", "No cycles are allowed"),
    ],
    ids=["upward", "torch-in-instructions", "retriever-imports-inspo", "typer-below-commands", "cycle"],
)
def test_a_wrong_import_breaks_its_contract(repo_root, tmp_path, module, line, broken):
    for part in ("inspo_cli", "retriever", "pyproject.toml"):
        (shutil.copytree if (repo_root / part).is_dir() else shutil.copy)(repo_root / part, tmp_path / part)
    with open(tmp_path / module, "a", encoding="utf-8") as f:
        f.write(f"\n{line}  # deliberately wrong\n")
    result = lint(tmp_path)
    assert result.returncode == 1, result.stdout
    assert broken in result.stdout and "0 broken" not in result.stdout
