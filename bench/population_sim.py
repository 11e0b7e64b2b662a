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

The k study (`--k 1,2,4`, issue 54): each question's `--group-size` G rollouts (default 8, the same for every k,
so every row spends the same rollouts) split over k instructions (`population.instructions_per_question`), each
configuration at each k, into bench/results/population_sim_k.json and its own README section. Beside the columns
above it reports the weights' error, how often and how fast each generation's best instruction comes first by
weight, and the reward per rollout (population_sim_measures.py defines them). `population.baseline` is not an axis:
it changes GRPO's advantage, and this simulator has no policy gradient, only the population's rewards.

    python bench/population_sim.py                  # every configuration, 100 runs each (about 20 min on 2 cores)
    python bench/population_sim.py --runs 20 --configs paper,ucb,thompson   # a quick look
    python bench/population_sim.py --runs 32 --k 1,2,4                      # the k study at G 8
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
from itertools import groupby
from operator import attrgetter

from _common import ROOT, machine, update_readme_section
from population_sim_measures import Measures, summarize, summarize_k, table, table_k

from inspo_cli.config.sections import PopulationConfig
from inspo_cli.instructions.evolution import BELOW_PARENT, evolve
from inspo_cli.instructions.replay import Experience, ReplayBuffer, ReplayQuestion
from inspo_cli.jsonio import atomic_write_json

RESULTS = ROOT / "bench/results/population_sim.json"
RESULTS_K = ROOT / "bench/results/population_sim_k.json"  # --k
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
        return sigmoid(self.strength[text][self.category[question]] + self.difficulty[question] + self.drift(step))

    def drift(self, step: int) -> float:
        return step / STEPS

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
    # the k study's (population_sim_measures.py)
    weight_squared_error: float
    weight_estimates: int
    generations: int
    identified: int
    steps_to_identify: int
    mean_reward: float
    rollouts: int


def simulate(
    config_name: str, seed: int, shift: float, spread: float, k: int = 1, group_size: int = ROLLOUTS
) -> RunResult:
    """One run; `k` instructions per question (`population.instructions_per_question`) share its `group_size`
    rollouts, so every k spends the same rollouts per step."""
    settings = {**PAPER, **CONFIGS[config_name]}
    if k != 1:  # at k = 1 the configuration is the paper's as written, whatever the population's default
        settings["instructions_per_question"] = k
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
    measures = Measures(world)
    measures.generation_started(population, 0)
    regret, groups = 0.0, 0
    worse_in = accepted = better_out = better = parent_best = evolutions = 0
    for step in range(STEPS):
        questions = rng.sample(range(POOL), QUESTIONS_PER_STEP)
        # one key per rollout, a question's group in a row: the population splits it into k blocks
        picks = population.sample([key for q in questions for key in [str(q)] * group_size], step)
        strongest = [max(world.strength[c.text][cat] for c in population.alive()) for cat in range(CATEGORIES)]
        block_picks, rewards, categories, experiences = [], [], [], []
        for q, block in zip(questions, (picks[i : i + group_size] for i in range(0, len(picks), group_size))):
            for pick, size in blocks(block):
                p = world.success(pick.text, q, step)
                outcomes = [float(rng.random() < p) for _ in range(size)]
                block_picks.append(pick)
                rewards.append(sum(outcomes) / size)
                categories.append(str(world.category[q]))
                measures.rolled_out(outcomes)
                best = sigmoid(strongest[world.category[q]] + world.difficulty[q] + world.drift(step))
                regret += (best - p) * size / group_size
                experiences.append(Experience(pick.instruction_id, str(q), f"q{q}", ("a",), "", outcomes[0], step + 1))
        groups += len(questions)
        population.observe(block_picks, rewards, categories)
        buffer.extend(experiences)
        # the trainer's order at the end of a step (training/coevolution.py): weights, then prune, then evolve
        population.end_step(step + 1)
        measures.step_ended(population)
        if population.should_prune(step + 1):
            measures.weights_read(population)
            population.prune(step + 1)
        if population.should_evolve(step + 1):
            measures.generation_ended()
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
            measures.generation_started(population, step + 1)
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
        measures.squared_error,
        measures.estimates,
        measures.generations,
        measures.identified,
        measures.steps_to_identify,
        measures.reward / measures.rollouts,
        measures.rollouts,
    )


def blocks(picks: list) -> list[tuple]:
    """A question's picks as (pick, rollouts) blocks: the runs of one instruction in a row."""
    return [(next(run), 1 + sum(1 for _ in run)) for _, run in groupby(picks, key=attrgetter("instruction_id"))]


