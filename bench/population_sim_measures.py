"""The numbers `population_sim.py --k` compares instructions-per-question settings on, and the intervals of both tables.

`Measures` reads a run as it goes without drawing from its generator, so a run at k = 1 is the same run, rollout for
rollout, as one without it:

- weight error: at every pruning (where eq. 6's weights decide), each alive instruction's weight against what it
  estimates, the mean of its true success rates (over the whole question pool, with the drift of its window's
  steps) at the steps its window averages; the root of the mean squared difference per run. The weight is an
  unbiased mean of group means, so this is the spread of the estimate;
- identification: per generation (the population from step 0 or an evolution to the next evolution) with at least
  two members, whether the generation's truly best member (by true success rate) is ranked first by weight at its
  last step, and from which step of the generation it stays ranked first;
- reward per group: the mean 0/1 reward (= EM in this world) over all rollouts.
"""

from __future__ import annotations

import math
import statistics

import numpy as np


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


class Measures:
    def __init__(self, world):
        self.world = world
        categories = len(next(iter(world.strength.values())))
        self.difficulty = [
            np.array([d for q, d in enumerate(world.difficulty) if world.category[q] == c]) for c in range(categories)
        ]
        self.squared_error, self.estimates = 0.0, 0
        self.reward, self.rollouts = 0.0, 0
        self.generations = self.identified = self.steps_to_identify = 0
        self.target: str | None = None
        self.first_since: int | None = None  # the generation's step from which the target has been ranked first
        self.step_in_generation = 0

    def true_rates(self, strengths: list[list[float]], steps: list[int]) -> list[float]:
        """Each instruction's success rate over the question pool at a step (0-based, as `World.success` takes it)."""
        rates = np.zeros(len(strengths))
        for c, difficulty in enumerate(self.difficulty):
            logits = np.array([s[c] + self.world.drift(t) for s, t in zip(strengths, steps)])
            rates += (1 / (1 + np.exp(-(logits[:, None] + difficulty[None, :])))).mean(axis=1)
        return list(rates / len(self.difficulty))

    def rolled_out(self, outcomes: list[float]) -> None:
        self.reward += sum(outcomes)
        self.rollouts += len(outcomes)

    def weights_read(self, population) -> None:
        """At a pruning: each alive instruction's weight against the mean true rate of its window's steps."""
        rows = [(c, row.step - 1) for c in population.alive() for row in c.window()]
        if not rows:
            return
        rates = self.true_rates([self.world.strength[c.text] for c, _ in rows], [t for _, t in rows])
        expected: dict[str, list[float]] = {}
        for (c, _), rate in zip(rows, rates):
            expected.setdefault(c.id, []).append(rate)
        for c in population.alive():
            if c.id in expected:
                self.squared_error += (c.weight - statistics.fmean(expected[c.id])) ** 2
                self.estimates += 1

    def generation_started(self, population, step: int) -> None:
        alive = population.alive()
        self.target, self.first_since, self.step_in_generation = None, None, 0
        if len(alive) >= 2:
            rates = self.true_rates([self.world.strength[c.text] for c in alive], [step] * len(alive))
            self.target = alive[max(range(len(alive)), key=rates.__getitem__)].id

    def step_ended(self, population) -> None:
        self.step_in_generation += 1
        if population.ranked()[0].id != self.target:
            self.first_since = None
        elif self.first_since is None:
            self.first_since = self.step_in_generation

    def generation_ended(self) -> None:
        """Before an evolution: the generation's verdict (one without a choice to make is not counted)."""
        if self.target is None:
            return
        self.generations += 1
        if self.first_since is not None:
            self.identified += 1
            self.steps_to_identify += self.first_since


def summarize(results) -> dict:
    """The selection table's columns over runs (`population_sim.RunResult`s)."""
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


def summarize_k(results) -> dict:
    """The k study's columns over runs: weight error, identification, reward (intervals over runs or Wilson)."""
    rmse, rmse_ci = mean_interval([math.sqrt(r.weight_squared_error / r.weight_estimates) for r in results])
    generations, identified = sum(r.generations for r in results), sum(r.identified for r in results)
    steps = [r.steps_to_identify / r.identified for r in results if r.identified]
    reward, reward_ci = mean_interval([r.mean_reward for r in results])
    steps_mean, steps_ci = mean_interval(steps) if steps else (None, [0.0, math.inf])
    return {
        "weight_rmse": rmse,
        "weight_rmse_ci": rmse_ci,
        "p_identified": identified / generations if generations else None,
        "p_identified_ci": wilson(identified, generations),
        "generations": generations,
        "steps_to_identify": steps_mean,
        "steps_to_identify_ci": steps_ci,
        "mean_reward": reward,
        "mean_reward_ci": reward_ci,
    }


def interval(value: float | None, bounds: list[float], digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f} [{bounds[0]:.{digits}f}, {bounds[1]:.{digits}f}]"


def table_k(summaries: dict) -> str:
    rows = [
        "| configuration | weight error (RMSE) | P(best ranked first at the evolution) | steps until it stays first | "
        "reward (= EM) per rollout | P(I* best ever) | regret per group | I*'s success rate |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, s in summaries.items():
        rows.append(
            f"| {name} | {interval(s['weight_rmse'], s['weight_rmse_ci'], 4)} | "
            f"{interval(s['p_identified'], s['p_identified_ci'], 2)} (of {s['generations']}) | "
            f"{interval(s['steps_to_identify'], s['steps_to_identify_ci'], 1)} | "
            f"{interval(s['mean_reward'], s['mean_reward_ci'], 4)} | "
            f"{interval(s['p_best_ever'], s['p_best_ever_ci'], 2)} | {interval(s['regret'], s['regret_ci'], 4)} | "
            f"{interval(s['best_rate'], s['best_rate_ci'], 3)} |"
        )
    return "\n".join(rows)


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
