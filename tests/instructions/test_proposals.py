"""Optimizer prompts are the paper's App. E text; the parser survives what LLMs really answer."""

from __future__ import annotations

import pytest

from inspo_cli.instructions.proposers.base import cut_off_block, parse_candidates
from inspo_cli.instructions.proposers.history import history_prompt
from inspo_cli.instructions.proposers.paraphrase import paraphrase_prompt
from inspo_cli.instructions.proposers.reflection import reflection_prompt
from inspo_cli.instructions.replay import Experience

RULES = (
    "Make sure you include the same XML tags <>...</> as the original prompt in your improved prompts.\n"
    "For each XML tag, include both the beginning and ending tags, such as <answer>...</answer>.\n"
    "List the instruction candidates in <ins_1>...</ins_1> to <ins_6>...</ins_6> tags."
)


def test_paraphrase_prompt_is_the_papers_template():
    assert paraphrase_prompt(" Answer inside <answer> and </answer>. ", n=6) == (
        "<ins_0> Answer inside <answer> and </answer>. </ins_0>\n\n"
        "Improve the above prompt.\nGive 6 different candidates.\n" + RULES
    )


def test_history_prompt_lists_instructions_with_scores():
    prompt = history_prompt([("Just answer.", 12.345), ("Search, then answer.", 40.0)], n=6)
    assert prompt == (
        "<history>\n"
        "<ins_1> Just answer. </ins_1>\n<score_1> 12.3 </score_1>\n"
        "<ins_2> Search, then answer. </ins_2>\n<score_2> 40 </score_2>\n"
        "</history>\n\n"
        "Based on the above \u201cinstruction: score\u201d history for instructions with their scores, where the "
        "score ranges from 0 to 100, analyze what components can lead to better performance.\n"
        "Give 6 different but better candidates. Make it concise and effective. Be creative and diverse in your "
        "suggestions.\n" + RULES
    )
    with pytest.raises(ValueError, match="outside 0..100"):
        history_prompt([("x", 0.7 * 1000)], n=6)


def test_reflection_prompt_shows_the_parent_and_each_failure_with_its_answers():
    failures = [
        Experience(
            "i0",
            "k1",
            "Who founded Citibank?",
            ("Samuel Osgood", "Osgood"),
            "<search> Citibank </search>\n<answer> Moses Taylor </answer>",
            0.0,
            3,
        ),
        Experience("i0", "k2", "Capital of Peru?", ("Lima",), "<answer> Cusco </answer>", 0.0, 3),
    ]
    prompt = reflection_prompt("Answer the question.", failures, n=6)
    assert prompt == (
        "The initial prompt is:\n\n<ins_0>\nAnswer the question.\n</ins_0>\n\n"
        "However, it still gets the following examples wrong:\n\n"
        "<example>\n"
        "Response: Question: Who founded Citibank?\n<search> Citibank </search>\n<answer> Moses Taylor </answer>\n"
        "Correct answer: Samuel Osgood | Osgood\n\n"
        "Response: Question: Capital of Peru?\n<answer> Cusco </answer>\n"
        "Correct answer: Lima\n"
        "</example>\n\n"
        "Analyze the reasons behind these mistakes and why the prompt could have gotten these examples wrong.\n"
        "Now take the reasons into account. Revise and improve the initial prompt by giving 6 different but better "
        "candidates.\n" + RULES
    )
    assert "<ins_3>...</ins_3> tags." in reflection_prompt("x", failures, n=3)
    with pytest.raises(ValueError):
        reflection_prompt("x", [], n=6)
    with pytest.raises(ValueError):
        paraphrase_prompt("x", n=0)


def test_parse_well_formed_answer():
    text = "<ins_1>First.</ins_1>\n<ins_2>\nSecond, with <answer> tags </answer>.\n</ins_2>"
    assert parse_candidates(text) == ["First.", "Second, with <answer> tags </answer>."]


def test_parse_tolerates_prose_missing_closing_tags_and_wrong_numbering():
    text = (
        "Analysis: the prompt never says to search. Here are candidates in <ins_1>...</ins_1> to <ins_N>...</ins_N>.\n"
        "<ins_1> Search before answering.\n"
        "<INS_3>Think, then search.</ins_2>\n"  # skipped number, closed with the wrong number
        "Some commentary between candidates.\n"
        "< ins_3 >\n```text\nUse <answer> tags.\n```\n</ins_3>\n"
        "<ins_4>Last one, never closed"
    )
    assert parse_candidates(text) == [
        "Search before answering.",
        "Think, then search.",
        "Use <answer> tags.",
        "Last one, never closed",
    ]


def test_parse_drops_empty_duplicate_over_long_and_excluded_candidates_and_caps_at_n():
    text = (
        "<ins_0>The parent.</ins_0><ins_1>  </ins_1><ins_2>Keep  me.</ins_2><ins_3>Keep me.</ins_3>"
        f"<ins_4>{'x' * 50}</ins_4><ins_5>Also keep.</ins_5><ins_6>Third.</ins_6>"
    )
    assert parse_candidates(text, max_chars=40, exclude=["The  parent."]) == ["Keep  me.", "Also keep.", "Third."]
    assert parse_candidates(text, n=2, max_chars=40) == ["The parent.", "Keep  me."]
    assert parse_candidates("No tags at all, sorry.") == []
    assert parse_candidates("") == []


def test_a_truncated_answer_loses_only_its_unclosed_last_block():
    # closed by its tag, ended by the next opening tag, then cut by the output limit mid-word
    text = "<ins_1>Closed.</ins_1>\n<ins_2>Ended by the next one.\n<ins_3>Cut off mid-wo"
    assert parse_candidates(text, truncated=True) == ["Closed.", "Ended by the next one."]
    assert cut_off_block(text) == "Cut off mid-wo"
    assert parse_candidates(text) == ["Closed.", "Ended by the next one.", "Cut off mid-wo"]  # ended on its own
    closed = "<ins_1>Closed.</ins_1>\n<ins_2>Also closed.</ins_2>\nAnd some analy"  # the cut fell after the blocks
    assert parse_candidates(closed, truncated=True) == ["Closed.", "Also closed."] and cut_off_block(closed) is None
    inside_a_tag = "<ins_1>Finished, but the closing tag was cut.</ins"  # not a tag yet: the block counts as unclosed
    assert parse_candidates(inside_a_tag, truncated=True) == [] and cut_off_block(inside_a_tag).startswith("Finished")
    assert cut_off_block("<ins_1>Done.</ins_1>\n<ins_2>\n") is None  # nothing was written in the cut block
    assert parse_candidates("<ins_1>One.</ins_1><ins_2>Two, cut", n=1, truncated=True) == ["One."]
