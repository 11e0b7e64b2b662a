"""`inspo report --audit`: the candidate's diff to its parent, its verification per question type, audit.md and
audit.json in the report, runs made before the audit (evolutions and rollouts read from their checkpoints), and a
hostile pass: no evolutions, no parent text, odd text, missing or damaged checkpoints."""

from __future__ import annotations

import json

import pytest
from helpers.audit_runs import TYPE_ROW, audit_run, before_after, evolution, replay_entry, replay_state
from helpers.cli_helpers import assert_one_line_error, invoke
from helpers.run_dirs import make_run

from inspo_cli.reporting.audit import audit_run as audit
from inspo_cli.reporting.audit_markdown import audit_markdown, escape, word_diff
from inspo_cli.runs import RunDir


@pytest.fixture
def runs(tmp_path, repo_root, monkeypatch):
    monkeypatch.chdir(repo_root)  # the demo recipe
    return tmp_path / "runs"


def test_the_diff_is_word_by_word_and_shows_tags_as_written():
    assert word_diff("Search first, then answer.", "Search twice first, then answer.") == (
        "Search **twice** first, then answer."
    )
    assert word_diff("Answer it.", "Guess it.") == "~~Answer~~ **Guess** it."
    assert word_diff("a <search>", "a\n\n  <search> b") == "a &lt;search> **b**"  # whitespace is not a change
    assert escape("*x* | _y_ `z` [l](u) \udcff") == r"\*x\* \| \_y\_ \`z\` \[l\](u) ?"
    # prose stays readable as text: no escapes where Markdown would change nothing
    assert escape("rollout_traits.jsonl of inspo-s0: Doc 1(Title: x) {question}") == (
        "rollout_traits.jsonl of inspo-s0: Doc 1(Title: x) {question}"
    )


