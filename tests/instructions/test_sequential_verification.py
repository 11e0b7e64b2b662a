"""Sequential verification (`population.verify_sequential`): D_B scored in chunks, a candidate decided as soon as it is
clearly above or below beat_parent's line, with the fixed rule's error rates (instructions/sequential.py)."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
from helpers.evolution import PARENT, ScriptedLM, make_config, make_population

from inspo_cli.config import RecipeError, load_recipe
from inspo_cli.instructions.evolution import ACCEPTED, BELOW_PARENT, NOT_IN_TOP_N, evolve
from inspo_cli.instructions.replay import Experience, ReplayBuffer
from inspo_cli.instructions.sequential import SequentialDesign, chunk_ends, sequential_design, verify_in_chunks, z_score
from inspo_cli.instructions.verification import PairedComparison, paired_comparison

ALPHA, BETA, GAMMA = "Alpha: search twice.", "Beta: plan first.", "Gamma: verify facts."
ROUND_1 = f"<ins_1>{ALPHA}</ins_1>\n<ins_2>{BETA}</ins_2>\n<ins_3>{GAMMA}</ins_3>"


# -- the design ----------------------------------------------------------------------------------------------


def test_looks_fall_on_equal_chunks_and_a_small_d_b_gets_fewer():
    assert chunk_ends(200, 4) == (50, 100, 150, 200)
    assert chunk_ends(210, 4) == (52, 105, 158, 210)
    assert chunk_ends(60, 4) == (20, 40, 60)  # 20 questions at least per look
    assert chunk_ends(30, 4) == (30,)
    one = sequential_design(30, 4, 1.645)  # one look: the fixed rule itself
    assert (one.looks, one.reject_below, one.accept_above, one.final_margin) == (1, (), (), 1.645)


def test_boundaries_bracket_the_line_and_the_last_look_keeps_the_margin():
    design = sequential_design(200, 4, 1.645)
    assert design.ends == (50, 100, 150, 200)
    assert all(r < a for r, a in zip(design.reject_below, design.accept_above))
    assert list(design.reject_below) == sorted(design.reject_below)  # O'Brien-Fleming: strictest at the first look
    assert list(design.accept_above) == sorted(design.accept_above, reverse=True)
    assert design.reject_below[0] < -4 and design.accept_above[0] > 1.5
    assert design.final_margin == pytest.approx(1.645, abs=0.01)  # alpha spent early is nearly given back
    for margin in (0.0, 1.0, 2.5):
        assert sequential_design(200, 8, margin).final_margin == pytest.approx(margin, abs=0.02)


# issue 51, class 9: the boundaries pinned. The first look's rejection and every acceptance boundary have closed forms;
# a two-look design's last margin is solved here from the bivariate normal, independently of the grid integration.


def _first_reject(margin: float, t: float) -> float:
    from scipy.stats import norm

    alpha = norm.cdf(-margin)
    return float(norm.ppf(2 * norm.sf(norm.isf(0.25 * alpha / 2) / math.sqrt(t))))  # the spending at t, all of it


def _accept(margin: float, t: float) -> float:
    from scipy.stats import norm

    return float((-margin * t + norm.isf(0.05) * math.sqrt(1 - t)) / math.sqrt(t))


def test_the_boundaries_at_200_questions_and_4_looks_are_these():
    design = sequential_design(200, 4, 1.645)
    assert design.reject_below[0] == pytest.approx(_first_reject(1.645, 0.25), abs=1e-9)
    assert design.accept_above == pytest.approx([_accept(1.645, t) for t in (0.25, 0.5, 0.75)], abs=1e-12)
    assert design.reject_below == pytest.approx((-4.86016, -3.34493, -2.67039), abs=2e-5)
    assert design.accept_above == pytest.approx((2.02647, 0.48166, -0.47496), abs=2e-5)
    assert design.final_margin == pytest.approx(1.64039, abs=2e-5)
    assert sequential_design(80, 4, 1.645) == SequentialDesign(  # the boundaries are in fractions of D_B
        (20, 40, 60, 80), design.reject_below, design.accept_above, design.final_margin
    )


def test_a_two_look_design_turns_away_a_copy_with_probability_alpha_exactly():
    from scipy.optimize import brentq
    from scipy.stats import multivariate_normal, norm

    margin, t = 1.0, 0.5
    design = sequential_design(200, 2, margin)
    low, high = _first_reject(margin, t), _accept(margin, t)
    assert design.reject_below == pytest.approx((low,), abs=1e-9) and design.accept_above == pytest.approx((high,))
    z = multivariate_normal(mean=[0, 0], cov=[[1, math.sqrt(t)], [math.sqrt(t), 1]])  # z at looks 1 and 2

    def rejected(c: float) -> float:  # below at look 1, or in between at look 1 and below -c at look 2
        return norm.cdf(low) + z.cdf([high, -c]) - z.cdf([low, -c])

    assert design.final_margin == pytest.approx(brentq(lambda c: rejected(c) - norm.cdf(-margin), 0, 3), abs=1e-5)


def _at(z: float) -> PairedComparison:
    return PairedComparison(0.5, 0.5, z, 1.0, 50)  # standard error 1: z is the difference, exactly


def test_a_z_on_a_boundary_goes_on_and_just_past_it_stops_at_each_look():
    design = sequential_design(200, 4, 1.645)
    step = 1e-9
    for look, (low, high) in enumerate(zip(design.reject_below, design.accept_above), start=1):
        assert design.decide(look, _at(low)) is None and design.decide(look, _at(high)) is None, look
        assert design.decide(look, _at(low - step)) is False and design.decide(look, _at(high + step)) is True, look
        assert design.decide(look, _at(low + step)) is None and design.decide(look, _at(high - step)) is None, look
    last = design.final_margin
    assert design.decide(4, _at(-last)) is True and design.decide(4, _at(-last - 1e-9)) is False
    assert design.decide(4, _at(design.accept_above[2] + 1.0)) is True and design.decide(4, _at(-3.0)) is False


def test_z_of_a_comparison_without_spread_is_its_sign():
    def comparison(difference, se):
        return PairedComparison(0.5, 0.5, difference, se, 50)

    assert (
        z_score(comparison(0.2, 0.1)),
        z_score(comparison(0.1, 0.0)),
        z_score(comparison(-0.1, 0.0)),
        z_score(comparison(0.0, 0.0)),
    ) == (pytest.approx(2.0), math.inf, -math.inf, 0.0)
    design = sequential_design(200, 4, 1.645)
    assert design.decide(1, comparison(0.0, 0.0)) is None  # all ties: scored on
    assert design.decide(4, comparison(0.0, 0.0)) is True  # and joins at the end, as under the fixed rule


def decisions(design, candidate, parent):
    """(joins, questions scored, joins under the fixed rule) per row, through design.decide."""
    d = candidate - parent
    joins, scored = np.zeros(len(d), dtype=bool), np.zeros(len(d), dtype=int)
    for row in range(len(d)):
        for look, end in enumerate(design.ends, start=1):
            part = d[row, :end]
            se = part.std(ddof=1) / math.sqrt(end)
            verdict = design.decide(look, PairedComparison(0.0, 0.0, float(part.mean()), float(se), end))
            if verdict is not None:
                joins[row], scored[row] = verdict, end
                break
    fixed = d.mean(axis=1) >= -1.645 * d.std(axis=1, ddof=1) / math.sqrt(d.shape[1]) - 1e-12
    return joins, scored, fixed


def test_error_rates_match_the_fixed_rule_and_rollouts_are_saved():
    """Bernoulli rewards at |D_B| = 200, p = 0.45 on every question (pairing helps least). A copy is turned away as
    often as by the fixed rule (5%), a worse candidate admitted no more often, and fewer questions are scored."""
    rng = np.random.default_rng(0)
    design, n, reps = sequential_design(200, 4, 1.645), 200, 3000
    rates = {}
    for delta in (0.0, -0.05, -0.10, 0.10):
        parent = rng.binomial(1, 0.45, (reps, n)).astype(float)
        candidate = rng.binomial(1, 0.45 + delta, (reps, n)).astype(float)
        joins, scored, fixed = decisions(design, candidate, parent)
        rates[delta] = (joins.mean(), fixed.mean(), scored.mean() / n, np.mean(joins != fixed))
    joins, fixed, scored, differs = rates[0.0]
    assert abs((1 - joins) - 0.05) < 0.015 and abs(joins - fixed) < 0.01 and scored < 0.8
    for delta in (-0.05, -0.10):
        joins, fixed, _, differs = rates[delta]
        assert joins <= fixed + 0.01 and differs < 0.02  # (it decides as the fixed rule does, nearly always)
    assert rates[0.10][0] > 0.99 and rates[0.10][2] < 0.65  # a better candidate joins, mostly before the end


@pytest.mark.slow
def test_error_rates_over_margins_and_looks():
    rng = np.random.default_rng(1)
    for margin, looks in ((1.0, 2), (1.645, 8), (2.0, 4)):
        design, reps = sequential_design(200, looks, margin), 8000
        parent = rng.binomial(1, 0.45, (reps, 200)).astype(float)
        copy = rng.binomial(1, 0.45, (reps, 200)).astype(float)
        joins, _, _ = decisions(design, copy, parent)
        alpha = 0.5 * math.erfc(margin / math.sqrt(2))  # Phi(-margin), the fixed rule's false rejection
        assert abs((1 - joins.mean()) - alpha) < 0.015, (margin, looks)


# -- in evolution --------------------------------------------------------------------------------------------


class KeyedVerifier:
    """Per-question rewards by instruction text and question key; records every call."""

    def __init__(self, rewards):
        self.rewards, self.calls = rewards, []

    def score(self, instructions, questions, rollouts=1):
        self.calls.append((list(instructions), [q.key for q in questions], rollouts))
        return [[self.rewards[text](q.key) for q in questions] for text in instructions]


def buffer_of(n: int) -> ReplayBuffer:
    buffer = ReplayBuffer(capacity=1000)
    buffer.extend(Experience("i0", f"q{i:03d}", f"Capital {i}?", ("Paris",), "wrong", 0.0, 1) for i in range(n))
    return buffer


def odd(key: str) -> bool:
    return int(key[1:]) % 2 == 1


# the parent earns 0.5 everywhere; Alpha 1.0 or 0.9 (clearly better), Beta 0.0 or 0.1 (clearly worse), Gamma the
# parent's own rewards: z = 0 at every look, below the acceptance boundary at looks 1 and 2 (2.03, 0.48) and above it
# at look 3 (-0.47)
REWARDS = {
    PARENT: lambda key: 0.5,
    ALPHA: lambda key: 0.9 if odd(key) else 1.0,
    BETA: lambda key: 0.1 if odd(key) else 0.0,
    GAMMA: lambda key: 0.5,
}


def sequential_config(**overrides):
    settings = dict(
        accept="beat_parent",
        accept_top_n=3,
        size=4,
        verify_size=80,
        verify_sequential=True,
        verify_looks=4,
        max_verify_rounds=1,
        leak_check="off",
    )
    return make_config(**{**settings, **overrides})


def test_a_clear_candidate_is_decided_at_the_first_look_and_saves_its_rollouts():
    config = sequential_config(verify_rollouts=2)
    verifier = KeyedVerifier(REWARDS)
    report = evolve(make_population(config), buffer_of(80), ScriptedLM(ROUND_1), verifier, config, 15, random.Random(0))
    rows = {c.text: c for c in report.candidates}
    assert [
        (rows[t].reason, rows[t].verified_questions, rows[t].decided_at_look, rows[t].looks)
        for t in (ALPHA, BETA, GAMMA)
    ] == [(ACCEPTED, 20, 1, 4), (BELOW_PARENT, 20, 1, 4), (ACCEPTED, 60, 3, 4)]
    # look 1: the parent and all three on 20 questions; looks 2 and 3: the parent and Gamma; no look 4
    assert [instructions for instructions, _, _ in verifier.calls] == [[PARENT, ALPHA, BETA, GAMMA]] + [
        [PARENT, GAMMA]
    ] * 2
    chunks = [keys for _, keys, _ in verifier.calls]
    assert [len(keys) for keys in chunks] == [20] * 3 and len({k for keys in chunks for k in keys}) == 60
    assert chunks[0] != sorted(chunks[0])  # D_B shuffled: a chunk is a random part of it, not the first keys
    assert {rollouts for _, _, rollouts in verifier.calls} == {2}
    assert report.verification_calls == 3
    assert report.verification_rollouts == (4 * 20 + 2 * 2 * 20) * 2  # 320, against 4 x 80 x 2 = 640 on all of D_B
    assert rows[ALPHA].difference == pytest.approx(0.45, abs=0.05) and rows[GAMMA].difference == 0.0
    saved = json.loads(json.dumps(report.as_dict()))["candidates"]  # what evolutions.json holds
    assert {(c["text"], c["verified_questions"], c["decided_at_look"], c["looks"]) for c in saved} == {
        (ALPHA, 20, 1, 4),
        (BETA, 20, 1, 4),
        (GAMMA, 60, 3, 4),
    }


def test_no_chunk_is_scored_once_every_candidate_is_decided():
    config = sequential_config()
    verifier = KeyedVerifier(REWARDS)
    lm = ScriptedLM(f"<ins_1>{ALPHA}</ins_1>\n<ins_2>{BETA}</ins_2>")
    report = evolve(make_population(config), buffer_of(80), lm, verifier, config, 15, random.Random(0))
    assert len(verifier.calls) == 1 and report.verification_rollouts == 3 * 20
    assert [c.reason for c in report.candidates] == [ACCEPTED, BELOW_PARENT]


def test_off_by_default_scores_all_of_d_b_in_one_call_and_records_no_looks():
    config = sequential_config(verify_sequential=False)
    verifier = KeyedVerifier(REWARDS)
    report = evolve(make_population(config), buffer_of(80), ScriptedLM(ROUND_1), verifier, config, 15, random.Random(0))
    assert len(verifier.calls) == 1 and report.verification_rollouts == 4 * 80
    assert all(c.decided_at_look is None for c in report.candidates)
    assert not {"verified_questions", "decided_at_look", "looks"} & set(report.as_dict()["candidates"][0])


def test_a_candidate_near_the_line_is_scored_to_the_end_and_judged_on_all_of_d_b():
    """Each chunk of 20: the candidate wins 9 questions and loses 11 (differences +1, -1): mean -0.1, standard
    deviation about 1, so z = -0.45, -0.63, -0.78 at looks 1-3, inside (-4.86, 2.03), (-3.35, 0.48), (-2.67, -0.47);
    at the end -0.1 >= -1.640 x 0.112: it joins, on the comparison over all of D_B."""
    parent = [0.0] * 9 + [1.0] * 11
    candidate = [1.0] * 9 + [0.0] * 11
    parent, candidate = parent * 4, candidate * 4
    asked = []

    def score(texts, questions):
        asked.append((list(texts), len(questions)))
        return [[{"P": parent, "C": candidate}[t][q] for q in questions] for t in texts]

    verdict = verify_in_chunks(score, "P", ["C"], list(range(80)), 1.645, 4)[0]
    assert (verdict.joins, verdict.look, verdict.looks) == (True, 4, 4)
    assert verdict.comparison == paired_comparison(candidate, parent)
    assert asked == [(["P", "C"], 20)] * 4


# issue 51, class 9: a candidate that joins early stopped on a high point. Alpha is the parent + 0.5 on the first chunk
# and the parent's equal after it (+0.125 over all of D_B); Beta is + 0.3 everywhere. Both join at look 1, Alpha with
# the larger difference so far; over all of D_B Beta is the better one.


class ChunkVerifier:
    """Rewards by how many chunks were scored before: Alpha 1.0 on the first, 0.5 after; Beta 0.8; the parent 0.5."""

    def __init__(self):
        self.calls = []

    def score(self, instructions, questions, rollouts=1):
        first = not self.calls
        self.calls.append(list(instructions))
        value = {PARENT: 0.5, "P": 0.5, ALPHA: 1.0 if first else 0.5, "A": 1.0 if first else 0.5, BETA: 0.8, "B": 0.8}
        return [[value[text]] * len(questions) for text in instructions]


def test_candidates_joining_early_are_scored_to_the_end_where_their_rank_decides_who_joins():
    verifier = ChunkVerifier()
    alpha, beta = verify_in_chunks(
        lambda texts, qs: verifier.score(texts, qs), "P", ["A", "B"], list(range(80)), 1.645, 4, room=1
    )
    assert verifier.calls == [["P", "A", "B"]] * 4  # both joined at look 1, and both were scored on to the end
    assert (alpha.joins, alpha.look, beta.joins, beta.look) == (True, 1, True, 1)
    assert alpha.comparison == paired_comparison([1.0] * 20 + [0.5] * 60, [0.5] * 80)
    assert (alpha.comparison.difference, beta.comparison.difference) == (0.125, pytest.approx(0.3))


def test_candidates_joining_early_are_not_scored_on_where_all_of_them_can_join():
    for room in (2, 3, None):
        verifier = ChunkVerifier()
        alpha, beta = verify_in_chunks(
            lambda texts, qs: verifier.score(texts, qs), "P", ["A", "B"], list(range(80)), 1.645, 4, room=room
        )
        assert verifier.calls == [["P", "A", "B"]] and alpha.comparison.questions == 20, room


def test_evolution_ranks_early_joiners_by_all_of_d_b_when_only_one_can_join():
    config = sequential_config(accept_top_n=1)
    verifier = ChunkVerifier()
    lm = ScriptedLM(f"<ins_1>{ALPHA}</ins_1>\n<ins_2>{BETA}</ins_2>")
    report = evolve(make_population(config), buffer_of(80), lm, verifier, config, 15, random.Random(0))
    rows = {c.text: c for c in report.candidates}
    assert (rows[BETA].reason, rows[ALPHA].reason) == (ACCEPTED, NOT_IN_TOP_N)  # Alpha's 0.5 at look 1 ranked it first
    assert [(rows[t].verified_questions, rows[t].decided_at_look) for t in (ALPHA, BETA)] == [(80, 1), (80, 1)]
    assert report.verification_rollouts == 3 * 80


# -- the recipe ----------------------------------------------------------------------------------------------


@pytest.fixture
def minimal(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"id": "0", "contents": "\\"T\\"\\ntext"}\n')
    path = tmp_path / "recipe.yaml"
    path.write_text(f"data:\n  train: nq_hotpotqa\nretriever:\n  corpus: {corpus}\nevaluation:\n  benchmarks: [nq]\n")
    return path


def error_of(path, overrides):
    with pytest.raises(RecipeError) as info:
        load_recipe(path, overrides)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_the_recipe_switches_it_on_and_checks_it(minimal):
    recipe = load_recipe(minimal)
    assert (recipe.population.verify_sequential, recipe.population.verify_looks) == (False, 4)
    on = load_recipe(minimal, ["population.verify_sequential=true", "population.verify_looks=5"]).population
    assert (on.verify_sequential, on.verify_looks) == (True, 5)


@pytest.mark.parametrize(
    "overrides, expected",
    [
        (["population.verify_sequential=maybe"], "population.verify_sequential: expected true or false"),
        (["population.verify_looks=two"], "population.verify_looks: expected an integer"),
        (["population.verify_looks=1"], "--set population.verify_looks: must be in [2, 10] (got 1)"),
        (["population.verify_looks=11"], "--set population.verify_looks: must be in [2, 10] (got 11)"),
        (
            ["population.verify_sequential=true", "population.accept=top_n"],
            "--set population.verify_sequential: stops verifying a candidate once it is clearly above or below accept: "
            "beat_parent's line, but population.accept is top_n",
        ),
        (
            ["population.verify_sequential=true", "population.verify=false"],
            "--set population.verify_sequential: stops verifying a candidate once it is clearly above or below accept: "
            "beat_parent's line, but population.verify is false",
        ),
        (
            ["population.verify_sequential=true", "population.verify_looks=8", "population.verify_size=100"],
            "--set population.verify_looks: is 8 with verify_size 100, so a look would hold fewer than the 20 "
            "questions it "
            "needs; lower verify_looks to 5 or raise verify_size to 160",
        ),
        (
            ["population.verify_sequential=true", "population.verify_size=30"],
            "population.verify_looks: is 4 with verify_size 30, so a look would hold fewer than the 20 questions it "
            "needs; raise verify_size to 80",
        ),
    ],
)
def test_invalid_settings_are_one_line_errors(minimal, overrides, expected):
    assert expected in error_of(minimal, overrides)
