"""The one documentation generator (`python -m inspo_cli.docs_gen`): it writes every page, `--check` names each stale
page and the command that fixes it, the layout lists every module, the strategies guide has a section (and a
paragraph) for every registry, the API page shows the tool seam, and the metrics page lists the one declared table
of logged names."""

from __future__ import annotations

from pathlib import Path

import pytest

import inspo_cli
import retriever
from inspo_cli import metric_names, registry
from inspo_cli.docs_gen import api, layout, metrics, pages, strategies
from inspo_cli.docs_gen.__main__ import main
from inspo_cli.docs_gen.markdown import REGENERATE, cell


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    """Every page, written once into a scratch docs folder."""
    docs = tmp_path_factory.mktemp("docs")
    assert main(["--docs", str(docs)]) == 0
    return docs


def test_the_command_writes_every_page_and_then_finds_none_stale(generated, capsys):
    assert sorted(p.relative_to(generated).as_posix() for p in generated.rglob("*.md")) == sorted(
        page.path for page in pages.PAGES
    )
    assert main(["--check", "--docs", str(generated)]) == 0
    assert main(["--docs", str(generated)]) == 0  # nothing changed: nothing rewritten
    assert "wrote" not in capsys.readouterr().out


def test_writing_rewrites_the_stale_pages_alone_and_names_them(generated, tmp_path):
    docs = tmp_path / "docs"
    for page in pages.PAGES:
        (docs / page.path).parent.mkdir(parents=True, exist_ok=True)
        (docs / page.path).write_text((generated / page.path).read_text(encoding="utf-8"), encoding="utf-8")
    (docs / "layout.md").write_text("edited by hand\n", encoding="utf-8")
    assert pages.write(docs) == ["layout.md"]
    assert (docs / "layout.md").read_text(encoding="utf-8") == (generated / "layout.md").read_text(encoding="utf-8")
    assert not [p.name for p in docs.rglob("*.tmp")]  # written whole, through a temporary file


