"""The warm start the laptop demo starts from: export the LoRA adapter of a `recipes/world-warm-start-lora.yaml` run
to data/warm-start/ (bf16, base named by its packaged name so it loads anywhere), then measure the exported adapter
on the world's test split exactly as bench/world_warm_start.py measures its policies (the demo's worked-example
instruction, 2 search turns, 256-token observations, BM25 top 3, greedy):

    inspo train --recipe recipes/world-warm-start-lora.yaml --name warm-start-lora     # ~27 min on 2 cores
    python bench/warm_start_adapter.py --run runs/warm-start-lora --limit 100

Writes data/warm-start/smollm2-135m-world/ (adapter_config.json, adapter_model.safetensors),
data/warm-start/README.md (what it is, the commands, its SHA-256, its scores), bench/results/warm_start_adapter.json
and its bench/README.md section. The base model's scores ("before") are bench/world_warm_start.py's.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import tempfile
from pathlib import Path

from _common import ROOT, machine, update_readme_section
from world_warm_start import TYPES, by_type, inspo

from inspo_cli.jsonio import atomic_write_json, atomic_write_text
from inspo_cli.runs import RunDir

OUT = ROOT / "data/warm-start/smollm2-135m-world"
RECIPE = "recipes/world-warm-start-lora.yaml"
EVAL_RECIPE = "recipes/world-warm-start.yaml"  # the limits and instruction the warm start was trained with


def export(run: RunDir, out: Path) -> str:
    """The run's newest checkpoint's adapter, in bf16, naming its base as the recipe does; returns its SHA-256."""
    import torch
    from safetensors.torch import load_file, save_file

    checkpoint = run.latest_checkpoint()
    if checkpoint is None or not (checkpoint / "adapter_model.safetensors").is_file():
        raise SystemExit(f"{run} has no checkpoint with a LoRA adapter; train {RECIPE} first")
    config = json.loads((checkpoint / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = run.recipe().model.name_or_path  # e.g. smollm2-135m-instruct
    weights = {
        k: v.to(torch.bfloat16).contiguous() for k, v in load_file(checkpoint / "adapter_model.safetensors").items()
    }
    tmp = Path(tempfile.mkdtemp(dir=out.parent if out.parent.exists() else None))
    save_file(weights, tmp / "adapter_model.safetensors", metadata={"format": "pt"})
    (tmp / "adapter_config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    for path in (tmp, tmp / "adapter_model.safetensors", tmp / "adapter_config.json"):
        path.chmod(0o755 if path.is_dir() else 0o644)  # mkdtemp's are private
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(out, ignore_errors=True)
    shutil.move(str(tmp), out)
    return hashlib.sha256((out / "adapter_model.safetensors").read_bytes()).hexdigest()


def table(rows: dict) -> str:
    lines = [
        "| policy | question type | n | EM | searches / question | valid-action rate | answered |",
        "|---|---|---|---|---|---|---|",
    ]
    for policy, results in rows.items():
        for name in (*TYPES, "all"):
            row = results[name]
            lines.append(
                f"| {policy} | {name} | {row['n']} | {row['em']:.3f} | {row['searches']:.2f} | "
                f"{row['valid_action_rate']:.2f} | {row['answered']:.2f} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", type=Path, required=True, help="a finished run of " + RECIPE)
    parser.add_argument("--limit", type=int, default=100, help="test questions (the split has 200)")
    args = parser.parse_args()
    run = RunDir.open(args.run)
    sha = export(run, OUT)
    with tempfile.TemporaryDirectory() as tmp:
        seconds = inspo(
            "evaluate",
            "--recipe",
            EVAL_RECIPE,
            "--model",
            str(OUT),
            "--method",
            "agent",
            "--limit",
            str(args.limit),
            "--device",
            "cpu",
            "--out",
            str(Path(tmp) / "after"),
        )
        after = by_type(Path(tmp) / "after/predictions.jsonl")
    base = json.loads((ROOT / "bench/results/world_warm_start.json").read_text())
    if base["test_questions"] != args.limit:
        raise SystemExit(
            f"bench/results/world_warm_start.json measured {base['test_questions']} questions; "
            f"use --limit {base['test_questions']}"
        )
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
        "test_questions": args.limit,
        "evaluation_seconds": round(seconds, 1),
        "results": {"before": base["results"]["before"], "after": after},
        "machine": machine(("torch", "transformers", "trl", "peft")),
    }
    atomic_write_json(ROOT / "bench/results/warm_start_adapter.json", report)
    scores = table({"SmolLM2-135M": base["results"]["before"], "+ warm-start adapter": after})
    t = report["training"]
    section = (
        f"## Warm-start adapter (`bench/warm_start_adapter.py --run <run of {RECIPE}> --limit {args.limit}`)\n\n"
        f"The LoRA adapter the demo starts from, exported to `{report['adapter']}` (bf16, "
        f"{report['size_bytes'] / 1e6:.1f} MB, SHA-256 `{sha}`), after {t['steps']} steps (loss "
        f"{t['loss_first']:.3f} → {t['loss_last']:.3f}, {t['seconds'] or 0:.0f} s on "
        f"{report['machine']['cpu_cores']} cores), on the first {args.limit} test questions of the world, "
        f"greedy, with {EVAL_RECIPE}'s instruction and limits:\n\n" + scores
    )
    update_readme_section("warm_start_adapter", section)
    atomic_write_text(
        OUT.parent / "README.md",
        f"""# Warm start for the laptop demo

`smollm2-135m-world/` is a LoRA adapter (rank 16 on every linear layer) for the packaged SmolLM2-135M-Instruct
(`smollm2-135m-instruct`), fine-tuned on the synthetic world's oracle trajectories: a `<search>` for each hop's
entity, the retrieved passages (masked out of the loss), the `<answer>`. `recipes/demo.yaml` starts from it;
any recipe can (`model.name_or_path: data/warm-start/smollm2-135m-world`): it is merged into its base once and
cached under `$INSPO_CACHE/merged/`.

Reproduce it (about {(t["seconds"] or 0) / 60:.0f} min on {report["machine"]["cpu_cores"]} CPU cores):

    inspo train --recipe {RECIPE} --name warm-start-lora
    python bench/warm_start_adapter.py --run runs/warm-start-lora --limit {args.limit}

SHA-256 of `adapter_model.safetensors` (bf16): `{sha}`

Measured on the first {args.limit} questions of the world's test split (greedy; the demo's worked-example
instruction, 2 search turns, 256-token observations, BM25 top 3):

{scores}
""",
    )
    print(section)


if __name__ == "__main__":
    main()
