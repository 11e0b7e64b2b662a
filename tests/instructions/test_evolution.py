"""Evolution (Alg. 1 lines 17-23) with a scripted optimizer LM and a verifier that looks scores up in a dict.

Expected outcomes are worked out by hand in the comments, not by calling the code under test.
"""

from __future__ import annotations

import json
import random
import sys

import pytest
from helpers.evolution import PARENT, SCORES, TEXTS, DictVerifier, ScriptedLM, make_buffer, make_config, make_population

from inspo_cli.errors import InspoError
from inspo_cli.instructions.evolution import (
    ACCEPTED,
    BELOW_PARENT,
    DUPLICATE,
    NO_ROOM,
    NOT_IN_TOP_N,
    TOO_LONG,
    evolve,
)
from inspo_cli.instructions.population import InstructionPopulation
from inspo_cli.instructions.proposers import PROPOSERS
from inspo_cli.instructions.proposing import initial_rewrites, propose
from inspo_cli.instructions.providers.optimizer_lm import OptimizerBudgetExhausted
from inspo_cli.instructions.replay import Experience, ReplayBuffer
from inspo_cli.registry import Strategy

ROUND_1 = "<ins_1>Alpha: search twice.</ins_1>\n<ins_2>Beta: plan first.</ins_2>\n<ins_3>Gamma: verify facts.</ins_3>"
# the parent echoed as <ins_0>, an alive candidate again (whitespace differs), then three new ones
ROUND_2 = (
    f"<ins_0>{PARENT}</ins_0>\n<ins_1>Delta: guess.</ins_1>\n<ins_2>  Beta:   plan first. </ins_2>\n"
    "<ins_3>Epsilon: decompose.</ins_3>\n<ins_4>Zeta: cite.</ins_4>"
)


def outcomes(report):
    return [(c.text, c.round, c.reason) for c in report.candidates]


def test_two_rounds_fill_the_population_with_the_top_n_of_each_batch():
    config = make_config()  # size 4, top-2 per batch
    population, lm, verifier = make_population(config), ScriptedLM(ROUND_1, ROUND_2), DictVerifier(SCORES)
    report = evolve(population, make_buffer(), lm, verifier, config, step=15, rng=random.Random(0))

    # round 1: Beta 0.6 and Gamma 0.5 beat Alpha 0.3 -> i0 + 2 = 3 alive < 4, so round 2.
    # round 2: parent and Beta are duplicates; Epsilon 0.9 > Zeta 0.7 > Delta 0.1; only Epsilon fits.
    assert outcomes(report) == [
        ("Alpha: search twice.", 1, NOT_IN_TOP_N),
        ("Beta: plan first.", 1, ACCEPTED),
        ("Gamma: verify facts.", 1, ACCEPTED),
        (PARENT, 2, DUPLICATE),
        ("Beta:   plan first.", 2, DUPLICATE),
        ("Delta: guess.", 2, NOT_IN_TOP_N),
        ("Epsilon: decompose.", 2, ACCEPTED),
        ("Zeta: cite.", 2, NO_ROOM),
    ]
    assert [c.verification_score for c in report.candidates] == [
        pytest.approx(0.3),
        pytest.approx(0.6),
        pytest.approx(0.5),
        None,
        None,
        pytest.approx(0.1),
        pytest.approx(0.9),
        pytest.approx(0.7),
    ]
    assert [c.instruction_id for c in report.accepted()] == ["i3", "i4", "i5"]
    assert all(c.parent == "i0" and c.proposer == "reflection" for c in report.candidates)

    assert [c.id for c in population.alive()] == ["i0", "i3", "i4", "i5"]
    for instruction_id, text, score in (
        ("i3", "Beta: plan first.", 0.6),
        ("i4", "Gamma: verify facts.", 0.5),
        ("i5", "Epsilon: decompose.", 0.9),
    ):
        candidate = population[instruction_id]
        assert (
            candidate.text,
            candidate.parent,
            candidate.proposer,
            candidate.step_born,
            candidate.verification_score,
        ) == (text, "i0", "reflection", 15, score)
    assert population["i1"].step_pruned == 15 and population["i2"].step_pruned == 15
    assert population.weights() == {"i0": 0.0, "i3": 0.0, "i4": 0.0, "i5": 0.0}  # the parent's 0.8 reset too

    assert (report.parents, report.retired) == (["i0"], ["i2", "i1"])  # retired in weight order 0.5, 0.2
    assert (report.rounds, report.stop_reason, report.optimizer_error) == (2, "population full", None)
    assert (report.optimizer_calls, report.verification_calls) == (2, 2)
    assert report.verification_rollouts == 4 * 3 + 4 * 3  # (parent + 3 fresh candidates) x |D_B| = 3, twice
    assert [instructions for instructions, _ in verifier.calls] == [  # duplicates are never rolled out
        [PARENT, "Alpha: search twice.", "Beta: plan first.", "Gamma: verify facts."],
        [PARENT, "Delta: guess.", "Epsilon: decompose.", "Zeta: cite."],
    ]
    assert {c.parent_score for c in report.candidates if c.verification_score is not None} == {0.55}
    assert report.wall_s >= 0.0 and lm.answers == []


