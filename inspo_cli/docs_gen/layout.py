"""docs/layout.md: every module of `inspo_cli` and `retriever`, package by package, each with the first sentence of
its docstring (read from the source with `ast`, nothing imported), under the page's hand-written introduction."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import inspo_cli
import retriever
from inspo_cli.docs_gen.markdown import generated_note, prose

PAGE = "layout.md"
HEADER = """\
Data flows one way: recipe → typed config → components → run directory. Only the CLI reads YAML and flags;
components take one config section each and never import the CLI. The layering (no import cycles, `retriever/`
standalone, no typer or CLI console in components) is checked by import-linter contracts in `pyproject.toml`, run
by the test suite (`lint-imports`); why the layers are what they are: [Architecture](architecture.md).

Adding a proposer, a selection or parent rule, an inference method, a retriever kind, a tool or a training algorithm
is one file plus one registry line, and a recipe may name one from outside the package by import path:
[Contributing](contributing.md#adding-a-strategy-one-file-and-one-registry-line); the registered ones:
[Strategies](reference/strategies.md). Beside the two packages: `recipes/`, `data/`, `tests/`, `bench/`
(benchmarks, with results) and `docs/` (this site). Changes: [`CHANGELOG.md`](../CHANGELOG.md).

Below, each package's modules, each with the first sentence of its docstring."""
# "App. B", "Fig. 3", "e.g. x": a full stop that ends no sentence
_NOT_AN_END = ("App.", "Fig.", "eq.", "Eq.", "Alg.", "Tab.", "e.g.", "i.e.", "al.", "vs.", "cf.", "No.")
_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`(\"'])")


def first_sentence(doc: str | None) -> str:
    """The first sentence of a docstring's first paragraph, on one line ("" without a docstring)."""
    paragraph = " ".join((doc or "").strip().split("\n\n")[0].split())
    for match in _END.finditer(paragraph):
        if not paragraph[: match.start()].endswith(_NOT_AN_END):
            return paragraph[: match.start()]
    return paragraph


def docstring_of(path: Path) -> str | None:
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))


def modules(package: Path) -> list[Path]:
    """Every module and sub-package (`__init__.py`) under `package`, a package's own modules before its
    sub-packages', in name order."""
    found = []
    for path in sorted(package.iterdir()):
        if path.suffix == ".py" and path.name != "__init__.py":
            found.append(path)
    for path in sorted(package.iterdir()):
        if path.is_dir() and (path / "__init__.py").is_file():
            found.append(path / "__init__.py")
            found += modules(path)
    return found


def _row(path: Path, package: Path) -> str:
    relative = path.relative_to(package).as_posix()
    name = relative.removesuffix("__init__.py") or relative
    return f"| `{name}` | {prose(first_sentence(docstring_of(path)) or '(no docstring)')} |"


def _section(package: Path, top: str) -> list[str]:
    out = [f"## `{top}`", "", prose(first_sentence(docstring_of(package / "__init__.py"))), ""]
    out += ["| module | what it is |", "|---|---|"]
    out += [_row(path, package) for path in modules(package) if path.parent != package or path.name != "__init__.py"]
    return [*out, ""]


def markdown() -> str:
    """The whole page: the header, then a section for `inspo_cli/`'s own modules, one per sub-package of it, and one
    for `retriever/`."""
    root = Path(inspo_cli.__file__).parent
    out = ["# Project layout", "", generated_note(), "", HEADER, ""]
    out += _section_flat(root, "inspo_cli/")
    for sub in sorted(p for p in root.iterdir() if p.is_dir() and (p / "__init__.py").is_file()):
        out += _section(sub, f"inspo_cli/{sub.name}/")
    out += _section(Path(retriever.__file__).parent, "retriever/")
    return "\n".join(out)


def _section_flat(root: Path, top: str) -> list[str]:
    """The top package's own modules (its sub-packages have their sections)."""
    out = [f"## `{top}`", "", prose(first_sentence(docstring_of(root / "__init__.py"))), ""]
    out += ["| module | what it is |", "|---|---|"]
    out += [_row(path, root) for path in sorted(root.glob("*.py")) if path.name != "__init__.py"]
    return [*out, ""]
