"""DAPO's dynamic sampling (`training.dynamic_sampling`, issue 41 item 5): groups of equal rewards leave the batch,
further questions fill it within a bounded number of rounds, and every round still feeds INSPO's weights."""

from __future__ import annotations

import math
import threading
import time
from functools import partial
from types import SimpleNamespace

import pytest
import torch
from helpers.scripted_trainer import RecordingSource, ScriptedBackend, generation_batch

from inspo_cli.config import Recipe, TrainingConfig
from inspo_cli.config.batch_plan import batch_plan
from inspo_cli.errors import InspoError
from inspo_cli.policy.generation import Generation
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


class Script:
    """A generation seam: round r's groups are informative as `plan[r]` says; each output row carries its
    (round, row) so the test can see which rows the batch kept."""

    def __init__(self, plan, group_size=2):
        self.plan, self.group_size, self.rounds, self.draws = plan, group_size, [], []

    def generate(self, rows):
        r = len(self.rounds)
        self.rounds.append(len(rows))
        flags = self.plan[r] if r < len(self.plan) else [False] * (len(rows) // self.group_size)
        assert len(flags) == len(rows) // self.group_size
        tag = torch.tensor([[r, i] for i in range(len(rows))])
        return Round({"completion_ids": tag, "advantages": torch.zeros(len(rows))}, list(flags))

    def draw(self, count, round_):
        self.draws.append((count, round_))
        return [{"prompt": f"extra{round_}.{i}"} for i in range(count)]


def test_each_rollout_of_a_further_question_gets_its_own_row():
    """TRL writes each rollout's answer into its input row: rows shared by a group would all take the last one's."""
    seen = []

    def generate(rows):
        seen.append(rows)
        return Round({"advantages": torch.zeros(len(rows))}, [len(seen) > 1] * (len(rows) // 2))

    DynamicSampling(2, 1, 0).fill([{}, {}], generate, lambda k, r: [{"q": 1}] * k, one_process)
    extra = seen[1]
    assert len(extra) == 2 and extra[0] == extra[1] and extra[0] is not extra[1]


def one_process(values, how):
    return list(values)


def kept_rows(output):
    return [tuple(row) for row in output["completion_ids"].tolist()]


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


# -- several processes: accelerate's collective gather, simulated by threads at the accelerator seam ----------------


class Processes:
    """`count` processes' accelerators whose `gather` is collective, as accelerate's: every process's tensor, in
    process order (a 0-d tensor as one row); a process that gathers when another does not breaks the barrier (an
    error, not a hang)."""

    def __init__(self, count: int):
        self.count, self.barrier, self.slots = count, threading.Barrier(count, timeout=20), [None] * count

    def accelerator(self, index: int) -> SimpleNamespace:
        def gather(tensor):
            self.slots[index] = tensor.reshape(1) if tensor.dim() == 0 else tensor
            self.barrier.wait()
            gathered = torch.cat(self.slots)
            self.barrier.wait()  # no process overwrites its slot before every one has read them all
            return gathered

        return SimpleNamespace(process_index=index, num_processes=self.count, device="cpu", gather=gather)

    def run(self, work) -> list:
        """`work(index, accelerator)` on every process at once; what each returned, in process order."""
        results, errors = [None] * self.count, []

        def one(index):
            try:
                results[index] = work(index, self.accelerator(index))
            except BaseException as error:  # noqa: BLE001 - re-raised in the test's thread
                errors.append(error)
                self.barrier.abort()

        threads = [threading.Thread(target=one, args=(i,)) for i in range(self.count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            raise errors[0]
        return results


TWO_PROCESSES = [
    # 1 group missing (on process 1) at 7/8 kept, then at 8/12 kept: 2 further questions each time, on both; process 0,
    # full after its first round, only takes part
    (
        [
            [[True, True, True, True], [True, False], [True, True]],
            [[True, True, True, False], [False, False], [False, True]],
        ],
        4,
        [(2, 1), (2, 2)],
        [(0, i) for i in range(8)],
        [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4), (0, 5), (2, 2), (2, 3)],
        {
            "dynamic_sampling/equal_generated": 5 / 16,
            "dynamic_sampling/extra_rollouts": 1.0,
            "dynamic_sampling/rounds": 2.0,
            "dynamic_sampling/unfilled": 0.0,
        },
    ),
    # the kept share counts every informative group generated, process 0's surplus too (8/12, not 5/12: 2 questions,
    # not 3); process 1 ends one group short and fills it with its own first dropped group
    (
        [
            [[True, True, True], [True, True, True], [True, True]],
            [[True, False, False], [True, False, False], [False, False]],
        ],
        3,
        [(3, 1), (2, 2)],
        [(0, i) for i in range(6)],
        [(0, 0), (0, 1), (1, 0), (1, 1), (0, 2), (0, 3)],
        {
            "dynamic_sampling/equal_generated": 6 / 16,
            "dynamic_sampling/extra_rollouts": 10 / 6,
            "dynamic_sampling/rounds": 2.0,
            "dynamic_sampling/unfilled": 1 / 6,
        },
    ),
]


@pytest.mark.parametrize("plans, groups, draws, rows0, rows1, metrics", TWO_PROCESSES)
def test_two_processes_run_the_same_rounds_keep_their_own_groups_and_report_the_same_counts(
    plans, groups, draws, rows0, rows1, metrics
):
    """Every round is as large on each process (TRL's gathers line up) and sized from every process's kept share;
    each process keeps its own rows; the counts are over both processes."""
    from inspo_cli.training.trainer import SearchGRPOTrainer

    def work(index, accelerator):
        script = Script(plans[index])
        reduce = partial(SearchGRPOTrainer._reduce, SimpleNamespace(accelerator=accelerator))
        output, metrics = DynamicSampling(2, 2, 0).fill([{}] * 2 * groups, script.generate, script.draw, reduce)
        return script.draws, kept_rows(output), metrics

    (draws0, kept0, metrics0), (draws1, kept1, metrics1) = Processes(2).run(work)
    assert draws0 == draws1 == draws and (kept0, kept1) == (rows0, rows1)
    assert metrics0 == pytest.approx(metrics) and metrics1 == pytest.approx(metrics)


def test_each_process_reads_its_own_rows_of_the_gathered_rewards():
    from inspo_cli.training.trainer import SearchGRPOTrainer

    rewards = torch.tensor([1.0, 1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 1.0])  # TRL's rewards of every process, in process order
    informative = [
        SearchGRPOTrainer._local_informative(
            SimpleNamespace(
                accelerator=SimpleNamespace(process_index=index), _round_rewards=rewards, num_generations=2
            ),
            4,
        )
        for index in (0, 1)
    ]
    assert informative == [[False, True], [True, False]]


def test_the_merged_batch_counts_the_loss_tokens_of_every_process():
    from inspo_cli.training.trainer import SearchGRPOTrainer

    def work(index, accelerator):
        width = 3 + index
        output = {"completion_mask": torch.ones(2, width), "tool_mask": torch.tensor([[1] * width, [0] * width])}
        SearchGRPOTrainer._count_loss_tokens(SimpleNamespace(accelerator=accelerator), output)
        return output["num_items_in_batch"].item()

    assert Processes(2).run(work) == [7, 7]  # 3 tokens in the loss on process 0, 4 on process 1


def test_each_process_draws_further_questions_of_its_own():
    from inspo_cli.training.trainer import SearchGRPOTrainer

    def drawn(index):
        questions = [{"qid": f"q{i}"} for i in range(1000)]
        trainer = SimpleNamespace(
            args=SimpleNamespace(seed=0),
            step=3,
            train_dataset=questions,
            accelerator=SimpleNamespace(process_index=index),
        )
        return [q["qid"] for q in SearchGRPOTrainer._further_questions(trainer, 8, 1)]

    assert drawn(0) == drawn(0) and drawn(0) != drawn(1)