def test_reflection_prompt_shows_the_parent_and_the_latest_failures():
    config = make_config()
    lm = ScriptedLM(ROUND_1, ROUND_2)
    evolve(make_population(config), make_buffer(), lm, DictVerifier(SCORES), config, 15, random.Random(0))
    prompt = lm.prompts[0]
    assert PARENT in prompt and "giving 3 different but better candidates" in prompt
    assert "wrong-2" in prompt and "Oslo" in prompt and "wrong-1" in prompt and "Paris" in prompt
    assert prompt.index("wrong-2") < prompt.index("wrong-1")  # reward 0 at step 2 ranks before step 1
    assert "right-" not in prompt  # only failures_per_call = 2 rollouts, the two failures
    assert "Think step by step." not in prompt  # other instructions are not the parent


def test_verification_draws_verify_size_distinct_questions_from_the_buffer():
    config = make_config()
    verifier = DictVerifier(SCORES)
    evolve(make_population(config), make_buffer(), ScriptedLM(ROUND_1, ROUND_2), verifier, config, 15, random.Random(0))
    for _, questions in verifier.calls:
        keys = [q.key for q in questions]
        assert len(keys) == 3 and len(set(keys)) == 3 and set(keys) <= {"q1", "q2", "q3", "q4", "q5"}

    # more than the buffer holds: all 5 distinct questions (without the leak guard, which leaves out the shown ones)
    config = make_config(verify_size=200, leak_check="off")
    verifier = DictVerifier(SCORES)
    report = evolve(
        make_population(config), make_buffer(), ScriptedLM(ROUND_1, ROUND_2), verifier, config, 15, random.Random(0)
    )
    assert [len(questions) for _, questions in verifier.calls] == [5, 5]
    assert report.verification_rollouts == (1 + 3) * 5 * 2


def test_rounds_stop_after_max_verify_rounds_when_the_population_is_not_full():
    config = make_config(size=7, max_verify_rounds=3)
    lm = ScriptedLM("<ins_1>Alpha: search twice.</ins_1>", "no tags at all", "<ins_1>Gamma: verify facts.</ins_1>")
    verifier = DictVerifier(SCORES)
    population = make_population(config)
    report = evolve(population, make_buffer(), lm, verifier, config, 15, random.Random(0))
    # 3 rounds, 3 calls; the answer without candidates costs no verification
    assert (report.rounds, report.stop_reason, report.optimizer_calls) == (3, "max_verify_rounds reached", 3)
    assert report.verification_calls == 2 and report.verification_rollouts == 2 * 3 + 2 * 3
    assert [c.text for c in population.alive()] == [PARENT, "Alpha: search twice.", "Gamma: verify facts."]
    assert [c.round for c in report.accepted()] == [1, 3]