def test_check_names_each_stale_page_and_the_command_that_fixes_it(generated, tmp_path, capsys):
    docs = tmp_path / "docs"
    for page in pages.PAGES:
        (docs / page.path).parent.mkdir(parents=True, exist_ok=True)
        (docs / page.path).write_text((generated / page.path).read_text(encoding="utf-8"), encoding="utf-8")
    (docs / "layout.md").write_text("# Project layout\n\nedited by hand\n", encoding="utf-8")
    (docs / "reference/metrics.md").unlink()
    assert main(["--check", "--docs", str(docs)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"{docs / 'layout.md'} is stale",
        f"{docs / 'reference/metrics.md'} is stale",
        f"regenerate with: {REGENERATE}",
    ]
    assert REGENERATE == "python -m inspo_cli.docs_gen"
    assert main(["--docs", str(docs)]) == 0 and main(["--check", "--docs", str(docs)]) == 0


def test_the_layout_lists_every_module_of_both_packages_with_its_docstring():
    page = layout.markdown()
    for package, top in (
        (Path(inspo_cli.__file__).parent, "inspo_cli"),
        (Path(retriever.__file__).parent, "retriever"),
    ):
        for module in package.rglob("*.py"):
            parts = module.relative_to(package).parts
            section = f"## `{top}/{parts[0]}/`" if len(parts) > 1 else f"## `{top}/`"
            name = "/".join(parts[1:] if len(parts) > 1 else parts).removesuffix("__init__.py")
            body = page.split(section + "\n", 1)[1].split("\n## ", 1)[0]
            if name:
                assert f"| `{name}` | " in body, f"{module} is not in docs/layout.md under {section}"
    assert "(no docstring)" not in page  # every module says what it is
    assert "[`CHANGELOG.md`](../CHANGELOG.md)" in page  # the hand-written header stays


@pytest.mark.parametrize(
    "doc, first",
    [
        ("One line.\n\nMore.", "One line."),
        ("Reward collapse: as App. B reports it. Then more.", "Reward collapse: as App. B reports it."),
        ("Softmax (eq. 4) over weights, e.g. `w`. Second.", "Softmax (eq. 4) over weights, e.g. `w`."),
        ("A sentence that wraps\nonto a second line. Next", "A sentence that wraps onto a second line."),
        (None, ""),
    ],
)
def test_a_modules_line_is_its_docstrings_first_sentence(doc, first):
    assert layout.first_sentence(doc) == first


def test_the_strategies_guide_has_a_section_and_a_paragraph_for_every_registry():
    page = strategies.markdown()
    for entry in registry.REGISTRIES:
        assert entry.key in strategies.GUIDES, f"no guide paragraph for {entry.key} in inspo_cli/docs_gen/strategies.py"
        section = page.split(f"## `{entry.key}`\n", 1)[1].split("\n## ", 1)[0]
        assert strategies.GUIDES[entry.key][:40] in section
        for name in entry:
            assert f"| `{name}` |" in section


def test_the_strategies_guide_follows_a_registry_added_to_the_tuple(monkeypatch):
    extra = registry.Registry(
        "rollout.example",
        "example",
        None,
        {"one": registry.Strategy("pkg.one", "the first example", "beyond", min_parents=2)},
    )
    monkeypatch.setattr(registry, "EXAMPLES", extra, raising=False)
    monkeypatch.setattr(registry, "REGISTRIES", (*registry.REGISTRIES, extra))
    page = strategies.markdown()
    assert "## `rollout.example`" in page and "No guide yet for `rollout.example`" in page
    assert "| `one` | beyond the paper | the first example | min_parents = 2 |" in page
    assert "Registered in `inspo_cli.registry.EXAMPLES`" in page


def test_the_api_page_shows_the_tool_seam_and_what_it_passes():
    page = api.markdown()
    for name in ("Tool", "ToolContext", "Observation"):
        assert f"`from inspo_cli.agent.tools.base import {name}`" in page
    tool = page.split("### Tool\n", 1)[1].split("\n### ", 1)[0]
    assert "an abstract class, registered as `agent.tools`" in tool
    assert "| `tag` | `str` |  | the Search-R1 protocol's element: &lt;tag&gt; argument &lt;/tag&gt; |" in tool
    assert "def call(self, arguments: Sequence[Mapping[str, Any]]) -> list[Observation]" in tool


def test_the_metrics_page_lists_every_declared_name_under_its_group():
    page = metrics.markdown()
    for metric in metric_names.METRICS:
        section = page.split(f"## {metric.group}\n", 1)[1].split("\n## ", 1)[0]
        assert f"| `{metric.name}` |" in section
    assert len({metric.name for metric in metric_names.METRICS}) == len(metric_names.METRICS)


def test_a_logged_name_is_declared_only_by_a_name_or_a_placeholder_for_one_segment():
    assert metric_names.undeclared(["reward", "tools/calculator/calls", "eval/nq/em", "population/weight/i3"]) == []
    assert metric_names.undeclared(["tools/a/b/calls", "rewards", "eval/em/x", "made_up"]) == [
        "eval/em/x",
        "made_up",
        "rewards",
        "tools/a/b/calls",
    ]


def test_the_faithfulness_table_has_each_row_of_the_data_file_in_its_columns():
    from inspo_cli.config import paper
    from inspo_cli.docs_gen import faithfulness

    page = faithfulness.markdown()
    assert "| topic | the paper / Search-R1 | inspo (default) | why | field |" in page
    rows = [line for line in page.splitlines() if line.startswith("| ") and not line.startswith("| topic ")]
    source = paper.source()["rows"]
    assert len(rows) == len(source)
    for line, row in zip(rows, source, strict=True):
        expected = [cell(row[column]) for column in ("topic", "paper", "inspo", "why", "fields")]
        assert line == "| " + " | ".join(expected) + " |"
    assert "(reward &lt; 1)" in page  # a bare `<` in prose is shown, not read as the start of an HTML element


def test_a_cell_shows_tags_and_pipes_as_written_and_leaves_code_spans_code():
    assert cell("put it between <calculate> and </calculate>") == "put it between &lt;calculate> and &lt;/calculate>"
    assert cell("a | b, `<|im_end|>` kept") == "a \\| b, `<\\|im_end\\|>` kept"


def test_a_docs_folder_that_cannot_be_written_is_one_line_and_exit_1(tmp_path, capsys):
    (tmp_path / "a-file").write_text("not a folder\n", encoding="utf-8")
    assert main(["--docs", str(tmp_path / "a-file")]) == 1
    assert main(["--check", "--docs", str(tmp_path / "missing")]) == 1  # every page stale, named on stderr
    err = capsys.readouterr().err
    assert err.startswith("error: docs folder ") and "a-file" in err.splitlines()[0] and "Traceback" not in err
