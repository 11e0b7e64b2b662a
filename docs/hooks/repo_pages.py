"""MkDocs hook: repository files the pages cite often, CHANGELOG.md and bench/README.md, become pages of the site
(changelog.md, bench.md), read from the repository root at each build so they never go stale.

Links are written relative to where a file lives in the repository, so they work on GitHub; this hook fits them to
the site before MkDocs reads them:

- on a docs page, a link to one of those files (`../bench/README.md#vllm-backend`) points at its page;
- on the two pages, a link to a docs page (`docs/cluster.md`) or to the other file points at that page, and a link
  to any other repository file (`reports/world/bars.png`, which the site does not carry) becomes its text and the
  file's repository path in code, "bars (`bench/reports/world/bars.png`)", so nothing points at a missing file.

An anchor keeps its words; GitHub's `fig-2--table-1` (a `/` dropped between spaces) is MkDocs's `fig-2-table-1`, so
runs of hyphens become one. Code blocks and code spans are left as they are.
"""

from __future__ import annotations

import logging
import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File

PAGES = {"CHANGELOG.md": "changelog.md", "bench/README.md": "bench.md"}  # repository path -> the page's src_uri

log = logging.getLogger("mkdocs.hooks.repo_pages")
FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.S | re.M)
CODE_SPAN = re.compile(r"(`+).+?\1", re.S)
LINK = re.compile(r"(!?)\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def rewrite_links(markdown: str, source: str, docs_dir: Path, *, everything: bool, docs: str = "docs/") -> str:
    """`markdown`, read from the repository file `source` (`bench/README.md`, `docs/training.md`), with its links
    fit for the site: those to the files in PAGES always; with `everything` (a file made a page here) also those
    to docs pages and, as text, to other repository files. `docs`: the docs directory as a repository path."""
    page = PAGES.get(source) or source[len(docs) :]
    here = posixpath.dirname(page) or "."

    def link(match: re.Match) -> str:
        bang, text, target = match[1], match[2], match[3]
        if SCHEME.match(target) or target.startswith("#"):
            return match[0]
        path, _, anchor = target.partition("#")
        repo_path = posixpath.normpath(posixpath.join(posixpath.dirname(source), path))
        if repo_path in PAGES:
            uri = PAGES[repo_path]
        elif everything and repo_path.startswith(docs) and (docs_dir / repo_path[len(docs) :]).is_file():
            uri = repo_path[len(docs) :]
        elif everything:
            shown = repo_path + ("/" if path.endswith("/") else "")
            return f"{text} (`{shown}`)" if text else f"`{shown}`"
        else:
            return match[0]
        suffix = "#" + re.sub(r"-{2,}", "-", anchor) if anchor else ""
        return f"{bang}[{text}]({posixpath.relpath(uri, here)}{suffix})"

    def prose(chunk: str) -> str:  # outside fenced blocks: code spans set aside (a link's text may be one)
        spans: list[str] = []

        def aside(span: re.Match) -> str:
            spans.append(span[0])
            return f"\0{len(spans) - 1}\0"

        rewritten = LINK.sub(link, CODE_SPAN.sub(aside, chunk))
        return re.sub(r"\0(\d+)\0", lambda m: spans[int(m[1])], rewritten)

    out, last = [], 0
    for block in FENCE.finditer(markdown):
        out += [prose(markdown[last : block.start()]), block[0]]
        last = block.end()
    return "".join([*out, prose(markdown[last:])])


def _root(config) -> Path:
    return Path(config.config_file_path).resolve().parent


def _docs(config) -> tuple[Path, str]:
    """The docs directory, and the same as a repository path ("docs/")."""
    docs_dir = Path(config.docs_dir).resolve()
    return docs_dir, docs_dir.relative_to(_root(config)).as_posix() + "/"


def on_files(files, config, **kwargs):
    root, (docs_dir, docs) = _root(config), _docs(config)
    for source, uri in PAGES.items():
        path = root / source
        if not path.is_file():
            log.warning("repo_pages: %s is missing, so the site has no %s", source, uri)
            continue
        content = rewrite_links(path.read_text(encoding="utf-8"), source, docs_dir, everything=True, docs=docs)
        files.append(File.generated(config, uri, content=content))
    return files


def on_page_markdown(markdown, page, config, **kwargs):
    if page.file.src_uri in PAGES.values():
        return markdown  # rewritten when it was read
    docs_dir, docs = _docs(config)
    return rewrite_links(markdown, docs + page.file.src_uri, docs_dir, everything=False, docs=docs)


def on_serve(server, config, builder, **kwargs):
    """`mkdocs serve` rebuilds when one of the files changes, as it does for a page in docs/."""
    for source in PAGES:
        if (_root(config) / source).is_file():
            server.watch(str(_root(config) / source))
    return server
