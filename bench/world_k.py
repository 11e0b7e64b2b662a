"""Instructions per question (k) on the laptop world: what the finished `bench/ablations/world-k.yaml` ablation says.

    inspo ablate --sweep bench/ablations/world-k.yaml --out runs/ablations/world-k    # 9 runs, ~2 h on 2 cores
    python bench/world_k.py runs/ablations/world-k                                    # this table, into README.md

Per variant, over its seeds (every variant spends the same rollouts: 4 questions x G 4 per step, 8 steps):
- held-out EM at App. B's checkpoint, with its 95% interval over seeds and questions and the difference to k1
  (`inspo ablate --collect`'s table, read here);
- training reward and EM over the last half of training, mean over seeds with Student's t interval over seeds;
- the questions behind an instruction's weight each step (eq. 6 is fed by the groups an instruction was sampled for:
  at k 2 each question feeds two instructions) and the RMS step-to-step change of the three initial instructions'
  weights (noise in the estimates, and the policy's own change, which every variant has);
- how fast the best initial instruction is identified: "best" is the one with the highest reward pooled over every
  rollout of every run of the ablation (no run knows it); per run, the first step from which it has the highest
  weight among the initial instructions alive and keeps it to the end (9: never), and whether the run's final I*
  is it.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

from _common import ROOT, machine, update_readme_section

INITIAL = ("i0", "i1", "i2")


def t_interval(values: list[float]) -> tuple[float, float | None]:
    """(mean, half width of the 95% t interval over `values`); None with one value."""
    from scipy import stats

    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, None
    return mean, float(stats.t.ppf(0.975, len(values) - 1)) * statistics.stdev(values) / math.sqrt(len(values))


def run_measures(run, steps: int) -> dict:
    instructions = {i["id"]: i for i in run.instructions()}
    metrics = run.metrics()
    half = [m for m in metrics if m["step"] > steps // 2]
    exposure = []
    for step in range(1, steps + 1):
        groups = [g for i in instructions.values() for s, _, g in i.get("step_rewards", []) if s == step]
        if groups:
            exposure.append(statistics.fmean(groups))
    changes = []
    for iid in INITIAL:
        history = dict(map(tuple, instructions.get(iid, {}).get("weight_history", [])))
        changes += [(history[s] - history[s - 1]) ** 2 for s in history if s - 1 in history]
    return {
        "reward": statistics.fmean(m["reward"] for m in half),
        "em": statistics.fmean(m["em"] for m in half),
        "questions_per_weight": statistics.fmean(exposure) if exposure else None,
        "weight_change_rms": math.sqrt(statistics.fmean(changes)) if changes else None,
        "instructions": instructions,
        "best_instruction_id": (run.summary() or {}).get("best_instruction_id"),
    }


def identified_at(instructions: dict, best: str, steps: int) -> int:
    """The first step from which `best` has the highest weight among the initial instructions alive, to the end."""
    histories = {i: dict(map(tuple, instructions[i].get("weight_history", []))) for i in INITIAL if i in instructions}
    first = steps + 1
    for step in range(steps, 0, -1):
        alive = {i: h[step] for i, h in histories.items() if step in h}
        if best not in alive or max(alive.values()) > alive[best]:
            break
        first = step
    return first


def pooled_best(measures: list[dict]) -> tuple[str, dict[str, float]]:
    totals = {i: [0.0, 0] for i in INITIAL}
    for m in measures:
        for iid in INITIAL:
            for _, mean, groups in m["instructions"].get(iid, {}).get("step_rewards", []):
                totals[iid][0] += mean * groups
                totals[iid][1] += groups
    rates = {i: s / n for i, (s, n) in totals.items() if n}
    return max(rates, key=rates.__getitem__), rates


def fmt(mean: float | None, half: float | None, digits: int = 3) -> str:
    if mean is None:
        return "-"
    return f"{mean:.{digits}f}" + ("" if half is None else f" ± {half:.{digits}f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("ablation", type=Path)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from inspo_cli.ablation.directory import AblationDir
    from inspo_cli.ablation.table import collect

    ablation = AblationDir.open(args.ablation)
    table = collect(ablation)
    steps = max(int(r["last_step"]) for row in table["rows"] for r in row["runs"])
    per_variant: dict[str, list[dict]] = {}
    for run in ablation.plan.runs():
        directory = ablation.run_dir(run)
        if directory.summary() is not None:
            per_variant.setdefault(run.variant, []).append(run_measures(directory, steps))
    best, rates = pooled_best([m for ms in per_variant.values() for m in ms])
    comparisons = {c["variant"]: c for c in table["comparisons"]}
    rows, out = [], {}
    for row in table["rows"]:
        name, ms = row["variant"], per_variant.get(row["variant"], [])
        if not ms:
            continue
        found = [identified_at(m["instructions"], best, steps) for m in ms]
        held = row["average"]
        c = comparisons.get(name)
        out[name] = {
            "seeds": row["seeds"],
            "held_out_em": held,
            "difference_to_k1": None if c is None else c["average"],
            "training_reward": t_interval([m["reward"] for m in ms]),
            "training_em": t_interval([m["em"] for m in ms]),
            "questions_per_weight": t_interval([m["questions_per_weight"] for m in ms]),
            "weight_change_rms": t_interval([m["weight_change_rms"] for m in ms]),
            "best_identified_at": found,
            "final_is_best": [m["best_instruction_id"] == best for m in ms],
        }
        o = out[name]
        interval = "" if held["low"] is None else f" [{held['low']:.3f}, {held['high']:.3f}]"
        delta = (
            "(reference)"
            if c is None
            else f"{c['average']['diff']:+.3f} [{c['average']['low']:+.3f}, {c['average']['high']:+.3f}], "
            f"p = {c['average']['p']:.2f}"
            if c["average"]["low"] is not None
            else f"{c['average']['diff']:+.3f}"
        )
        rows.append(
            f"| {name} | {len(ms)} | {held['mean']:.3f}{interval} | {delta} | {fmt(*o['training_reward'])} | "
            f"{fmt(*o['training_em'])} | {fmt(*o['questions_per_weight'], digits=2)} | "
            f"{fmt(*o['weight_change_rms'])} | {', '.join(map(str, found))} | "
            f"{sum(o['final_is_best'])} of {len(ms)} |"
        )
    results = {
        "machine": machine(("torch", "transformers", "trl")),
        "command": f"python bench/world_k.py {args.ablation}",
        "best_initial_instruction": best,
        "pooled_reward_by_initial_instruction": rates,
        "variants": out,
    }
    (ROOT / "bench/results").mkdir(exist_ok=True)
    (ROOT / "bench/results/world_k.json").write_text(json.dumps(results, indent=2) + "\n")
    rates_text = ", ".join(f"{i} {r:.3f}" for i, r in rates.items())
    section = "\n".join(
        [
            f"`inspo ablate --sweep bench/ablations/world-k.yaml --out {args.ablation}`, then "
            f"`python bench/world_k.py {args.ablation}`.",
            "",
            "| variant | seeds | held-out EM [95% CI] | Δ vs k1 [95% CI] | training reward (last half) | training EM "
            "(last half) | questions per weight per step | weight change per step (RMS) | step best identified "
            "(per seed; 9 never) | final I* is the best |",
            "|---|---|---|---|---|---|---|---|---|---|",
            *rows,
            "",
            f"Best initial instruction (reward pooled over every rollout of every run): {best} ({rates_text}). "
            "Training columns: mean ± 95% t half-width over seeds.",
        ]
    )
    update_readme_section("world_k", section)
    print(section)


if __name__ == "__main__":
    main()