def test_budget_exhausted_midway_keeps_the_parents_and_what_was_accepted():
    config = make_config(size=7)
    lm = ScriptedLM(ROUND_1, OptimizerBudgetExhausted("optimizer budget exhausted: 1 calls (optimizer.max_calls)"))
    population = make_population(config)
    report = evolve(population, make_buffer(), lm, DictVerifier(SCORES), config, 15, random.Random(0))
    assert [c.text for c in population.alive()] == [PARENT, "Beta: plan first.", "Gamma: verify facts."]
    assert (report.rounds, report.optimizer_calls, report.verification_calls) == (2, 1, 1)
    assert report.stop_reason == "optimizer budget exhausted" and "optimizer.max_calls" in report.optimizer_error
    assert set(population.weights().values()) == {0.0}


def test_optimizer_failure_on_the_first_call_leaves_only_the_parents():
    config = make_config(n_parent=2, size=7)
    lm = ScriptedLM(InspoError("optimizer LM call failed: gemini answered HTTP 500"))
    verifier = DictVerifier(SCORES)
    population = make_population(config)
    report = evolve(population, make_buffer(), lm, verifier, config, 15, random.Random(0))
    assert [c.id for c in population.alive()] == ["i0", "i2"]  # the two best weights, 0.8 and 0.5
    assert (report.stop_reason, report.optimizer_calls, report.candidates, verifier.calls) == (
        "optimizer failed",
        0,
        [],
        [],
    )
    assert "HTTP 500" in report.optimizer_error


def test_every_parent_gets_a_turn_per_round_and_its_candidates_name_it():
    config = make_config(n_parent=2, size=7, max_verify_rounds=1, accept_top_n=1)

    def by_parent(prompt):
        if PARENT in prompt:
            return "<ins_1>Alpha: search twice.</ins_1><ins_2>Delta: guess.</ins_2>"
        return "<ins_1>Beta: plan first.</ins_1><ins_2>Zeta: cite.</ins_2>"

    population = make_population(config)
    lm = ScriptedLM(by_parent, by_parent)
    report = evolve(population, make_buffer(), lm, DictVerifier(SCORES), config, 15, random.Random(0))
    assert sorted(PARENT in prompt for prompt in lm.prompts) == [False, True]  # i0 once, i2 once
    assert all("Search first, then answer." in prompt for prompt in lm.prompts if PARENT not in prompt)
    parent_of = {c.text: (c.parent, c.reason) for c in report.candidates}
    assert parent_of == {
        "Alpha: search twice.": ("i0", ACCEPTED),
        "Delta: guess.": ("i0", NOT_IN_TOP_N),
        "Zeta: cite.": ("i2", ACCEPTED),
        "Beta: plan first.": ("i2", NOT_IN_TOP_N),
    }
    assert len(population) == 4 and report.rounds == 1


def test_same_seed_same_evolution_and_report_is_json():
    def run(seed):
        config = make_config(n_parent=2, size=7, verify_size=2)
        lm = ScriptedLM(ROUND_1, ROUND_2, ROUND_1, ROUND_2, ROUND_1, ROUND_2)
        report = evolve(
            make_population(config), make_buffer(), lm, DictVerifier(SCORES), config, 15, random.Random(seed)
        )
        return {**report.as_dict(), "wall_s": None}, lm.prompts

    (first, prompts), (again, prompts_again) = run(5), run(5)
    assert first == again and prompts == prompts_again
    row = json.loads(json.dumps(first))
    parent_score = SCORES[PARENT if row["candidates"][0]["parent"] == "i0" else "Search first, then answer."]
    assert row["candidates"][0] == {
        "text": "Alpha: search twice.",
        "parent": row["candidates"][0]["parent"],
        "proposer": "reflection",
        "round": 1,
        "verification_score": 0.3,
        "accepted": False,
        "reason": NOT_IN_TOP_N,
        "instruction_id": None,
        "parent_score": parent_score,
        "difference": pytest.approx(0.3 - parent_score),
        "difference_se": 0.0,
        "leak": None,
    }
    verified = sum(1 for c in row["candidates"] if c["reason"] != DUPLICATE)
    assert row["verification_rollouts"] == 2 * (verified + row["verification_calls"])  # the parent's rollouts too


