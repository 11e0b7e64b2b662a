"""summary.json: what a finished run reports, one schema for `inspo train` and `inspo evolve`.

    summary = finish_run(run, recipe, instructions, coevolution, wall, resumed_from="checkpoints/checkpoint-2")

draws the curves (plots/), builds the summary from metrics.jsonl, and writes evolutions.json (INSPO),
best_instruction.txt and summary.json, the last marking the run finished. Keys, for both kinds of run: steps,
updates, wall_seconds, compute (processes and device kind), resumed_from, reward/EM/loss over the first and last
quarter of the steps, the final row, the periodic evaluations, reward_collapse and the checkpoint App. B would
report, the best instruction and the instructions alive at the end, `frozen_policy` (true for `inspo evolve`), the
trained model's directory (None with a frozen policy), recipe_model, metrics and plots, and `overhead` (App. C's
account of what evolution cost; None without a population), and `sampling` for rejection sampling (its phase 1 in
numbers).
"""

from __future__ import annotations

from inspo_cli.collapse import detect_collapse
from inspo_cli.config import Recipe
from inspo_cli.errors import InspoError
from inspo_cli.evaluation.checkpoints import paper_choice
from inspo_cli.jsonio import read_json
from inspo_cli.runs import RunDir


def finish_run(
    run: RunDir,
    recipe: Recipe,
    instructions,
    coevolution,
    wall: float,
    resumed_from: str | None,
    frozen_policy: bool = False,
    processes: int = 1,
    device: str = "cpu",
) -> dict:
    """Plots, summary and the run's closing files (call on the main process only). `processes` and `device`: what
    the run ran on (its last session's, after a resume), for the cost columns (`ablation.cost`)."""
    from inspo_cli.training.run_logger import plot_curves  # imports transformers and torch

    plots = plot_curves(run)
    summary = run_summary(
        run, recipe, instructions, wall, resumed_from, [run.relative(p) for p in plots], frozen_policy
    )
    summary["compute"] = {"processes": processes, "device": device.split(":")[0]}
    if coevolution is not None:
        summary["overhead"] = overhead_account(coevolution, recipe, summary["steps"], wall)
    if run.sampling_summary_file.is_file():  # rejection sampling's phase 1
        summary["sampling"] = read_json(
            run.sampling_summary_file, dict, f"delete {run.sampling_dir} and resume: phase 1 samples again"
        )
    run.write_outcome(summary, summary["best_instruction"], coevolution.reports if coevolution is not None else None)
    return summary


def run_summary(
    run: RunDir,
    recipe: Recipe,
    instructions,
    wall: float,
    resumed_from: str | None,
    plots: list[str],
    frozen_policy: bool = False,
) -> dict:

    rows = run.metrics()

    def mean(key: str, part: list[dict]) -> float | None:
        values = [row[key] for row in part if row.get(key) is not None]
        return sum(values) / len(values) if values else None

    best = instructions.best_pick()
    if hasattr(instructions, "alive"):  # the population
        listed = [{"id": c.id, "text": c.text, "weight": c.weight, "alive": c.alive} for c in instructions.alive()]
    else:
        listed = [{"id": best.instruction_id, "text": best.text}]
    window = max(1, len(rows) // 4)
    e = recipe.evaluation
    collapse = detect_collapse(rows, e.collapse_window, e.collapse_drop)
    selected = None
    if not frozen_policy:
        try:
            selected = paper_choice(run, recipe)
        except InspoError as error:  # collapsed before the first checkpoint: say so, the run itself is fine
            selected = str(error)
    evaluations = [
        {
            "step": row["step"],
            "em": row["eval/em"],
            **{
                k.removeprefix("eval/").removesuffix("/em"): v
                for k, v in row.items()
                if k.startswith("eval/") and k.endswith("/em") and k != "eval/em"
            },
        }
        for row in rows
        if row.get("eval/em") is not None
    ]
    return {
        "steps": rows[-1]["step"] if rows else 0,
        "updates": rows[-1]["update"] if rows else 0,
        "wall_seconds": round(wall, 1),
        "resumed_from": resumed_from,
        "reward_first_quarter": mean("reward", rows[:window]),
        "reward_last_quarter": mean("reward", rows[-window:]),
        "em_first_quarter": mean("em", rows[:window]),
        "em_last_quarter": mean("em", rows[-window:]),
        "loss_first_quarter": mean("loss", rows[:window]),
        "loss_last_quarter": mean("loss", rows[-window:]),
        "final": rows[-1] if rows else None,
        "evaluations": evaluations,  # EM per periodic evaluation (files in evaluations/step-<N>/)
        "reward_collapse": collapse.as_dict() if collapse else None,
        "selected_checkpoint": selected,  # App. B: the final checkpoint before any reward collapse (--checkpoint best)
        "best_instruction": best.text,
        "best_instruction_id": best.instruction_id,
        "instructions": listed,
        "frozen_policy": frozen_policy,
        "model": None if frozen_policy else run.relative(run.final_dir),
        "recipe_model": recipe.model.name_or_path,
        "metrics": run.relative(run.metrics_file),
        "plots": plots,
        "overhead": None,
    }


def overhead_account(coevolution, recipe: Recipe, steps: int, wall: float) -> dict:
    """The paper's App. C account: what evolving instructions cost next to training."""
    reports = coevolution.reports
    seconds = sum(r["wall_s"] for r in reports)
    return {
        "evolutions": len(reports),
        "evolution_seconds": round(seconds, 2),
        "share_of_wall_time": round(seconds / wall, 4) if wall else None,
        "verification_rollouts": sum(r["verification_rollouts"] for r in reports),
        "training_rollouts": steps * recipe.training.batch_size * recipe.training.group_size,
        # population.leak_check: candidates that held an answer the optimizer was shown or a question's words
        "leaked_candidates": sum(1 for r in reports for c in r["candidates"] if c.get("leak")),
        "optimizer": coevolution.optimizer_accounting(),
    }
