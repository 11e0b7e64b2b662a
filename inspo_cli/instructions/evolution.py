"""Evolution of the instruction population (paper §3.3, Alg. 1 lines 17-23): select, generate, verify.

Every `evolve_every` steps the trainer calls `evolve`. The top `n_parent` instructions by weight become the
parents and the only survivors; the optimizer LM proposes candidates from each parent (INSPO reflects on
failed rollouts from the replay buffer; the paraphrase and history proposers are the paper's ablations); the
current policy is rolled out with the candidates on a sample D_B of replay questions; the best
`accept_top_n` join the population. Rounds repeat until the population holds `size` instructions or
`max_verify_rounds` rounds are spent, then every weight restarts at 0.

    report = evolve(population, buffer, optimizer, verifier, recipe.population, step, random.Random(seed))
    rows = report.as_dict()["candidates"]          # every proposal, accepted or not, and why
    overhead += report.verification_rollouts       # |candidates| x |D_B| per verification, as in App. C

`Verifier` is the seam to the policy: the trainer implements it with the batched rollout engine, tests with
a dict. When the optimizer runs out of budget or fails (`InspoError`), evolution stops where it is and keeps
the parents and whatever was accepted, so training goes on with a smaller population instead of crashing.
Parent order, the failures shown and D_B all come from the `random.Random` passed in, so a seeded run
evolves the same way again (given the same optimizer answers and verification scores).
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, Sequence

from inspo_cli.errors import InspoError
from inspo_cli.instructions.lm import LanguageModel, OptimizerBudgetExhausted
from inspo_cli.instructions.population import Candidate, InstructionPopulation, normalize_text
from inspo_cli.instructions.proposals import history_prompt, paraphrase_prompt, parse_candidates, reflection_prompt
from inspo_cli.instructions.replay import ReplayBuffer, ReplayQuestion

if TYPE_CHECKING:
    from inspo_cli.config.sections import PopulationConfig

# What became of a proposed candidate
ACCEPTED = "accepted"
DUPLICATE = "duplicate"  # the same text (ignoring whitespace) as an alive instruction: never verified
NOT_IN_TOP_N = "not in top-n"  # verified, but accept_top_n others of its batch scored higher
NO_ROOM = "no room"  # in the top n, but the population was already full

HISTORY_LIMIT = 20  # OPRO shows its 20 best-scored instructions; more would only lengthen the prompt


class Verifier(Protocol):
    """Scores instructions with the current policy: the seam between evolution and the rollout engine."""

    def score(self, instructions: Sequence[str], questions: Sequence[ReplayQuestion]) -> list[float]:
        """The mean reward of the policy rolled out with each instruction on `questions`, one per instruction."""
        ...


@dataclass
class ProposedCandidate:
    """One instruction the optimizer proposed during an evolution, and what became of it."""

    text: str
    parent: str  # the parent's instruction id
    proposer: str
    round: int  # 1-based verification round
    verification_score: float | None  # mean reward on D_B; None when never verified (a duplicate)
    accepted: bool
    reason: str  # ACCEPTED, DUPLICATE, NOT_IN_TOP_N or NO_ROOM
    instruction_id: str | None = None  # its id in the population when accepted


@dataclass
class EvolutionReport:
    """What one evolution did and cost, for instructions.jsonl and the run's overhead account."""

    step: int
    proposer: str
    parents: list[str]  # ids, best weight first
    retired: list[str]  # ids of the non-parents retired at the start (Alg. 1 line 17)
    candidates: list[ProposedCandidate] = field(default_factory=list)
    rounds: int = 0
    optimizer_calls: int = 0  # calls that returned an answer
    verification_calls: int = 0
    verification_rollouts: int = 0  # sum over verifications of len(candidates) x len(questions)
    wall_s: float = 0.0
    stop_reason: str = ""  # "population full", "max_verify_rounds reached", "optimizer budget exhausted", ...
    optimizer_error: str | None = None  # the optimizer's message when it stopped the evolution

    def accepted(self) -> list[ProposedCandidate]:
        return [c for c in self.candidates if c.accepted]

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "wall_s": round(self.wall_s, 3)}


