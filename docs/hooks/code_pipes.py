"""MkDocs hook: a `|` inside a code span in a table cell is written `\\|` in the Markdown, which GitHub needs (it
would split the cell otherwise) and GitHub shows as `|`; Python-Markdown keeps the backslash inside code. After
rendering, every `\\|` inside `<code>` becomes `|`, so the site shows what GitHub shows. A code span of one token in
a table cell gets the class `token`, which extra.css keeps on one line; a token too long for a column may break
after each `/`, `.` or `_` instead, so a path does not push its table past the page."""

from __future__ import annotations

import re

CELL = re.compile(r"<t[dh]\b[^>]*>.*?</t[dh]>", re.S)  # only tables: a code block may mean `\|` (grep)
CODE = re.compile(r"(<code[^>]*>)(.*?)(</code>)", re.S)


LONG_TOKEN = 24  # characters: a token longer than this may break, but only after a `/`, `.` or `_`
BREAK_AFTER = re.compile(r"(?<=[/._])(?=[^/._])")


def _code(m: re.Match) -> str:
    text = m[2].replace("\\|", "|")
    token = m[1] == "<code>" and text.strip() and " " not in text.strip()
    if token and len(text) > LONG_TOKEN:
        # a path or name wider than a column (`verl/workers/sharding_manager/fsdp_vllm.py`) would stretch its table
        # past the page: it breaks between its parts, never inside one (<wbr> copies as nothing)
        return m[1] + BREAK_AFTER.sub("<wbr>", text) + m[3]
    # one token (`Qwen/Qwen2.5-3B`, `--recipe`, a field name) is a word: it must not break at its hyphen or slash
    return ('<code class="token">' if token else m[1]) + text + m[3]


def unescape_code_pipes(html: str) -> str:
    return CELL.sub(lambda cell: CODE.sub(_code, cell[0]), html)


def on_page_content(html, **kwargs):
    return unescape_code_pipes(html)
