"""Evolution (Alg. 1 lines 17-23) round by round with a scripted optimizer LM and a verifier that looks scores
up in a dict: the population fills with each batch's top n, verification draws, budgets, failures and seeds.

Expected outcomes are worked out by hand in the comments, not by calling the code under test.
"""

from __future__ import annotations

import json
import random

import pytest
from helpers.evolution import PARENT, SCORES, DictVerifier, ScriptedLM, make_buffer, make_config, make_population
from helpers.evolution_rounds import ROUND_1, ROUND_2, outcomes

from inspo_cli.errors import InspoError
from inspo_cli.instructions.evolution import (
    ACCEPTED,
    DUPLICATE,
    NO_ROOM,
    NOT_IN_TOP_N,
    evolve,
)
from inspo_cli.instructions.proposing import propose
from inspo_cli.instructions.providers.optimizer_lm import OptimizerBudgetExhausted


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
        # D_B's questions have no type here, and this verifier gives rewards only (PolicyVerifier gives EM too)
        "by_type": {
            "unknown": {
                "questions": 2,
                "candidate_reward": 0.3,
                "parent_reward": parent_score,
                "candidate_em": None,
                "parent_em": None,
            }
        },
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
