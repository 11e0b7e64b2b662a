"""How well does verification tell a candidate instruction from its parent? (issue 27, item 3)

A candidate is verified by rolling the current policy out under it and under its parent on the same questions D_B
(`population.verify_size`, the paper's 200), `population.verify_rollouts` times each, and joins by
`population.accept`. This measures, for the rule the paper recipes used before ("at least the parent's mean") and
for the paired rule they use now (`inspo_cli.instructions.verification`: the per-question difference may be at
most `accept_margin` standard errors below zero), how often

- an exact copy of the parent is turned away (false rejection; with 6 candidates per evolution, App. C's "one
  round" needs all six to join),
- a truly better candidate (+0.05, +0.10 mean reward) joins, and a truly worse one (-0.05, -0.10) joins;

and, for sequential verification (`population.verify_sequential`, issue 39 item 4: D_B scored in `verify_looks`
chunks, a candidate decided as soon as it is clearly above or below the line; `inspo_cli.instructions.sequential`),
the same rates, the mean share of D_B a candidate is scored on, the share of an evolution's rollouts (six copies and
their parent, which is scored until the last copy is decided) and how often its decision differs from the fixed
rule's on the same rollouts.

Two sources of per-question success rates p_q:

1. Simulation at the paper's D_B size (200 questions): p_q ~ Beta with mean 0.45 (the 3B policy's reward) and
   concentration c (0.5: most questions always or never solved; 2; inf: every question alike, where pairing helps
   least), Bernoulli rewards (EM).
2. The world, with a frozen policy: the shipped warm start (`recipes/demo.yaml`: its instruction, limits and reward,
   EM plus 0.2 for a well-formed wrong answer) rolled out `--pool` times on each of `--questions` training
   questions through the real rollout engine and BM25. An exact copy's verification is then the comparison of
   disjoint draws of those real rollouts (the copy *is* the parent, so its rollouts are further samples of the
   same thing); a better (worse) candidate is such a draw with rewards raised to the top (dropped to 0) at random,
   at the rate that moves the mean by exactly delta.

In the simulation a better candidate's success rate on question q is p_q + delta (1 - p_q) / (1 - mean p), a worse
one's p_q (1 + delta / mean p): the mean moves by exactly delta and no rate leaves [0, 1].

    python bench/verification.py                         # simulation only (seconds)
    python bench/verification.py --world --questions 200 --pool 8   # plus the world (about 30 min on 2 cores)
    python bench/verification.py --reuse-world           # the world's rates again from the rollouts kept

The rules, vectorised, and the simulation are in bench/verification_sim.py; this file measures on the world and
writes the results and the README section.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Sequence

import numpy as np
from _common import ROOT, machine, update_readme_section
from verification_sim import (
    DELTAS,
    RULES,
    SEQUENTIAL,
    check_against_library,
    curves,
    judge,
    one_round,
    record,
    simulate,
)

from inspo_cli.jsonio import atomic_write_json

RESULTS = ROOT / "bench/results/verification.json"
FIGURE = ROOT / "bench/results/verification.png"


def world_pool(questions: int, pool: int, seed: int) -> tuple[np.ndarray, dict]:
    """(rewards[question, draw], facts): the demo's policy and instruction, `pool` rollouts of each question."""
    # imported here: only --world rolls a policy out; the simulation runs without torch, a model or a retriever
    import torch

    from inspo_cli.agent import RolloutEngine
    from inspo_cli.config import load_recipe
    from inspo_cli.policy.backends import load_backend
    from inspo_cli.policy.models import uses_chat_template
    from inspo_cli.retrieval import open_from_config
    from inspo_cli.training.reward import rollout_and_score
    from inspo_cli.training.trainer_inputs import train_questions

    recipe = load_recipe(ROOT / "recipes/demo.yaml", [f"run.seed={seed}"])
    torch.set_num_threads(2)
    torch.manual_seed(seed)
    backend, tokenizer = load_backend(recipe.model, recipe.rollout, batch_size=64, device="cpu", seed=seed)
    engine = RolloutEngine(
        backend,
        open_from_config(recipe.retriever),
        tokenizer,
        recipe.rollout,
        topk=recipe.retriever.topk,
        chat=uses_chat_template(tokenizer, recipe.model.chat_template),
    )
    chosen = train_questions(recipe)[:questions]
    instruction = recipe.population.instructions[0]
    rewards = np.zeros((len(chosen), pool))
    started = time.time()
    for draw in range(pool):
        _, scored = rollout_and_score(engine, [instruction] * len(chosen), chosen, recipe.reward)
        rewards[:, draw] = scored
        print(
            f"world: draw {draw + 1}/{pool} done, mean reward {np.mean(scored):.3f}, {time.time() - started:.0f} s",
            flush=True,
        )
    return rewards, {
        "questions": len(chosen),
        "pool": pool,
        "seconds": round(time.time() - started, 1),
        "mean_reward": float(rewards.mean()),
        "share_always_same": float(np.mean(rewards.min(axis=1) == rewards.max(axis=1))),
    }


