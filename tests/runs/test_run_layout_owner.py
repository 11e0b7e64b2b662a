"""docs/architecture.md, "One owner per concept": one object owns the run directory's layout. No module outside
inspo_cli/runs/ spells a run-directory file name in code (docstrings and comments may mention them; a directory
name counts as a path segment, so the English word "checkpoints" in a message or a summary key named "plots"
does not)."""

from __future__ import annotations

import ast

from inspo_cli.runs import RunDir

NAMES = [
    getattr(RunDir, a)
    for a in (
        "RECIPE",
        "INFO",
        "METRICS",
        "INSTRUCTIONS",
        "EVOLUTIONS",
        "COEVOLUTION",
        "BEST_INSTRUCTION",
        "SUMMARY",
        "TENSORBOARD",
        "PLOTS",
        "EVALUATIONS",
        "CHECKPOINTS",
        "CHECKPOINT_PREFIX",
        "CHECKPOINT_COMPLETE",
        "DISTILL_INFO",
    )
]


def code_strings(tree: ast.AST):
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node


def spells(text: str, name: str) -> bool:
    if "." in name or "-" in name:  # a file name, or HF's checkpoint- prefix
        return name in text
    return f"{name}/" in text or f"/{name}" in text


def test_only_runs_py_spells_run_directory_file_names(repo_root):
    found = []
    for path in sorted((repo_root / "inspo_cli").rglob("*.py")):
        if path.parent == repo_root / "inspo_cli" / "runs":
            continue
        for node in code_strings(ast.parse(path.read_text(encoding="utf-8"))):
            found += [
                f"{path.relative_to(repo_root)}:{node.lineno}: {name}" for name in NAMES if spells(node.value, name)
            ]
    assert found == []
