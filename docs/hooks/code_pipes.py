"""MkDocs hook: a `|` inside a code span in a table cell is written `\\|` in the Markdown, which GitHub needs (it
would split the cell otherwise) and GitHub shows as `|`; Python-Markdown keeps the backslash inside code. After
rendering, every `\\|` inside `<code>` becomes `|`, so the site shows what GitHub shows. A code span of one token in
a table cell gets the class `token`, which extra.css keeps on one line."""

from __future__ import annotations

import re

CELL = re.compile(r"<t[dh]\b[^>]*>.*?</t[dh]>", re.S)  # only tables: a code block may mean `\|` (grep)
CODE = re.compile(r"(<code[^>]*>)(.*?)(</code>)", re.S)


def _code(m: re.Match) -> str:
    text = m[2].replace("\\|", "|")
    # one token (`Qwen/Qwen2.5-3B`, `--recipe`, a field name) is a word: it must not break at its hyphen or slash
    opening = '<code class="token">' if m[1] == "<code>" and text.strip() and " " not in text.strip() else m[1]
    return opening + text + m[3]


def unescape_code_pipes(html: str) -> str:
    return CELL.sub(lambda cell: CODE.sub(_code, cell[0]), html)


def on_page_content(html, **kwargs):
    return unescape_code_pipes(html)