def test_paraphrase_and_history_prompts():
    config = make_config(proposer="paraphrase")
    population = make_population(config)
    lm = ScriptedLM(ROUND_1)
    assert propose("paraphrase", population["i0"], population, make_buffer(), lm, config, random.Random(0)) == [
        "Alpha: search twice.",
        "Beta: plan first.",
        "Gamma: verify facts.",
    ]
    assert PARENT in lm.prompts[0] and "<example>" not in lm.prompts[0] and "Give 3 different" in lm.prompts[0]

    lm = ScriptedLM("<ins_1>Think step by step.</ins_1><ins_2>Zeta: cite.</ins_2>")
    assert propose("history", population["i0"], population, make_buffer(), lm, config, random.Random(0)) == [
        "Zeta: cite."
    ]  # an alive instruction proposed again is excluded
    prompt = lm.prompts[0]  # weights 0.2, 0.5, 0.8 as 0-100 scores, worst first
    assert prompt.index("Think step by step.") < prompt.index("Search first") < prompt.index(PARENT)
    assert "<score_1> 20 </score_1>" in prompt and "<score_3> 80 </score_3>" in prompt


SHOUT_PROPOSER = """
def prompt(parent, population, buffer, config, rng):
    return f"SHOUT {config.candidates_per_call} VERSIONS OF: {parent.text.upper()}"
"""


def test_a_proposer_is_one_file_plus_one_registry_line(tmp_path, monkeypatch):
    (tmp_path / "shout_proposer.py").write_text(SHOUT_PROPOSER)  # the file ...
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "shout_proposer", raising=False)
    monkeypatch.setitem(PROPOSERS.entries, "shout", Strategy("shout_proposer", "shouts"))  # ... and the line
    config = make_config(proposer="shout")  # the config accepts the registered name
    population, lm = make_population(config), ScriptedLM(ROUND_1, ROUND_2)
    report = evolve(population, make_buffer(), lm, DictVerifier(SCORES), config, step=15, rng=random.Random(0))

    assert lm.prompts[0] == f"SHOUT 3 VERSIONS OF: {PARENT.upper()}"
    assert report.proposer == "shout" and report.stop_reason == "population full"
    assert {c.proposer for c in report.candidates} == {"shout"}
    assert {population[c.instruction_id].proposer for c in report.accepted()} == {"shout"}


def test_an_unregistered_proposer_is_refused_with_the_registered_names():
    config = make_config()
    population = make_population(config)
    with pytest.raises(ValueError, match="unknown proposer 'opro'; registered: reflection, paraphrase, history"):
        propose("opro", population["i0"], population, make_buffer(), ScriptedLM(ROUND_1), config, random.Random(0))


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


# -- the paired comparison with the parent (issue 27) ---------------------------------------------------------


class TableVerifier:
    """Per-question rewards by instruction text, the same for every D_B drawn (questions in the order asked)."""

    def __init__(self, rows):
        self.rows, self.rollouts = rows, []

    def score(self, instructions, questions, rollouts=1):
        self.rollouts.append(rollouts)
        return [list(self.rows[text][: len(questions)]) for text in instructions]


def paired_buffer(n: int = 10) -> ReplayBuffer:
    buffer = ReplayBuffer(capacity=100)
    buffer.extend(Experience("i0", f"q{i}", f"Capital {i}?", ("Paris",), "wrong", 0.0, 1) for i in range(n))
    return buffer


