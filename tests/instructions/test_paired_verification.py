"""The paired comparison of a candidate with its parent (issue 27): within noise it joins, clearly worse it does
not, and the difference is the mean per-question difference with its standard error."""

from __future__ import annotations

import json
import random

import pytest
from helpers.evolution import PARENT, ScriptedLM, make_config, make_population
from helpers.evolution_rounds import ROUND_1

from inspo_cli.instructions.evolution import (
    ACCEPTED,
    BELOW_PARENT,
    evolve,
)
from inspo_cli.instructions.replay import Experience, ReplayBuffer

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


def test_at_margin_0_a_candidate_that_ties_its_parent_joins_whatever_the_float_sums_say():
    """The same rewards on other questions: the means tie, though the differences sum to -1.4e-17 in floats."""
    from inspo_cli.instructions.verification import paired_comparison

    comparison = paired_comparison([0.6, 0.2, 0.8, 0.4], [0.2, 0.8, 0.4, 0.6])
    assert comparison.candidate_score == comparison.parent_score and comparison.difference < 0
    assert comparison.joins(0.0)
    assert not paired_comparison([0.5, 0.2, 0.8, 0.4], [0.2, 0.8, 0.4, 0.6]).joins(0.0)  # a real loss does not
