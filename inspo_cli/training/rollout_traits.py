"""What a run's rollouts looked like, step by step and instruction by instruction, for `inspo report --audit`.

A verifier rewards what it can measure; a policy and an evolving instruction can learn to please it without
answering better (longer answers under a lenient metric, several guesses in one `<answer>`, the question's own
words as the answer, no searches, the format bonus alone). So every training step writes, per instruction, the sums
the audit compares before and after an evolution (`rollout_traits.jsonl`, one row per step and instruction id):

    rollouts        trajectories sampled under the instruction this step
    answered        of those, with an answer
    answer_words    words in the answers, summed (whitespace-separated words of the answer text; no tokenizer)
    several_answers answers that hold several answers (`holds_several_answers`)
    copied          answers copied from the question (`copied_from_question`)
    searches        search calls, summed; no_search: trajectories with none
    reward, em      summed; format_bonus: the part of the reward that is the format bonus (reward.format_weight)

The trainer calls `collect_rollouts` from its rollout function and `write_step` at the end of each step; `inspo
evolve` calls `StepTraits` itself. Runs made before this file existed are audited from their checkpoints' replay
buffers through `facts_from_experience`, with the same definitions (the answer read back from the response text).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from inspo_cli.agent.protocol import CORRECTIVE_OBSERVATION
from inspo_cli.config import RewardConfig
from inspo_cli.jsonio import COUNT, POSITIVE, Range, atomic_write_jsonl, iter_rows
from inspo_cli.metrics import METRICS, exact_match, normalize_answer
from inspo_cli.runs import DAMAGED, RunDir
from inspo_cli.training.reward import followed_protocol, outcome_rewards

ROW_SHAPE = {
    "step": COUNT,
    "instruction_id": str,
    "rollouts": POSITIVE,
    "answered": COUNT,
    "answer_words": COUNT,
    "several_answers": COUNT,
    "copied": COUNT,
    "searches": COUNT,
    "no_search": COUNT,
    "reward": Range(0.0),
    "em": Range(0.0),
    "format_bonus": Range(0.0),
}  # a row of rollout_traits.jsonl, as `read_rows` checks it
SUMS = tuple(k for k in ROW_SHAPE if k not in ("step", "instruction_id"))

# Where one answer ends and another begins: ';', '|', a line break, and the word "or" or "and/or" between spaces.
_SEPARATORS = re.compile(r"[;|\n]|\s+(?:and/or|or)\s+", re.IGNORECASE)
_OBSERVATION = re.compile(r"<information>.*?(?:</information>|\Z)", re.DOTALL)
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_SEARCH = re.compile(r"<search>(.*?)</search>", re.DOTALL)


@dataclass(frozen=True)
class RolloutFacts:
    """One trajectory, as the audit needs it."""

    instruction_id: str
    step: int
    question: str
    golden_answers: tuple[str, ...]
    answer: str | None
    searches: int
    reward: float
    em: float
    format_bonus: float  # the part of `reward` that is the format bonus: the reward of a wrong, well-formed answer


def holds_several_answers(answer: str, golden_answers: Sequence[str]) -> bool:
    """The answer splits into two or more non-empty parts at ';', '|', a line break or a spaced "or"/"and/or", or
    holds two or more commas (a list of three or more; one comma is common inside a single answer: "Paris, Texas",
    "Washington, D.C."). An answer that is one of the gold answers (exact match) is one answer, whatever it holds."""
    if exact_match(answer, golden_answers):
        return False
    parts = [p for p in _SEPARATORS.split(answer) if normalize_answer(p)]
    return len(parts) >= 2 or answer.count(",") >= 2


def copied_from_question(answer: str, question: str, golden_answers: Sequence[str]) -> bool:
    """The answer's normalized words (`metrics.normalize_answer`: case, punctuation and articles dropped) are a run
    of the question's normalized words, and the answer is not a gold answer (a question may name its answer)."""
    words = normalize_answer(answer).split()
    if not words or exact_match(answer, golden_answers):
        return False
    asked = normalize_answer(question).split()
    return any(asked[i : i + len(words)] == words for i in range(len(asked) - len(words) + 1))