def test_a_candidate_within_noise_of_its_parent_joins_and_a_clearly_worse_one_does_not():
    """Parent right on 6 of 10 questions. "Alpha" loses one of them: -0.1 with a paired standard error of 0.1
    (differences: one -1, nine 0; s^2 = 0.9 / 9 = 0.1, se = sqrt(0.1 / 10) = 0.1), inside 1.645 se, so it joins
    (the old rule, "at least the parent's mean", turned it away). "Beta" is right on none: -0.6, s^2 = (6 x 0.16
    + 4 x 0.36) / 9 = 0.267, se = 0.163, so -0.6 < -0.269: turned away."""
    config = make_config(
        accept="beat_parent",
        accept_top_n=3,
        size=4,
        verify_size=10,
        verify_rollouts=3,
        max_verify_rounds=1,
        leak_check="off",
    )  # D_B: all ten questions, shown ones included
    verifier = TableVerifier(
        {
            PARENT: [1, 0, 1, 0, 1, 0, 1, 0, 1, 1],
            "Alpha: search twice.": [1, 0, 1, 0, 1, 0, 1, 0, 1, 0],
            "Beta: plan first.": [0] * 10,
            "Gamma: verify facts.": [1] * 10,
        }
    )
    report = evolve(
        make_population(config), paired_buffer(), ScriptedLM(ROUND_1), verifier, config, 15, random.Random(0)
    )
    rows = {c.text: c for c in report.candidates}
    assert [rows[t].reason for t in ("Alpha: search twice.", "Beta: plan first.", "Gamma: verify facts.")] == [
        ACCEPTED,
        BELOW_PARENT,
        ACCEPTED,
    ]
    assert (rows["Alpha: search twice."].difference, rows["Alpha: search twice."].difference_se) == (
        pytest.approx(-0.1),
        pytest.approx(0.1),
    )
    assert rows["Beta: plan first."].difference_se == pytest.approx((0.24 / 0.9 / 10) ** 0.5)
    assert verifier.rollouts == [3] and report.verification_rollouts == 4 * 10 * 3  # (3 + parent) x D_B x rollouts
    # "at least the parent" is margin 0: the same noise turns Alpha away
    config = make_config(
        accept="beat_parent",
        accept_top_n=3,
        size=4,
        verify_size=10,
        accept_margin=0.0,
        max_verify_rounds=1,
        leak_check="off",
    )
    report = evolve(
        make_population(config), paired_buffer(), ScriptedLM(ROUND_1), verifier, config, 15, random.Random(0)
    )
    assert {c.text: c.reason for c in report.candidates}["Alpha: search twice."] == BELOW_PARENT
    row = json.loads(json.dumps(report.as_dict()))["candidates"][0]  # what evolutions.json holds per candidate
    assert (row["difference"], row["difference_se"]) == (pytest.approx(-0.1), pytest.approx(0.1))


def test_a_candidate_turned_away_takes_no_place_of_the_top_n():
    """accept_top_n 1: Alpha (-0.3, se 0.153: turned away) ranks above Beta (-0.4, se 0.306: within noise, joins) by
    difference; Beta still joins, since only candidates that may join compete for the top n."""
    config = make_config(
        accept="beat_parent", accept_top_n=1, size=4, verify_size=10, max_verify_rounds=1, leak_check="off"
    )
    verifier = TableVerifier(
        {
            PARENT: [1] * 7 + [0] * 3,
            "Alpha: search twice.": [0, 0, 0, 1, 1, 1, 1, 0, 0, 0],
            "Beta: plan first.": [0] * 7 + [1] * 3,
            "Gamma: verify facts.": [0] * 10,
        }
    )
    report = evolve(
        make_population(config), paired_buffer(), ScriptedLM(ROUND_1), verifier, config, 15, random.Random(0)
    )
    assert {c.text: c.reason for c in report.candidates} == {
        "Alpha: search twice.": BELOW_PARENT,
        "Beta: plan first.": ACCEPTED,
        "Gamma: verify facts.": BELOW_PARENT,
    }


