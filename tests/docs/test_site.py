"""The built site: every link inside it lands on a page (and a heading, where it names one), none points at a `.md`
file, the repository files made pages (docs/hooks/repo_pages.py) are there, and the generated references
(docs/reference/cli.md, docs/reference/api.md) show what the code says (tests/docs/test_docs.py checks that every
generated page is current). The site is built once for the module (about 2 s); tests/docs/test_docs.py checks the
strict build itself."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


class _Page(HTMLParser):
    """A page's link targets (`<a href>`, `<img src>`), element ids, and the text of each table row's cells under
    the `<h2>` they follow."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.ids: set[str] = set()
        self.rows: list[tuple[str, list[str]]] = []  # (the section's h2 id, the row's cell texts)
        self._section = ""
        self._cell: list[str] | None = None
        self._row: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("name"):
            self.ids.add(attrs["name"])
        if tag == "a" and attrs.get("href") is not None:
            self.links.append(attrs["href"])
        if tag == "img" and attrs.get("src") is not None:
            self.links.append(attrs["src"])
        if tag == "h2":
            self._section = attrs.get("id", "")
        if tag == "tr":
            self._row = []
        if tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        if tag == "tr" and self._row is not None:
            self.rows.append((self._section, self._row))
            self._row = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


@pytest.fixture(scope="module")
def site(built_site) -> Path:
    result = built_site.result
    if result.returncode != 0:
        pytest.fail(f"mkdocs build --strict failed:\n{result.stdout}{result.stderr}")
    return built_site.site


@pytest.fixture(scope="module")
def pages(site) -> dict[Path, _Page]:
    parsed = {}
    for path in sorted(site.rglob("*.html")):
        page = _Page()
        page.feed(path.read_text(encoding="utf-8"))
        parsed[path] = page
    return parsed


def _target(site: Path, page: Path, href: str) -> tuple[Path, str] | None:
    """The file and anchor a link inside the site lands on; None for a link out of it (https:, mailto:, //host)."""
    parts = urlsplit(href)
    if parts.scheme or parts.netloc:
        return None
    path = unquote(parts.path)
    if not path:
        file = page
    elif path.startswith("/"):  # 404.html's links are from the site's root
        file = site / path.lstrip("/")
    else:
        file = page.parent / path
    if path.endswith("/") or file.is_dir():
        file = file / "index.html"
    return file.resolve(), unquote(parts.fragment)


def test_every_link_inside_the_site_lands_on_a_file_and_anchor(site, pages):
    broken = []
    for page, parsed in pages.items():
        for href in parsed.links:
            target = _target(site, page, href)
            if target is None:
                continue
            file, anchor = target
            where = f"{page.relative_to(site)}: {href}"
            if not file.is_file():
                broken.append(f"{where} (no such file)")
            elif anchor and file.suffix == ".html" and anchor not in pages[file].ids:
                broken.append(f"{where} (no element with id {anchor!r})")
    assert not broken, "links that land nowhere:\n" + "\n".join(broken[:30])


def test_no_link_points_at_a_markdown_file(site, pages):
    left = [
        f"{page.relative_to(site)}: {href}"
        for page, parsed in pages.items()
        for href in parsed.links
        if urlsplit(href).path.endswith(".md") and not urlsplit(href).scheme
    ]
    assert not left, "links to .md files (a page the site does not have under that name):\n" + "\n".join(left[:30])


def test_the_changelog_and_bench_readme_are_pages(site, pages, repo_root):
    for source, page in (("CHANGELOG.md", "changelog"), ("bench/README.md", "bench")):
        built = site / page / "index.html"
        assert built.is_file(), f"{source} is no page of the site (docs/hooks/repo_pages.py)"
        title = re.search(r"^# (.+)$", (repo_root / source).read_text(encoding="utf-8"), re.M)[1]
        assert f">{title}<" in built.read_text(encoding="utf-8").replace('<a class="headerlink"', "<")
    # the docs cite them as repository files (so the links work on GitHub); on the site they land on the pages
    layout = site / "layout" / "index.html"
    assert any(
        _target(site, layout, href) == ((site / "changelog/index.html").resolve(), "") for href in pages[layout].links
    )


def _app_commands(typer_app, path=("inspo",)) -> list[str]:
    """Every command path of a Typer app, from its registrations (not from the generator's walk)."""
    found = [" ".join(path)]
    for command in typer_app.registered_commands:
        found.append(" ".join((*path, command.name or command.callback.__name__.replace("_", "-"))))
    for group in typer_app.registered_groups:
        found += _app_commands(group.typer_instance, (*path, group.name))
    return found