# -- proposing ---------------------------------------------------------------------------------------------


def proposal_prompt(proposer: str, parent: Candidate, population: InstructionPopulation, buffer: ReplayBuffer,
                    config: PopulationConfig, rng: random.Random) -> str:
    """The App. E prompt asking the optimizer for `candidates_per_call` new instructions from `parent`."""
    n = config.candidates_per_call
    if proposer == "reflection":
        failures = buffer.failures(config.failures_per_call, rng)
        if not failures:
            raise ValueError("the reflection proposer needs rollouts to reflect on, but the replay buffer is empty")
        return reflection_prompt(parent.text, failures, n)
    if proposer == "paraphrase":
        return paraphrase_prompt(parent.text, n)
    if proposer == "history":
        return history_prompt(scored_history(population), n)
    raise ValueError(f"proposer must be reflection, paraphrase or history, got {proposer!r}")


def propose(proposer: str, parent: Candidate, population: InstructionPopulation, buffer: ReplayBuffer,
            lm: LanguageModel, config: PopulationConfig, rng: random.Random) -> list[str]:
    """Up to `candidates_per_call` new instructions from one optimizer call, none equal to an alive one."""
    answer = lm.complete(proposal_prompt(proposer, parent, population, buffer, config, rng))
    return parse_candidates(answer, n=config.candidates_per_call, exclude=[c.text for c in population.alive()])


def scored_history(population: InstructionPopulation, limit: int = HISTORY_LIMIT) -> list[tuple[str, float]]:
    """(text, 100 x weight) of the best `limit` instructions with a measured weight, worst first (OPRO's order).

    Every candidate ever created counts, pruned ones included (their weight is the one they were pruned
    with); one whose weight was reset and not measured since is left out rather than shown as a false 0.
    A text recorded twice keeps its newest score. Scores are clipped to the template's 0..100.
    """
    scores: dict[str, tuple[str, float]] = {}
    for row in population.records():  # creation order, so a newer record of a text replaces the older
        if row["recent_means"]:
            scores[normalize_text(row["text"])] = (row["text"], min(100.0, max(0.0, 100.0 * row["weight"])))
    if not scores:  # nothing measured yet: the alive instructions, unscored, are all the history there is
        return [(c.text, 0.0) for c in population.alive()][-limit:]
    return sorted(scores.values(), key=lambda pair: pair[1])[-limit:]


def initial_rewrites(text: str, lm: LanguageModel, n: int) -> list[str]:
    """Up to n distinct rewrites of `text` for the initial population, from one paraphrase-template call.

    The original is not among them; the caller builds the population as `[text, *rewrites][:size]`. Fewer
    than n come back when the optimizer gave fewer usable ones (duplicates, empty or over-long blocks).
    """
    if not text.strip():
        raise ValueError("the instruction to rewrite is empty")
    return parse_candidates(lm.complete(paraphrase_prompt(text, n)), n=n, exclude=[text])


# -- evolving ----------------------------------------------------------------------------------------------


def evolve(population: InstructionPopulation, buffer: ReplayBuffer, lm: LanguageModel, verifier: Verifier,
           config: PopulationConfig, step: int, rng: random.Random) -> EvolutionReport:
    """Alg. 1 lines 17-23: keep the top `n_parent`, refill the population with verified candidates, reset weights."""
    started = time.monotonic()
    if len(buffer) == 0:  # checked before the population is touched: Alg. 1 fills B (line 15) before evolving
        raise ValueError("evolve needs rollouts in the replay buffer to reflect on and verify with; "
                         "add the step's experiences to the buffer first")
    parents = population.parents()  # ranked by weight, so taken before the weights are reset
    report = EvolutionReport(step=step, proposer=config.proposer, parents=[p.id for p in parents],
                             retired=population.keep_only_parents(step))  # P_t <- P_parent
    report.stop_reason = _refill(population, parents, buffer, lm, verifier, config, step, rng, report)
    population.reset_weights()  # W_t <- 0 (line 17); new candidates start at 0 anyway, parents are reset here
    report.wall_s = time.monotonic() - started
    return report


