"""Finished run directories written as training leaves them, without a model: for `inspo report`, `ablate
--collect` and the readers of a run's files."""

from __future__ import annotations

import json
from pathlib import Path

from inspo_cli.ablation.directory import AblationDir
from inspo_cli.config import dump_recipe, load_recipe

LINEAGE = [  # i0 initial; i1 and i3 evolved from i0 at step 2; i4 from i1 at step 4; i2 initial, pruned at 2
    {
        "id": "i0",
        "text": "Answer it. {question}",
        "parent": None,
        "proposer": "initial",
        "step_born": 0,
        "verification_score": None,
        "weight_history": [[1, 0.1], [2, 0.2], [3, 0.3], [4, 0.4]],
        "step_pruned": None,
    },
    {
        "id": "i1",
        "text": "Search first.",
        "parent": "i0",
        "proposer": "reflection",
        "step_born": 2,
        "verification_score": 0.5,
        "weight_history": [[3, 0.0], [4, 0.5]],
        "step_pruned": None,
    },
    {
        "id": "i2",
        "text": "Guess.",
        "parent": None,
        "proposer": "initial",
        "step_born": 0,
        "verification_score": None,
        "weight_history": [[1, 0.0], [2, 0.0]],
        "step_pruned": 2,
    },
    {
        "id": "i3",
        "text": "Plan, then search.",
        "parent": "i0",
        "proposer": "reflection",
        "step_born": 2,
        "verification_score": 0.25,
        "weight_history": [[3, 0.1]],
        "step_pruned": 4,
    },
    {
        "id": "i4",
        "text": "Search twice.",
        "parent": "i1",
        "proposer": "reflection",
        "step_born": 4,
        "verification_score": 0.75,
        "weight_history": [],
        "step_pruned": None,
    },
]


def make_run(
    root: Path,
    name: str,
    seed: int,
    rewards: list[float],
    em: float | None,
    population: bool = True,
    eval_em: dict[int, float] | None = None,
    overrides: tuple[str, ...] = (),
) -> Path:
    """A finished run directory: recipe (the demo with `seed` and `overrides`), metrics, summary, instructions, final
    evaluation."""
    run = root / name
    run.mkdir(parents=True)
    overrides = [f"run.seed={seed}", *overrides] + ([] if population else ["population.enabled=false"])
    (run / "recipe.yaml").write_text(dump_recipe(load_recipe("recipes/demo.yaml", overrides)))
    (run / "run.json").write_text(json.dumps({"seed": seed}))
    rows = [
        {
            "step": i + 1,
            "update": i + 1,
            "reward": r,
            "search/searches_per_trajectory": 1.0 + i,
            "length/prompt": 100.0,
            "length/response": 20.0 + seed,
            **({"eval/em": eval_em[i + 1]} if eval_em and i + 1 in eval_em else {}),
        }
        for i, r in enumerate(rewards)
    ]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    steps = len(rewards)
    overhead = (
        {
            "evolutions": 1,
            "evolution_seconds": 30.0,
            "share_of_wall_time": 0.1,
            "verification_rollouts": 24,
            "training_rollouts": 128,
            "optimizer": {"calls": 2, "total_tokens": 900},
        }
        if population
        else None
    )
    (run / "summary.json").write_text(json.dumps({"steps": steps, "best_instruction": "Answer.", "overhead": overhead}))
    if population:
        (run / "instructions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in LINEAGE))
    if em is not None:
        (run / f"evaluations/step-{steps}").mkdir(parents=True)
        (run / f"evaluations/step-{steps}/results.json").write_text(
            json.dumps({"scores": {"agent": {"world": {"em": em, "f1": em, "subem": em, "searches": 1.0, "n": 20}}}})
        )
    return run


def fake_run_dir(ablation: AblationDir, name: str, em: dict[str, float], steps: int = 4) -> None:
    """A finished run directory with an evaluation after its last step, as training leaves it."""
    run = ablation.runs_dir / name
    (run / f"evaluations/step-{steps}").mkdir(parents=True)
    (run / "run.json").write_text("{}")
    (run / "summary.json").write_text(json.dumps({"steps": steps, "best_instruction": "Answer."}))
    scores = {b: {"em": v, "f1": v, "subem": v, "searches": 1.0, "n": 10} for b, v in em.items()}
    (run / f"evaluations/step-{steps}/results.json").write_text(json.dumps({"scores": {"agent": scores}}))


def write_evaluation(directory: Path, per_question: list[float], instruction: str, benchmark: str = "world") -> None:
    """results.json and predictions.jsonl of the policy ("agent") with these per-question EMs (ids q0, q1, ...), as
    `inspo evaluate` writes them."""
    directory.mkdir(parents=True, exist_ok=True)
    em = sum(per_question) / len(per_question)
    (directory / "results.json").write_text(
        json.dumps(
            {
                "instruction": instruction,
                "scores": {
                    "agent": {benchmark: {"em": em, "f1": em, "subem": em, "searches": 1.0, "n": len(per_question)}}
                },
            }
        )
    )
    (directory / "predictions.jsonl").write_text(
        "".join(
            json.dumps({"method": "agent", "benchmark": benchmark, "id": f"q{i}", "em": v}) + "\n"
            for i, v in enumerate(per_question)
        )
    )
