"""The audit as files: audit.md (a section per run, per evolution, per accepted candidate) and audit.json.

    written = write_audit(audits, out)      # [out/audit.md, out/audit.json]
    word_diff("Search first.", "Search twice first.")   # 'Search **twice** first.'

The diff is word by word (whitespace ignored): removed words are ~~struck through~~, added ones **bold**; the
instructions' own Markdown and tags are escaped so that `<search>` shows as written.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Sequence
from pathlib import Path

from inspo_cli.jsonio import atomic_write_json, atomic_write_text
from inspo_cli.reporting.audit import NO_TYPES, CandidateAudit, EvolutionAudit, RunAudit
from inspo_cli.reporting.audit_flags import FLAGS

# What can change inline Markdown anywhere in a line (emphasis, code, links, strikethrough, table cells, a heading's
# closing #s); `_` only where it can open or close emphasis, not inside a word (rollout_traits). `<` and `&` become
# entities. Whitespace is collapsed to single spaces, so a text never starts a line of its own (no heading, list,
# quote or code block comes out of an instruction's line breaks), and what starts the text itself (a list item's
# content: "- 1. x" would be a nested list) is escaped by _LEADING.
_MARKDOWN = re.compile(r"([\\`*\[\]|~#]|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z]))")
_LEADING = re.compile(r"^(?:([-+>=])|(\d+)([.)]))")


def escape(text: str) -> str:
    """Text shown as written in Markdown, on one line: whitespace collapsed, its special characters escaped, `<` and
    `&` as entities, and what UTF-8 cannot hold (a lone surrogate read back from JSON) as "?"."""
    text = " ".join(text.encode("utf-8", "replace").decode("utf-8").split())
    text = _MARKDOWN.sub(r"\\\1", text.replace("&", "&amp;").replace("<", "&lt;"))
    return _LEADING.sub(lambda m: f"\\{m[1]}" if m[1] else f"{m[2]}\\{m[3]}", text)


def word_diff(parent: str, candidate: str) -> str:
    """The candidate against its parent, word by word: removed words struck through, added ones in bold."""
    old, new = parent.split(), candidate.split()
    parts: list[str] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if op in ("delete", "replace"):
            parts.append(f"~~{escape(' '.join(old[i1:i2]))}~~")
        if op in ("insert", "replace"):
            parts.append(f"**{escape(' '.join(new[j1:j2]))}**")
        if op == "equal":
            parts.append(escape(" ".join(old[i1:i2])))
    return " ".join(parts)


def _number(value, spec: str = ".3f") -> str:
    return "–" if value is None else format(value, spec)


def _change(after, before, spec: str = "+.3f") -> str:
    return "–" if after is None or before is None else format(after - before, spec)


def _flag_table(flags) -> list[str]:
    lines = ["| flag | measures | before | after | state |", "|---|---|---|---|---|"]
    for f in flags:
        state = f"**{f.state}**" if f.state == "fired" else f.state
        if f.state in ("too few rollouts", "not applicable"):
            state += f" ({escape(f.why)})"
        lines.append(f"| {f.name} | {FLAGS[f.name]} | {_number(f.before)} | {_number(f.after)} | {state} |")
    return lines


def _by_type(c: CandidateAudit) -> list[str]:
    v = c.verification
    overall = (
        f"Verification on D_B: candidate {_number(v['verification_score'])}, parent {_number(v['parent_score'])}, "
        f"difference {_number(v['difference'], '+.3f')} ± {_number(v['difference_se'])} (reward)."
        if v.get("verification_score") is not None
        else "Not verified (population.verify false): no verification scores."
    )
    if not c.by_type:
        return [overall, "", NO_TYPES + "." if v.get("verification_score") is not None else "", ""]
    lines = [
        overall,
        "",
        "| question type | questions | reward: parent → candidate | Δ reward | EM: parent → candidate | Δ EM |",
        "|---|---|---|---|---|---|",
    ]
    for kind, t in c.by_type.items():
        lines.append(
            f"| {escape(kind)} | {t['questions']} | {_number(t['parent_reward'])} → {_number(t['candidate_reward'])} "
            f"| {_change(t['candidate_reward'], t['parent_reward'])} | {_number(t['parent_em'])} → "
            f"{_number(t['candidate_em'])} | {_change(t['candidate_em'], t['parent_em'])} |"
        )
    return [*lines, ""]


def _candidate(c: CandidateAudit, window: int) -> list[str]:
    lines = [f"#### {escape(c.candidate_id or '(no id)')} from {escape(c.parent_id)}", ""]
    if c.parent_text is None:
        lines += [f"The parent's text is not recorded; the candidate: {escape(c.text)}", ""]
    else:
        lines += [f"Diff to the parent (~~removed~~, **added**): {word_diff(c.parent_text, c.text)}", ""]
    lines += _by_type(c)
    lines += [
        f"Rollouts: the parent's in the {window} steps up to the evolution ({c.before['rollouts']}) against the "
        f"candidate's in the {window} after ({c.after['rollouts']}).",
        "",
        *_flag_table(c.flags),
        "",
    ]
    return lines


def _evolution(e: EvolutionAudit, window: int) -> list[str]:
    lines = [
        f"### Evolution at step {e.step}",
        "",
        f"{e.proposed} proposed, {len(e.candidates)} accepted. The whole policy's rollouts, {window} steps before "
        f"({e.before['rollouts']}) and after ({e.after['rollouts']}):",
        "",
        *_flag_table(e.flags),
        "",
    ]
    for c in e.candidates:
        lines += _candidate(c, window)
    return lines


def run_section(audit: RunAudit) -> list[str]:
    lines = [f"## {escape(audit.name)}", ""]
    if audit.sources:
        lines += ["Read from: " + "; ".join(f"{k}: {escape(v)}" for k, v in audit.sources.items()) + ".", ""]
    lines += [f"- {escape(note)}" for note in audit.notes] + ([""] if audit.notes else [])
    fired = audit.fired()
    lines += ["Flags fired: " + (", ".join(map(escape, fired)) if fired else "none") + ".", ""]
    if not audit.evolutions:
        lines += ["No evolution to audit.", ""]
    for e in audit.evolutions:
        lines += _evolution(e, audit.window)
    return lines


def audit_markdown(audits: Sequence[RunAudit]) -> str:
    lines = [
        "# Audit: what evolution rewarded",
        "",
        "Per evolution, each accepted candidate's diff to its parent, its verification per question type, and "
        "flags for verifier-sensitive behaviour, before and after (definitions and thresholds: docs/audit.md).",
        "",
    ]
    for audit in audits:
        lines += run_section(audit)
    return "\n".join(lines).rstrip() + "\n"


def write_audit(audits: Sequence[RunAudit], out: Path) -> list[Path]:
    atomic_write_text(out / "audit.md", audit_markdown(audits))
    atomic_write_json(out / "audit.json", [dataclasses.asdict(a) for a in audits])
    return [out / "audit.md", out / "audit.json"]


def link_audit(audits: Sequence[RunAudit], out: Path) -> list[Path]:
    """audit.md and audit.json in the report `out`, and a section of its index.md that links them."""
    written = write_audit(audits, out)
    index = out / "index.md"
    fired = sum(len(a.fired()) for a in audits)
    section = (
        f"## Audit of the evolutions\n\n{sum(len(a.evolutions) for a in audits)} evolutions in {len(audits)} runs, "
        f"{fired} flags fired: [audit.md](audit.md).\n"
    )
    atomic_write_text(index, index.read_text(encoding="utf-8") + "\n" + section)
    return written
