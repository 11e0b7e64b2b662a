"""The built site reads as it was written: no text lost as an unknown HTML element (a raw `<search>` in prose is taken
for a tag and vanishes), no code line too wide for the page at 1280 px, every dotted `inspo_cli.…` / `retriever.…`
name in the docs and the recipes' comments resolves to what the code has today, and every loss type has its
section on the RL-switches page. The site is built once for the module (about 2 s)."""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
MAX_CODE_LINE = 100  # characters: what a code block shows at 1280 px, beside the integrated table of contents
RL_SWITCHES = "docs/rl-switches.md"
# W3C HTML 5.2's elements and the SVG ones Material inlines for its icons. WHATWG's newer `search` is left out on
# purpose: a `<search>` in these pages is always the protocol's tag, which the browser would swallow.
HTML_ELEMENTS = frozenset(
    """a abbr address area article aside audio b base bdi bdo blockquote body br button canvas caption cite code col
    colgroup data datalist dd del details dfn dialog div dl dt em embed fieldset figcaption figure footer form h1 h2
    h3 h4 h5 h6 head header hgroup hr html i iframe img input ins kbd label legend li link main map mark menu meta
    meter nav noscript object ol optgroup option output p param picture pre progress q rp rt ruby s samp script
    section select slot small source span strong style sub summary sup table tbody td template textarea tfoot th
    thead time title tr track u ul var video wbr""".split()
)
SVG_ELEMENTS = frozenset("svg g path circle ellipse line polyline polygon rect defs use symbol clippath".split())
# a dotted name: not a file (`retriever/kinds.py` uses slashes), not the tail of a longer word or path
DOTTED = re.compile(r"(?<![\w/.-])((?:inspo_cli|retriever)(?:\.[A-Za-z_]\w*)+)(?::([A-Za-z_]\w*))?")
FILE_SUFFIXES = {"py", "yaml", "yml", "md", "json", "jsonl", "txt", "csv"}
# a page that shows how to write a new module names its file on a line of its own before the code block
NEW_MODULE = re.compile(r"^`((?:inspo_cli|retriever)/[\w/]+)\.py`:\s*$", re.M)


class _Elements(HTMLParser):
    """Every element name in a page, and the text of each line inside `<pre>` blocks."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: set[str] = set()
        self.code: list[str] = []
        self._pre = 0

    def handle_starttag(self, tag, attrs):
        self.elements.add(tag)
        if tag == "pre":
            self._pre += 1
            self.code.append("")

    def handle_endtag(self, tag):
        if tag == "pre" and self._pre:
            self._pre -= 1

    def handle_data(self, data):
        if self._pre:
            self.code[-1] += data


@pytest.fixture(scope="module")
def site(built_site) -> Path:
    result = built_site.result
    if result.returncode != 0:
        pytest.fail(f"mkdocs build failed:\n{result.stdout}{result.stderr}")
    return built_site.site


@pytest.fixture(scope="module")
def parsed(site) -> dict[str, _Elements]:
    pages = {}
    for path in sorted(site.rglob("*.html")):
        page = _Elements()
        page.feed(path.read_text(encoding="utf-8"))
        pages[path.relative_to(site).as_posix()] = page
    return pages


def unknown_elements(page: _Elements) -> set[str]:
    return page.elements - HTML_ELEMENTS - SVG_ELEMENTS


def long_code_lines(page: _Elements, limit: int = MAX_CODE_LINE) -> list[str]:
    return [line for block in page.code for line in block.splitlines() if len(line) > limit]


def test_no_text_is_taken_for_an_html_element(parsed):
    """`<calculate>`, `<tool_call>`, `<search>` written bare in prose become elements the browser drops with their
    name: the page then reads "put the expression between and ." Write them in backquotes."""
    found = {name: sorted(unknown_elements(page)) for name, page in parsed.items() if unknown_elements(page)}
    assert not found, f"elements that are no HTML (a tag written outside backquotes?): {found}"


def test_no_code_line_is_wider_than_the_page(parsed):
    wide = [f"{name}: {len(line)}: {line[:80]}..." for name, page in parsed.items() for line in long_code_lines(page)]
    assert not wide, f"code lines over {MAX_CODE_LINE} characters (wrap them):\n" + "\n".join(wide)


def _recipe_keys() -> set[str]:
    """Every dotted recipe key (`retriever.kind`): a recipe field, not a Python name, though it reads like one."""
    from inspo_cli.config import Recipe

    return {
        f"{section.name}.{f.name}"
        for section in dataclasses.fields(Recipe)
        for f in dataclasses.fields(section.default_factory())  # type: ignore[misc]
    }


def resolves(name: str, attribute: str | None = None) -> bool:
    """Whether `a.b.c` (and `:attribute`) names a module of the package, or an attribute reached from one."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in [*parts[cut:], *([attribute] if attribute else [])]:
            if not hasattr(found, part):
                return False
            found = getattr(found, part)
        return True
    return False


