"""Which candidates evolution accepts: initial rewrites, a parent that beats its candidates, over-long candidates,
reflection on the parent's failures, a full population, and evolution without verification.

Expected outcomes are worked out by hand in the comments, not by calling the code under test.
"""

from __future__ import annotations

import random

import pytest
from helpers.evolution import PARENT, SCORES, TEXTS, DictVerifier, ScriptedLM, make_buffer, make_config, make_population
from helpers.evolution_rounds import ROUND_1, ROUND_2, outcomes

from inspo_cli.instructions.evolution import (
    ACCEPTED,
    BELOW_PARENT,
    DUPLICATE,
    NO_ROOM,
    NOT_IN_TOP_N,
    TOO_LONG,
    evolve,
)
from inspo_cli.instructions.proposing import initial_rewrites
from inspo_cli.instructions.replay import Experience, ReplayBuffer


def test_initial_rewrites_are_distinct_and_exclude_the_original():
    lm = ScriptedLM(
        f"<ins_1>{PARENT}</ins_1><ins_2>R1: search.</ins_2><ins_3> R1:  search. </ins_3>"
        "<ins_4>R2: think.</ins_4><ins_5>R3: cite.</ins_5>"
    )
    assert initial_rewrites(PARENT, lm, 2) == ["R1: search.", "R2: think."]
    assert PARENT in lm.prompts[0] and "Give 2 different candidates" in lm.prompts[0]


def test_empty_buffer_or_bad_verifier_is_an_error_before_damage():
    config = make_config()
    population = make_population(config)
    with pytest.raises(ValueError, match="replay buffer"):
        evolve(population, ReplayBuffer(10), ScriptedLM(ROUND_1), DictVerifier(SCORES), config, 15, random.Random(0))
    assert len(population) == 3 and population["i0"].weight == pytest.approx(0.8)

    class ShortVerifier:
        def score(self, instructions, questions, rollouts=1):
            return [[0.5] * len(questions)]

    with pytest.raises(ValueError, match="one finite reward per question for each instruction"):
        evolve(
            make_population(config), make_buffer(), ScriptedLM(ROUND_1), ShortVerifier(), config, 15, random.Random(0)
        )


def test_a_full_population_stops_mid_round_without_asking_the_next_parent():
    config = make_config(n_parent=2, size=4)  # 2 parents + the top 2 of the first batch = 4
    lm = ScriptedLM(ROUND_1, ROUND_1)
    population = make_population(config)
    report = evolve(population, make_buffer(), lm, DictVerifier(SCORES), config, 15, random.Random(0))
    assert len(lm.prompts) == 1 and report.optimizer_calls == 1 and report.rounds == 1
    assert len(population) == 4 and report.stop_reason == "population full"


def test_beat_parent_rejects_candidates_that_score_below_the_parent_on_the_same_questions():
    config = make_config(accept="beat_parent", accept_top_n=3, size=7, max_verify_rounds=1)
    population, verifier = make_population(config), DictVerifier({**SCORES, PARENT: 0.5})
    report = evolve(population, make_buffer(), ScriptedLM(ROUND_1), verifier, config, 15, random.Random(0))
    # parent 0.5 on this D_B: Alpha 0.3 is below it; Beta 0.6 and Gamma 0.5 (a tie counts as good enough) join
    assert outcomes(report) == [
        ("Alpha: search twice.", 1, BELOW_PARENT),
        ("Beta: plan first.", 1, ACCEPTED),
        ("Gamma: verify facts.", 1, ACCEPTED),
    ]
    assert [c.parent_score for c in report.candidates] == [0.5, 0.5, 0.5]
    assert verifier.calls[0][0][0] == PARENT and len(verifier.calls) == 1  # parent and candidates: one call
    assert [c.text for c in population.alive()] == [PARENT, "Beta: plan first.", "Gamma: verify facts."]
    assert report.verification_rollouts == 4 * 3 and report.stop_reason == "max_verify_rounds reached"

    top_n = make_config(accept="top_n", accept_top_n=3, size=7, max_verify_rounds=1)  # Alg. 1 line 21 literally
    population = make_population(top_n)
    evolve(
        population,
        make_buffer(),
        ScriptedLM(ROUND_1),
        DictVerifier({**SCORES, PARENT: 0.5}),
        top_n,
        15,
        random.Random(0),
    )
    assert "Alpha: search twice." in [c.text for c in population.alive()]


def test_all_candidates_below_the_parent_leave_the_parent_alone():
    config = make_config(accept="beat_parent", size=7, max_verify_rounds=2)
    population = make_population(config)
    report = evolve(
        population,
        make_buffer(),
        ScriptedLM(ROUND_1, ROUND_1),
        DictVerifier({**SCORES, PARENT: 0.95}),
        config,
        15,
        random.Random(0),
    )
    assert [c.id for c in population.alive()] == ["i0"] and report.accepted() == []
    assert report.rounds == 2 and {c.reason for c in report.candidates} == {BELOW_PARENT}


