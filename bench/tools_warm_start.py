"""Can the laptop policy use the calculator? The tools warm start (recipes/world-tools/warm-start-lora.yaml: LoRA
SFT of SmolLM2-135M on the tools world's oracle trajectories, with search and the calculator) exported to
data/warm-start/smollm2-135m-world-tools/, then evaluated on the tools world's test split (data/world-tools, 30%
arithmetic) through the CLI, with recipes/world-tools/static.yaml's limits (3 tool turns, 256-token observations,
BM25 top 3, greedy), four ways:

- `search + calculator`: the tools adapter with both tools and the instruction it was trained with;
- `search only`: the same policy and instruction, but the agent has no calculator (a `<calculate>` gets the
  corrective observation), so the subtraction must be done in its head;
- `search only, search instruction`: the same policy, no calculator, and the demo's search-only instruction;
- `demo warm start, search only`: the demo's warm start (data/warm-start/smollm2-135m-world, trained on searches
  alone) with the demo's instruction, as the demo runs it.

    inspo train --recipe recipes/world-tools/warm-start-lora.yaml --name warm-start-tools    # ~30 min on 2 cores
    python bench/tools_warm_start.py --run runs/warm-start-tools --limit 200

Writes the adapter, its README, bench/results/tools_warm_start.json and bench/README.md's section: per policy and
question type, EM, searches and calculator calls per question, the valid-action rate and the share answered.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from _common import ROOT, machine, update_readme_section
from warm_start_adapter import export
from world_warm_start import by_type as world_by_type
from world_warm_start import inspo

from inspo_cli.config.instruction_defaults import WORKED_EXAMPLE_INSTRUCTION
from inspo_cli.jsonio import atomic_write_json, atomic_write_text
from inspo_cli.runs import RunDir

OUT = ROOT / "data/warm-start/smollm2-135m-world-tools"
RECIPE = "recipes/world-tools/warm-start-lora.yaml"
EVAL_RECIPE = "recipes/world-tools/static.yaml"
DEMO_ADAPTER = "data/warm-start/smollm2-135m-world"
TYPES = ("single_hop", "bridge", "comparison", "temporal", "arithmetic")


def by_type(predictions: Path) -> dict:
    """Per question type (and all): n, EM, searches and calculator calls per question, valid-action rate, answered."""
    return world_by_type(predictions, "data/world-tools", TYPES, tools=("calculator",))


def table(results: dict) -> str:
    lines = [
        "| policy | question type | n | EM | searches / question | calculator calls / question | "
        "valid-action rate | answered |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for policy, rows in results.items():
        for name in (*TYPES, "all"):
            row = rows[name]
            lines.append(
                f"| {policy} | {name} | {row['n']} | {row['em']:.3f} | {row['searches']:.2f} | "
                f"{row['calculator_calls']:.2f} | {row['valid_action_rate']:.2f} | {row['answered']:.2f} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", type=Path, required=True, help="a finished run of " + RECIPE)
    parser.add_argument("--limit", type=int, default=200, help="test questions (the split has 200)")
    args = parser.parse_args()
    run = RunDir.open(args.run)
    sha = export(run, OUT)
    search_only = Path(tempfile.mkdtemp()) / "search-instruction.txt"
    search_only.write_text(WORKED_EXAMPLE_INSTRUCTION)
    common = ("--recipe", EVAL_RECIPE, "--method", "agent", "--limit", str(args.limit), "--device", "cpu")
    settings = {
        "search + calculator": ("--model", str(OUT)),
        "search only": ("--model", str(OUT), "--set", "agent.tools=[search]"),
        "search only, search instruction": (
            "--model",
            str(OUT),
            "--set",
            "agent.tools=[search]",
            "--instruction",
            str(search_only),
        ),
        "demo warm start, search only": (
            "--model",
            DEMO_ADAPTER,
            "--set",
            "agent.tools=[search]",
            "--instruction",
            str(search_only),
        ),
    }
    results, seconds = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, options) in enumerate(settings.items()):
            out = Path(tmp) / str(i)
            seconds[name] = round(inspo("evaluate", *common, *options, "--out", str(out)), 1)
            results[name] = by_type(out / "predictions.jsonl")
            print(f"{name}: EM {results[name]['all']['em']:.3f} ({seconds[name]:.0f} s)", flush=True)
    metrics = run.metrics()
    summary = run.summary() or {}
    report = {
        "recipe": RECIPE,
        "adapter": str(OUT.relative_to(ROOT)),
        "sha256": sha,
        "size_bytes": (OUT / "adapter_model.safetensors").stat().st_size,
        "training": {
            "steps": metrics[-1]["step"],
            "loss_first": metrics[0]["loss"],
            "loss_last": metrics[-1]["loss"],
            "seconds": summary.get("wall_seconds"),
        },
        "evaluation_recipe": EVAL_RECIPE,
        "test_questions": args.limit,
        "evaluation_seconds": seconds,
        "results": results,
        "machine": machine(("torch", "transformers", "trl", "peft")),
    }
    atomic_write_json(ROOT / "bench/results/tools_warm_start.json", report)
    t = report["training"]
    scores = table(results)
    arithmetic = {name: rows["arithmetic"]["em"] for name, rows in results.items()}
    section = (
        f"## Tools warm start (`bench/tools_warm_start.py --run <run of {RECIPE}> --limit {args.limit}`)\n\n"
        f"The LoRA adapter `recipes/world-tools/` starts from, exported to `{report['adapter']}` (bf16, "
        f"{report['size_bytes'] / 1e6:.1f} MB, SHA-256 `{sha}`), after {t['steps']} steps (loss "
        f"{t['loss_first']:.3f} → {t['loss_last']:.3f}, {t['seconds'] or 0:.0f} s on "
        f"{report['machine']['cpu_cores']} cores), on the first {args.limit} test questions of the tools world "
        f"(data/world-tools), greedy, with {EVAL_RECIPE}'s limits (3 tool turns). The same policy with and "
        "without the calculator, and the demo's warm start (trained on searches alone):\n\n"
        + scores
        + "\n\nOn the arithmetic questions: "
        + ", ".join(f"{name} {em:.3f}" for name, em in arithmetic.items())
        + "."
    )
    update_readme_section("tools_warm_start", section)
    atomic_write_text(
        OUT / "README.md",
        f"""# Tools warm start

A LoRA adapter (rank 16 on every linear layer) for the packaged SmolLM2-135M-Instruct (`smollm2-135m-instruct`),
fine-tuned on the tools world's oracle trajectories (data/world-tools): a `<search>` for each hop, the retrieved
passages, for an arithmetic question a `<calculate>` of its two years and the calculator's result (observations
masked out of the loss), then the `<answer>`. `recipes/world-tools/` starts from it.

Reproduce it (about {(t["seconds"] or 0) / 60:.0f} min on {report["machine"]["cpu_cores"]} CPU cores):

    inspo train --recipe {RECIPE} --name warm-start-tools
    python bench/tools_warm_start.py --run runs/warm-start-tools --limit {args.limit}

SHA-256 of `adapter_model.safetensors` (bf16): `{sha}`. Its scores: bench/README.md, "Tools warm start".
""",
    )
    print(section)


if __name__ == "__main__":
    main()