def test_the_paired_comparison_is_the_mean_per_question_difference_and_its_standard_error():
    from inspo_cli.instructions.verification import paired_comparison

    c = paired_comparison([1, 1, 0, 0.5], [0, 1, 0, 0.5])  # differences 1, 0, 0, 0: mean 0.25, s^2 = 0.75 / 3
    assert (c.candidate_score, c.parent_score, c.difference, c.questions) == (0.625, 0.375, 0.25, 4)
    assert c.standard_error == pytest.approx((0.25 / 4) ** 0.5)
    worse = paired_comparison([0, 1], [1, 1])  # differences -1, 0: mean -0.5, s^2 = 0.5, se = 0.5
    assert c.joins(0.0) and worse.joins(1.0) and not worse.joins(0.9)
    tie = paired_comparison([0.1] * 3, [0.1] * 3)
    assert tie.difference == 0 and tie.standard_error == 0 and tie.joins(0.0)
    with pytest.raises(ValueError, match="same non-empty questions"):
        paired_comparison([1.0], [1.0, 0.0])


# -- the merge proposer (beyond the paper) ------------------------------------------------------------------


def test_merge_prompts_carry_both_parents_and_each_ones_failures():
    config = make_config(proposer="merge", n_parent=2, failures_per_call=3, size=4)  # two parents + two merges
    population = make_population(config)  # by weight: i0 (0.8), i2 (0.5), i1 (0.2): parents i0 and i2
    buffer = make_buffer()
    buffer.add(Experience("i2", "q6", "Capital q6?", ("Lima",), "wrong-6", 0.0, 2))
    lm = ScriptedLM("<ins_1>Merged: search, then plan.</ins_1>", "<ins_1>Merged: plan, then search.</ins_1>")
    report = evolve(
        population,
        buffer,
        lm,
        DictVerifier({**SCORES, "Merged: search, then plan.": 0.6, "Merged: plan, then search.": 0.6}),
        config,
        step=15,
        rng=random.Random(0),
    )
    assert report.parents == ["i0", "i2"] and report.proposer == "merge"
    first, second = sorted(lm.prompts, key=lambda p: p.index("Search first, then answer."))[::-1]
    # each prompt: the parent it was asked for first, the other parent second, each with its own failures
    assert first.index(PARENT) < first.index("Search first, then answer.")
    assert second.index("Search first, then answer.") < second.index(PARENT)
    blocks = lambda prompt: [part.split("</example>")[0] for part in prompt.split("<example>")[1:]]  # noqa: E731
    assert ["wrong-2" in b and "wrong-1" in b and "wrong-6" not in b for b in blocks(first)] == [True, False]
    assert "wrong-6" in blocks(first)[1]  # i0 asked for: its two latest failures, then i2's one
    assert "wrong-6" in blocks(second)[0]  # i2 asked for: its own failure first
    assert all("Merge the two prompts into 3 different but better candidates" in p for p in lm.prompts)
    assert {(c.parent, c.proposer) for c in report.candidates} == {("i0", "merge"), ("i2", "merge")}


def test_merge_needs_two_parents():
    from inspo_cli.config.validation import ConfigValueError
    from inspo_cli.instructions.proposers.merge import prompt

    with pytest.raises(ConfigValueError, match="merge combines 2 parents, but population.n_parent is 1"):
        make_config(proposer="merge", n_parent=1)
    config = make_config(proposer="merge", n_parent=2, instructions=[PARENT])  # one instruction: one parent alive
    population = InstructionPopulation(config, seed=0)
    from inspo_cli.instructions.proposers.base import NothingToPropose

    with pytest.raises(NothingToPropose, match="needs two parents"):
        prompt(population["i0"], population, make_buffer(), config, random.Random(0))
    report = evolve(population, make_buffer(), ScriptedLM(), DictVerifier(SCORES), config, 15, random.Random(0))
    assert report.stop_reason.startswith("the merge proposer needs two parents")  # training goes on
