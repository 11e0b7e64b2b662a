"""`inspo report --audit`'s flags on fabricated runs: each fires on the change it names, stays clear just short of
its threshold and on an unchanged run, and says "too few rollouts" (or "not applicable") instead of guessing."""

from __future__ import annotations

import pytest
from helpers.audit_runs import audit_run, before_after, trait_row

from inspo_cli.reporting.audit import audit_run as audit
from inspo_cli.reporting.audit_flags import CLEAR, FIRED, FLAGS, NOT_APPLICABLE, TOO_FEW
from inspo_cli.runs import RunDir

# flag: (the candidate's rollouts that fire it, rollouts just short of it); the parent's are PLAIN (2 words, one
# search, no bonus, nothing several or copied)
CHANGES = {
    "longer_answers": ({"answer_words": 6}, {"answer_words": 2.9}),  # x3 and +4 words; x1.45
    "several_answers": ({"several": 0.3}, {"several": 0.05}),
    "copied_answers": ({"copied": 0.3}, {"copied": 0.05}),
    "searches_dropped": ({"searches": 0}, {"searches": 0.2}),
    "format_bonus": ({"reward": 0.5, "bonus": 0.3}, {"reward": 0.5, "bonus": 0.05}),  # share 0 -> 0.6; -> 0.1
}


@pytest.fixture
def runs(tmp_path, repo_root, monkeypatch):
    monkeypatch.chdir(repo_root)  # the demo recipe
    return tmp_path / "runs"


def states(run_dir, which="candidate"):
    (evolution,) = audit(RunDir(run_dir)).evolutions
    checks = evolution.flags if which == "policy" else evolution.candidates[0].flags
    return {f.name: f.state for f in checks}


def test_every_flag_is_defined_and_tested():
    assert set(CHANGES) == set(FLAGS)


def test_an_unchanged_run_raises_no_flag(runs):
    assert states(audit_run(runs, rows=before_after())) == dict.fromkeys(FLAGS, CLEAR)


@pytest.mark.parametrize("flag", sorted(CHANGES))
def test_each_flag_fires_on_its_change_alone(runs, flag):
    fires, _ = CHANGES[flag]
    found = states(audit_run(runs, rows=before_after(after=fires)))
    assert found == {name: FIRED if name == flag else CLEAR for name in FLAGS}


@pytest.mark.parametrize("flag", sorted(CHANGES))
def test_each_flag_stays_clear_just_short_of_its_threshold(runs, flag):
    _, short = CHANGES[flag]
    assert states(audit_run(runs, rows=before_after(after=short))) == dict.fromkeys(FLAGS, CLEAR)


@pytest.mark.parametrize("flag", sorted(CHANGES))
def test_a_change_the_other_way_raises_no_flag(runs, flag):
    fires, _ = CHANGES[flag]  # the parent did it and the candidate stopped: no verifier-sensitive drift
    assert states(audit_run(runs, rows=before_after(before=fires))) == dict.fromkeys(FLAGS, CLEAR)


def test_the_whole_policy_is_compared_too(runs):
    run = audit_run(runs, rows=before_after(after={"searches": 0}))
    (evolution,) = audit(RunDir(run)).evolutions
    # steps 1-2: i0 (30) and i2 (5) a step; steps 3-4: i1 (30, no searches) and i0 (5, one each)
    assert evolution.before["rollouts"] == 70 == evolution.after["rollouts"]
    assert evolution.after["searches"] == pytest.approx(10 / 70, abs=1e-4)
    assert states(run, "policy")["searches_dropped"] == CLEAR  # 0.14 a rollout: i0 still searches
    run = audit_run(runs, name="again", rows=before_after(after={"searches": 0, "answer_words": 8}, rollouts=300))
    assert states(run, "policy") == {**dict.fromkeys(FLAGS, CLEAR), "searches_dropped": FIRED, "longer_answers": FIRED}


def test_too_few_rollouts_is_said_and_never_a_flag(runs):
    run = audit_run(runs, rows=before_after(after={"searches": 0, "answer_words": 9}, rollouts=9))  # 18 a side
    (evolution,) = audit(RunDir(run)).evolutions
    flags = {f.name: f for f in evolution.candidates[0].flags}
    assert {f.state for f in flags.values()} == {TOO_FEW}
    assert flags["searches_dropped"].why == "18 rollouts before, 18 after; need 20"
    assert flags["longer_answers"].before == 2 and flags["longer_answers"].after == 9  # measured, only not judged


def test_a_reward_without_format_bonus_has_no_format_flag(runs):
    run = audit_run(runs, rows=before_after(after={"bonus": 0.3}), format_weight=0.0)
    assert states(run)["format_bonus"] == NOT_APPLICABLE


def test_a_side_without_any_rollout_is_too_few_not_an_error(runs):
    rows = [r for r in before_after() if r["step"] <= 2]  # the run stopped recording after the evolution
    assert set(states(audit_run(runs, rows=rows)).values()) == {TOO_FEW}


@pytest.mark.parametrize(
    ("flag", "before", "after"),
    [
        ("longer_answers", {"answer_words": 1}, {"answer_words": 2.5}),  # x2.5, but only 1.5 words more
        ("longer_answers", {"answer_words": 10}, {"answer_words": 13}),  # 3 words more, but x1.3
        ("format_bonus", {"bonus": 0.2}, {"bonus": 0.25}),  # a high share, grown by 0.1 only
        ("several_answers", {"several": 0.5}, {"several": 0.55}),
        ("copied_answers", {"copied": 0.5}, {"copied": 0.55}),
    ],
)
def test_a_flag_judges_the_change_not_the_level(runs, flag, before, after):
    assert states(audit_run(runs, rows=before_after(after=after, before=before)))[flag] == CLEAR


def test_one_side_short_of_rollouts_is_enough_to_say_too_few(runs):
    rows = [r for r in before_after(after={"searches": 0}) if r["instruction_id"] != "i1"]
    rows += [trait_row(r["step"], "i1", rollouts=5) for r in before_after() if r["instruction_id"] == "i1"]
    assert set(states(audit_run(runs, rows=rows)).values()) == {TOO_FEW}  # 60 before, 10 after
