"""INSPO's step, shared by `inspo train` and `inspo evolve`: what happens at the end of every step with a population.

    source, make_coevolution = instruction_source(recipe, saved_state_file_or_None, accelerator)
    coevo = make_coevolution(PolicyVerifier(engine, recipe.reward, generation_context, accelerator))
    coevo.remember(experiences)          # every rollout of the step, from all processes (replay buffer, line 15)
    coevo.end_step(step)                 # weights (eq. 6), pruning every K_p, evolution every K_e until T_e

`CoEvolution` gets its verifier when it is built: whoever owns the policy (the trainer, or the frozen-policy
loop) builds the verifier and calls the factory `instruction_source` returned.

Every process holds the same population and replay buffer, because each sees the same gathered rewards and
rollouts and draws its randomness from (seed, step). Two things must not run once per process: the optimizer
LM (`MainProcessLM` calls it on the main process and broadcasts the answer, or the error) and verification
(`PolicyVerifier` rolls each candidate out on this process's share of D_B and sums the rewards over all
processes), so all ranks accept the same candidates.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from inspo_cli.config import PopulationConfig, Recipe, RewardConfig
from inspo_cli.errors import InspoError
from inspo_cli.evaluation.runner import evaluation_questions
from inspo_cli.instructions.evolution import EvolutionReport, Verifier, evolve
from inspo_cli.instructions.initial import initial_instructions
from inspo_cli.instructions.leakage import LeakGuard
from inspo_cli.instructions.population import InstructionPopulation
from inspo_cli.instructions.proposing import initial_rewrites
from inspo_cli.instructions.providers.language_model import Answer, LanguageModel, ask
from inspo_cli.instructions.replay import Experience, ReplayBuffer, ReplayQuestion
from inspo_cli.instructions.sampling import InstructionSource, StaticInstruction, stable_random
from inspo_cli.main_process import broadcast_from_main
from inspo_cli.metrics import exact_match, normalize_answer
from inspo_cli.progress import err_console
from inspo_cli.runs import RunDir
from inspo_cli.training.reward import rollout_and_score


class NoOptimizer:
    """The optimizer LM where none may be called: on every process but the main one (`MainProcessLM` asks on the
    main process only), and in a run that never evolves. Calling it is a bug, and says so; its accounting is
    nothing (the main process's is the run's)."""

    def __init__(self, why: str):
        self.why = why

    def complete(self, prompt: str) -> str:
        raise RuntimeError(
            f"the optimizer LM was called {self.why}; it is only ever called on the main process of a run that evolves"
        )

    def accounting(self) -> None:
        return None

    def restore(self, accounting: dict) -> None:
        """Nothing to restore: the main process's optimizer carries the budget."""


class MainProcessLM:
    """The optimizer LM, called on the main process only; every process gets the same answer (its text and whether
    it was truncated, so all drop the same cut-off candidate) or the same error (`broadcast_from_main`).

    Every process but the main one holds a `NoOptimizer`. `broadcast` sends the main process's one-element list to
    all processes (accelerate's `broadcast_object_list` unless given)."""

    def __init__(self, lm: LanguageModel, accelerator, broadcast: Callable[[list], list] | None = None):
        self.lm, self.accelerator, self._broadcast = lm, accelerator, broadcast

    def complete(self, prompt: str) -> str:
        return self.answer(prompt).text

    def answer(self, prompt: str) -> Answer:
        return broadcast_from_main(self.accelerator, lambda: ask(self.lm, prompt), self._broadcast)

    def accounting(self) -> dict | None:
        """The optimizer's calls, tokens and seconds so far (on the main process; None elsewhere)."""
        accounting = getattr(self.lm, "accounting", None)
        return accounting() if callable(accounting) else None

    def restore(self, accounting: dict) -> None:
        """The budget spent before an interruption, so it carries over a resume."""
        restore = getattr(self.lm, "restore", None)
        if callable(restore):
            restore(accounting)

    def record_lines(self) -> int | None:
        """The lines of the optimizer's record so far (main process; None elsewhere, or without a record)."""
        lines = getattr(self.lm, "record_lines", None)
        return lines() if callable(lines) else None

    def resume_from_record(self, lines: int, say: Callable[[str], None] | None = None) -> None:
        """The calls recorded after a checkpoint are answered from the record when asked again (`OptimizerLM`)."""
        resume = getattr(self.lm, "resume_from_record", None)
        if callable(resume):
            resume(lines, say)


