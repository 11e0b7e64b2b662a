"""INSPO inside training: what the trainer does at the end of every step when the population is on.

    coevo = CoEvolution(population, recipe.population, optimizer_lm, verifier, seed, accelerator)
    coevo.remember(experiences)          # every rollout of the step, from all processes (replay buffer, line 15)
    coevo.end_step(step)                 # weights (eq. 6), pruning every K_p, evolution every K_e until T_e

Every process holds the same population and replay buffer, because each sees the same gathered rewards and
rollouts and draws its randomness from (seed, step). Two things must not run once per process: the optimizer
LM (`MainProcessLM` calls it on the main process and broadcasts the answer, or the error) and verification
(`PolicyVerifier` rolls each candidate out on this process's share of D_B and sums the rewards over all
processes), so all ranks accept the same candidates.
"""

from __future__ import annotations

import contextlib
from typing import Sequence

from inspo_cli.config import PopulationConfig, RewardConfig
from inspo_cli.errors import InspoError
from inspo_cli.instructions.evolution import EvolutionReport, evolve
from inspo_cli.instructions.lm import LanguageModel, OptimizerBudgetExhausted
from inspo_cli.instructions.population import InstructionPopulation
from inspo_cli.instructions.replay import Experience, ReplayBuffer, ReplayQuestion
from inspo_cli.instructions.sampling import stable_random
from inspo_cli.training.reward import followed_protocol, outcome_rewards


class MainProcessLM:
    """The optimizer LM, called on the main process only; every process gets the same text or the same error."""

    def __init__(self, lm: LanguageModel | None, accelerator):
        self.lm, self.accelerator = lm, accelerator

    def complete(self, prompt: str) -> str:
        if self.accelerator.num_processes == 1:
            return self.lm.complete(prompt)
        from accelerate.utils import broadcast_object_list

        payload: list = [None]
        if self.accelerator.is_main_process:
            try:
                payload = [("ok", self.lm.complete(prompt))]
            except OptimizerBudgetExhausted as e:
                payload = [("budget", str(e))]
            except InspoError as e:
                payload = [("error", str(e))]
        kind, value = broadcast_object_list(payload)[0]
        if kind == "budget":
            raise OptimizerBudgetExhausted(value)
        if kind == "error":
            raise InspoError(value)
        return value


class PolicyVerifier:
    """Alg. 1 line 21's verification: the current policy rolled out under each candidate on D_B, mean reward.

    `engine` is the rollout engine over the policy; `generation` a context manager factory that readies the
    policy for generation (the trainer's unwrap-and-no-grad; nothing for a frozen policy); `accelerator`
    (optional) splits D_B over processes and sums the rewards back."""

    def __init__(self, engine, reward: RewardConfig, generation=contextlib.nullcontext, accelerator=None):
        self.engine, self.reward, self.generation, self.accelerator = engine, reward, generation, accelerator

    def score(self, instructions: Sequence[str], questions: Sequence[ReplayQuestion]) -> list[float]:
        rank, world = (self.accelerator.process_index, self.accelerator.num_processes) if self.accelerator else (0, 1)
        mine = list(questions)[rank::world]
        pairs = [(text, q) for text in instructions for q in mine]  # one batched rollout for all candidates
        totals = [[0.0, 0] for _ in instructions]
        # Every process enters the generation context, also one whose share of D_B is empty: under ZeRO-3 it gathers
        # the sharded weights collectively (and a vLLM weight sync is collective too), so a rank that skipped it
        # would leave the others waiting for ever.
        with self.generation():
            trajectories = self.engine.run([t for t, _ in pairs], [q.question for _, q in pairs]) if pairs else []
        if pairs:
            rewards = outcome_rewards([t.answer for t in trajectories], [q.golden_answers for _, q in pairs],
                                      [followed_protocol(t) for t in trajectories], self.reward.metric,
                                      self.reward.format_weight)
            for i in range(len(instructions)):
                chunk = rewards[i * len(mine):(i + 1) * len(mine)]
                totals[i] = [sum(chunk), len(chunk)]
        if world > 1:
            import torch

            summed = self.accelerator.reduce(torch.tensor(totals, dtype=torch.float64,
                                                          device=self.accelerator.device), reduction="sum")
            totals = summed.tolist()
        return [s / n if n else 0.0 for s, n in totals]


class CoEvolution:
    def __init__(self, population: InstructionPopulation, config: PopulationConfig, lm: LanguageModel | None,
                 verifier, seed: int, buffer: ReplayBuffer | None = None):
        self.population, self.config, self.lm, self.verifier, self.seed = population, config, lm, verifier, seed
        self.buffer = buffer or ReplayBuffer(config.replay_capacity)
        self.reports: list[dict] = []

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
            report = evolve(population, self.buffer, self.lm, self.verifier, self.config, step,
                            stable_random(self.seed, step, "evolve"))
            self.reports.append(report.as_dict())
        metrics = {"population/size": len(population), "population/pruned": len(pruned),
                   "population/best_weight": population.best().weight,
                   "population/prompt_length": sum(len(c.text) for c in population.alive()) / len(population)}
        if report is not None:
            metrics.update({"population/evolved": 1, "population/accepted": len(report.accepted()),
                            "population/proposed": len(report.candidates), "time/evolution": report.wall_s})
        for instruction_id, probability in population.probabilities().items():
            metrics[f"population/probability/{instruction_id}"] = probability
            metrics[f"population/weight/{instruction_id}"] = population[instruction_id].weight
        return metrics

    def optimizer_accounting(self) -> dict | None:
        """The optimizer's calls, tokens and seconds so far (known on the main process, which makes the calls)."""
        lm = getattr(self.lm, "lm", self.lm)
        return lm.accounting() if hasattr(lm, "accounting") else None

    def state_dict(self) -> dict:
        return {"population": self.population.state_dict(), "replay": self.buffer.state_dict(),
                "evolutions": self.reports, "optimizer": self.optimizer_accounting()}
