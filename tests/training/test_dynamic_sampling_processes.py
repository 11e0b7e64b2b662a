"""DAPO's dynamic sampling on several processes: accelerate's collective gather, simulated by threads at the
accelerator seam; every process runs the same rounds, keeps its own groups and draws its own further questions."""

from __future__ import annotations

import threading
from functools import partial
from types import SimpleNamespace

import pytest
import torch
from helpers.dynamic_sampling import Script, kept_rows

from inspo_cli.training.dynamic_sampling import DynamicSampling

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
                accelerator=SimpleNamespace(process_index=index), _round_rewards=rewards, group_size=2, _baseline_rows=2
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
