"""Dynamic sampling on the demo: how many groups of a step give no gradient, with `training.dynamic_sampling` off
and on, and what filling the batch costs.

    python bench/dynamic_sampling.py                  # the demo recipe (SmolLM2, INSPO), 8 steps each
    python bench/dynamic_sampling.py --steps 4 --set population.enabled=false

Runs `inspo train` on recipes/demo.yaml twice with the same seed, the switch off then on, alone on the machine (one
after the other), and reads their metrics.jsonl. Per step: `groups/equal_rewards`, the share of the trained batch's
groups whose rollouts all earned the same reward (zero advantage: no policy gradient); with the switch on, also the
share of all generated groups with equal rewards, the extra rollouts (per rollout of the batch), the extra rounds,
and the share of the batch that had to be filled with dropped groups once the rounds ran out. Wall time is the
whole run's (evolution and evaluation included) and per step (TRL's time of generation and update).

Writes bench/results/dynamic_sampling.json and the "Dynamic sampling" section of bench/README.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, machine, update_readme_section

from inspo_cli.jsonio import atomic_write_json  # noqa: E402
from inspo_cli.runs import RunDir  # noqa: E402

KEYS = (
    "groups/equal_rewards",
    "dynamic_sampling/equal_generated",
    "dynamic_sampling/extra_rollouts",
    "dynamic_sampling/rounds",
    "dynamic_sampling/unfilled",
    "reward",
    "em",
    "frac_reward_zero_std",
)


def run(name: str, switch: bool, steps: int, out: Path, extra: list[str]) -> dict:
    command = [
        sys.executable,
        "-m",
        "inspo_cli",
        "train",
        "--recipe",
        str(ROOT / "recipes/demo.yaml"),
        "--output-dir",
        str(out),
        "--name",
        name,
        "--set",
        f"training.steps={steps}",
        "--set",
        f"training.eval_every={steps}",
        "--set",
        f"training.save_every={steps}",
        "--set",
        f"training.dynamic_sampling={'true' if switch else 'false'}",
    ]
    for item in extra:
        command += ["--set", item]
    started = time.perf_counter()
    done = subprocess.run(
        command, cwd=ROOT, env={**os.environ, "TRL_EXPERIMENTAL_SILENCE": "1"}, capture_output=True, text=True
    )
    seconds = time.perf_counter() - started
    if done.returncode:
        raise SystemExit(f"{name}: inspo train failed\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    rows = RunDir(out / name).metrics()
    return {
        "dynamic_sampling": switch,
        "wall_seconds": round(seconds, 1),
        "steps": [
            {
                "step": r["step"],
                **{k: r[k] for k in KEYS if k in r},
                "seconds": round(
                    r.get("time/generation", 0)
                    + r.get("time/retrieval", 0)
                    + r.get("time/scoring", 0)
                    + r.get("time/update", 0),
                    1,
                ),
            }
            for r in rows
        ],
    }


def mean(rows: list[dict], key: str) -> float | None:
    values = [r[key] for r in rows if key in r]
    return round(statistics.fmean(values), 3) if values else None


def section(result: dict) -> str:
    lines = [
        "## Dynamic sampling",
        "",
        f"`{result['command']}` on {result['machine']['cpu_cores']} CPU cores ({result['machine']['cpu']}): "
        f"recipes/demo.yaml, {result['steps']} steps, the recipe's seed, each run alone"
        + (f", with {' '.join(result['set'])}" if result["set"] else "")
        + ". Means over the steps; "
        "`equal-reward groups trained` is the share of the trained batch's groups with zero advantage.",
        "",
        "| dynamic_sampling | equal-reward groups trained | equal-reward groups generated | extra rollouts "
        "per batch rollout | extra rounds | batch filled with dropped groups | reward | EM | s / step | "
        "run wall s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for side in result["runs"]:
        rows = side["steps"]

        def cell(key, spec="g"):
            value = mean(rows, key)
            return "—" if value is None else format(value, spec)

        lines.append(
            f"| {'on' if side['dynamic_sampling'] else 'off'} | {cell('groups/equal_rewards')} | "
            f"{cell('dynamic_sampling/equal_generated')} | {cell('dynamic_sampling/extra_rollouts')} | "
            f"{cell('dynamic_sampling/rounds')} | {cell('dynamic_sampling/unfilled')} | {cell('reward')} | "
            f"{cell('em')} | {cell('seconds', '.1f')} | {side['wall_seconds']:g} |"
        )
    off, on = result["runs"]
    lines += [
        "",
        "Per step, equal-reward groups trained (off → on): "
        + ", ".join(
            f"{a.get('groups/equal_rewards', float('nan')):.2f} → {b.get('groups/equal_rewards', float('nan')):.2f}"
            for a, b in zip(off["steps"], on["steps"])
        )
        + ".",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--set", action="append", default=[], help="more recipe overrides, for both runs")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="inspo-dynamic-sampling-") as tmp:
        runs = [run(name, switch, args.steps, Path(tmp), args.set) for name, switch in (("off", False), ("on", True))]
    result = {
        "command": "python bench/dynamic_sampling.py"
        + "".join(f" --set {s}" for s in args.set)
        + (f" --steps {args.steps}" if args.steps != 8 else ""),
        "steps": args.steps,
        "set": args.set,
        "machine": machine(("torch", "transformers", "trl")),
        "runs": runs,
    }
    atomic_write_json(ROOT / "bench/results/dynamic_sampling.json", result)
    update_readme_section("dynamic-sampling", section(result))
    print(section(result))


if __name__ == "__main__":
    main()
