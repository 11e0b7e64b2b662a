"""The test suite's own layout: no test module imports another (top level or inside a function), and neither does a
shared helper. What several test modules need lives in tests/helpers/ (or, for fixtures, tests/conftest.py), so a
test module can be run, moved or deleted alone."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def imported_test_modules(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, module) for each `test_*` module that `tree` imports: `import test_x`, `from test_x import y`, and
    `importlib.import_module("test_x")` or `__import__("test_x")` with the name written out."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""] if node.level == 0 else []
        elif (
            isinstance(node, ast.Call)
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and (
                (isinstance(node.func, ast.Name) and node.func.id == "__import__")
                or (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
            )
        ):
            names = [node.args[0].value]
        else:
            continue
        found += [(node.lineno, name) for name in names if name.split(".")[0].startswith("test_")]
    return sorted(found)


def test_no_test_module_imports_another_and_no_helper_imports_a_test_module():
    test_files = sorted(TESTS.rglob("test_*.py"))
    helper_files = sorted((TESTS / "helpers").glob("*.py"))
    assert len(test_files) > 10 and (TESTS / "helpers" / "__init__.py") in helper_files
    # the check itself finds each form, at any depth
    sample = (
        "import test_a\nfrom test_b import x\ndef f():\n    from test_c.sub import y\n    import os, test_d\n"
        "    importlib.import_module('test_e')\n    __import__('test_f')\nfrom helpers.runs import metrics\n"
    )
    assert imported_test_modules(ast.parse(sample)) == [
        (1, "test_a"),
        (2, "test_b"),
        (4, "test_c.sub"),
        (5, "test_d"),
        (6, "test_e"),
        (7, "test_f"),
    ]
    offenders = [
        f"{path.relative_to(TESTS.parent)}:{line}: imports {module}"
        for path in test_files + helper_files
        for line, module in imported_test_modules(ast.parse(path.read_text(encoding="utf-8"), str(path)))
    ]
    assert not offenders, (
        "a test module imports a test module; move what it needs into tests/helpers/ (fixtures: "
        "tests/conftest.py) and import it from there:\n" + "\n".join(offenders)
    )