class PolicyVerifier:
    """Alg. 1 line 21's verification: the current policy rolled out under each instruction on D_B; per question,
    the mean reward of its rollouts.

    `engine` is the rollout engine over the policy; `generation` a context manager factory that readies the
    policy for generation (the trainer's unwrap-and-no-grad; nothing for a frozen policy); `accelerator`
    (optional) splits D_B over processes and gathers the per-question rewards back. `exact_match` is the last
    call's table of mean EMs, in the same layout (the reward may hold a format bonus; the audit shows both)."""

    def __init__(self, engine, reward: RewardConfig, generation=contextlib.nullcontext, accelerator=None):
        self.engine, self.reward, self.generation, self.accelerator = engine, reward, generation, accelerator
        self.exact_match: list[list[float]] | None = None

    def score(
        self, instructions: Sequence[str], questions: Sequence[ReplayQuestion], rollouts: int = 1
    ) -> list[list[float]]:
        rank, world = (self.accelerator.process_index, self.accelerator.num_processes) if self.accelerator else (0, 1)
        mine = list(range(len(questions)))[rank::world]
        # one batched rollout for every instruction, question and repetition
        pairs = [(text, questions[j]) for text in instructions for j in mine for _ in range(rollouts)]
        table = [[0.0] * len(questions) for _ in instructions]
        em_table = [[0.0] * len(questions) for _ in instructions]
        # Every process enters the generation context, also one whose share of D_B is empty: under ZeRO-3 it gathers
        # the sharded weights collectively (and a vLLM weight sync is collective too), so a rank that skipped it
        # would leave the others waiting for ever.
        with self.generation():
            trajectories, rewards = rollout_and_score(
                self.engine, [t for t, _ in pairs], [q for _, q in pairs], self.reward
            )
        em = [exact_match(t.answer, q.golden_answers) for t, (_, q) in zip(trajectories, pairs)]
        for i in range(len(instructions)):
            for n, j in enumerate(mine):
                first = (i * len(mine) + n) * rollouts
                table[i][j] = sum(rewards[first : first + rollouts]) / rollouts
                em_table[i][j] = sum(em[first : first + rollouts]) / rollouts
        if world > 1:  # each question is filled in by exactly one process: the sum is the whole table
            import torch

            table, em_table = (
                self.accelerator.reduce(
                    torch.tensor(part, dtype=torch.float64, device=self.accelerator.device), reduction="sum"
                ).tolist()
                for part in (table, em_table)
            )
        self.exact_match = em_table
        return table


