"""DAPO's dynamic sampling in the trainer (issue 41 item 5): the equal group dropped and the batch filled, the
share of equal groups logged without the switch, the same further questions per step and round, and the metrics of
several rounds pooled the way TRL logs them, while every round still feeds INSPO's weights."""

from __future__ import annotations

import math
import time

import pytest
import torch
from helpers.dynamic_sampling import Script, kept_rows, one_process
from helpers.scripted_trainer import RecordingSource, ScriptedBackend, generation_batch

from inspo_cli.policy.generation import Generation
from inspo_cli.training.dynamic_sampling import DynamicSampling


class FirstAlwaysRight(ScriptedBackend):
    """Search, then answer: the first question (Hokin) right on every row, so its group has equal rewards; the
    second right on even rows only."""

    def generate(self, contexts, max_new_tokens, stop=()):
        out = []
        for row, context in enumerate(contexts):
            text = self.tokenizer.decode(context)
            if "<information>" not in text:
                reply = "<search> founder of Hokin Works </search>"
            elif "Hokin" in text.split("Question:")[-1].split("\n")[0]:
                reply = "<answer> Ada Vell </answer>"
            else:
                reply = f"<answer> {'1714' if row % 2 == 0 else 'castle'} </answer>"
            out.append(Generation(self.tokenizer(reply, add_special_tokens=False)["input_ids"], "stop"))
        return out


def test_the_trainer_drops_the_equal_group_fills_the_batch_and_reports_every_round(make_trainer):
    from trl.trainer.utils import nanstd

    source = RecordingSource("Answer the given question.")
    trainer = make_trainer(source, dynamic_sampling=True, dynamic_sampling_max_rounds=5)
    assert trainer.dynamic_sampling_rounds == 5
    trainer.engine.backend = FirstAlwaysRight(trainer.processing_class)
    started = time.perf_counter()
    output = trainer._generate_and_score_completions(generation_batch())
    elapsed = time.perf_counter() - started
    phases = trainer.phase_seconds
    # every round's rollout is generation (or retrieval) once, the rest scoring: the phases add up to the call
    assert phases["scoring"] > 0 and sum(phases.values()) == pytest.approx(elapsed, rel=0.05)
    assert len(output["advantages"]) == 4 and (output["advantages"] != 0).all()  # two informative groups
    loss_mask = output["completion_mask"] * output["tool_mask"]
    assert output["num_items_in_batch"] == loss_mask.sum()
    rounds = len(source.observed)
    assert rounds >= 2  # the Hokin group was dropped, and a further round found a second 1714 group
    assert source.observed[0][1] == [1.0, 0.5]  # the dropped group's reward still reached the instruction weights
    metrics = trainer._metrics["train"]
    assert metrics["dynamic_sampling/rounds"] == [rounds - 1] and metrics["dynamic_sampling/unfilled"] == [0.0]
    assert metrics["groups/equal_rewards"] == [0.0]
    assert len(metrics["reward"]) == 1  # the rounds' TRL metrics, one value weighted by their rollouts
    # exact match, right or wrong: a group of two whose mean is 0.5 holds a 1 and a 0
    rewards = [float(i < 2 * mean) for _, means, _ in source.observed for mean in means for i in range(2)]
    assert metrics["reward"] == [pytest.approx(sum(rewards) / len(rewards))] and 0.5 < metrics["reward"][0] < 1.0
    assert metrics["reward_std"] == [pytest.approx(nanstd(torch.tensor(rewards)).item())]


def test_without_the_switch_the_share_of_equal_groups_is_logged(make_trainer):
    trainer = make_trainer()
    trainer.engine.backend = FirstAlwaysRight(trainer.processing_class)
    output = trainer._generate_and_score_completions(generation_batch())
    assert (output["advantages"][:2] == 0).all()
    assert trainer._metrics["train"]["groups/equal_rewards"] == [0.5]


def test_further_questions_are_the_same_for_the_same_step_and_round(make_trainer):
    trainer = make_trainer()
    first = trainer._further_questions(5, 1)
    assert trainer._further_questions(5, 1) == first and all(q["qid"] for q in first)
    assert len(trainer._further_questions(3, 2)) == 3


