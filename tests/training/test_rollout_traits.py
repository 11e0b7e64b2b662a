"""rollout_traits.jsonl: the definitions the audit's flags rest on (several answers, copied answers, the format
bonus, answers read back from a replay buffer's text), the rows per step and instruction, and their writer's resume
semantics (a resumed run never holds a step twice)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from inspo_cli.agent.protocol import CORRECTIVE_OBSERVATION
from inspo_cli.config import RewardConfig
from inspo_cli.instructions.replay import Experience
from inspo_cli.runs import RunDir
from inspo_cli.training.rollout_traits import (
    StepTraits,
    answer_and_searches,
    copied_from_question,
    facts_from_experience,
    facts_from_trajectory,
    holds_several_answers,
    read_rows,
    trait_rows,
)


@pytest.mark.parametrize(
    ("answer", "gold", "several"),
    [
        ("Paris", ["Paris"], False),
        ("Paris, Texas", ["Dallas"], False),  # one comma: often inside one answer
        ("Washington, D.C.", ["Washington, D.C."], False),
        ("Paris; Lyon", ["Paris"], True),
        ("Paris or Lyon", ["Paris"], True),
        ("Paris\nLyon", ["Paris"], True),
        ("Paris | Lyon", ["Paris"], True),
        ("Paris, Lyon, Nice", ["Paris"], True),  # a list of three
        ("Tom and/or Jerry", ["Tom"], True),
        ("Oregon", ["Oregon"], False),  # "or" inside a word is no separator
        ("Pride or Prejudice", ["Pride or Prejudice"], False),  # a gold answer is one answer, whatever it holds
        ("1, 2, 3", ["1, 2, 3"], False),
        ("Paris;", ["Lyon"], False),  # an empty part is no answer
    ],
)
def test_several_answers_in_one_answer(answer, gold, several):
    assert holds_several_answers(answer, gold) is several


@pytest.mark.parametrize(
    ("answer", "question", "gold", "copied"),
    [
        ("Brakune Kedahl", "Who led Sontania when Brakune Kedahl was born?", ["Selo Lido"], True),
        ("the Sontania", "Who led Sontania when Brakune Kedahl was born?", ["Selo Lido"], True),  # articles dropped
        ("Selo Lido", "Who led Sontania when Brakune Kedahl was born?", ["Selo Lido"], False),
        ("Kedahl was", "Who led Sontania when Brakune Kedahl was born?", ["x"], True),
        ("Kedahl born", "Who led Sontania when Brakune Kedahl was born?", ["x"], False),  # not a run of its words
        ("Sont", "Who led Sontania?", ["x"], False),  # part of a word is not a word
        ("Paris", "Is Paris the capital of France?", ["Paris"], False),  # a question may name its answer
        ("...", "Who?", ["x"], False),  # nothing left once normalized
    ],
)
def test_copied_from_the_question(answer, question, gold, copied):
    assert copied_from_question(answer, question, gold) is copied


def test_answers_and_searches_are_read_from_what_the_policy_wrote_only():
    response = (
        "<think>look</think><search>Kedahl born</search>\n\n<information>Doc 1(Title: x) <answer>Decoy</answer> "
        "<search>decoy</search></information>\n\n<answer>Wrong</answer>"
        + CORRECTIVE_OBSERVATION  # its "<answer> and </answer>" is the environment's, not an answer
        + "<search>second</search><information>cut off by the length limit <answer>x</answer>"
    )
    assert answer_and_searches(response) == ("Wrong", 2)
    assert answer_and_searches("no tags at all \udcff") == (None, 0)
    assert answer_and_searches("<answer>first</answer> then <answer>last</answer>") == ("last", 0)


def _trajectory(answer, searches=1, stop="answer", invalid=0):
    return SimpleNamespace(
        answer=answer, num_searches=searches, stop_reason=stop, invalid_actions=invalid, queries=["q"] * searches
    )


def test_the_format_bonus_is_the_reward_of_a_wrong_well_formed_answer():
    config = RewardConfig(format_weight=0.2)
    right = facts_from_trajectory(_trajectory("Paris"), "i0", 1, "Capital?", ["Paris"], config)
    wrong = facts_from_trajectory(_trajectory("Lyon"), "i0", 1, "Capital?", ["Paris"], config)
    malformed = facts_from_trajectory(_trajectory("Lyon", invalid=1), "i0", 1, "Capital?", ["Paris"], config)
    assert (right.reward, right.em, right.format_bonus) == (1.0, 1.0, 0.0)
    assert (wrong.reward, wrong.em, wrong.format_bonus) == (0.2, 0.0, 0.2)
    assert (malformed.reward, malformed.format_bonus) == (0.0, 0.0)
    # from a replay buffer: the recorded reward, the bonus where the metric gave nothing
    old = Experience("i0", "k", "Capital?", ("Paris",), "<answer>Lyon</answer>", 0.2, 3)
    facts = facts_from_experience(old, config)
    assert (facts.answer, facts.reward, facts.format_bonus, facts.em, facts.step) == ("Lyon", 0.2, 0.2, 0.0, 3)
    assert facts_from_experience(Experience("i0", "k", "Capital?", ("Paris",), "", 0.0, 3), config).answer is None


def test_rows_sum_each_step_and_instruction():
    config = RewardConfig(format_weight=0.1)
    facts = [
        facts_from_trajectory(_trajectory("Paris; Lyon", 0), "i1", 2, "Capital?", ["Paris"], config),
        facts_from_trajectory(_trajectory("Paris"), "i0", 2, "Capital?", ["Paris"], config),
        facts_from_trajectory(_trajectory(None, 2, stop="max_turns"), "i0", 2, "Capital?", ["Paris"], config),
        facts_from_trajectory(_trajectory("capital"), "i0", 1, "Capital?", ["Paris"], config),
    ]
    rows = trait_rows(facts)
    assert [(r["step"], r["instruction_id"]) for r in rows] == [(1, "i0"), (2, "i0"), (2, "i1")]
    assert rows[0] == {
        "step": 1,
        "instruction_id": "i0",
        "rollouts": 1,
        "answered": 1,
        "answer_words": 1,
        "several_answers": 0,
        "copied": 1,
        "searches": 1,
        "no_search": 0,
        "reward": 0.1,
        "em": 0.0,
        "format_bonus": 0.1,
    }
    assert rows[1]["rollouts"] == 2 and rows[1]["answered"] == 1 and rows[1]["searches"] == 3
    assert rows[2]["several_answers"] == 1 and rows[2]["no_search"] == 1 and rows[2]["answer_words"] == 2


def test_a_huge_answer_is_counted_not_stored():
    facts = facts_from_trajectory(_trajectory("word " * 50_000), "i0", 1, "Q?", ["A"], RewardConfig())
    (row,) = trait_rows([facts])
    assert row["answer_words"] == 50_000 and len(json.dumps(row)) < 400


def test_the_writer_appends_a_row_per_instruction_and_a_resumed_run_never_holds_a_step_twice(tmp_path):
    run = RunDir(tmp_path)
    config = RewardConfig()

    def facts(iid, answer="A"):
        return facts_from_trajectory(_trajectory(answer), iid, 0, "Q?", ["A"], config)

    log = StepTraits(run, config)
    for step in (1, 2, 3):
        log.add([facts("i0"), facts("i1", "B")])
        log.write(step)
    assert [(r["step"], r["instruction_id"]) for r in read_rows(run)][-2:] == [(3, "i0"), (3, "i1")]
    with open(run.rollout_traits_file, "a") as f:
        f.write('{"step": 4, "instr')  # a kill while appending
    resumed = StepTraits(run, config)  # resumed from the checkpoint after step 1: steps 2 and 3 run again
    resumed.write(2, [facts("i0")])
    resumed.write(3, [facts("i0")])
    assert [(r["step"], r["instruction_id"]) for r in read_rows(run)] == [(1, "i0"), (1, "i1"), (2, "i0"), (3, "i0")]
    StepTraits(run, config, main_process=False).write(4, [facts("i0")])  # only the main process writes
    assert len(read_rows(run)) == 4