def test_the_cli_reference_names_every_command(repo_root):
    from inspo_cli.cli import app

    headings = re.findall(r"^## (inspo\b.*)$", (repo_root / "docs/reference/cli.md").read_text(encoding="utf-8"), re.M)
    assert sorted(headings) == sorted(_app_commands(app))


def test_the_cli_reference_shows_each_help_text_as_written(site, pages):
    """Each option's row holds its help text unchanged once rendered: a `|`, `<timestamp>` or `*` in it was escaped,
    not taken for Markdown (backquotes become code spans, so they are left out of the comparison)."""
    from inspo_cli.cli import app
    from inspo_cli.docs_gen.cli import anchor, contexts

    rows = {(section, cells[0]): cells for section, cells in pages[site / "reference/cli/index.html"].rows}
    wrong, checked = [], 0
    for ctx in contexts(app):
        for param in ctx.command.params:
            if param.hidden:
                continue
            names = (
                param.name + ("..." if param.nargs != 1 else "")
                if param.param_type_name == "argument"
                else ", ".join(param.opts) + (" / " + ", ".join(param.secondary_opts) if param.secondary_opts else "")
            )
            cells = rows.get((anchor(ctx.command_path), names))
            expected = " ".join((param.help or "").replace("`", "").split())
            checked += 1
            if cells is None:
                wrong.append(f"{ctx.command_path} {names}: no row")
            elif cells[3] != expected:
                wrong.append(f"{ctx.command_path} {names}:\n  shows   {cells[3]!r}\n  help is {expected!r}")
    assert checked > 50 and not wrong, "\n".join(wrong[:10])


def test_the_api_page_shows_each_docstring_as_written(site):
    """Docstrings are Markdown on the page: their words show in order, `<ins_1>`-like text and `*` included."""
    from inspo_cli.docs_gen import api as api_reference
    from inspo_cli.docs_gen.markdown import docstring

    page = (site / "reference/api/index.html").read_text(encoding="utf-8")
    text = re.sub(r"<[^>]+>", " ", re.sub(r"</?(?:code|a|em|strong|span)\b[^>]*>", "", page))  # inline: no space
    text = html.unescape(text)
    text = " ".join(text.split())
    missing = []
    for seam in (*api_reference.SEAMS, *api_reference.TYPES, *api_reference.RECORDS):
        obj = api_reference._object(seam)
        assert f"from {seam.module} import {seam.name}" in text
        for line in docstring(obj.__dict__.get("__doc__") or ""):
            shown = re.sub(r"\\(.)", r"\1", line.replace("`", "")).replace("&lt;", "<").replace("&gt;", ">")
            shown = " ".join(re.sub(r"^\s*[-*] ", "", shown.replace("&amp;", "&")).split())
            if shown and not shown.startswith(f"{seam.name}(") and shown not in text:
                missing.append(f"{seam.name}: {shown}")
    assert not missing, "docstring lines the API page does not show as written:\n" + "\n".join(missing[:10])


def test_repo_pages_fit_their_links_to_the_site(repo_root):
    """docs/hooks/repo_pages.py: from bench/README.md (a page at the site's root), a docs page and the changelog are
    linked as pages, a file the site does not carry becomes text with its repository path, and code is left alone;
    on a docs page only the links to the two files change."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("repo_pages", repo_root / "docs/hooks/repo_pages.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    docs = repo_root / "docs"
    bench = (
        "[cluster](../docs/cluster.md#a--b), [log](../CHANGELOG.md), [bars](reports/world/bars.png), "
        "![fig](reports/f.png), `[x](y.md)`, [web](https://example.org)\n```\n[kept](z.md)\n```\n"
    )
    assert hook.rewrite_links(bench, "bench/README.md", docs, everything=True) == (
        "[cluster](cluster.md#a-b), [log](changelog.md), bars (`bench/reports/world/bars.png`), "
        "fig (`bench/reports/f.png`), `[x](y.md)`, [web](https://example.org)\n```\n[kept](z.md)\n```\n"
    )
    page = "[`bench/README.md`](../../bench/README.md#vllm-backend), [other](../cluster.md), [file](../../x.py)"
    assert hook.rewrite_links(page, "docs/reference/p.md", docs, everything=False) == (
        "[`bench/README.md`](../bench.md#vllm-backend), [other](../cluster.md), [file](../../x.py)"
    )
