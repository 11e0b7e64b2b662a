"""Fabricated runs for `inspo report --decompose`: three seeds of an INSPO variant and of a static one whose every
cell's per-question outcomes are known (`CELLS`), and `inspo distill`'s run directory inside a run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from helpers.run_dirs import make_run, write_evaluation
from inspo_cli.ablation.cells import CELL_FILE
from inspo_cli.ablation.decompose import Variant
from inspo_cli.ablation.results import read_result
from inspo_cli.instructions.initial import initial_instructions
from inspo_cli.runs import RunDir

Q = 10
SEEDS = (0, 1, 2)


def outcome(first: int, seed: int, shift: int = 0) -> list[float]:
    """Questions q0..q(first-1) right, then every third question from `shift` (per seed) right too."""
    return [1.0 if q < first or (q >= first and (q + seed + shift) % 3 == 0) else 0.0 for q in range(Q)]


# the per-question EM of each cell, per seed: what the tests fabricate and then expect back
CELLS = {
    ("initial", "seed"): lambda s: outcome(1, 0),  # the same policy and instruction for every seed
    ("initial", "evolved"): lambda s: outcome(2, s),
    ("trained", "seed"): lambda s: outcome(3, s, 1),
    ("trained", "evolved"): lambda s: outcome(5, s, 2),  # Table 1's cell, evaluated again
    ("static", "seed"): lambda s: outcome(2, s, 1),  # the static run's Table 1 cell, evaluated again
    ("static", "evolved"): lambda s: outcome(3, s, 2),
}


def evolved_text(seed: int) -> str:
    return f"Evolved instruction of seed {seed}: search, then answer. {{question}}"


def make_runs(root: Path, tiny_model_dir: Path, trained_evolved=CELLS[("trained", "evolved")]) -> dict:
    """Three seeds of an INSPO variant and of a static one, each with a final model (the tiny one) and its reported
    evaluation per question (`trained_evolved` the INSPO runs'); I* differs per seed."""
    overrides = (
        f"model.name_or_path={tiny_model_dir}",
        "evaluation.limit=4",
        "evaluation.batch_size=4",
        "rollout.max_turns=1",
        "rollout.max_tokens_per_turn=8",
    )
    made = {}
    for seed in SEEDS:
        for variant, population in (("inspo", True), ("static", False)):
            run = make_run(
                root, f"{variant}-s{seed}", seed, [0.1, 0.2, 0.3], None, population=population, overrides=overrides
            )
            (run / "checkpoints").mkdir()
            shutil.copytree(tiny_model_dir, run / "checkpoints" / "final")  # its own path: its own cells
            made[(variant, seed)] = run
    seed_text = initial_instructions(RunDir(made[("inspo", 0)]).recipe())[0]
    for seed in SEEDS:
        write_evaluation(made[("inspo", seed)] / "evaluations/step-3", trained_evolved(seed), evolved_text(seed))
        write_evaluation(made[("static", seed)] / "evaluations/step-3", CELLS[("static", "seed")](seed), seed_text)
    return made


def variants(runs: dict, seeds=SEEDS) -> list[Variant]:
    found = []
    for name, static in (("inspo", False), ("static", True)):
        found.append(
            Variant(
                name, static, [(RunDir(runs[(name, s)]), read_result(RunDir(runs[(name, s)]), s)[0]) for s in seeds]
            )
        )
    return found


def fabricate_cells(plans, cells: dict = CELLS) -> None:
    """Write every cell not cached yet as if evaluated, with the per-question outcomes `cells` gives per seed."""
    for plan in plans:
        for key, spec in plan.cells.items():
            if not spec.cached:
                write_evaluation(spec.directory, cells[key](plan.seed), spec.text)
                (spec.directory / CELL_FILE).write_text(json.dumps({"cell": spec.name}))


def make_distilled(
    run: Path, model: Path | None = None, finished: bool = True, student: str | None = None, **recorded
) -> Path:
    """`inspo distill`'s run directory inside `run` as it leaves it: the source's recipe, run.json, distill.json
    (taught by step 3's final policy with the run's reported I*; `recorded` replaces fields), a final policy (a copy
    of `model`, else a config.json alone) and, when `finished`, summary.json. `student` is the student's instruction
    (None: the seed instruction S)."""
    source = RunDir(run)
    distilled = RunDir(source.distill_dir)
    distilled.path.mkdir()
    shutil.copy(source.recipe_file, distilled.recipe_file)
    distilled.info_file.write_text(json.dumps({"seed": source.recipe().run.seed}))
    seed_text = initial_instructions(source.recipe())[0]
    reported = json.loads((run / "evaluations/step-3/results.json").read_text())["instruction"]
    info = {
        "distilled_from": str(run.resolve()),
        "form": "off-policy",
        "keep": "all",
        "teacher_checkpoint": "final",
        "teacher_step": 3,
        "teacher_model": str(source.final_dir.resolve()),
        "teacher_instruction": reported,
        "teacher_instruction_id": "i4",
        "student_instruction": seed_text if student is None else student,
        "student_instruction_source": "seed" if student is None else "text",
        "student_prompt_instruction": seed_text if student is None else (student or "{question}"),
    } | recorded
    distilled.distill_info_file.write_text(json.dumps(info))
    if model is not None:
        shutil.copytree(model, distilled.final_dir)
    else:
        distilled.final_dir.mkdir(parents=True)
        (distilled.final_dir / "config.json").write_text("{}")
    if finished:
        distilled.summary_file.write_text(json.dumps({"steps": 2, "best_instruction": info["student_instruction"]}))
    return distilled.path
