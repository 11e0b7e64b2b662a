"""Table 1 on the laptop: every row of the paper's Table 1 (Direct, SFT, GRPO without search, IRCoT, RAG, SFT by
rejection sampling, Search-o1, Search-R1, INSPO) on the bundled world, trained and evaluated through the CLI as a
user runs it, and laid out as the paper's table with the world's question types as its columns.

Every row starts from the shipped warm start and has the demo's limits (recipes/world-table1/search-r1.yaml says
why); the commands, one per row and seed:

    inspo evaluate --recipe recipes/world-table1/inference.yaml --limit N             # Direct, IRCoT, RAG, Search-o1
    inspo train --recipe recipes/world-table1/<sft|grpo-no-search|rejection-sampling|search-r1>.yaml --set run.seed=S
    inspo train --recipe recipes/demo.yaml --set run.seed=S                            # INSPO
    inspo evaluate --run <each run> --limit N

    python bench/world_table1.py [--seeds 0,1,2] [--limit 100] [--work runs/table1]

Everything goes under --work, and a stage whose output is there is not run again: a killed script continues where
it stopped (a killed training run resumes from its newest checkpoint). Writes bench/results/world_table1.json and
its bench/README.md section. About 75 min on 2 CPU cores for one seed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
from pathlib import Path

from _common import ROOT, machine, update_readme_section
from world_warm_start import TYPES, inspo

from inspo_cli.jsonio import atomic_write_json

INFERENCE = "recipes/world-table1/inference.yaml"
# (section, row label, how it is made): a method of `inspo evaluate`, or a recipe to train and then evaluate
ROWS = (
    ("Model inference", "Direct", ("method", "direct")),
    ("Model inference", "SFT", ("train", "recipes/world-table1/sft.yaml")),
    ("Model inference", "GRPO (no search)", ("train", "recipes/world-table1/grpo-no-search.yaml")),
    ("Tool-integrated", "IRCoT", ("method", "ircot")),
    ("Tool-integrated", "RAG", ("method", "rag")),
    ("Tool-integrated", "SFT (rejection sampling)", ("train", "recipes/world-table1/rejection-sampling.yaml")),
    ("Tool-integrated", "Search-o1", ("method", "search-o1")),
    ("Tool-integrated", "Search-R1 (GRPO, static instruction)", ("train", "recipes/world-table1/search-r1.yaml")),
    ("Tool-integrated", "INSPO", ("train", "recipes/demo.yaml")),
)
START = ("Starting point", "warm start (agent, untrained)", ("method", "agent"))


class Stages:
    """Seconds each finished stage took, kept in the work directory so a resumed script still reports them."""

    def __init__(self, work: Path) -> None:
        self.file = work / "stages.json"
        self.seconds = json.loads(self.file.read_text()) if self.file.exists() else {}

    def run(self, name: str, done: Path, *args: str) -> None:
        if done.exists() and name in self.seconds:
            print(f"{name}: done before ({self.seconds[name]:.0f} s)", flush=True)
            return
        print(f"{name}: inspo {' '.join(args)}", flush=True)
        self.seconds[name] = inspo(*args)
        atomic_write_json(self.file, self.seconds)
        print(f"{name}: {self.seconds[name]:.0f} s", flush=True)


def train(stages: Stages, recipe: str, seed: int, runs: Path, name: str, overrides: list[str]) -> Path:
    run = runs / name
    if run.exists() and not (run / "summary.json").exists():  # killed: resume if it can, else start again
        from inspo_cli.runs import RunDir
        from inspo_cli.training.algorithms import PROGRESS_BEFORE_TRAINING

        opened = RunDir.open(run)
        if opened.latest_checkpoint() is not None or opened.recipe().training.algorithm in PROGRESS_BEFORE_TRAINING:
            stages.run(f"train {name}", run / "summary.json", "train", "--resume", str(run), "--device", "cpu")
            return run
        shutil.rmtree(run)
    sets = [item for override in (*overrides, f"run.seed={seed}") for item in ("--set", override)]
    stages.run(
        f"train {name}",
        run / "summary.json",
        "train",
        "--recipe",
        recipe,
        *sets,
        "--device",
        "cpu",
        "--output-dir",
        str(runs),
        "--name",
        name,
    )
    return run


def by_type(predictions: Path, types: dict[str, str]) -> dict[str, dict]:
    """{method: {question type | "all": {n, em, searches}}} from an `inspo evaluate` predictions file."""
    sums: dict[str, dict[str, list]] = {}
    for line in predictions.open():
        row = json.loads(line)
        per = sums.setdefault(row["method"], {})
        for name in (types[row["id"]], "all"):
            per.setdefault(name, []).append(row)
    return {
        method: {
            name: {
                "n": len(rows),
                "em": sum(r["em"] for r in rows) / len(rows),
                "searches": sum(r["searches"] for r in rows) / len(rows),
            }
            for name, rows in per.items()
        }
        for method, per in sums.items()
    }


def cell(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.3f}"
    return f"{statistics.mean(values):.3f} ± {statistics.stdev(values):.3f}"


def table(rows: list[dict]) -> str:
    lines = [
        "| method | " + " | ".join(TYPES) + " | avg. of types | all | searches / question |",
        "|---|" + "---|" * (len(TYPES) + 3),
    ]
    section = None
    for row in rows:
        if row["section"] != section:
            section = row["section"]
            lines.append(f"| *{section}* |" + " |" * (len(TYPES) + 3))
        per_seed = row["results"]
        ems = [[r[t]["em"] for r in per_seed] for t in TYPES]
        avg = [statistics.mean(r[t]["em"] for t in TYPES) for r in per_seed]
        lines.append(
            f"| {row['label']} | " + " | ".join(cell(e) for e in ems) + f" | **{cell(avg)}** | "
            f"{cell([r['all']['em'] for r in per_seed])} | "
            f"{statistics.mean(r['all']['searches'] for r in per_seed):.2f} |"
        )
    return "\n".join(lines)


def notes_text(notes: dict) -> str:
    lines = []
    for seed, n in notes.get("rejection_sampling", {}).items():
        lines.append(
            f"Rejection sampling, seed {seed}: phase 1 kept {n['kept']} of {n['trajectories']} trajectories "
            f"({n['questions_solved']} of {n['questions']} questions solved at least once)."
        )
    for seed, text in notes.get("inspo_best_instruction", {}).items():
        # `&lt;` so that `<search>` shows as written: raw, a browser takes it for an element and drops it
        quoted = "\n".join("> " + line.replace("<", "&lt;") for line in text.strip().splitlines())
        lines.append(f"INSPO's best instruction at the end, seed {seed}:\n\n{quoted}")
    return "".join("\n\n" + line for line in lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0", help="comma-separated training seeds (evaluation is greedy)")
    parser.add_argument("--limit", type=int, default=100, help="test questions (the split has 200)")
    parser.add_argument("--work", type=Path, default=ROOT / "runs/table1", help="where runs and evaluations go")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        dest="overrides",
        help="recipe override for every trained row (e.g. a smoke run: training.steps=1)",
    )
    parser.add_argument("--tag", default="", help="suffix of the results file and README section (e.g. _smoke)")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    stages = Stages(work)
    types = {json.loads(line)["id"]: json.loads(line)["type"] for line in (ROOT / "data/world/test.jsonl").open()}
    common = ("--limit", str(args.limit), "--device", "cpu")

    stages.run(
        "evaluate inference",
        work / "inference/results.json",
        "evaluate",
        "--recipe",
        INFERENCE,
        *common,
        "--out",
        str(work / "inference"),
    )
    inference = by_type(work / "inference/predictions.jsonl", types)
    rows, notes = [], {}
    for section, label, (kind, what) in (START, *ROWS):
        if kind == "method":
            rows.append(
                {
                    "section": section,
                    "label": label,
                    "command": f"inspo evaluate --recipe {INFERENCE}",
                    "results": [inference[what]],
                }
            )
            continue
        per_seed = []
        for seed in seeds:
            name = f"{Path(what).stem}-s{seed}"
            run = train(stages, what, seed, work / "runs", name, args.overrides)
            out = work / "evals" / name
            stages.run(
                f"evaluate {name}",
                out / "results.json",
                "evaluate",
                "--run",
                str(run),
                "--method",
                "agent",
                *common,
                "--out",
                str(out),
            )
            per_seed.append(by_type(out / "predictions.jsonl", types)["agent"])
            summary = json.loads((run / "summary.json").read_text())
            if "sampling" in summary:
                notes.setdefault("rejection_sampling", {})[seed] = {
                    k: summary["sampling"][k] for k in ("trajectories", "kept", "questions", "questions_solved")
                }
            if label == "INSPO":
                notes.setdefault("inspo_best_instruction", {})[seed] = summary["best_instruction"]
        rows.append(
            {"section": section, "label": label, "command": f"inspo train --recipe {what}", "results": per_seed}
        )

    report = {
        "test_questions": args.limit,
        "seeds": seeds,
        "overrides": args.overrides,
        "rows": rows,
        "notes": notes,
        "seconds": stages.seconds,
        "machine": machine(("torch", "transformers", "trl")),
    }
    atomic_write_json(ROOT / f"bench/results/world_table1{args.tag}.json", report)
    hours = sum(stages.seconds.values()) / 3600
    command = (
        f"bench/world_table1.py --seeds {args.seeds} --limit {args.limit}"
        + "".join(f" --set {o}" for o in args.overrides)
        + (f" --tag {args.tag}" if args.tag else "")
    )
    section = (
        f"## Table 1 on the world (`{command}`)\n\n"
        f"EM on the first {args.limit} test questions of the bundled world, greedy, by question type; every "
        f"row starts from the shipped warm start and has the demo's limits (one search turn, 128-token "
        "observations, BM25 top 3); trained rows: 8 updates (the RL rows 32 questions' worth; SFT 64 examples, "
        f"rejection sampling 8 trajectories an update over those it kept), seed(s) {args.seeds}"
        f"{' (mean ± sd)' if len(seeds) > 1 else ''}. Recipes: recipes/world-table1/ "
        "(INSPO: recipes/demo.yaml). "
        f"{hours:.1f} h on {report['machine']['cpu_cores']} CPU cores.\n\n" + table(rows) + notes_text(notes)
    )
    update_readme_section(f"world_table1{args.tag}", section)
    print(section)


if __name__ == "__main__":
    main()