def test_metrics_of_several_rounds_become_one_over_everything_generated():
    from inspo_cli.training.dynamic_sampling import pooled as _pooled

    sizes = [4, 12]
    rounds = {
        "reward": [1.0, 0.0],
        "reward_std": [0.0, 0.0],
        "completions/max_length": [30, 50],
        "completions/min_length": [7, 5],
        "frac_reward_zero_std": [0.5, 1.0],
    }
    assert _pooled("reward", rounds["reward"], sizes, rounds) == 0.25
    # four rollouts at 1 and twelve at 0: TRL's (sample) standard deviation of the sixteen, sqrt(3 / 15)
    assert _pooled("reward_std", rounds["reward_std"], sizes, rounds) == pytest.approx(math.sqrt(0.2))
    assert _pooled("completions/max_length", [30, 50], sizes, rounds) == 50
    assert _pooled("completions/min_length", [7, 5], sizes, rounds) == 5
    assert _pooled("frac_reward_zero_std", [0.5, 1.0], sizes, rounds) == 0.875
    assert _pooled("sampling/importance_sampling_ratio/max", [1.2, math.nan], sizes, rounds) == 1.2
    # a round without a value (NaN) is skipped wherever it comes
    assert _pooled("sampling/importance_sampling_ratio/max", [math.nan, 1.2, 1.1], [2] * 3, rounds) == 1.2
    assert _pooled("sampling/importance_sampling_ratio/min", [math.nan, 0.9, 0.7], [2] * 3, rounds) == 0.7


def test_pooled_metrics_are_what_trl_logs_for_all_the_rounds_rollouts_at_once():
    """TRL's own statistics (nanmean, its Bessel-corrected nanstd, min, max) of each round, pooled, equal the same
    statistics of the union: the extremes are not the last round's, the spread is not a mean of the rounds'."""
    from trl.trainer.utils import nanstd

    from inspo_cli.training.dynamic_sampling import pooled as _pooled

    rewards = [[1.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0, 0.5, 0.5, 1.0, 0.0], [0.25, 1.0]]
    lengths = [[30, 12, 44, 7], [5, 61, 9, 9, 20, 18, 3, 40], [50, 8]]

    def logged(rewards, lengths):  # as grpo_trainer.py logs one generation round
        r, n = torch.tensor(rewards, dtype=torch.float64), torch.tensor(lengths, dtype=torch.float64)
        return {
            "reward": torch.nanmean(r).item(),
            "reward_std": nanstd(r).item(),
            "rewards/em/mean": torch.nanmean(r).item(),
            "rewards/em/std": nanstd(r).item(),
            "completions/mean_length": n.mean().item(),
            "completions/max_length": n.max().item(),
            "completions/min_length": n.min().item(),
        }

    per_round = [logged(r, n) for r, n in zip(rewards, lengths)]
    rounds = {key: [round_[key] for round_ in per_round] for key in per_round[0]}
    union = logged([x for r in rewards for x in r], [x for n in lengths for x in n])
    sizes = [len(r) for r in rewards]
    assert {key: _pooled(key, values, sizes, rounds) for key, values in rounds.items()} == pytest.approx(union)


def test_a_round_that_finds_more_than_is_missing_gives_only_what_is_missing():
    script = Script([[True, False, False, False], [True, True, True, True]])
    output, metrics = DynamicSampling(2, 3, 0).fill([{}] * 8, script.generate, script.draw, one_process)
    # 3 missing at 1/4 kept: one batch more, whose first 3 groups complete the batch; none of the dropped ones
    assert script.draws == [(4, 1)]
    assert kept_rows(output) == [(0, 0), (0, 1), (1, 0), (1, 1), (1, 2), (1, 3), (1, 4), (1, 5)]
    assert metrics["dynamic_sampling/unfilled"] == 0.0 and metrics["dynamic_sampling/equal_generated"] == 3 / 8


def test_a_step_whose_groups_all_had_equal_rewards_still_samples_a_bounded_amount():
    script = Script([[False, False]])  # and nothing informative after
    output, metrics = DynamicSampling(2, 2, 0).fill([{}] * 4, script.generate, script.draw, one_process)
    assert script.draws == [(2, 1), (2, 2)]  # the kept share is never taken below one group in a batch
    assert kept_rows(output) == [(0, 0), (0, 1), (0, 2), (0, 3)]
    assert metrics == {
        "dynamic_sampling/equal_generated": 1.0,
        "dynamic_sampling/extra_rollouts": 2.0,
        "dynamic_sampling/rounds": 2.0,
        "dynamic_sampling/unfilled": 1.0,
    }