def _refill(population: InstructionPopulation, parents: Sequence[Candidate], buffer: ReplayBuffer,
            lm: LanguageModel, verifier: Verifier, config: PopulationConfig, step: int, rng: random.Random,
            report: EvolutionReport) -> str:
    """Lines 18-22, bounded by `max_verify_rounds` (App. C: "a maximum of 5 rounds of verification retrials")."""
    for round_number in range(1, config.max_verify_rounds + 1):
        if len(population) >= config.size:
            return "population full"
        report.rounds = round_number
        # §3.3 Select: "We randomly sample one instruction I_t at a time to form the parent". Sampling without
        # replacement gives every parent a turn per round, in an order that differs between rounds.
        for parent in rng.sample(list(parents), len(parents)):
            if len(population) >= config.size:
                return "population full"
            prompt = proposal_prompt(config.proposer, parent, population, buffer, config, rng)
            try:
                answer = lm.complete(prompt)
            except OptimizerBudgetExhausted as error:  # before InspoError: it is one, with its own reason
                report.optimizer_error = str(error)
                return "optimizer budget exhausted"
            except InspoError as error:
                report.optimizer_error = str(error)
                return "optimizer failed"
            report.optimizer_calls += 1
            _verify_and_add(answer, parent, round_number, population, buffer, verifier, config, step, rng, report)
    return "population full" if len(population) >= config.size else "max_verify_rounds reached"


def _verify_and_add(answer: str, parent: Candidate, round_number: int, population: InstructionPopulation,
                    buffer: ReplayBuffer, verifier: Verifier, config: PopulationConfig, step: int,
                    rng: random.Random, report: EvolutionReport) -> None:
    """Line 21 for one optimizer answer: verify its new candidates on a fresh D_B and add the top n."""
    alive_texts = [c.text for c in population.alive()]
    alive_normalized = {normalize_text(t) for t in alive_texts}

    def record(text: str, score: float | None, reason: str, instruction_id: str | None = None) -> None:
        report.candidates.append(ProposedCandidate(text, parent.id, config.proposer, round_number, score,
                                                   reason == ACCEPTED, reason, instruction_id))

    for text in parse_candidates(answer):  # every block, so the duplicates `propose` drops are on record
        if normalize_text(text) in alive_normalized:
            record(text, None, DUPLICATE)
    fresh = parse_candidates(answer, n=config.candidates_per_call, exclude=alive_texts)  # as `propose` returns
    if not fresh:
        return
    questions = buffer.verification_questions(config.verify_size, rng)  # D_B, drawn anew for every batch
    scores = [float(s) for s in verifier.score(fresh, questions)]
    if len(scores) != len(fresh) or not all(math.isfinite(s) for s in scores):
        raise ValueError(f"the verifier must return one finite score per instruction: {len(fresh)} instructions, "
                         f"got {scores}")
    report.verification_calls += 1
    report.verification_rollouts += len(fresh) * len(questions)

    # Alg. 1 line 21: "Verify {I_new} on a validation set D_B and add the top-n candidates to P_new" (and §3.3
    # Verify: "only the top-n best performing candidates are added to the new population P_t"). The paper
    # asks for no comparison with the parent or any threshold, so the top n go in while there is room.
    # sorted() is stable: of equal scores, the earlier proposal ranks first.
    ranking = sorted(range(len(fresh)), key=lambda i: -scores[i])
    outcomes: dict[int, tuple[str, str | None]] = {}
    for rank, i in enumerate(ranking):  # best first, so a nearly full population takes the best
        if rank >= config.accept_top_n:
            outcomes[i] = (NOT_IN_TOP_N, None)
            continue
        added = population.add(fresh[i], parent=parent.id, proposer=config.proposer, step=step,
                               verification_score=scores[i])
        if added is not None:
            outcomes[i] = (ACCEPTED, added.id)
        else:
            outcomes[i] = (NO_ROOM if len(population) >= config.size else DUPLICATE, None)
    for i, text in enumerate(fresh):  # recorded in the order proposed
        record(text, scores[i], *outcomes[i])