def facts_from_trajectory(
    trajectory, instruction_id: str, step: int, question: str, golden_answers: Sequence[str], reward: RewardConfig
) -> RolloutFacts:
    """A trajectory of the rollout engine, with its reward computed as GRPO's reward function computes it."""
    gold = tuple(golden_answers)
    formed = followed_protocol(trajectory)
    (value,) = outcome_rewards([trajectory.answer], [gold], [formed], reward.metric, reward.format_weight)
    score = METRICS[reward.metric](trajectory.answer, gold)
    return RolloutFacts(
        instruction_id,
        step,
        question,
        gold,
        trajectory.answer,
        trajectory.num_searches,
        value,
        exact_match(trajectory.answer, gold),
        value if score <= 0 else 0.0,
    )


def answer_and_searches(response: str) -> tuple[str | None, int]:
    """The answer and the number of searches read back from a Search-R1-protocol response (the replay buffer keeps
    the text, observations included): inserted passages and corrective messages are left out first, so that a tag
    inside them counts for nothing; the last `<answer>` is the answer, as the trajectory's last turn gave it."""
    written = _OBSERVATION.sub(" ", response).replace(CORRECTIVE_OBSERVATION, " ")
    answers = _ANSWER.findall(written)
    return (answers[-1].strip() if answers else None), len(_SEARCH.findall(written))


def facts_from_experience(experience, reward: RewardConfig) -> RolloutFacts:
    """A replay-buffer `Experience` (runs before rollout_traits.jsonl): the reward as recorded, the answer and the
    searches read from its response text, the bonus where the recorded reward is not the metric's score."""
    answer, searches = answer_and_searches(experience.response)
    gold = tuple(experience.golden_answers)
    score = METRICS[reward.metric](answer, gold) if answer is not None else 0.0
    value = max(float(experience.reward), 0.0)
    return RolloutFacts(
        experience.instruction_id,
        experience.step,
        experience.question,
        gold,
        answer,
        searches,
        value,
        exact_match(answer, gold),
        value if score <= 0 else 0.0,
    )


def trait_rows(facts: Iterable[RolloutFacts]) -> list[dict]:
    """One row of sums per (step, instruction id), in step order, then by instruction id."""
    rows: dict[tuple[int, str], dict] = {}
    for f in facts:
        row = rows.setdefault(
            (f.step, f.instruction_id), {"step": f.step, "instruction_id": f.instruction_id, **dict.fromkeys(SUMS, 0)}
        )
        row["rollouts"] += 1
        row["searches"] += f.searches
        row["no_search"] += f.searches == 0
        row["reward"] += max(f.reward, 0.0)
        row["em"] += f.em
        row["format_bonus"] += f.format_bonus
        if f.answer is not None:
            row["answered"] += 1
            row["answer_words"] += len(f.answer.split())
            row["several_answers"] += holds_several_answers(f.answer, f.golden_answers)
            row["copied"] += copied_from_question(f.answer, f.question, f.golden_answers)
    for row in rows.values():
        for key in ("reward", "em", "format_bonus"):
            row[key] = round(row[key], 6)
    return [rows[k] for k in sorted(rows)]


# (part, whole): a row's sums that count some of another's rollouts; a part above its whole makes a share above 1
PARTS = (
    ("answered", "rollouts"),
    ("no_search", "rollouts"),
    ("em", "rollouts"),
    ("several_answers", "answered"),
    ("copied", "answered"),
    ("format_bonus", "reward"),
)


