"""Evolution of the instruction population (paper §3.3, Alg. 1 lines 17-23): select, generate, verify.

Every `evolve_every` steps the trainer calls `evolve`. The top `n_parent` instructions by weight become the
parents and the only survivors; the optimizer LM proposes candidates from each parent (INSPO reflects on the
parent's failed rollouts from the replay buffer; the paraphrase and history proposers are the paper's ablations;
each is a module registered in `proposers.PROPOSERS`, looked up by `population.proposer`);
the current policy is rolled out `verify_rollouts` times on each question of a sample D_B of replay questions
(older than the latest step where the buffer allows) with the parent and its candidates in one batch (unless
`population.verify` is false, the "prune + expand" ablation: the first `accept_top_n` join unverified), and
candidates join by `population.accept`: `beat_parent` (those not significantly worse than the parent, question by
question on the same D_B: `verification.py`; best first, at most `accept_top_n`) or `top_n` (the best
`accept_top_n` whatever their score). With `population.verify_sequential` (beyond the paper) D_B is scored in
chunks and a candidate stops once it is clearly above or below beat_parent's line (`sequential.py`). Rounds repeat
until the population holds `size` instructions or `max_verify_rounds` rounds are spent, then every weight restarts
at 0.

    report = evolve(population, buffer, optimizer, verifier, recipe.population, step, random.Random(seed))
    rows = report.as_dict()["candidates"]          # every proposal, accepted or not, and why
    overhead += report.verification_rollouts       # (|candidates| + 1 parent) x |D_B| x verify_rollouts each
                                                   # (sequential: per chunk, the undecided candidates + 1 parent)

`Verifier` is the seam to the policy: the trainer implements it with the batched rollout engine (per-question mean
rewards), tests with a dict. When the optimizer runs out of budget or fails (`InspoError`), evolution stops where
it is and keeps the parents and whatever was accepted, so training goes on with a smaller population instead of
crashing.
Parent order, the failures shown and D_B all come from the `random.Random` passed in, so a seeded run
evolves the same way again (given the same optimizer answers and verification scores).
The optimizer's prompts and their parsing are in `proposing.py`, the report's rows and outcomes in
`evolution_report.py`.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from inspo_cli.errors import InspoError
from inspo_cli.instructions.candidate import Candidate, normalize_text
from inspo_cli.instructions.evolution_report import (
    ACCEPTED,
    BELOW_PARENT,
    CUT_OFF,
    DUPLICATE,
    LEAKED,
    NO_QUESTIONS,
    NO_ROOM,
    NOT_IN_TOP_N,
    TOO_LONG,
    EvolutionReport,
    ProposedCandidate,
    by_type,
)
from inspo_cli.instructions.leakage import LeakGuard
from inspo_cli.instructions.population import InstructionPopulation
from inspo_cli.instructions.proposers.base import NoFailures, NothingToPropose, cut_off_block, parse_candidates
from inspo_cli.instructions.proposing import proposal_prompt
from inspo_cli.instructions.providers.call_record import ReplayMissing
from inspo_cli.instructions.providers.language_model import Answer, LanguageModel, ask
from inspo_cli.instructions.providers.optimizer_lm import OptimizerBudgetExhausted
from inspo_cli.instructions.replay import ReplayBuffer, ReplayQuestion
from inspo_cli.instructions.sequential import verify_in_chunks
from inspo_cli.instructions.verification import Verdict, paired_comparison

if TYPE_CHECKING:
    from inspo_cli.config.sections import PopulationConfig


class Verifier(Protocol):
    """Scores instructions with the current policy: the seam between evolution and the rollout engine."""

    def score(
        self, instructions: Sequence[str], questions: Sequence[ReplayQuestion], rollouts: int = 1
    ) -> list[list[float]]:
        """Per instruction, per question (in the order given): the mean reward of `rollouts` rollouts of the policy."""
        ...


def evolve(
    population: InstructionPopulation,
    buffer: ReplayBuffer,
    lm: LanguageModel,
    verifier: Verifier,
    config: PopulationConfig,
    step: int,
    rng: random.Random,
    guard: LeakGuard | None = None,
    categories: Mapping[str, str] | None = None,
) -> EvolutionReport:
    """Alg. 1 lines 17-23: keep the top `n_parent`, refill the population with verified candidates, reset weights."""
    started = time.monotonic()
    if len(buffer) == 0:  # checked before the population is touched: Alg. 1 fills B (line 15) before evolving
        raise ValueError(
            "evolve needs rollouts in the replay buffer to reflect on and verify with; "
            "add the step's experiences to the buffer first"
        )
    parents = population.parents()  # ranked by weight, so taken before the weights are reset
    report = EvolutionReport(
        step=step, proposer=config.proposer, parents=[p.id for p in parents], retired=population.keep_only_parents(step)
    )  # P_t <- P_parent
    evolution = _Evolution(
        population, buffer, lm, verifier, config, step, rng, report, guard or LeakGuard(), categories or {}
    )
    report.stop_reason = evolution.refill(parents)
    population.reset_weights()  # W_t <- 0 (line 17); new candidates start at 0 anyway, parents are reset here
    report.wall_s = time.monotonic() - started
    return report


@dataclass
class _Evolution:
    """One evolution's working state: what every phase of lines 18-22 reads, and the report each one writes to.
    Each optimizer answer goes through `screen` (parse; duplicates, over-long and cut-off blocks recorded and
    dropped), `verify` (the parent and the fresh candidates on one D_B) and `admit` (by population.accept)."""

    population: InstructionPopulation
    buffer: ReplayBuffer
    lm: LanguageModel
    verifier: Verifier
    config: PopulationConfig
    step: int
    rng: random.Random
    report: EvolutionReport
    guard: LeakGuard
    categories: Mapping[str, str] = field(default_factory=dict)  # question key -> type (by_type in the report)
    flagged: dict[str, str] = field(default_factory=dict)  # leak_check flag: candidate text -> why, this answer
    # this batch's verification, per instruction text, per question key: (mean reward, mean EM or None)
    scored: dict[str, dict[str, tuple[float, float | None]]] = field(default_factory=dict)

    def refill(self, parents: Sequence[Candidate]) -> str:
        """Lines 18-22, bounded by `max_verify_rounds` (App. C: "a maximum of 5 rounds of verification
        retrials"); returns why it stopped."""
        config, population, report = self.config, self.population, self.report
        for round_number in range(1, config.max_verify_rounds + 1):
            if len(population) >= config.size:
                return "population full"
            report.rounds = round_number
            # §3.3 Select: "We randomly sample one instruction I_t at a time to form the parent". Sampling without
            # replacement gives every parent a turn per round, in an order that differs between rounds.
            for parent in self.rng.sample(list(parents), len(parents)):
                if len(population) >= config.size:
                    return "population full"
                try:
                    prompt = proposal_prompt(config.proposer, parent, population, self.buffer, config, self.rng)
                except NoFailures:
                    return "no failed rollouts to reflect on"
                except NothingToPropose as error:
                    return str(error)
                shown = [] if config.leak_check == "off" else self.guard.shown(prompt, self.buffer)
                self.guard.check_shown(shown)  # no dev/test question may reach the optimizer
                try:
                    answer = ask(self.lm, prompt)
                except ReplayMissing as error:  # the replayed run left its record: it must stop, not go on
                    raise ReplayMissing(f"step {self.step}: {error}") from None
                except OptimizerBudgetExhausted as error:  # before InspoError: it is one, with its own reason
                    report.optimizer_error = str(error)
                    return "optimizer budget exhausted"
                except InspoError as error:
                    report.optimizer_error = str(error)
                    return "optimizer failed"
                report.optimizer_calls += 1
                report.truncated_answers += answer.truncated
                fresh = self.screen(answer, parent, round_number, shown)
                if not fresh:
                    continue
                if not config.verify:  # Fig. 3's "prune + expand" ablation: no rollouts, the first accept_top_n join
                    self.admit_unverified(fresh, parent, round_number)
                    continue
                verdicts = self.verify(fresh, parent, shown)  # line 21
                if verdicts is None:
                    for text in fresh:
                        self.record(text, parent, round_number, None, NO_QUESTIONS)
                else:
                    self.admit(fresh, verdicts, parent, round_number)
        return "population full" if len(population) >= config.size else "max_verify_rounds reached"

    def record(
        self,
        text: str,
        parent: Candidate,
        round_number: int,
        score: float | None,
        reason: str,
        instruction_id: str | None = None,
        leak: str | None = None,
        verdict: Verdict | None = None,
    ) -> None:
        """One proposal and what became of it; `verdict`, when it was verified, gives the paired comparison."""
        c = verdict.comparison if verdict is not None else None
        look, looks = (verdict.look, verdict.looks) if verdict is not None else (None, None)
        self.report.candidates.append(
            ProposedCandidate(
                text,
                parent.id,
                self.config.proposer,
                round_number,
                score,
                reason == ACCEPTED,
                reason,
                instruction_id,
                parent_score=c.parent_score if c else None,
                difference=c.difference if c else None,
                difference_se=c.standard_error if c else None,
                leak=leak or self.flagged.get(text),
                verified_questions=c.questions if c and look is not None else None,
                decided_at_look=look,
                looks=looks,
                by_type=None
                if verdict is None
                else by_type(self.scored.get(text, {}), self.scored.get(parent.text, {}), self.categories),
            )
        )

    def screen(
        self, answer: Answer, parent: Candidate, round_number: int, shown: Sequence[ReplayQuestion] = ()
    ) -> list[str]:
        """The answer's new candidates, at most `candidates_per_call`; every other distinct block is recorded with
        why it is not verified (the same text as an alive instruction, over max_instruction_chars, a leak with
        leak_check refuse, or the unclosed last block of an answer cut off at the output limit)."""
        alive_normalized = {normalize_text(c.text) for c in self.population.alive()}
        fresh: list[str] = []
        self.flagged = {}
        for text in parse_candidates(answer.text, truncated=answer.truncated):
            leak = None if self.config.leak_check == "off" else self.guard.leak(text, shown, self.buffer)
            if normalize_text(text) in alive_normalized:
                self.record(text, parent, round_number, None, DUPLICATE)
            elif len(text) > self.config.max_instruction_chars:
                self.record(text, parent, round_number, None, TOO_LONG)
            elif leak is not None and self.config.leak_check == "refuse":
                self.record(text, parent, round_number, None, LEAKED, leak=leak)
            elif len(fresh) < self.config.candidates_per_call:
                fresh.append(text)
                if leak is not None:
                    self.flagged[text] = leak
        cut = cut_off_block(answer.text) if answer.truncated else None
        if cut is not None:
            self.record(cut, parent, round_number, None, CUT_OFF)
        return fresh

    def verify(
        self, fresh: Sequence[str], parent: Candidate, shown: Sequence[ReplayQuestion] = ()
    ) -> list[Verdict] | None:
        """Each candidate against its parent on a fresh D_B: the parent is rolled out in the same call on the same
        questions, and each candidate is compared with it question by question (verification.py): the same
        questions, the same policy weights, the same batch on both sides. D_B leaves out the questions the
        candidates' prompt showed (`shown`); None when that leaves none. With verify_sequential, D_B is shuffled
        (its chunks must be alike) and scored chunk by chunk, the decided candidates left out (sequential.py)."""
        config = self.config
        self.scored = {}
        # D_B, drawn anew each batch
        questions = self.buffer.verification_questions(config.verify_size, self.rng, exclude={q.key for q in shown})
        if not questions:
            return None
        if config.verify_sequential:
            room = min(config.accept_top_n, config.size - len(self.population))  # more joining: ranked on all D_B
            return verify_in_chunks(
                self.score,
                parent.text,
                fresh,
                self.rng.sample(questions, len(questions)),
                config.accept_margin,
                config.verify_looks,
                room,
            )
        table = self.score([parent.text, *fresh], questions)
        comparisons = [paired_comparison(row, table[0]) for row in table[1:]]
        return [Verdict(c, c.joins(config.accept_margin)) for c in comparisons]

    def score(self, instructions: Sequence[str], questions: Sequence[ReplayQuestion]) -> list[list[float]]:
        """One verifier call, checked and counted in the report."""
        rollouts = self.config.verify_rollouts
        table = self.verifier.score(instructions, questions, rollouts=rollouts)
        if len(table) != len(instructions) or any(
            len(row) != len(questions) or not all(math.isfinite(v) for v in row) for row in table
        ):
            raise ValueError(
                f"the verifier must return one finite reward per question for each instruction: "
                f"{len(instructions)} instructions x {len(questions)} questions, got {table}"
            )
        self.report.verification_calls += 1
        self.report.verification_rollouts += len(instructions) * len(questions) * rollouts
        em = getattr(self.verifier, "exact_match", None)  # PolicyVerifier's; a test's verifier may give none
        em = em if isinstance(em, list) and len(em) == len(table) else [[None] * len(questions)] * len(table)
        for text, rewards, ems in zip(instructions, table, em):
            self.scored.setdefault(text, {}).update((q.key, (r, e)) for q, r, e in zip(questions, rewards, ems))
        return table

    def admit(self, fresh: Sequence[str], verdicts: Sequence[Verdict], parent: Candidate, round_number: int) -> None:
        """Alg. 1 line 21: "add the top-n candidates"; §1: "low-performing candidates are rejected". With
        accept=beat_parent a candidate must not be significantly worse than its parent (accept_margin standard
        errors of the paired difference); either way at most accept_top_n join, best first (sorted() is stable: of
        equal differences, the earlier proposal ranks first; where sequential verification admits more than there is
        room for, each of them was scored on all of D_B: `sequential.verify_in_chunks`). Every candidate is recorded,
        in the order proposed."""
        config, population = self.config, self.population
        comparisons = [v.comparison for v in verdicts]
        ranking = sorted(range(len(fresh)), key=lambda i: -comparisons[i].difference)
        outcomes: dict[int, tuple[str, str | None]] = {}
        rank = 0  # among the candidates that may join: one turned away takes no place of the top n
        for i in ranking:
            if config.accept == "beat_parent" and not verdicts[i].joins:
                outcomes[i] = (BELOW_PARENT, None)
                continue
            rank += 1
            if rank > config.accept_top_n:
                outcomes[i] = (NOT_IN_TOP_N, None)
                continue
            added = population.add(
                fresh[i],
                parent=parent.id,
                proposer=config.proposer,
                step=self.step,
                verification_score=comparisons[i].candidate_score,
            )
            if added is not None:
                outcomes[i] = (ACCEPTED, added.id)
            else:
                outcomes[i] = (NO_ROOM if len(population) >= config.size else DUPLICATE, None)
        for i, text in enumerate(fresh):
            self.record(text, parent, round_number, comparisons[i].candidate_score, *outcomes[i], verdict=verdicts[i])

    def admit_unverified(self, fresh: Sequence[str], parent: Candidate, round_number: int) -> None:
        """Fig. 3's "prune + expand": the first accept_top_n join in proposal order, with no rollouts."""
        config, population = self.config, self.population
        for rank, text in enumerate(fresh):
            added = (
                None
                if rank >= config.accept_top_n
                else population.add(text, parent=parent.id, proposer=config.proposer, step=self.step)
            )
            if added is not None:
                self.record(text, parent, round_number, None, ACCEPTED, added.id)
            else:
                self.record(
                    text,
                    parent,
                    round_number,
                    None,
                    NOT_IN_TOP_N
                    if rank >= config.accept_top_n
                    else NO_ROOM
                    if len(population) >= config.size
                    else DUPLICATE,
                )
