"""MkDocs hook: a `|` inside a code span in a table cell is written `\\|` in the Markdown, which GitHub needs (it
would split the cell otherwise) and GitHub shows as `|`; Python-Markdown keeps the backslash inside code. After
rendering, every `\\|` inside `<code>` becomes `|`, so the site shows what GitHub shows."""

from __future__ import annotations

import re

CELL = re.compile(r"<t[dh]\b[^>]*>.*?</t[dh]>", re.S)  # only tables: a code block may mean `\|` (grep)
CODE = re.compile(r"(<code[^>]*>)(.*?)(</code>)", re.S)


def unescape_code_pipes(html: str) -> str:
    return CELL.sub(lambda cell: CODE.sub(lambda m: m[1] + m[2].replace("\\|", "|") + m[3], cell[0]), html)


def on_page_content(html, **kwargs):
    return unescape_code_pipes(html)
