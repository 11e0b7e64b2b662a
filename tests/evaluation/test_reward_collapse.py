"""App. B reports "the final checkpoint before any reward collapse": what counts as a collapse decides which
checkpoint a table holds. The recipe's default: the mean reward over 10 steps below half of its best."""

from __future__ import annotations

import math

from inspo_cli.collapse import detect_collapse
from inspo_cli.config import EvaluationConfig


def rows(rewards):
    return [{"step": i, "reward": r} for i, r in enumerate(rewards, start=1)]


def test_the_default_window_is_ten_steps_so_a_four_step_dip_is_not_a_collapse():
    e = EvaluationConfig()
    dip = [0.6] * 20 + [0.0] * 4 + [0.6] * 10  # the 10-step mean falls to 0.36, above half of 0.6
    assert detect_collapse(rows(dip), e.collapse_window, e.collapse_drop) is None
    assert detect_collapse(rows(dip), 5, e.collapse_drop) is not None  # a shorter window would call it one
    fall = [0.6] * 20 + [0.0] * 10
    found = detect_collapse(rows(fall), e.collapse_window, e.collapse_drop)
    # the mean first reaches its peak over steps 1-10; over steps 17-26 it is (4 x 0.6) / 10 = 0.24 < 0.3
    assert (found.peak_step, found.detected_at) == (10, 26)


def test_exactly_half_of_the_peak_is_not_below_it():
    assert detect_collapse(rows([0.5, 0.5, 0.25, 0.25]), 2, 0.5) is None
    assert detect_collapse(rows([0.5, 0.5, 0.25, 0.24]), 2, 0.5) is not None


def test_a_step_without_a_finite_reward_is_left_out_not_a_hole_that_hides_a_collapse():
    """A step whose groups were all unscorable logs no finite reward: the windows run over the steps that have one."""
    rewards = [0.6, 0.6, 0.6, math.nan, 0.1, 0.1]
    found = detect_collapse(rows(rewards), 3, 0.5)
    assert found is not None and found.detected_at == 6 and found.peak_step == 3
