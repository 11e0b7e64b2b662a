"""DAPO's dynamic sampling (`training.dynamic_sampling`, issue 41 item 5) round by round: groups of equal rewards
leave the batch, further questions fill it within a bounded number of rounds, and batches merge padded correctly."""

from __future__ import annotations

import math

import pytest
import torch
from helpers.dynamic_sampling import Script, kept_rows, one_process

from inspo_cli.config import Recipe, TrainingConfig
from inspo_cli.config.batch_plan import batch_plan
from inspo_cli.errors import InspoError
from inspo_cli.training.dynamic_sampling import DynamicSampling, Round, informative_groups, merge


def test_a_group_is_informative_when_its_scored_rewards_differ():
    rewards = torch.tensor([1.0, 1.0, 0.0, 1.0, math.nan, math.nan, math.nan, 0.0, 1.0, math.nan, 0.5, 0.25])
    assert informative_groups(rewards, 2) == [False, True, False, False, False, True]


def test_merge_pads_prompts_on_the_left_and_completions_on_the_right():
    a = {
        "prompt_ids": torch.tensor([[5, 6], [7, 8]]),
        "prompt_mask": torch.ones(2, 2, dtype=torch.long),
        "completion_ids": torch.tensor([[1], [2]]),
        "tool_mask": torch.tensor([[0], [1]]),
        "advantages": torch.tensor([0.5, -0.5]),
        "num_items_in_batch": torch.tensor(2),
    }
    b = {
        "prompt_ids": torch.tensor([[9]]),
        "prompt_mask": torch.ones(1, 1, dtype=torch.long),
        "completion_ids": torch.tensor([[3, 4, 5]]),
        "tool_mask": torch.tensor([[1, 0, 1]]),
        "advantages": torch.tensor([1.0]),
        "num_items_in_batch": torch.tensor(3),
    }
    merged = merge([(a, [1]), (b, [0])], pad_token_id=0)
    assert merged["prompt_ids"].tolist() == [[7, 8], [0, 9]]
    assert merged["prompt_mask"].tolist() == [[1, 1], [0, 1]]
    assert merged["completion_ids"].tolist() == [[2, 0, 0], [3, 4, 5]]
    assert merged["tool_mask"].tolist() == [[1, 1, 1], [1, 0, 1]]  # TRL pads its tool mask with 1
    assert merged["advantages"].tolist() == [-0.5, 1.0] and "num_items_in_batch" not in merged


def test_each_rollout_of_a_further_question_gets_its_own_row():
    """TRL writes each rollout's answer into its input row: rows shared by a group would all take the last one's."""
    seen = []

    def generate(rows):
        seen.append(rows)
        return Round({"advantages": torch.zeros(len(rows))}, [len(seen) > 1] * (len(rows) // 2))

    DynamicSampling(2, 1, 0).fill([{}, {}], generate, lambda k, r: [{"q": 1}] * k, one_process)
    extra = seen[1]
    assert len(extra) == 2 and extra[0] == extra[1] and extra[0] is not extra[1]


def test_dropped_groups_are_replaced_by_informative_ones_of_further_questions():
    script = Script([[True, False, False, True], [False, True, True, False]])
    output, metrics = DynamicSampling(2, 3, 0).fill([{}] * 8, script.generate, script.draw, one_process)
    # round 0 keeps groups 0 and 3; 2 missing at a kept share of 1/2: 4 further questions
    assert script.draws == [(4, 1)]
    assert kept_rows(output) == [(0, 0), (0, 1), (0, 6), (0, 7), (1, 2), (1, 3), (1, 4), (1, 5)]
    assert metrics == {
        "dynamic_sampling/equal_generated": 0.5,
        "dynamic_sampling/extra_rollouts": 1.0,
        "dynamic_sampling/rounds": 1.0,
        "dynamic_sampling/unfilled": 0.0,
    }


def test_the_round_size_is_what_is_missing_over_the_kept_share_and_rounds_are_bounded():
    script = Script([[True, False, False, False]])  # then nothing informative
    output, metrics = DynamicSampling(2, 2, 0).fill([{}] * 8, script.generate, script.draw, one_process)
    assert script.draws == [(4, 1), (4, 2)]  # 3 missing at 1/4 kept: capped at one batch; then the bound
    # group 0, then the step's own dropped groups fill the rest
    assert kept_rows(output) == [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4), (0, 5), (0, 6), (0, 7)]
    assert metrics == {
        "dynamic_sampling/equal_generated": 11 / 12,
        "dynamic_sampling/extra_rollouts": 2.0,
        "dynamic_sampling/rounds": 2.0,
        "dynamic_sampling/unfilled": 0.75,
    }


def test_a_batch_without_equal_groups_costs_nothing_more():
    script = Script([[True, True]])
    output, metrics = DynamicSampling(2, 3, 0).fill([{}] * 4, script.generate, script.draw, one_process)
    assert script.draws == [] and kept_rows(output) == [(0, 0), (0, 1), (0, 2), (0, 3)]
    assert metrics["dynamic_sampling/equal_generated"] == 0 and metrics["dynamic_sampling/rounds"] == 0


def test_every_process_runs_the_same_rounds_when_only_another_one_is_short():
    """This process keeps its whole batch, another one misses a group: both run the extra round (TRL's gathers are
    collective), and this one keeps its own rows."""

    def two_processes(values, how):
        other = {"max": [1], "sum": None}[how]
        if how == "max":
            return [max(values[0], other[0])]
        return [v * 2 for v in values]  # the other process's counts, alike for the test

    script = Script([[True, True]])
    output, metrics = DynamicSampling(2, 1, 0).fill([{}] * 4, script.generate, script.draw, two_processes)
    assert len(script.rounds) == 2 and kept_rows(output) == [(0, 0), (0, 1), (0, 2), (0, 3)]


def test_dynamic_sampling_needs_whole_groups_on_each_process():
    recipe = Recipe(
        training=TrainingConfig(
            batch_size=3, group_size=2, mini_batch_trajectories=6, micro_batch_size=3, dynamic_sampling=True
        )
    )
    with pytest.raises(InspoError, match="training.dynamic_sampling needs whole groups on each process"):
        batch_plan(recipe, processes=2)
    recipe.training.dynamic_sampling = False
    batch_plan(recipe, processes=2)