def test_over_long_candidates_are_recorded_not_dropped_silently():
    long_text = "Plan: " + "search each entity separately. " * 20
    config = make_config(max_instruction_chars=200, size=7, max_verify_rounds=1)
    answer = f"<ins_1>{long_text}</ins_1><ins_2>Beta: plan first.</ins_2>"
    verifier = DictVerifier(SCORES)
    report = evolve(make_population(config), make_buffer(), ScriptedLM(answer), verifier, config, 15, random.Random(0))
    assert [(c.reason, c.verification_score) for c in report.candidates] == [(TOO_LONG, None), (ACCEPTED, 0.6)]
    assert report.candidates[0].text == long_text.strip() and verifier.calls[0][0] == [PARENT, "Beta: plan first."]


def test_reflection_shows_the_parents_latest_failures_and_never_a_full_reward():
    config = make_config(failures_per_call=3, max_verify_rounds=1)
    buffer = ReplayBuffer(capacity=100)
    buffer.extend(
        [
            Experience("i0", "q1", "Q1?", ("a",), "parent-old-fail", 0.0, 1),
            Experience("i1", "q2", "Q2?", ("b",), "other-new-fail", 0.0, 2),
            Experience("i0", "q3", "Q3?", ("c",), "parent-new-fail", 0.0, 2),
            Experience("i0", "q4", "Q4?", ("d",), "parent-new-pass", 1.0, 2),
            Experience("i2", "q5", "Q5?", ("e",), "other-pass", 1.0, 2),
        ]
    )
    lm = ScriptedLM(ROUND_1)
    evolve(make_population(config), buffer, lm, DictVerifier(SCORES), config, 15, random.Random(0))
    prompt = lm.prompts[0]
    # the parent (i0) "still gets wrong": its newest failure, its older one, then another instruction's to fill up
    assert prompt.index("parent-new-fail") < prompt.index("parent-old-fail") < prompt.index("other-new-fail")
    assert "pass" not in prompt

    # only two failures exist: two are shown, not padded with successes
    config = make_config(failures_per_call=4, max_verify_rounds=1)
    buffer = ReplayBuffer(capacity=10)
    buffer.extend(
        [
            Experience("i0", "q1", "Q1?", ("a",), "fail-1", 0.2, 2),
            Experience("i0", "q2", "Q2?", ("b",), "pass-2", 1.0, 2),
            Experience("i0", "q3", "Q3?", ("c",), "fail-3", 0.0, 2),
        ]
    )
    lm = ScriptedLM(ROUND_1)
    evolve(make_population(config), buffer, lm, DictVerifier(SCORES), config, 15, random.Random(0))
    assert lm.prompts[0].index("fail-3") < lm.prompts[0].index("fail-1") and "pass-2" not in lm.prompts[0]


def test_nothing_failed_means_no_reflection_and_no_crash():
    config = make_config(size=7)
    buffer = ReplayBuffer(capacity=10)
    buffer.extend([Experience("i0", "q1", "Q1?", ("a",), "right", 1.0, 2)])
    population, lm = make_population(config), ScriptedLM()
    report = evolve(population, buffer, lm, DictVerifier(SCORES), config, 15, random.Random(0))
    assert report.stop_reason == "no failed rollouts to reflect on" and lm.prompts == []
    assert [c.id for c in population.alive()] == ["i0"]


def test_initial_rewrites_keep_the_recipes_other_instructions_out():
    lm = ScriptedLM("<ins_1>Think step by step.</ins_1><ins_2>R1: search.</ins_2><ins_3>R2: think.</ins_3>")
    assert initial_rewrites(PARENT, lm, 2, keep=TEXTS) == ["R1: search.", "R2: think."]
    assert initial_rewrites(PARENT, ScriptedLM(), 0) == []  # the recipe already fills the population: no call


def test_without_verification_the_first_accept_top_n_join_unverified_and_nothing_is_rolled_out():
    # Fig. 3's "prune + expand" bar: population.verify false
    config = make_config(verify=False)  # size 4, top-2 per answer
    population, verifier = make_population(config), DictVerifier(SCORES)
    report = evolve(population, make_buffer(), ScriptedLM(ROUND_1, ROUND_2), verifier, config, 15, random.Random(0))
    # round 1: Alpha and Beta join in proposal order (top 2 of 3), Gamma is third: i0 + 2 = 3 < 4, so round 2;
    # round 2: parent and Beta are duplicates, Delta joins (population full), Epsilon would be second: no room.
    assert outcomes(report) == [
        ("Alpha: search twice.", 1, ACCEPTED),
        ("Beta: plan first.", 1, ACCEPTED),
        ("Gamma: verify facts.", 1, NOT_IN_TOP_N),
        (PARENT, 2, DUPLICATE),
        ("Beta:   plan first.", 2, DUPLICATE),
        ("Delta: guess.", 2, ACCEPTED),
        ("Epsilon: decompose.", 2, NO_ROOM),
        ("Zeta: cite.", 2, NOT_IN_TOP_N),
    ]
    assert verifier.calls == [] and (report.verification_calls, report.verification_rollouts) == (0, 0)
    assert all(c.verification_score is None and c.parent_score is None for c in report.candidates)
    assert [c.text for c in population.alive()] == [
        PARENT,
        "Alpha: search twice.",
        "Beta: plan first.",
        "Delta: guess.",
    ]
    assert population["i3"].verification_score is None