class CoEvolution:
    """The population with its replay buffer, optimizer LM and verifier; `reports` lists every evolution so far."""

    def __init__(
        self,
        population: InstructionPopulation,
        config: PopulationConfig,
        lm: LanguageModel,
        verifier: Verifier,
        seed: int,
        buffer: ReplayBuffer | None = None,
        reports: Sequence[dict] = (),
        warn: Callable[[str], None] | None = None,
        guard: LeakGuard | None = None,
        categories: Mapping[str, str] | None = None,
    ):
        self.population, self.config, self.lm, self.verifier, self.seed = population, config, lm, verifier, seed
        self.categories = categories or {}  # question key -> type, for verification results per type (the audit)
        self.guard = guard or LeakGuard()  # population.leak_check; its held-out questions never reach a prompt
        self.warn = warn  # where a failed evolution is said (the main process's console); None: nowhere
        self.buffer = buffer or ReplayBuffer(config.replay_capacity)
        self.reports: list[dict] = list(reports)

    @property
    def evolving(self) -> bool:
        return self.config.evolve_until > 0

    def remember(self, experiences: Sequence[Experience]) -> None:
        if self.evolving:
            self.buffer.extend(experiences)

    def end_step(self, step: int) -> dict[str, float]:
        """Weights, then pruning, then evolution, as scheduled; returns the step's population metrics."""
        population = self.population
        population.end_step(step)
        pruned = population.prune(step) if population.should_prune(step) else []
        report: EvolutionReport | None = None
        if self.evolving and population.should_evolve(step) and len(self.buffer) > 0:
            report = evolve(
                population,
                self.buffer,
                self.lm,
                self.verifier,
                self.config,
                step,
                stable_random(self.seed, step, "evolve"),
                self.guard,
                self.categories,
            )
            self.reports.append(report.as_dict())
            if report.optimizer_error and self.warn is not None:  # else a bad key would only show in evolutions.json
                self.warn(
                    f"warning: evolution at step {step} stopped: {report.optimizer_error} "
                    f"({len(report.accepted())} candidates accepted; training goes on with the population)"
                )
            truncated_before = any(r.get("truncated_answers") for r in self.reports[:-1])  # resumed ones too
            if report.truncated_answers and self.warn is not None and not truncated_before:  # once per run
                self.warn(
                    f"warning: {report.truncated_answers} of {report.optimizer_calls} optimizer answers at step "
                    f"{step} stopped before their end (at optimizer.max_output_tokens, or by the provider's "
                    "safety or recitation filter: stop_reasons in the optimizer's accounting); an unfinished "
                    f'last candidate is dropped ("cut off" in {RunDir.EVOLUTIONS}); for the limit, raise '
                    "optimizer.max_output_tokens or lower optimizer.thinking_budget (this warning is not "
                    "repeated)"
                )
        metrics = {
            "population/size": len(population),
            "population/pruned": len(pruned),
            "population/best_weight": population.best().weight,
            "population/prompt_length": sum(len(c.text) for c in population.alive()) / len(population),
        }
        if report is not None:
            metrics.update(
                {
                    "population/evolved": 1,
                    "population/accepted": len(report.accepted()),
                    "population/proposed": len(report.candidates),
                    "time/evolution": report.wall_s,
                }
            )
        for instruction_id, probability in population.probabilities().items():
            metrics[f"population/probability/{instruction_id}"] = probability
            metrics[f"population/weight/{instruction_id}"] = population[instruction_id].weight
        return metrics

    def optimizer_accounting(self) -> dict | None:
        """The optimizer's calls, tokens and seconds so far (known on the main process, which makes the calls)."""
        accounting = getattr(self.lm, "accounting", None)  # a test's fake LM may keep none
        return accounting() if callable(accounting) else None

    def state_dict(self) -> dict:
        """What a resume restores; `optimizer_record_lines` is how many lines the optimizer's record had, so that a
        resumed run takes the calls recorded after them from the record instead of asking again."""
        lines = getattr(self.lm, "record_lines", None)
        return {
            "population": self.population.state_dict(),
            "replay": self.buffer.state_dict(),
            "evolutions": self.reports,
            "optimizer": self.optimizer_accounting(),
            "optimizer_record_lines": lines() if callable(lines) else None,
        }


CoEvolutionFactory = Callable[[Verifier], CoEvolution]