def parse_ks(text: str, group_size: int) -> list[int]:
    """--k's values: distinct whole numbers >= 1 that divide --group-size (equal rollouts for every instruction)."""
    try:
        ks = [int(v) for v in text.split(",")]
    except ValueError:
        sys.exit(f"error: --k {text!r}: give whole numbers separated by commas, e.g. 1,2,4")
    bad = [k for k in ks if k < 1 or group_size % k]
    if bad or len(set(ks)) != len(ks):
        sys.exit(f"error: --k {text!r}: each k must be >= 1, listed once, and divide --group-size {group_size}")
    return ks


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--configs", help="comma-separated names of CONFIGS (default: all; with --k: paper)")
    parser.add_argument("--shift", type=float, default=-0.1, help="mean strength change of a candidate (logits)")
    parser.add_argument("--spread", type=float, default=0.2, help="its standard deviation (logits)")
    parser.add_argument(
        "--k", help="the k study: instructions per question, comma-separated (e.g. 1,2,4), each with every --configs"
    )
    parser.add_argument("--group-size", type=int, default=8, help="the k study's rollouts per question (G)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-readme", action="store_true", help="do not rewrite bench/README.md's section")
    args = parser.parse_args(argv)
    ks = parse_ks(args.k, args.group_size) if args.k else None
    names = [n.strip() for n in (args.configs or ("paper" if ks else ",".join(CONFIGS))).split(",") if n.strip()]
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        sys.exit(f"error: --configs: unknown {', '.join(unknown)}; choose from {', '.join(CONFIGS)}")
    group_size = args.group_size if ks else ROLLOUTS
    rows = {(f"{name} k={k}" if ks else name): (name, k) for name in names for k in ks or [1]}
    started = time.monotonic()
    summaries = {}
    with ProcessPoolExecutor(args.workers) as pool:
        for label, (name, k) in rows.items():
            t0 = time.monotonic()
            n = args.runs
            results = list(
                pool.map(simulate, [name] * n, range(n), [args.shift] * n, [args.spread] * n, [k] * n, [group_size] * n)
            )
            summaries[label] = {**summarize(results), **(summarize_k(results) if ks else {})}
            print(
                f"{label}: {n} runs in {time.monotonic() - t0:.0f} s; P(best ever) "
                f"{summaries[label]['p_best_ever']:.2f}, regret {summaries[label]['regret']:.4f}",
                flush=True,
            )
    settings = {
        "paper": PAPER,
        "steps": STEPS,
        "questions_per_step": QUESTIONS_PER_STEP,
        "rollouts": group_size,
        "runs": args.runs,
        "shift": args.shift,
        "spread": args.spread,
    }
    configs = {
        label: {**CONFIGS[name], **({"instructions_per_question": k} if ks else {})}
        for label, (name, k) in rows.items()
    }
    order = [f"{name} k={k}" for name in CONFIGS for k in range(1, group_size + 1)] if ks else list(CONFIGS)
    save(RESULTS_K if ks else RESULTS, argv, settings, configs, summaries, order, time.monotonic() - started)
    if not args.no_readme:
        saved = json.loads((RESULTS_K if ks else RESULTS).read_text())
        ran = "; ".join(f"`{c}`" for c in saved["commands"])
        title = "Instructions per question (k), simulated" if ks else "Instruction selection, simulated"
        update_readme_section(
            "population_sim_k" if ks else "population_sim",
            f"## {title}\n\n{ran} — {args.runs} runs per configuration, {saved['wall_s'] / 60:.0f} min in all on "
            f"{machine()['cpu_cores']} cores.\n\n{(table_k if ks else table)(saved['results'])}\n",
        )


def save(path, argv, settings: dict, configs: dict, summaries: dict, order: list[str], wall: float) -> None:
    """Write the results (added to the file's earlier configurations when the settings are the same) and print them."""
    command = shlex.join(["python", "bench/population_sim.py", *argv])
    earlier = json.loads(path.read_text()) if path.is_file() else {}
    if earlier.get("settings") == settings:  # the same experiment: add these configurations to the earlier ones
        summaries = {**earlier["results"], **summaries}
        configs = {**earlier.get("configs", {}), **configs}
        commands = [c for c in earlier.get("commands", []) if c != command] + [command]
        wall += earlier.get("wall_s", 0.0)
    else:
        commands = [command]
    summaries = {name: summaries[name] for name in order if name in summaries}
    atomic_write_json(
        path,
        {
            "commands": commands,
            "machine": machine(),
            "wall_s": round(wall, 1),
            "settings": settings,
            "configs": {n: configs[n] for n in summaries},
            "results": summaries,
        },
    )
    print((table_k if path == RESULTS_K else table)(summaries))


if __name__ == "__main__":
    main(sys.argv[1:])
