"""Training rollouts kept for reading (`run.save_rollouts`, for `inspo view`): per step, the first N groups (a group:
one question's rollouts in one generation round) written whole to `rollouts/step-<step>.jsonl.gz`, one row per
trajectory:

    step, group, qid, question, golden_answers, instruction_id, type (the question's type, "" when unknown)
    prompt          the prompt as the policy saw it (instruction and question), decoded
    prompt_ids, completion_ids
    mask            the completion's loss mask as runs: [[1, n], [0, m], ...] (1: written by the policy and trained
                    on; 0: inserted by the toolkit, an observation, and masked out of the loss)
    segments        the completion's text, one entry per run of the mask: {"by": "policy" | "inserted", "text"}
    searches, retrieved   the search queries and the passage ids each returned
    tool_calls, tool_errors, invalid_actions, turns
    answer, stop_reason, truncated
    reward, score, em, format_bonus   the reward as GRPO's reward function gives it, the metric's score, exact match,
                    and the part of the reward that is the format bonus

A step's file is written once, atomically, when the step ends, so a run killed mid-step leaves the files of its
finished steps only; a resumed run first removes the files of the steps after its checkpoint (it repeats them), so
the directory reads as one uninterrupted run. The trainer calls `collect` from its rollout function and `write_step`
at the end of each step, on every process (the rows are gathered; the main process writes).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from inspo_cli.agent.segments import mask_runs, segments
from inspo_cli.jsonio import atomic_write_jsonl_gz
from inspo_cli.metrics import METRICS
from inspo_cli.runs import RunDir
from inspo_cli.training.rollout_traits import facts_from_trajectory, trainer_gold

STEP_FILE = re.compile(r"^step-(\d{6,})\.jsonl\.gz$")


def step_file_name(step: int) -> str:
    return f"step-{step:06d}.jsonl.gz"


@dataclass
class _Pending:
    """One process's rollouts of the current step, in generation order: (round, qid) per row, and what a row needs."""

    keys: list[tuple[int, str]] = field(default_factory=list)
    items: list[tuple] = field(default_factory=list)  # (trajectory, instruction id, question, gold, qid, type)
    rounds: int = 0