def read_rows(run: RunDir) -> list[dict]:
    """rollout_traits.jsonl's rows ([] when the run has none); a last line cut short by a kill is left out. A row
    whose sums contradict each other, or a second row of one step and instruction, is an error naming the line."""
    file = run.rollout_traits_file
    if not file.exists():
        return []
    seen: set[tuple[int, str]] = set()

    def consistent(row: dict) -> str | None:
        for part, whole in PARTS:
            if row[part] > row[whole] + 1e-6:  # reward sums are rounded to 6 places
                return f'"{part}" ({row[part]}) is more than "{whole}" ({row[whole]}), which counts it'
        key = (row["step"], row["instruction_id"])
        if key in seen:
            return f"a second row of step {key[0]} and instruction {key[1]} (the file holds each once)"
        seen.add(key)
        return None

    return list(iter_rows(file, ROW_SHAPE, DAMAGED, on_cut_tail=lambda _: None, check=consistent))


class StepTraits:
    """The writer of rollout_traits.jsonl: `add` a step's trajectories, `write(step)` when the step ends. Its first
    write drops the rows of that step and later ones (a resumed run repeats the steps after its checkpoint), so the
    file reads as one uninterrupted run, as metrics.jsonl does."""

    def __init__(self, run: RunDir, reward: RewardConfig, main_process: bool = True):
        self.run, self.reward, self.main_process = run, reward, main_process
        self.pending: list[RolloutFacts] = []
        self.gold: dict[str, tuple[str, ...]] = {}  # the trainer's: question text -> gold answers
        self._resumed_checked = False

    def add(self, facts: Iterable[RolloutFacts]) -> None:
        self.pending.extend(facts)

    def write(self, step: int, facts: Sequence[RolloutFacts] | None = None) -> None:
        """The rows of `facts` (default: what was added since the last write) as rows of `step`."""
        facts, self.pending = (self.pending if facts is None else list(facts)), []
        if not self.main_process:
            return
        file = self.run.rollout_traits_file
        if not self._resumed_checked:
            self._resumed_checked = True
            if file.exists():
                atomic_write_jsonl(file, [r for r in read_rows(self.run) if r["step"] < step])
        rows = trait_rows(replace(f, step=step) for f in facts)
        if not rows:
            return
        with open(file, "a", encoding="utf-8") as out:
            out.write("".join(json.dumps(r) + "\n" for r in rows))
            out.flush()
            os.fsync(out.fileno())


# -- the trainer's two calls (trainer.py `_rollout` and `_end_step`) -----------------------------------------------


def collect_rollouts(trainer, prompts: Sequence[str], trajectories: Sequence) -> None:
    """Keep this process's trajectories of a training generation, with their instructions (`trainer._picks`) and
    gold answers (looked up by question text in the training set), until the step ends."""
    if not trainer.model.training:
        return
    log = _trainer_log(trainer)
    gold = log.gold
    step = trainer.step + 1
    log.add(
        facts_from_trajectory(t, pick.instruction_id, step, q, gold.get(q, ()), log.reward)
        for t, pick, q in zip(trajectories, trainer._picks, prompts)
    )


def write_step(trainer, step: int) -> None:
    """Every process's trajectories of the step, gathered; the main process appends their rows."""
    from accelerate.utils import gather_object

    log = _trainer_log(trainer)
    log.write(step, gather_object(list(log.pending)))


def trainer_gold(trainer) -> dict[str, tuple[str, ...]]:
    """The training set's gold answers by question text."""
    return _trainer_log(trainer).gold


def _trainer_log(trainer) -> StepTraits:
    log = getattr(trainer, "_rollout_traits", None)
    if log is None:
        run = RunDir(Path(trainer.args.output_dir).parent)  # the checkpoints' folder is the run's checkpoints/
        log = StepTraits(run, trainer.reward_config, trainer.accelerator.is_main_process)
        dataset = trainer.train_dataset
        for question, answers in zip(dataset["prompt"], dataset["golden_answers"]):
            log.gold.setdefault(question, tuple(answers))
        trainer._rollout_traits = log
    return log
