"""The little Markdown a report writes (headings, tables, lists, code blocks, paragraphs; inline code, bold, links,
images) as HTML, every piece of text escaped. A link or image is kept only when `resolve(target)` gives it an address
(a figure of the report, a run of the ablation); otherwise its text stays, unlinked."""

from __future__ import annotations

import re
from collections.abc import Callable

from inspo_cli.viewer.html import Markup, escape

INLINE = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]*)\)|`([^`]+)`|\*\*([^*]+)\*\*")


def inline(text: str, resolve: Callable[[str], str | None], cell_link: Callable[[str], Markup | None]) -> Markup:
    out, last = [], 0
    for match in INLINE.finditer(text):
        out.append(escape(text[last : match.start()]))
        image, label, target, code, bold = match.groups()
        if code is not None:
            out.append(Markup("<code>{}</code>").format(code))
        elif bold is not None:
            out.append(Markup("<b>{}</b>").format(bold))
        else:
            href = resolve(target)
            if href is None:
                out.append(escape(label))
            elif image:
                out.append(Markup('<img src="{}" alt="{}" width="640">').format(href, label))
            else:
                out.append(Markup('<a href="{}">{}</a>').format(href, label))
        last = match.end()
    out.append(escape(text[last:]))
    rendered = Markup("").join(out)
    linked = cell_link(text.strip())
    return linked if linked is not None else rendered


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def render(
    text: str,
    resolve: Callable[[str], str | None] = lambda target: None,
    cell_link: Callable[[str], Markup | None] = lambda text: None,
) -> Markup:
    lines, out, i = text.splitlines(), [], 0

    def inl(s: str) -> Markup:
        return inline(s, resolve, lambda _: None)

    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            out.append(Markup("<pre>{}</pre>").format("\n".join(lines[i + 1 : j])))
            i = j + 1
        elif m := re.match(r"^(#{1,6})\s+(.*)$", line):
            level = min(len(m.group(1)) + 1, 6)
            out.append(Markup("<h{}>{}</h{}>").format(level, inl(m.group(2)), level))
            i += 1
        elif line.lstrip().startswith("|") and i + 1 < len(lines) and re.match(r"^\s*\|[\s:|-]+\|\s*$", lines[i + 1]):
            head = _cells(line)
            j, rows = i + 2, []
            while j < len(lines) and lines[j].lstrip().startswith("|"):
                rows.append(_cells(lines[j]))
                j += 1
            out.append(
                Markup("<table><thead><tr>{}</tr></thead><tbody>{}</tbody></table>").format(
                    Markup("").join(Markup("<th>{}</th>").format(inl(c)) for c in head),
                    Markup("").join(
                        Markup("<tr>{}</tr>").format(
                            Markup("").join(Markup("<td>{}</td>").format(inline(c, resolve, cell_link)) for c in row)
                        )
                        for row in rows
                    ),
                )
            )
            i = j
        elif re.match(r"^\s*[-*]\s+", line):
            items = []
            while (
                i < len(lines)
                and lines[i].strip()
                and (re.match(r"^\s*[-*]\s+", lines[i]) or lines[i].startswith("  "))
            ):
                if re.match(r"^\s*[-*]\s+", lines[i]):
                    items.append(re.sub(r"^\s*[-*]\s+", "", lines[i]))
                else:
                    items[-1] += " " + lines[i].strip()
                i += 1
            out.append(
                Markup("<ul>{}</ul>").format(Markup("").join(Markup("<li>{}</li>").format(inl(t)) for t in items))
            )
        elif not line.strip():
            i += 1
        else:
            j = i
            while (
                j < len(lines)
                and lines[j].strip()
                and not lines[j].startswith(("#", "|", "```"))
                and not re.match(r"^\s*[-*]\s+", lines[j])
            ):
                j += 1
            j = max(j, i + 1)
            out.append(Markup("<p>{}</p>").format(inl(" ".join(lines[i:j]))))
            i = j
    return Markup("\n").join(out)