def world_rates(rewards: np.ndarray, repetitions: int, rng: np.random.Generator, rules: Sequence[tuple]) -> dict:
    """Acceptance rates on the world. A copy of the parent is a disjoint draw of the same real rollouts; a better
    (worse) candidate is such a draw with each reward raised to the maximum (dropped to 0) with the probability
    that moves the mean by exactly delta, so its rewards keep the world's own shape (0, 0.2 or 1). A sequential
    rule scores the questions in an order of its own per verification, as evolution shuffles D_B."""
    n, pool = rewards.shape
    top = float(rewards.max())
    rows = {}
    for rule in rules:
        label, k, margin, looks = rule
        if 2 * k > pool:
            continue
        order = np.argsort(rng.random((repetitions, n, pool)), axis=-1)  # a random permutation of draws per question
        drawn = np.take_along_axis(np.broadcast_to(rewards, (repetitions, n, pool)), order, axis=-1)
        if looks is not None:  # and of the questions
            shuffled = np.argsort(rng.random((repetitions, n)), axis=-1)[..., None]
            drawn = np.take_along_axis(drawn, np.broadcast_to(shuffled, drawn.shape), axis=1)
        parent, copy = drawn[..., :k].mean(-1), drawn[..., k : 2 * k].mean(-1)
        row: dict = {}
        record(row, "+0.00", copy, parent, rule)
        if 7 * k <= pool:  # six copies and the parent from disjoint real rollouts
            one_round(
                row,
                [judge(drawn[..., i * k : (i + 1) * k].mean(-1), parent, rule) for i in range(1, 7)],
                looks is not None,
            )
        single = drawn[..., k : 2 * k]  # the copy's own rollouts, each shifted on its own
        for delta in DELTAS:
            if delta == 0:
                continue
            if delta > 0:
                chance = delta / np.mean(top - rewards)
                moved = np.where(rng.random(single.shape) < chance, top, single)
            else:
                chance = -delta / np.mean(rewards)
                moved = np.where(rng.random(single.shape) < chance, 0.0, single)
            record(row, f"{delta:+.2f}", moved.mean(-1), parent, rule)
        rows[label] = row
    return rows