HOSTILE = [
    "*x* | _y_ `z` [l](u)",
    "a*b*c",
    "__init__ and x_ _y",
    "~~s~~ ~x~",
    "<search> q </search> &amp;",
    "a\\*b",
    "#1 #",
    "- a list\n> a quote\n1. ordered\n+ plus",
    "Answer it.\n---\nThen stop.\n===",
    "text  \n\n    indented code",
    "1) first",
    "> a quote first",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_escaped_text_renders_as_written_in_a_paragraph_a_list_item_and_a_table_cell(text):
    """What a Markdown renderer shows for an escaped text (CommonMark with tables and strikethrough, as GitHub
    renders) is the text itself, its whitespace collapsed: no emphasis, code, link, heading, list, quote or tag comes
    out of an instruction's own characters or line breaks, wherever audit.md puts it."""
    import html
    import re

    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark").enable(["strikethrough", "table"])
    shown = " ".join(text.split())
    for document, wrapper in (
        (f"The candidate: {escape(text)}", r"<p>(.*)</p>"),
        (f"- {escape(text)}", r"<ul>\s*<li>(.*)</li>\s*</ul>"),
        (f"| a |\n|---|\n| {escape(text)} |", r"<td>(.*)</td>"),
    ):
        rendered = md.render(document).strip()
        inner = re.search(wrapper, rendered, re.S)
        assert inner and "<" not in inner[1].replace("&lt;", ""), rendered  # no tag inside: nothing interpreted
        assert html.unescape(inner[1]).removeprefix("The candidate: ") == shown


def test_the_report_gets_the_audit_with_diff_types_and_flags(runs, tmp_path):
    run = audit_run(runs, rows=before_after(after={"several": 0.5}))
    out = tmp_path / "report"
    result = invoke("report", run, "--audit", "--out", out)
    assert result.exit_code == 0, result.output
    assert "Audit" in result.stdout and "several_answers" in result.stdout  # the terminal's table
    text = (out / "audit.md").read_text()
    assert "~~Answer it. {question}~~ **Search first.**" in text
    assert "| temporal | 5 | 0.400 → 0.600 | +0.200 | 0.400 → 0.400 | +0.000 |" in text
    assert "| several_answers | share of answers holding several answers | 0.000 | 0.500 | **fired** |" in text
    assert "Flags fired: step 2 policy: several_answers, step 2 i1: several_answers." in text  # policy: 30/70
    assert "1 evolutions in 1 runs, 2 flags fired: [audit.md](audit.md)" in (out / "index.md").read_text()
    (saved,) = json.loads((out / "audit.json").read_text())
    (candidate,) = saved["evolutions"][0]["candidates"]
    assert candidate["by_type"] == {"temporal": TYPE_ROW} and candidate["candidate_id"] == "i1"
    assert saved["sources"] == {"evolutions": "evolutions.json", "rollouts": "rollout_traits.jsonl"}
    again = invoke("report", run, "--audit", "--out", out)  # the report (audit included) is replaced whole
    assert again.exit_code == 0, again.output


def test_audit_needs_an_inspo_run(runs, tmp_path):
    static = make_run(runs, "static-s0", 0, [0.2, 0.2], 0.2, population=False)
    result = invoke("report", static, "--audit", "--out", tmp_path / "report")
    assert_one_line_error(result, "--audit: no run with an instruction population")


def test_a_run_before_the_audit_is_read_from_its_checkpoints(runs):
    run = audit_run(runs, rows=None)
    (run / "evolutions.json").write_text(json.dumps([evolution()]))  # no by_type: written before this change
    searched = "<search>Kedahl</search><information>Doc 1 <answer>x</answer></information><answer>Selo Lido</answer>"
    old = [replay_entry(s, "i0", searched, 1.0) for s in (1, 2) for _ in range(12)]
    new = [replay_entry(s, "i1", "<answer>Brakune Kedahl</answer>", 0.2) for s in (3, 4) for _ in range(12)]
    for update, entries in ((2, old), (4, old[12:] + new)):  # the second buffer has evicted step 1
        folder = run / "checkpoints" / f"checkpoint-{update}"
        folder.mkdir(parents=True)
        (folder / "coevolution.json").write_text(json.dumps(replay_state(entries)))
    result = audit(RunDir(run))
    assert result.sources["rollouts"] == "replay buffers of 2 saved states"
    assert any("rollouts read from the replay buffers" in note and "steps 1-4" in note for note in result.notes)
    (e,) = result.evolutions
    (c,) = e.candidates
    assert c.before["rollouts"] == 24 and c.after["rollouts"] == 24  # step 2 once, though both buffers hold it
    assert (c.before["searches"], c.after["searches"], c.after["copied"], c.after["format_bonus_share"]) == (
        1.0,
        0.0,
        1.0,
        1.0,
    )
    fired = {f.name for f in c.flags if f.state == "fired"}
    assert fired == {"searches_dropped", "copied_answers", "format_bonus"}
    assert c.by_type is None
    text = audit_markdown([result])
    assert "verification per question type was not recorded" in text
    assert "difference +0.100 ± 0.050 (reward)" in text


def test_an_unfinished_run_is_audited_from_its_newest_checkpoint(runs):
    run = audit_run(runs, rows=before_after())
    (run / "evolutions.json").unlink()
    assert audit(RunDir(run)).evolutions == []  # nothing saved yet
    folder = run / "checkpoints" / "checkpoint-2"
    folder.mkdir(parents=True)
    (folder / "coevolution.json").write_text(json.dumps(replay_state([])))
    damaged = run / "checkpoints" / "checkpoint-4"
    damaged.mkdir()
    (damaged / "coevolution.json").write_text('{"population": ')  # a kill while it was written
    result = audit(RunDir(run))
    assert result.sources["evolutions"] == "checkpoints/checkpoint-2/coevolution.json"
    assert len(result.evolutions) == 1 and result.evolutions[0].candidates[0].candidate_id == "i1"
    assert any(note.startswith("checkpoints/checkpoint-4/coevolution.json left out") for note in result.notes)


def test_no_rollouts_and_no_evolutions_are_said_per_section(runs):
    run = audit_run(runs, rows=None)
    (run / "evolutions.json").write_text("[]")
    result = audit(RunDir(run))
    assert result.evolutions == []
    assert any(note.startswith("no rollouts recorded") for note in result.notes)
    text = audit_markdown([result])
    assert "No evolution to audit." in text and "Flags fired: none." in text
    (run / "evolutions.json").unlink()
    assert any(note.startswith("no evolutions recorded") for note in audit(RunDir(run)).notes)


def test_odd_text_an_unknown_parent_and_an_unverified_candidate(runs):
    run = audit_run(runs, rows=before_after())
    odd = evolution(text="<search>|*\udcff</search>  `x`", parent="i9", verification_score=None, parent_score=None)
    (run / "evolutions.json").write_text(json.dumps([odd]))
    (run / "instructions.jsonl").unlink()
    result = audit(RunDir(run))
    text = audit_markdown([result])
    assert r"The parent's text is not recorded; the candidate: &lt;search>\|\*?&lt;/search> \`x\`" in text
    assert "Not verified (population.verify false)" in text
    assert any("no instructions.jsonl" in note for note in result.notes)
    assert {f.state for f in result.evolutions[0].candidates[0].flags} == {"too few rollouts"}  # i9 never ran


def test_a_damaged_traits_file_is_one_line_naming_it(runs, tmp_path):
    run = audit_run(runs, rows=before_after())
    with open(run / "rollout_traits.jsonl", "ab") as f:
        f.write(b'{"step": 5, "instruction_id": "i\xff"}\n{"step": 6}\n')
    result = invoke("report", run, "--audit", "--out", tmp_path / "report")
    assert_one_line_error(result, "rollout_traits.jsonl")


@pytest.mark.parametrize(
    "damage, fragment",
    [
        ({"by_type": [1, 2]}, '"by_type": expected an object or null'),
        ({"by_type": {"temporal": {"questions": 5}}}, '"temporal": no "candidate_reward"'),
        ({"by_type": {"temporal": {**TYPE_ROW, "parent_em": 1.5}}}, '"parent_em": expected a finite number in [0, 1]'),
        ({"verification_score": "high"}, '"verification_score": expected a finite number or null'),
        ({"difference_se": -0.1}, '"difference_se": expected a finite number >= 0 or null'),
        ({"instruction_id": 5}, '"instruction_id": expected a string or null'),
    ],
)
def test_a_candidate_the_audit_shows_with_odd_shapes_is_one_line_naming_it(runs, tmp_path, damage, fragment):
    run = audit_run(runs, rows=before_after())
    (run / "evolutions.json").write_text(json.dumps([evolution(**damage)]))
    result = invoke("report", run, "--audit", "--out", tmp_path / "report")
    assert_one_line_error(result, 'evolutions.json: item 1 -> "candidates" -> item 1 ->', fragment)


@pytest.mark.parametrize(
    "change, fragment",
    [
        ({"answered": 31}, '"answered" (31) is more than "rollouts" (30)'),
        ({"several_answers": 45}, '"several_answers" (45) is more than "answered" (30)'),
        ({"copied": 31}, '"copied" (31) is more than "answered"'),
        ({"no_search": 60}, '"no_search" (60) is more than "rollouts"'),
        ({"format_bonus": 16.0}, '"format_bonus" (16.0) is more than "reward" (15.0)'),
    ],
)
def test_traits_whose_sums_contradict_each_other_are_one_line_not_a_share_above_one(runs, tmp_path, change, fragment):
    rows = before_after()
    rows[4] = {**rows[4], **change}  # i1 at step 3: read as a share of several answers above 1, the flag would fire
    run = audit_run(runs, rows=rows)
    result = invoke("report", run, "--audit", "--out", tmp_path / "report")
    assert_one_line_error(result, "rollout_traits.jsonl:5: ", fragment)


def test_a_step_and_instruction_twice_in_the_traits_is_one_line(runs, tmp_path):
    rows = before_after()
    run = audit_run(runs, rows=rows + rows[4:5])  # counted twice, i1's rollouts would pass the 20 a side
    result = invoke("report", run, "--audit", "--out", tmp_path / "report")
    assert_one_line_error(result, "rollout_traits.jsonl:9: a second row of step 3 and instruction i1")
