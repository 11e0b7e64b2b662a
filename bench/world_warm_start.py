"""Does the laptop policy learn to search? SmolLM2-135M on the synthetic world before and after the warm start
(SFT on the world's oracle trajectories, recipes/world-warm-start.yaml), through the CLI as a user runs it:

    inspo evaluate --recipe recipes/world-warm-start.yaml --model smollm2-135m-instruct --limit N   # before
    inspo train --recipe recipes/world-warm-start.yaml                                           # warm start
    inspo evaluate --run <that run> --limit N                                                     # after

Both evaluations use the same instruction (the demo's worked example), limits (2 search turns, 256-token
observations), BM25 top 3 and greedy decoding, on the first N questions of the world's test split. Reported per
question type: EM, searches per question, the share of turns with a valid action, and the share answered.

    python bench/world_warm_start.py --limit 200 [--set training.steps=20] [--before DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from _common import ROOT, machine, update_readme_section

from inspo_cli.jsonio import atomic_write_json

RECIPE = "recipes/world-warm-start.yaml"
TYPES = ("single_hop", "bridge", "comparison", "temporal")


def inspo(*args: str) -> float:
    started = time.time()
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-m", "inspo_cli", *args], cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"inspo {' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return time.time() - started


def by_type(
    predictions: Path, world: str = "data/world", types: tuple[str, ...] = TYPES, tools: tuple[str, ...] = ()
) -> dict:
    """Per question type of `world`'s test split (and all): n, EM, searches per question, valid-action rate, share
    answered, and for each of `tools` its calls per question (`<tool>_calls`)."""
    type_of = {}
    for line in (ROOT / world / "test.jsonl").open():
        row = json.loads(line)
        type_of[row["id"]] = row["type"]
    groups = defaultdict(list)
    for line in predictions.open():
        row = json.loads(line)
        groups[type_of[row["id"]]].append(row)
        groups["all"].append(row)
    out = {}
    for name in (*types, "all"):
        rows = groups.get(name, [])
        n = len(rows)
        turns = sum(r["turns"] for r in rows)
        out[name] = {
            "n": n,
            "em": sum(r["em"] for r in rows) / n if n else None,
            "searches": sum(r["searches"] for r in rows) / n if n else None,
            **{
                f"{tool}_calls": sum(r.get("tool_calls", {}).get(tool, 0) for r in rows) / n if n else None
                for tool in tools
            },
            "valid_action_rate": 1 - sum(r["invalid_actions"] for r in rows) / turns if turns else None,
            "answered": sum(r["stop_reason"] == "answer" for r in rows) / n if n else None,
        }
    return out


def table(results: dict) -> str:
    lines = [
        "| policy | question type | n | EM | searches / question | valid-action rate | answered |",
        "|---|---|---|---|---|---|---|",
    ]
    for policy in ("before", "after"):
        for name, row in results[policy].items():
            lines.append(
                f"| {policy} | {name} | {row['n']} | {row['em']:.3f} | {row['searches']:.2f} | "
                f"{row['valid_action_rate']:.2f} | {row['answered']:.2f} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=200, help="test questions (the split has 200)")
    parser.add_argument("--set", action="append", default=[], dest="overrides", help="recipe override for training")
    parser.add_argument(
        "--before",
        type=Path,
        help="an `inspo evaluate` output directory of the base model with "
        "these settings and --limit, to reuse instead of evaluating it again",
    )
    args = parser.parse_args()
    sets = [item for override in args.overrides for item in ("--set", override)]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        before = args.before or work / "before"
        seconds = {
            "before": None
            if args.before
            else inspo(
                "evaluate",
                "--recipe",
                RECIPE,
                "--model",
                "smollm2-135m-instruct",
                "--method",
                "agent",
                "--limit",
                str(args.limit),
                "--device",
                "cpu",
                "--out",
                str(before),
            )
        }
        seconds["train"] = inspo(
            "train",
            "--recipe",
            RECIPE,
            *sets,
            "--device",
            "cpu",
            "--output-dir",
            str(work / "runs"),
            "--name",
            "warm-start",
        )
        run = work / "runs/warm-start"
        seconds["after"] = inspo(
            "evaluate", "--run", str(run), "--limit", str(args.limit), "--device", "cpu", "--out", str(work / "after")
        )
        results = {"before": by_type(before / "predictions.jsonl"), "after": by_type(work / "after/predictions.jsonl")}
        summary = json.loads((run / "summary.json").read_text())
        rows = [json.loads(line) for line in (run / "metrics.jsonl").open()]
    report = {
        "recipe": RECIPE,
        "overrides": args.overrides,
        "test_questions": args.limit,
        "seconds": seconds,
        "training": {
            "steps": summary["steps"],
            "loss_first": rows[0]["loss"],
            "loss_last": rows[-1]["loss"],
            "token_accuracy_last": rows[-1].get("mean_token_accuracy"),
        },
        "results": results,
        "machine": machine(("torch", "transformers", "trl")),
    }
    atomic_write_json(ROOT / "bench/results/world_warm_start.json", report)
    overrides = " ".join(f"--set {o}" for o in args.overrides)
    section = (
        f"## World warm start (`bench/world_warm_start.py --limit {args.limit} {overrides}`)\n\n"
        f"SmolLM2-135M before and after SFT on the world's oracle trajectories ({RECIPE}"
        f"{', ' + ', '.join(args.overrides) if args.overrides else ''}: {summary['steps']} steps, loss "
        f"{rows[0]['loss']:.3f} → {rows[-1]['loss']:.3f}), on the first {args.limit} test questions, greedy, "
        f"same instruction and limits. Wall time: warm start {seconds['train']:.0f} s, evaluation after "
        f"{seconds['after']:.0f} s "
        f"({report['machine']['cpu_cores']} cores).\n\n" + table(results)
    )
    update_readme_section("world_warm_start", section)
    print(section)


if __name__ == "__main__":
    main()