def instruction_source(
    recipe: Recipe, saved: Path | None, accelerator, record: Path | None = None
) -> tuple[InstructionSource, CoEvolutionFactory | None]:
    """(source, make_coevolution): the static instruction (Search-R1) and None, or the INSPO population and a
    factory that builds its `CoEvolution` around a verifier, fresh or as `saved` (a coevolution.json) left it.
    With `record` (the run's optimizer_calls.jsonl), every optimizer call is a line of it; resumed, the calls it
    holds after the lines `saved` counted are answered from it when asked again.
    A missing optimizer API key fails here, before any model loads."""

    texts = initial_instructions(recipe)
    config = recipe.population
    if not config.enabled:
        return StaticInstruction(texts[0]), None
    guard = LeakGuard(held_out_questions(recipe, _console_warning if accelerator.is_main_process else None))
    lm: LanguageModel = NoOptimizer("in a run with population.evolve_until 0 and no initial_rewrites")
    warn = _console_warning if accelerator.is_main_process else None
    if config.evolve_until > 0 or config.initial_rewrites:
        # looked up per call: tests replace open_optimizer at its module
        from inspo_cli.instructions.providers.opening import open_optimizer

        lm = MainProcessLM(
            open_optimizer(recipe.optimizer, record=record)
            if accelerator.is_main_process
            else NoOptimizer("on a process other than the main one"),
            accelerator,
        )
    if saved is not None:
        if not saved.is_file():
            raise InspoError(
                f"{saved.parent} has no {saved.name} although population.enabled is true; it was written "
                "without the population, so it cannot be resumed with one"
            )
        state = RunDir.coevolution_state(saved)
        population = InstructionPopulation.from_state_dict(config, state["population"])
        if isinstance(lm, MainProcessLM) and state.get("optimizer"):
            lm.restore(state["optimizer"])  # the budget carries over the interruption
        if isinstance(lm, MainProcessLM) and state.get("optimizer_record_lines") is not None:
            # what the interrupted run asked after this state was saved is in the record: not asked (or paid) again
            lm.resume_from_record(state["optimizer_record_lines"], warn)
        return population, functools.partial(
            CoEvolution,
            population,
            config,
            lm,
            seed=recipe.run.seed,
            buffer=ReplayBuffer.from_state_dict(state["replay"]),
            reports=state.get("evolutions", []),
            warn=warn,
            guard=guard,
            categories=question_categories(recipe),
        )
    if config.initial_rewrites:  # the recipe's instructions stay; rewrites of the first fill the population
        texts = [
            *texts,
            *initial_rewrites(
                texts[0], lm, config.size - len(texts), keep=texts, max_chars=config.max_instruction_chars
            ),
        ]
    population = InstructionPopulation(config, seed=recipe.run.seed, initial_texts=texts)
    return population, functools.partial(
        CoEvolution,
        population,
        config,
        lm,
        seed=recipe.run.seed,
        warn=warn,
        guard=guard,
        categories=question_categories(recipe),
    )


def question_categories(recipe: Recipe) -> dict[str, str]:
    """Each training question's type by its key (`Question.category`), so that an evolution records its verification
    per question type (`inspo report --audit`); none in a run that never verifies, or when the questions cannot be
    read here (the evolution then records no types)."""
    if recipe.population.evolve_until <= 0 or not recipe.population.verify:
        return {}
    from inspo_cli.training.trainer_inputs import train_questions  # looked up per call: tests replace it

    try:
        return {q.key: q.category for q in train_questions(recipe)}
    except (InspoError, OSError):
        return {}


def held_out_questions(recipe: Recipe, warn: Callable[[str], None] | None = None) -> list[str]:
    """The texts of the questions the run is evaluated on (all of `evaluation.benchmarks` at `evaluation.split`),
    which no optimizer prompt may hold; none when the run never asks the optimizer, or (said once) when they cannot
    be read here, for a run that evaluates elsewhere. A question that is also a training question (NQ repeats some
    across its splits) is left out: the policy trains on it anyway, and the check is for evaluation rollouts reaching
    the optimizer. None with `population.leak_check: off`, which checks nothing."""
    if recipe.population.evolve_until <= 0 or recipe.population.leak_check == "off":
        return []
    from inspo_cli.training.trainer_inputs import train_questions  # looked up per call: tests replace it

    e = recipe.evaluation
    try:
        found = evaluation_questions(e.benchmarks, recipe.data, e.split, None)  # all of them, not evaluation.limit
        training = {normalize_answer(q.question) for q in train_questions(recipe)}
    except InspoError as error:
        if warn is not None:
            warn(
                f"warning: the leak check cannot read the evaluation questions ({error}); optimizer prompts are "
                "not checked against them"
            )
        return []
    held_out = [q.question for questions in found.values() for q in questions]
    kept = [text for text in held_out if normalize_answer(text) not in training]
    if len(kept) < len(held_out) and warn is not None:
        warn(
            f"warning: {len(held_out) - len(kept)} of the {len(held_out)} evaluation questions are also training "
            "questions; the leak check cannot hold those out of optimizer prompts"
        )
    return kept


def _console_warning(line: str) -> None:

    err_console.print(line, markup=False, highlight=False, soft_wrap=True)
