"""The passage corpus format shared with Search-R1 and FlashRAG.

A corpus is JSONL with one passage per line: `{"id": "...", "contents": "\\"Title\\"\\ntext"}`. The title is
wrapped in double quotes on the first line; Search-R1 renders a retrieved passage as
`Doc i(Title: Title) text`. These helpers are the only place that knows the layout.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class Passage:
    id: str
    title: str
    text: str
    score: float | None = field(default=None, compare=False)  # set by a retriever; not part of identity

    def with_score(self, score: float) -> Passage:
        return replace(self, score=float(score))

    @property
    def contents(self) -> str:
        return format_contents(self.title, self.text)

    def to_row(self) -> dict:
        return {"id": self.id, "contents": self.contents}

    @classmethod
    def from_row(cls, row: dict) -> Passage:
        title, text = parse_contents(row["contents"])
        return cls(id=str(row["id"]), title=title, text=text)


_new = object.__new__


def make_passage(id: str, title: str, text: str, score: float | None) -> Passage:
    """`Passage(id, title, text, score)` for the hot paths (every hit of every search): fills the instance's
    dict directly instead of the frozen dataclass's four `object.__setattr__` calls, twice as fast."""
    p = _new(Passage)
    d = p.__dict__
    d["id"], d["title"], d["text"], d["score"] = id, title, text, score
    return p


def format_contents(title: str, text: str) -> str:
    return f'"{title}"\n{text}'


def parse_contents(contents: str) -> tuple[str, str]:
    """Split `"Title"\\ntext` into (title, text); contents without a title line give ("", contents)."""
    first, sep, rest = contents.partition("\n")
    if sep and len(first) >= 2 and first.startswith('"') and first.endswith('"'):
        return first[1:-1], rest
    return "", contents