class RolloutLog:
    """The writer of rollouts/: `collect` a generation round's trajectories, `write_step(step)` when the step ends."""

    def __init__(self, run: RunDir, groups: int | None, tokenizer, reward, main_process: bool = True):
        self.run, self.groups, self.tokenizer, self.reward = run, groups, tokenizer, reward
        self.main_process = main_process
        self.pending = _Pending()
        self._resumed_checked = False

    @property
    def enabled(self) -> bool:
        return self.groups is None or self.groups > 0

    def collect(
        self,
        trajectories: Sequence,
        instruction_ids: Sequence[str],
        questions: Sequence[str],
        gold: Sequence[Sequence[str]],
        qids: Sequence[str],
        types: Sequence[str] | None = None,
    ) -> None:
        if not self.enabled:
            return
        round_index = self.pending.rounds
        self.pending.rounds += 1
        types = types if types is not None else [""] * len(qids)
        for item in zip(trajectories, instruction_ids, questions, gold, qids, types):
            self.pending.keys.append((round_index, item[4]))
            self.pending.items.append(item)

    def chosen(self, keys: Sequence[tuple[int, str]]) -> dict[int, int]:
        """Row index (in the gathered order) -> group number, for the rows of the first `groups` groups."""
        numbers: dict[tuple[int, str], int] = {}
        chosen = {}
        for index, key in enumerate(keys):
            number = numbers.setdefault((int(key[0]), str(key[1])), len(numbers))  # a list after a gather
            if self.groups is None or number < self.groups:
                chosen[index] = number
        return chosen

    def write_step(self, step: int, gather=lambda rows: rows, process_index: int = 0) -> None:
        """The step's chosen rows, from every process (`gather`: accelerate's gather_object, a collective that every
        process calls, in process order), written by the main process."""
        pending, self.pending = self.pending, _Pending()
        if not self.enabled:
            return
        per_process = gather([list(pending.keys)])  # one list per process, in process order
        offset = sum(len(keys) for keys in per_process[:process_index])
        chosen = self.chosen([key for keys in per_process for key in keys])
        local = [
            self._row(step, chosen[offset + i], *item) for i, item in enumerate(pending.items) if offset + i in chosen
        ]
        rows = gather(local)
        if not self.main_process:
            return
        self._drop_repeated_steps(step)
        if rows:
            rows.sort(key=lambda r: r["group"])  # stable: a group's rows stay in generation order
            atomic_write_jsonl_gz(self.run.rollouts_dir / step_file_name(step), rows)

    def _drop_repeated_steps(self, step: int) -> None:
        """On a run's first write: the files of this step and later ones, left by the attempt a resume repeats."""
        if self._resumed_checked:
            return
        self._resumed_checked = True
        folder = self.run.rollouts_dir
        if not folder.is_dir():
            return
        for path in folder.iterdir():
            match = STEP_FILE.match(path.name)
            if match and int(match.group(1)) >= step and path.is_file() and not path.is_symlink():
                path.unlink()

    def _row(
        self, step: int, group: int, trajectory, instruction_id: str, question: str, gold, qid: str, qtype: str = ""
    ) -> dict:
        facts = facts_from_trajectory(trajectory, instruction_id, step, question, gold, self.reward)
        runs = mask_runs(trajectory.completion_mask)
        return {
            "step": step,
            "group": group,
            "qid": str(qid),
            "question": question,
            "golden_answers": list(facts.golden_answers),
            "instruction_id": instruction_id,
            "type": str(qtype or ""),
            "prompt": self._decode(trajectory.prompt_ids),
            "prompt_ids": list(trajectory.prompt_ids),
            "completion_ids": list(trajectory.completion_ids),
            "mask": runs,
            "segments": segments(trajectory.completion_ids, trajectory.completion_mask, self._decode),
            "searches": list(trajectory.queries),
            "retrieved": [list(ids) for ids in trajectory.retrieved],
            "tool_calls": dict(trajectory.tool_calls),
            "tool_errors": dict(trajectory.tool_errors),
            "invalid_actions": trajectory.invalid_actions,
            "turns": trajectory.turns,
            "answer": trajectory.answer,
            "stop_reason": trajectory.stop_reason,
            "truncated": trajectory.truncated,
            "reward": facts.reward,
            "score": METRICS[self.reward.metric](trajectory.answer, facts.golden_answers),
            "em": facts.em,
            "format_bonus": facts.format_bonus,
        }

    def _decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=False)


def step_files(run: RunDir) -> list[tuple[int, Path]]:
    """(step, file) of the run's kept rollouts, in step order."""
    folder = run.rollouts_dir
    if not folder.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in folder.iterdir() if (m := STEP_FILE.match(p.name)) and p.is_file()]
    return sorted(found)


# -- the trainer's two calls (trainer.py `_rollout` and `_end_step`) -----------------------------------------------


def collect_rollouts(trainer, prompts: Sequence[str], trajectories: Sequence) -> None:
    """Keep this process's trajectories of a training generation round, until the step ends."""
    if not trainer.model.training or trainer.save_rollouts == 0:
        return
    gold = trainer_gold(trainer)
    _trainer_log(trainer).collect(
        trajectories,
        [pick.instruction_id for pick in trainer._picks],
        prompts,
        [gold.get(q, ()) for q in prompts],
        trainer._row_qids,
        getattr(trainer, "_row_categories", None),
    )


def write_step(trainer, step: int) -> None:
    """The step's kept rollouts, gathered from every process; the main process writes them."""
    if trainer.save_rollouts == 0:
        return
    from accelerate.utils import gather_object

    _trainer_log(trainer).write_step(step, gather_object, trainer.accelerator.process_index)


def _trainer_log(trainer) -> RolloutLog:
    log = getattr(trainer, "_rollout_log", None)
    if log is None:
        run = RunDir(Path(trainer.args.output_dir).parent)  # the checkpoints' folder is the run's checkpoints/
        log = RolloutLog(
            run,
            trainer.save_rollouts,
            trainer.processing_class,
            trainer.reward_config,
            trainer.accelerator.is_main_process,
        )
        trainer._rollout_log = log
    return log