def table(rows: dict) -> str:
    lines = [
        "| rule | rollouts / question | copy of the parent turned away | 6 copies all join (one round) | "
        "joins at -0.10 | at -0.05 | at +0.05 | at +0.10 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for label, k, _, _ in RULES:
        if label not in rows:
            continue
        r = rows[label]
        one_round = f"{r['one_round']:.3f}" if "one_round" in r else "-"
        lines.append(
            f"| {label} | {k} | {1 - r['+0.00']:.3f} | {one_round} | {r['-0.10']:.3f} | "
            f"{r['-0.05']:.3f} | {r['+0.05']:.3f} | {r['+0.10']:.3f} |"
        )
    return "\n".join(lines)


def sequential_table(rows: dict) -> str:
    """What the sequential rules score: the mean share of D_B per candidate, by its true difference; the share of an
    evolution's rollouts (six copies and their parent); on the same rollouts as the fixed rule, the decisions that
    differ from its, and how many more candidates join than under it (copy, -0.05, -0.10)."""
    lines = [
        "| rule | share of D_B scored: copy | at -0.10 | at -0.05 | at +0.05 | at +0.10 | "
        "rollouts of an evolution of 6 copies + parent | decisions differing from the fixed rule's (most) | "
        "joins minus the fixed rule's, same rollouts: copy / -0.05 / -0.10 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    if not any(label in rows for label, _, _, _ in SEQUENTIAL):
        return "(no sequential rules measured: rerun with --reuse-world)"
    for label, _, _, _ in SEQUENTIAL:
        if label not in rows:
            continue
        r = rows[label]
        scored = r["scored"]
        evolution = f"{r['one_round_scored']:.3f}" if "one_round_scored" in r else "-"
        differs = max(r["differs"].values())
        excess = " / ".join(f"{r['excess'][key]:+.4f}" for key in ("+0.00", "-0.05", "-0.10"))
        lines.append(
            f"| {label} | {scored['+0.00']:.3f} | {scored['-0.10']:.3f} | {scored['-0.05']:.3f} | "
            f"{scored['+0.05']:.3f} | {scored['+0.10']:.3f} | {evolution} | {differs:.4f} | {excess} |"
        )
    return "\n".join(lines)


def plot(curves: dict, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for label, points in curves.items():
        ax.plot([d for d, _ in points], [a for _, a in points], marker="o", markersize=3, label=label)
    ax.axvline(0, color="grey", linewidth=0.8)
    ax.set_xlabel("candidate's true mean reward minus its parent's")
    ax.set_ylabel("probability the candidate joins")
    ax.set_title("Verification, |D_B| = 200 (simulated: p_q ~ Beta, mean 0.45, c = 2)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def choice(results: dict) -> str:
    """The argument for the paper recipes' defaults, with this run's figures."""
    sims = results["simulation"].values()
    old, new, two, seq = RULES[0][0], RULES[2][0], RULES[4][0], SEQUENTIAL[0][0]

    def excess(label: str, key: str) -> str:
        values = [rows[label]["excess"][key] * 100 for rows in sims if label in rows]
        return f"{min(values):+.2f} to {max(values):+.2f}"

    def span(label: str, key: str, complement: bool = False, within: str | None = None) -> str:
        values = [1 - rows[label][key] if complement else rows[label][key] for rows in sims if label in rows]
        if within is not None:
            values = [rows[label][within][key] for rows in sims if label in rows]
        low, high = f"{min(values) * 100:.1f}", f"{max(values) * 100:.1f}"
        return f"{low}%" if low == high else f"{low}-{high}%"

    return (
        f"**The paper recipes' choice: `accept: beat_parent` with `accept_margin: 1.645` and "
        f"`verify_rollouts: 1`.** "
        f"Requiring at least the parent's mean (before) turns away {span(old, '+0.00', True)} of candidates "
        f"exactly as good as their parent, so all six of an evolution join together only "
        f"{span(old, 'one_round')} of the time and App. C's one round of verification rarely holds. The paired "
        f"rule turns away {span(new, '+0.00', True)}, all six join {span(new, 'one_round')} of the time, and a "
        f"candidate better by 0.05 joins {span(new, '+0.05')}; the price is that a candidate worse by 0.05 joins "
        f"{span(new, '-0.05')} and one worse by 0.10 {span(new, '-0.10')} (most when every question is alike; on "
        f"the world, where rewards vary less, {results['world']['rates'][new]['-0.10'] * 100:.1f}%). Those that "
        f"slip in are then sampled by the rewards they earn (eq. 6), and the bottom half is pruned every K_p = 5 "
        f"steps. One rollout per question keeps App. C's count (6 x 200 rollouts per evolution); "
        f"`verify_rollouts: 2` cuts the chances of worse candidates (0.05 worse: {span(two, '-0.05')}; 0.10 "
        f"worse: {span(two, '-0.10')}) at twice the verification rollouts, about 1.6% more rollouts over a "
        f"300-step paper run (9 evolutions x 7 x 200 more against 300 x 2,560 training rollouts).\n\n"
        f"**Sequential verification (`verify_sequential: true`, off in the paper recipes: the paper scores all of "
        f"D_B).** With 4 looks (`verify_looks`, 50 questions each) it turns away {span(seq, '+0.00', True)} of "
        f"copies of the parent, admits a candidate worse by 0.05 {span(seq, '-0.05')} and one worse by 0.10 "
        f"{span(seq, '-0.10')} of the time (the fixed rule, above: {span(new, '-0.05')} and {span(new, '-0.10')}),"
        f" and on the same rollouts decides otherwise than the fixed rule in at most "
        f"{max(max(rows[seq]['differs'].values()) for rows in sims) * 100:.1f}% of verifications, admitting "
        f"{excess(seq, '-0.05')} more of the candidates worse by 0.05 and {excess(seq, '-0.10')} more of those "
        f"worse by 0.10 (percentage points; negative: fewer). It scores a "
        f"copy on {span(seq, '+0.00', within='scored')} of D_B, a candidate better by 0.10 on "
        f"{span(seq, '+0.10', within='scored')}, one worse by 0.10 on {span(seq, '-0.10', within='scored')}; an "
        f"evolution of six copies makes {span(seq, 'one_round_scored')} of the fixed rule's rollouts. Each look "
        f"is one batched call, so the saving in wall time is smaller than in rollouts."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repetitions", type=int, default=20000, help="simulated verifications per cell")
    parser.add_argument("--world", action="store_true", help="also measure on the world with the frozen warm start")
    parser.add_argument("--questions", type=int, default=200, help="world training questions (D_B)")
    parser.add_argument("--pool", type=int, default=8, help="rollouts per world question")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--reuse-world",
        action="store_true",
        help="recompute the world's rates from the rollouts kept in bench/results/verification.json",
    )
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    sequential_rng = np.random.default_rng([args.seed, 39])  # the fixed rules' draws stay those of before
    check_against_library(rng, sequential_rng)
    previous = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    results = {
        "machine": machine(("numpy", "torch", "transformers")),
        "questions": 200,
        "repetitions": args.repetitions,
        "simulation": {},
    }
    fixed = [rule for rule in RULES if rule[3] is None]
    for concentration in (0.5, 2.0, math.inf):
        results["simulation"][str(concentration)] = {
            **simulate(concentration, 200, args.repetitions, rng, fixed),
            **simulate(concentration, 200, args.repetitions, sequential_rng, SEQUENTIAL),
        }
        print(f"simulated c = {concentration}", flush=True)
    plot(
        {
            **curves(200, args.repetitions // 4, rng, fixed),
            **curves(200, args.repetitions // 4, sequential_rng, SEQUENTIAL[:1]),
        },
        FIGURE,
    )

    def rates(rewards: np.ndarray) -> dict:
        return {
            **world_rates(rewards, args.repetitions // 4, rng, fixed),
            **world_rates(rewards, args.repetitions // 4, sequential_rng, SEQUENTIAL),
        }

    if args.world:
        rewards, facts = world_pool(args.questions, args.pool, args.seed)
        results["world"] = {**facts, "rates": rates(rewards), "rewards": rewards.tolist()}
    elif "world" in previous:  # keep the last world rollouts when only the simulation is re-run
        w = previous["world"]
        results["world"] = {**w, "rates": rates(np.array(w["rewards"])) if args.reuse_world else w["rates"]}
    atomic_write_json(RESULTS, results)
    section = [
        "## Verification: telling a candidate from its parent (`python bench/verification.py --world`)",
        "",
        "What share of verifications admit a candidate, by its true difference from the parent in mean reward "
        "(App. C: 6 candidates per evolution, so one round refills the population only when all 6 join). "
        "Simulated at the paper's |D_B| = 200 with Bernoulli (EM) rewards and per-question success rates "
        f"p_q ~ Beta(mean 0.45, concentration c), {args.repetitions} verifications per cell. "
        "Results: `bench/results/verification.json`; curves: `bench/results/verification.png`.",
    ]
    for concentration, rows in results["simulation"].items():
        name = {
            "0.5": "c = 0.5 (most questions always or never solved)",
            "2.0": "c = 2",
            "inf": "c = inf (every question alike: pairing helps least)",
        }[concentration]
        section += ["", f"**Simulation, {name}**", "", table(rows), "", sequential_table(rows)]
    if "world" in results:
        w = results["world"]
        section += [
            "",
            f"**The world, frozen warm-start policy** (`recipes/demo.yaml`: its instruction, limits and "
            f"reward; {w['questions']} training questions x {w['pool']} rollouts, mean reward "
            f"{w['mean_reward']:.3f}, {w['share_always_same'] * 100:.0f}% of questions scored the same in all "
            f"{w['pool']} rollouts; {w['seconds']:.0f} s on {results['machine']['cpu_cores']} cores). The "
            "copies compare disjoint real rollouts; better and worse candidates are such rollouts with "
            "rewards raised to the top or dropped to 0 at random, at the rate that moves the mean by delta.",
            "",
            table(w["rates"]),
            "",
            sequential_table(w["rates"]),
        ]
    section += ["", choice(results)]
    update_readme_section("verification", "\n".join(section))
    print("\n".join(section))


if __name__ == "__main__":
    sys.exit(main())
