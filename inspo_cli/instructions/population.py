"""The INSPO instruction population: importance weights, softmax sampling, pruning (paper §3.1, Alg. 1).

Each candidate instruction I_j carries an importance weight w_j, the moving average of the mean group reward
it earned over the last `weight_window` steps in which it was used (eq. 6; 0 before its first use). Questions
draw their instruction from softmax(w / temperature) over the alive candidates (eq. 4), or by another
`population.selection` strategy (`selection/`); with `instructions_per_question` k > 1 a question's group of
rollouts is split into k blocks, each with a different instruction, and a block counts as a group. Every `prune_every`
steps the bottom half by weight is dropped (successive halving, never below `n_parent`); every `evolve_every`
steps before `evolve_until` the top `n_parent` become parents of a new generation (evolution itself, which
needs the optimizer LM, lives elsewhere and uses `parents`, `keep_only_parents`, `add`, `reset_weights`).

    population = InstructionPopulation(recipe.population, seed=recipe.run.seed)
    picks = population.sample(question_keys, step)       # one Pick per key, identical on every process
    population.observe(group_picks, group_mean_rewards)  # any number of times during the step
    population.end_step(step)                            # weights now include this step
    if population.should_prune(step):
        population.prune(step)

Draws are reproducible without communication between processes: the draw for (seed, step, key) comes from a
generator seeded with sha256 of those three, and weights are means taken with `math.fsum`, which does not
depend on the order rewards were observed in. The state is plain JSON (`state_dict`), and `records()` gives
every candidate ever seen, alive or pruned, for the run's instructions.jsonl. A candidate and its rows of rewards
and weights are in candidate.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from inspo_cli.errors import InspoError
from inspo_cli.instructions.candidate import (
    CANDIDATE_SHAPE,
    Candidate,
    CategoryReward,
    StepReward,
    WeightPoint,
    normalize_text,
)
from inspo_cli.instructions.parents import load_parent_rule
from inspo_cli.instructions.sampling import Pick, question_groups, stable_random
from inspo_cli.instructions.selection import load_selection
from inspo_cli.instructions.selection.base import Arm, draw_distinct
from inspo_cli.registry import PROPOSERS as REGISTERED_PROPOSERS
from inspo_cli.registry import is_import_path

if TYPE_CHECKING:
    from inspo_cli.config.sections import PopulationConfig

ORIGINS = ("initial", "rewrite")  # where a candidate can come from besides a registered proposer
STATE_VERSION = 1
STATE_SHAPE = {
    "version": int,
    "seed": int,
    "next_id": int,
    "last_step_ended": (int, None),
    "pending": {str: [float]},
    "pending_categories?": {str: {str: [float, float]}},
    "candidates": [CANDIDATE_SHAPE],
}  # `state_dict`


def check_initial_texts(config: PopulationConfig, texts: Sequence[str]) -> None:
    """Refuse an initial population that cannot be built: more instructions than `population.size`, an empty one,
    or one that repeats another (ignoring whitespace). `inspo recipe check` runs it too."""
    if len(texts) > config.size:
        raise InspoError(
            f"population: {len(texts)} initial instructions but population.size is {config.size}; "
            "raise population.size or give fewer instructions"
        )
    seen: set[str] = set()
    for i, text in enumerate(texts):
        if not text.strip():
            raise InspoError(f"population: initial instruction {i} is empty; remove it or write the instruction")
        normalized = normalize_text(text)
        if normalized in seen:
            raise InspoError(
                f"population: initial instruction {i} repeats an earlier one (ignoring whitespace); "
                "remove the duplicate"
            )
        seen.add(normalized)


class InstructionPopulation:
    """The candidates of one run, implementing `InstructionSource` (see sampling.py)."""

    def __init__(self, config: PopulationConfig, seed: int, initial_texts: Sequence[str] | None = None):
        """`initial_texts` defaults to `config.instructions`; each becomes an "initial" candidate born at step 0."""
        self.config = config
        self.seed = int(seed)
        self._candidates: dict[str, Candidate] = {}  # every candidate ever, in creation order
        self._next_id = 0
        self._pending: dict[str, list[float]] = {}  # group rewards observed during the current step
        self._pending_categories: dict[str, dict[str, list[float]]] = {}  # id -> category -> [reward sum, groups]
        self._last_step_ended: int | None = None
        texts = list(config.instructions if initial_texts is None else initial_texts)
        check_initial_texts(config, texts)
        for text in texts:
            self.add(text, parent=None, proposer="initial", step=0)

    # -- the candidates ----------------------------------------------------------------------------------

    def __getitem__(self, instruction_id: str) -> Candidate:
        return self._candidates[instruction_id]

    def __len__(self) -> int:
        """The number of alive candidates."""
        return len(self.alive())

    def alive(self) -> list[Candidate]:
        """The current population, in creation order."""
        return [c for c in self._candidates.values() if c.alive]

    def weights(self) -> dict[str, float]:
        return {c.id: c.weight for c in self.alive()}

    def add(
        self, text: str, parent: str | None, proposer: str, step: int, verification_score: float | None = None
    ) -> Candidate | None:
        """A new alive candidate, or None when the population is full or an alive one has the same text."""
        if not text.strip():
            raise ValueError("an instruction must not be empty")
        if proposer not in ORIGINS and proposer not in REGISTERED_PROPOSERS and not is_import_path(proposer):
            raise ValueError(
                f"proposer must be one of {(*ORIGINS, *REGISTERED_PROPOSERS)} or an import path, got {proposer!r}"
            )
        if parent is not None and parent not in self._candidates:
            raise ValueError(f"unknown parent instruction id {parent!r}")
        alive = self.alive()
        if len(alive) >= self.config.size:
            return None
        normalized = normalize_text(text)
        if any(normalize_text(c.text) == normalized for c in alive):
            return None
        candidate = Candidate(
            id=f"i{self._next_id}",
            text=text.strip(),
            parent=parent,
            proposer=proposer,
            step_born=step,
            verification_score=verification_score,
        )
        self._next_id += 1  # ids are never reused, so instructions.jsonl rows stay unambiguous
        self._candidates[candidate.id] = candidate
        return candidate

    # -- sampling (eq. 4) --------------------------------------------------------------------------------

    def selector(self):
        """`population.selection`'s selector over the alive candidates (in creation order), from their window's
        statistics and the number of groups seen in the last step: the same on every process and after a resume."""
        alive = self.alive()
        if not alive:
            raise RuntimeError("the population has no alive candidates")
        arms = [
            Arm(
                c.id,
                c.weight,
                sum(row.groups for row in c.window()),
                math.fsum(row.mean * row.groups for row in c.window()),
            )
            for c in alive
        ]
        batch = sum(
            row.groups for c in self._candidates.values() for row in c.step_rewards if row.step == self._last_step_ended
        )
        return load_selection(self.config.selection)(arms, self.config, batch), alive

    def probabilities(self) -> dict[str, float]:
        """The chance each alive candidate is drawn for a question group (eq. 4's softmax(w / temperature) with
        the paper's selection), in creation order."""
        selector, alive = self.selector()
        return {c.id: p for c, p in zip(alive, selector.probabilities())}

    def sample(self, keys: Sequence[str], step: int, group_size: int | None = None) -> list[Pick]:
        """One instruction per key; the same key at the same step gets the same picks in every process.

        With `instructions_per_question` k = 1 (the paper) every occurrence of a key gets one instruction. With k > 1
        each run of consecutive equal keys is a question's group (cut into groups of `group_size` rows where given,
        for a question drawn twice in a row), split into equal blocks of rows in a row, one different instruction per
        block, drawn without replacement (`selection.base.draw_distinct`; the first block's is the k = 1 pick): k
        blocks, or with fewer than k instructions alive the largest divisor of the group's length not above their
        number. A caller that hands over only part of a group (one process's rows) must sample the whole list."""
        selector, alive = self.selector()
        blocks = min(self.config.instructions_per_question, len(alive))
        drawn: dict[str, list[Pick]] = {}
        picks: list[Pick] = []
        for key, length in question_groups(keys, group_size):
            if key not in drawn:
                order = draw_distinct(selector, stable_random(self.seed, step, key), blocks)
                drawn[key] = [Pick(alive[i].id, alive[i].text) for i in order]
            per_block = length // max(d for d in range(1, blocks + 1) if length % d == 0)
            picks.extend(drawn[key][row // per_block] for row in range(length))
        return picks

    # -- weights (eq. 6) ---------------------------------------------------------------------------------

    def observe(
        self, picks: Sequence[Pick], group_rewards: Sequence[float], categories: Sequence[str] | None = None
    ) -> None:
        """Record each group's mean reward against its instruction (and, given, its question's category: the
        benchmark or question type that `parents: pareto` compares on); counted at `end_step`."""
        if len(picks) != len(group_rewards) or (categories is not None and len(categories) != len(picks)):
            raise ValueError(
                f"{len(picks)} picks but {len(group_rewards)} group rewards"
                + ("" if categories is None else f" and {len(categories)} categories")
            )
        for i, (pick, reward) in enumerate(zip(picks, group_rewards)):
            if pick.instruction_id not in self._candidates:
                raise ValueError(f"reward for unknown instruction id {pick.instruction_id!r}")
            self._pending.setdefault(pick.instruction_id, []).append(float(reward))
            if categories is not None:
                total = self._pending_categories.setdefault(pick.instruction_id, {}).setdefault(categories[i], [0.0, 0])
                total[0] += float(reward)
                total[1] += 1

    def end_step(self, step: int) -> None:
        """Fold the step's rewards into the weights: r̄_{t,j} = mean group reward, w_j = mean of the last n r̄."""
        if self._last_step_ended is not None and step <= self._last_step_ended:
            raise ValueError(f"end_step({step}) after end_step({self._last_step_ended}); steps must increase")
        for instruction_id, rewards in self._pending.items():
            candidate = self._candidates[instruction_id]
            step_mean = math.fsum(rewards) / len(rewards)
            candidate.step_rewards.append(StepReward([step, step_mean, len(rewards)]))
            candidate.recent_means.append(step_mean)
            del candidate.recent_means[: -self.config.weight_window]
            for category, (reward_sum, groups) in sorted(self._pending_categories.get(instruction_id, {}).items()):
                candidate.step_categories.append(CategoryReward([step, category, reward_sum, int(groups)]))
        for candidate in self.alive():
            candidate.weight_history.append(WeightPoint([step, candidate.weight]))
        self._pending, self._pending_categories = {}, {}
        self._last_step_ended = step

    def reset_weights(self) -> None:
        """Alg. 1 line 17: a new generation starts with every weight at 0, parents included."""
        for candidate in self.alive():
            candidate.recent_means = []

    # -- schedule, pruning, parents ----------------------------------------------------------------------

    def should_prune(self, step: int) -> bool:
        return self.config.prune and step > 0 and step % self.config.prune_every == 0

    def should_evolve(self, step: int) -> bool:
        return step > 0 and step % self.config.evolve_every == 0 and step < self.config.evolve_until

    def ranked(self) -> list[Candidate]:
        """Alive candidates, best weight first; ties keep the older candidate first so ranking is deterministic."""
        order = {instruction_id: i for i, instruction_id in enumerate(self._candidates)}
        return sorted(self.alive(), key=lambda c: (-c.weight, order[c.id]))

    def prune(self, step: int) -> list[str]:
        """Successive halving: keep the best max(n_parent, ceil(size / 2)); returns the pruned ids."""
        ranked = self.ranked()
        if len(ranked) <= self.config.n_parent:
            return []
        keep = max(self.config.n_parent, math.ceil(len(ranked) / 2))
        return self._retire(ranked[keep:], step)

    def parents(self) -> list[Candidate]:
        """The parents of the next generation, best first, by `population.parents` (`parents/`): the top n_parent
        alive candidates by weight (`top`, the paper's), or GEPA's Pareto front over question categories."""
        return load_parent_rule(self.config.parents)(self.ranked(), self.config)

    def keep_only_parents(self, step: int) -> list[str]:
        """Alg. 1 line 17, P_t <- P_parent: retire every alive non-parent before refilling; returns their ids."""
        parents = {c.id for c in self.parents()}
        return self._retire([c for c in self.ranked() if c.id not in parents], step)

    def best(self) -> Candidate:
        """I* = argmax_j w_j, the instruction the run hands to inference."""
        return self.ranked()[0]

    def best_pick(self) -> Pick:
        best = self.best()
        return Pick(best.id, best.text)

    def _retire(self, candidates: Sequence[Candidate], step: int) -> list[str]:
        for candidate in candidates:
            candidate.step_pruned = step
        return [c.id for c in candidates]

    # -- persistence -------------------------------------------------------------------------------------

    def records(self) -> list[dict[str, Any]]:
        """One row per candidate ever created (alive or pruned), in creation order, for instructions.jsonl."""
        return [{**asdict(c), "weight": c.weight, "alive": c.alive} for c in self._candidates.values()]

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume, as JSON-serialisable data."""
        return {
            "version": STATE_VERSION,
            "seed": self.seed,
            "next_id": self._next_id,
            "last_step_ended": self._last_step_ended,
            "pending": {k: list(v) for k, v in self._pending.items()},
            "pending_categories": {k: {c: list(t) for c, t in v.items()} for k, v in self._pending_categories.items()},
            "candidates": [asdict(c) for c in self._candidates.values()],
        }

    @classmethod
    def from_state_dict(cls, config: PopulationConfig, state: dict[str, Any]) -> InstructionPopulation:
        """The population `state_dict` described, with the recipe's (possibly changed) hyperparameters."""
        if state.get("version") != STATE_VERSION:
            raise InspoError(
                f"population state version {state.get('version')!r} is not {STATE_VERSION}; "
                "resume with the inspo version that wrote the run, or start a new run"
            )
        population = cls(config, state["seed"], initial_texts=[])
        population._next_id = state["next_id"]
        population._last_step_ended = state["last_step_ended"]
        population._pending = {k: list(v) for k, v in state["pending"].items()}
        population._pending_categories = {
            k: {c: list(t) for c, t in v.items()} for k, v in state.get("pending_categories", {}).items()
        }
        fields = set(Candidate.__dataclass_fields__)
        for row in state["candidates"]:
            candidate = Candidate(
                **{
                    **{k: v for k, v in row.items() if k in fields},
                    "step_rewards": [StepReward(r) for r in row.get("step_rewards", [])],
                    "recent_means": list(row.get("recent_means", [])),
                    "weight_history": [WeightPoint(h) for h in row.get("weight_history", [])],
                    "step_categories": [CategoryReward(r) for r in row.get("step_categories", [])],
                }
            )
            population._candidates[candidate.id] = candidate
        return population
