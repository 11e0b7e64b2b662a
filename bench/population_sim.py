"""What does each instruction-selection switch buy? The real population code, driven by synthetic rewards (issue 32).

INSPO's population machinery is torch-free, so it runs here as it runs in training: `InstructionPopulation`
(sampling by `population.selection`, eq. 6 weights, pruning), `evolution.evolve` (parents, the reflection
proposer's prompt, verification on D_B, `population.accept`), `ReplayBuffer`. Only the policy and the optimizer are
synthetic:

- questions come in 4 categories (as the world's question types); question q has a difficulty d_q ~ N(0, 1);
  every instruction has a true strength s_c per category (logit scale); a rollout of q under instruction i succeeds
  with probability sigmoid(s_i,c(q) + d_q + drift(t)) (reward 1 or 0), where drift rises linearly by 1 logit over
  the run, as a policy that learns lifts every instruction;
- the initial population is Search-R1's instruction (s = logit 0.35 in every category) and N_P - 1 rewrites of it,
  each shifted by N(0, 0.3) overall and N(0, 0.2) per category;
- the optimizer, asked for candidates from a parent (the reflection proposer), returns `candidates_per_call` of
  them with strengths s_parent + N(shift, spread) overall and N(0, spread / 2) per category (`--shift -0.1 --spread
  0.2` by default: most variations are no better, a few are); asked to merge two parents, it starts from their
  per-category mean;
- each step draws the paper's batch: 512 questions x 5 rollouts, 300 steps, K_p 5, K_e 15, T_e 150, |D_B| 200.

Per configuration (selection x accept rule, and the paper's defaults tau_s 0.2, N_P 7, window 5 against
alternatives) over `--runs` seeds it reports, with 95% intervals (Wilson for proportions, t for means):

- P(parent best): at each evolution, the first parent (the best by weight) is the truly strongest (its mean over the
  categories) of the population it is chosen from: does the selection measure the instructions well enough?
  P(I* best ever): I* at the end is the strongest instruction the run ever held (by then pruning has cut the
  population down to N_parent, so "the best of the final population" says nothing);
- regret: the mean reward per group lost to sampling instructions weaker than the population's strongest in the
  question's category (the cost of exploring), and I*'s true success rate at the end (on an average question,
  without drift);
- worse in: of the accepted candidates, the share weaker than their parent; better out: of the candidates stronger
  than their parent by more than 0.1 logit, the share turned away by verification.

    python bench/population_sim.py                  # every configuration, 100 runs each (about 20 min on 2 cores)
    python bench/population_sim.py --runs 20 --configs paper,ucb,thompson   # a quick look
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shlex
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from _common import ROOT, machine, update_readme_section

from inspo_cli.config.sections import PopulationConfig
from inspo_cli.instructions.evolution import BELOW_PARENT, evolve
from inspo_cli.instructions.replay import Experience, ReplayBuffer, ReplayQuestion
from inspo_cli.jsonio import atomic_write_json

RESULTS = ROOT / "bench/results/population_sim.json"
STEPS, QUESTIONS_PER_STEP, ROLLOUTS, POOL = 300, 512, 5, 20_000
PAPER = dict(
    size=7,
    n_parent=1,
    temperature=0.2,
    weight_window=5,
    prune_every=5,
    evolve_every=15,
    evolve_until=150,
    proposer="reflection",
    candidates_per_call=6,
    failures_per_call=4,
    verify_size=200,
    verify_rollouts=1,
    accept="beat_parent",
    accept_margin=1.645,
    accept_top_n=6,
    max_verify_rounds=5,
    selection="softmax",
)
# name -> what differs from the paper's configuration
CONFIGS = {
    "paper": {},
    "ucb": {"selection": "ucb"},
    "thompson": {"selection": "thompson"},
    "epsilon-greedy": {"selection": "epsilon-greedy"},
    "accept top-n": {"accept": "top_n"},
    "ucb + accept top-n": {"selection": "ucb", "accept": "top_n"},
    "thompson + accept top-n": {"selection": "thompson", "accept": "top_n"},
    "tau_s 0.05": {"temperature": 0.05},
    "tau_s 1.0": {"temperature": 1.0},
    "N_P 5": {"size": 5},
    "N_P 9": {"size": 9},
    "window 1": {"weight_window": 1},
    "window 15": {"weight_window": 15},
    "N_parent 2": {"n_parent": 2},
    "pareto parents (N_parent 2)": {"parents": "pareto", "n_parent": 2},
    "merge (N_parent 2)": {"proposer": "merge", "n_parent": 2},
    # with the paper's K_p 5 and K_e 15 the population is halved down to N_parent before every evolution, so the
    # parent rule has nothing left to choose from; pruning only at the evolutions (K_p 15) leaves it 4 to choose from
    "N_parent 2 + K_p 15": {"n_parent": 2, "prune_every": 15},
    "pareto parents (N_parent 2 + K_p 15)": {"parents": "pareto", "n_parent": 2, "prune_every": 15},
}
CATEGORIES = 4


def sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


class World:
    """The synthetic policy: instruction strengths per category, question difficulties and categories, the drift of
    a learning policy."""

    def __init__(self, rng: random.Random):
        self.difficulty = [rng.gauss(0.0, 1.0) for _ in range(POOL)]
        self.category = [q % CATEGORIES for q in range(POOL)]
        self.strength: dict[str, list[float]] = {}  # instruction text -> s per category

    def success(self, text: str, question: int, step: int) -> float:
        return sigmoid(self.strength[text][self.category[question]] + self.difficulty[question] + step / STEPS)

    def overall(self, text: str) -> float:
        return statistics.fmean(self.strength[text])


class SyntheticOptimizer:
    """A `LanguageModel` whose candidates' strengths are drawn around the parent's (or, merging, around the mean
    of the two parents'), found by their texts in the prompt."""

    def __init__(self, world: World, rng: random.Random, n: int, shift: float, spread: float):
        self.world, self.rng, self.n, self.shift, self.spread = world, rng, n, shift, spread

    def complete(self, prompt: str) -> str:
        parents = [t for t in self.world.strength if t in prompt]  # instruction texts never contain one another
        start = [statistics.fmean(values) for values in zip(*(self.world.strength[t] for t in parents))]
        blocks = []
        for _ in range(self.n):
            text = f"Instruction {len(self.world.strength)}: search, then answer."
            shift = self.rng.gauss(self.shift, self.spread)
            self.world.strength[text] = [s + shift + self.rng.gauss(0.0, self.spread / 2) for s in start]
            blocks.append(f"<ins_{len(blocks) + 1}>{text}</ins_{len(blocks) + 1}>")
        return "\n".join(blocks)


class SyntheticVerifier:
    """Rolls the synthetic policy out on D_B: one 0/1 reward per question and rollout."""

    def __init__(self, world: World, rng: random.Random):
        self.world, self.rng, self.step = world, rng, 0

    def score(self, instructions, questions: list[ReplayQuestion], rollouts: int = 1) -> list[list[float]]:
        return [
            [
                sum(self.rng.random() < self.world.success(text, int(q.key), self.step) for _ in range(rollouts))
                / rollouts
                for q in questions
            ]
            for text in instructions
        ]


@dataclass
class RunResult:
    parent_best: int  # evolutions whose first parent was the strongest alive instruction
    evolutions: int
    best_ever: bool
    regret: float
    best_rate: float
    worse_in: int
    accepted: int
    better_out: int
    better: int


def simulate(config_name: str, seed: int, shift: float, spread: float) -> RunResult:
    settings = {**PAPER, **CONFIGS[config_name]}
    rng = random.Random(seed)
    world = World(rng)
    base = math.log(0.35 / 0.65)
    texts = ["Search-R1's instruction: reason, search, answer."] + [
        f"Rewrite {k}: reason, search, answer." for k in range(1, settings["size"])
    ]
    for k, text in enumerate(texts):
        shift = 0.0 if k == 0 else rng.gauss(0.0, 0.3)
        world.strength[text] = [base + shift + (0.0 if k == 0 else rng.gauss(0.0, 0.2)) for _ in range(CATEGORIES)]
    config = PopulationConfig(enabled=True, instructions=texts, **settings)
    from inspo_cli.instructions.population import InstructionPopulation

    population = InstructionPopulation(config, seed=seed)
    buffer = ReplayBuffer(4096)
    optimizer = SyntheticOptimizer(world, rng, config.candidates_per_call, shift, spread)
    verifier = SyntheticVerifier(world, rng)
    regret, groups = 0.0, 0
    worse_in = accepted = better_out = better = parent_best = evolutions = 0
    for step in range(STEPS):
        questions = rng.sample(range(POOL), QUESTIONS_PER_STEP)
        picks = population.sample([str(q) for q in questions], step)
        strongest = [max(world.strength[c.text][k] for c in population.alive()) for k in range(CATEGORIES)]
        rewards, experiences = [], []
        for q, pick in zip(questions, picks):
            p = world.success(pick.text, q, step)
            outcomes = [float(rng.random() < p) for _ in range(ROLLOUTS)]
            rewards.append(sum(outcomes) / ROLLOUTS)
            regret += sigmoid(strongest[world.category[q]] + world.difficulty[q] + step / STEPS) - p
            experiences.append(Experience(pick.instruction_id, str(q), f"q{q}", ("a",), "", outcomes[0], step + 1))
        groups += len(questions)
        population.observe(picks, rewards, [str(world.category[q]) for q in questions])
        buffer.extend(experiences)
        # the trainer's order at the end of a step (training/coevolution.py): weights, then prune, then evolve
        population.end_step(step + 1)
        if population.should_prune(step + 1):
            population.prune(step + 1)
        if population.should_evolve(step + 1):
            evolutions += 1
            strongest_alive = max(population.alive(), key=lambda c: world.overall(c.text))
            parent_best += population.parents()[0].id == strongest_alive.id
            verifier.step = step
            report = evolve(population, buffer, optimizer, verifier, config, step + 1, rng)
            for c in report.candidates:
                if c.verification_score is None and not c.accepted:
                    continue
                gain = world.overall(c.text) - world.overall(population[c.parent].text)
                if c.accepted:
                    accepted += 1
                    worse_in += gain < 0
                if gain > 0.1:
                    better += 1
                    better_out += c.reason == BELOW_PARENT
    best = population.best()
    ever = max((population[r["id"]] for r in population.records()), key=lambda c: world.overall(c.text))
    return RunResult(
        parent_best,
        evolutions,
        best.id == ever.id,
        regret / groups,
        statistics.fmean(sigmoid(s) for s in world.strength[best.text]),
        worse_in,
        accepted,
        better_out,
        better,
    )


def wilson(successes: int, n: int) -> list[float]:
    if n == 0:
        return [0.0, 1.0]
    z, p = 1.959964, successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [max(centre - half, 0.0), min(centre + half, 1.0)]


def mean_interval(values: list[float]) -> tuple[float, list[float]]:
    mean = statistics.fmean(values)
    half = 1.96 * statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else math.inf
    return mean, [mean - half, mean + half]


def summarize(results: list[RunResult]) -> dict:
    n = len(results)
    best, evolutions = sum(r.parent_best for r in results), sum(r.evolutions for r in results)
    ever = sum(r.best_ever for r in results)
    regret, regret_ci = mean_interval([r.regret for r in results])
    rate, rate_ci = mean_interval([r.best_rate for r in results])
    worse, accepted = sum(r.worse_in for r in results), sum(r.accepted for r in results)
    out, better = sum(r.better_out for r in results), sum(r.better for r in results)
    return {
        "runs": n,
        "p_parent_best": best / evolutions if evolutions else None,
        "p_parent_best_ci": wilson(best, evolutions),
        "evolutions": evolutions,
        "p_best_ever": ever / n,
        "p_best_ever_ci": wilson(ever, n),
        "regret": regret,
        "regret_ci": regret_ci,
        "best_rate": rate,
        "best_rate_ci": rate_ci,
        "worse_in": worse / accepted if accepted else None,
        "worse_in_ci": wilson(worse, accepted),
        "accepted": accepted,
        "better_out": out / better if better else None,
        "better_out_ci": wilson(out, better),
        "better": better,
    }


def table(summaries: dict) -> str:
    rows = [
        "| configuration | P(parent best) | P(I* best ever) | regret per group | I*'s success rate | worse in | "
        "better out |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, s in summaries.items():

        def share(key, count):
            return (
                "-"
                if s[key] is None
                else f"{s[key]:.2f} [{s[key + '_ci'][0]:.2f}, {s[key + '_ci'][1]:.2f}] (of {s[count]})"
            )

        rows.append(
            f"| {name} | {share('p_parent_best', 'evolutions')} | "
            f"{s['p_best_ever']:.2f} [{s['p_best_ever_ci'][0]:.2f}, {s['p_best_ever_ci'][1]:.2f}] | "
            f"{s['regret']:.4f} [{s['regret_ci'][0]:.4f}, {s['regret_ci'][1]:.4f}] | "
            f"{s['best_rate']:.3f} [{s['best_rate_ci'][0]:.3f}, {s['best_rate_ci'][1]:.3f}] | "
            f"{share('worse_in', 'accepted')} | {share('better_out', 'better')} |"
        )
    return "\n".join(rows)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated names of CONFIGS")
    parser.add_argument("--shift", type=float, default=-0.1, help="mean strength change of a candidate (logits)")
    parser.add_argument("--spread", type=float, default=0.2, help="its standard deviation (logits)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-readme", action="store_true", help="do not rewrite bench/README.md's section")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.configs.split(",") if n.strip()]
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        sys.exit(f"error: --configs: unknown {', '.join(unknown)}; choose from {', '.join(CONFIGS)}")
    started = time.monotonic()
    summaries = {}
    with ProcessPoolExecutor(args.workers) as pool:
        for name in names:
            t0 = time.monotonic()
            results = list(
                pool.map(
                    simulate, [name] * args.runs, range(args.runs), [args.shift] * args.runs, [args.spread] * args.runs
                )
            )
            summaries[name] = summarize(results)
            print(
                f"{name}: {args.runs} runs in {time.monotonic() - t0:.0f} s; P(best ever) "
                f"{summaries[name]['p_best_ever']:.2f}, regret {summaries[name]['regret']:.4f}",
                flush=True,
            )
    wall = time.monotonic() - started
    command = shlex.join(["python", "bench/population_sim.py", *argv])
    settings = {
        "paper": PAPER,
        "steps": STEPS,
        "questions_per_step": QUESTIONS_PER_STEP,
        "rollouts": ROLLOUTS,
        "runs": args.runs,
        "shift": args.shift,
        "spread": args.spread,
    }
    earlier = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    if earlier.get("settings") == settings:  # the same experiment: add these configurations to the earlier ones
        summaries = {**earlier["results"], **summaries}
        commands = [c for c in earlier.get("commands", []) if c != command] + [command]
        wall += earlier.get("wall_s", 0.0)
    else:
        commands = [command]
    summaries = {name: summaries[name] for name in CONFIGS if name in summaries}
    atomic_write_json(
        RESULTS,
        {
            "commands": commands,
            "machine": machine(),
            "wall_s": round(wall, 1),
            "settings": settings,
            "configs": {n: CONFIGS[n] for n in summaries},
            "results": summaries,
        },
    )
    print(table(summaries))
    if not args.no_readme:
        ran = "; ".join(f"`{c}`" for c in commands)
        update_readme_section(
            "population_sim",
            f"## Instruction selection, simulated\n\n{ran} — {args.runs} runs "
            f"per configuration, {wall / 60:.0f} min in all on "
            f"{machine()['cpu_cores']} cores.\n\n{table(summaries)}\n",
        )


if __name__ == "__main__":
    main(sys.argv[1:])