def dead_names(text: str, recipe_keys: set[str]) -> list[str]:
    """The dotted names in `text` that resolve to nothing, each with its line number."""
    created = {path.replace("/", ".") for path in NEW_MODULE.findall(text)}
    dead = []
    for number, line in enumerate(text.splitlines(), 1):
        for match in DOTTED.finditer(line):
            name, attribute = match[1], match[2]
            if name.rsplit(".", 1)[-1] in FILE_SUFFIXES or name in recipe_keys:
                continue
            if any(name == module or name.startswith(module + ".") for module in created):
                continue
            if not resolves(name, attribute):
                dead.append(f"{number}: {match[0]}")
    return dead


@pytest.mark.slow  # imports every module a page names, torch and TRL included: a minute on 2 cores
def test_every_dotted_name_in_the_docs_and_recipes_resolves():
    """Modules move (issue 53 moved a dozen): a page or a recipe comment naming `inspo_cli.instructions.lm` after
    it moved sends a reader to nothing. Resolved at test time, against the code as it is."""
    keys = _recipe_keys()
    files = sorted((REPO_ROOT / "docs").rglob("*.md")) + sorted((REPO_ROOT / "recipes").rglob("*.yaml"))
    dead = [
        f"{path.relative_to(REPO_ROOT)}:{where}"
        for path in files
        for where in dead_names(path.read_text(encoding="utf-8"), keys)
    ]
    assert not dead, "names that resolve to no module or attribute:\n" + "\n".join(dead)


def registered_loss_types() -> list[str]:
    """The loss types a recipe may name: the registry's records where there is one for `training.loss_type`, else
    the checked tuple of the training section."""
    registry = importlib.import_module("inspo_cli.registry")
    for value in vars(registry).values():
        if getattr(value, "key", None) == "training.loss_type":
            return list(value.keys()) if hasattr(value, "keys") else list(value)
    from inspo_cli.config.training_section import LOSS_TYPES

    return list(LOSS_TYPES)


def loss_section_problems(page: str, names: list[str]) -> list[str]:
    r"""What the RL-switches page lacks: a `### \`name\`` section for each loss type, with its formula (a ```text
    block), and no section for a name that is not one."""
    sections = dict(re.findall(r"^### `([a-z_]+)`[^\n]*\n(.*?)(?=^#{2,3} |\Z)", page, re.M | re.S))
    problems = [f"no section for {name}" for name in names if name not in sections]
    problems += [f"{name}: no formula" for name in names if name in sections and "```text" not in sections[name]]
    return problems + [f"a section for {name}, which is no loss type" for name in sorted(set(sections) - set(names))]


def test_every_loss_type_has_its_section_with_a_formula():
    names = registered_loss_types()
    assert len(names) >= 8
    problems = loss_section_problems((REPO_ROOT / RL_SWITCHES).read_text(encoding="utf-8"), names)
    assert not problems, f"{RL_SWITCHES}: " + "; ".join(problems)


def test_long_paths_in_table_cells_break_between_their_parts(repo_root):
    """docs/hooks/code_pipes.py: a path wider than a column gets break points after `/`, `.` and `_` (so the
    faithfulness table fits 1280 px); a short token stays one unbreakable word."""
    spec = importlib.util.spec_from_file_location("code_pipes", repo_root / "docs/hooks/code_pipes.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    cell = "<td><code>verl/workers/sharding_manager/fsdp_vllm.py</code> <code>--recipe</code></td>"
    assert hook.unescape_code_pipes(cell) == (
        "<td><code>verl/<wbr>workers/<wbr>sharding_<wbr>manager/<wbr>fsdp_<wbr>vllm.<wbr>py</code> "
        '<code class="token">--recipe</code></td>'
    )
    assert hook.unescape_code_pipes("<p><code>verl/workers/sharding_manager/fsdp_vllm.py</code></p>") == (
        "<p><code>verl/workers/sharding_manager/fsdp_vllm.py</code></p>"
    )


def test_the_checks_catch_what_they_are_for():
    """The three detectors on small inputs: a bare tag, a wide line, a moved module, a recipe key, a new module."""
    page = _Elements()
    page.feed("<p>put it between <calculate> and </calculate>.</p><svg><path/></svg><pre><code>ok\n" + "x" * 101)
    assert unknown_elements(page) == {"calculate"}
    assert long_code_lines(page) == ["x" * 101]
    keys = {"retriever.kind"}
    assert dead_names("`inspo_cli.instructions.no_such` and `retriever.kind`, `inspo_cli.errors.InspoError`", keys) == [
        "1: inspo_cli.instructions.no_such"
    ]
    assert dead_names("see inspo_cli.registry:NO_SUCH, inspo_cli.registry:REGISTRIES", keys) == [
        "1: inspo_cli.registry:NO_SUCH"
    ]
    tutorial = (
        "`inspo_cli/instructions/proposers/contrast.py`:\n\n```python\n'inspo_cli.instructions.proposers.contrast.x'"
    )
    assert dead_names(tutorial, keys) == []
    page = "### `grpo`\n\n```text\nL\n```\n\n### `bnpo`\n\nno formula\n\n### `ppo`\n\n```text\nL\n```\n"
    assert loss_section_problems(page, ["grpo", "bnpo", "dapo"]) == [
        "no section for dapo",
        "bnpo: no formula",
        "a section for ppo, which is no loss type",
    ]
