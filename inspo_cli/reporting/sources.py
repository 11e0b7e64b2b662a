"""What a report reads: run directories and ablation directories, grouped into variants with their seeds.

    groups = load_groups(["runs/ablations/world"])                 # one group per variant of the plan
    groups = load_groups(["runs/inspo-s0", "runs/inspo-s1", "runs/search-r1-s0"], rule="final")

An ablation directory (plan.json) gives one group per variant, holding every run of it that has started. Loose
run directories are grouped by their recipe with the seed and name set aside: runs that differ only in
`run.seed` are seeds of one variant (labelled by the run name without its `-s<seed>` suffix); anything else
that differs makes another group. A staged run (population.stage pre-rl / post-rl) is read through its summary:
the training stage's curves, the evolve stage's instructions. Each run's result is its evaluation at the step the
rule picks (`ablation.results`: "best", App. B's checkpoint before any reward collapse, or "final").
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from inspo_cli.ablation.results import RunResult
from inspo_cli.errors import InspoError
from inspo_cli.files import not_a_directory
from inspo_cli.runs import RunDir


@dataclass
class SeedRun:
    """One run of a variant, as the report needs it."""

    run: RunDir
    seed: int
    metrics: list[dict]
    summary: dict | None  # None while unfinished
    instructions: list[dict]  # instructions.jsonl rows (INSPO), else []
    result: RunResult | None  # its evaluation at the step the report's rule picks, else None
    why: str | None = None  # why it has no result

    @property
    def name(self) -> str:
        return self.run.path.name


@dataclass
class Group:
    label: str
    runs: list[SeedRun] = field(default_factory=list)
    bars: list[str] = field(default_factory=list)  # what the variant stands for (ablations)


def load_groups(paths: Sequence[str | Path], rule: str = "best") -> list[Group]:
    """Groups of runs with their results under `rule` (`ablation.results`: "best", App. B's, or "final")."""
    groups: list[Group] = []
    loose: list[RunDir] = []
    for path in paths:
        path = Path(path)
        if (problem := not_a_directory(path, "input")) is not None:
            raise InspoError(problem)
        if (path / "plan.json").is_file():
            groups += _ablation_groups(path, rule)
        elif (path / RunDir.INFO).is_file():
            loose.append(RunDir(path))
        else:
            raise InspoError(f"{path} is neither a run directory (no {RunDir.INFO}) nor an ablation directory (no "
                             "plan.json); pass directories made by inspo train, inspo evolve or inspo ablate")
    groups += _group_loose(loose, rule)
    labels = [g.label for g in groups]
    for group in groups:  # the same variant name from two ablations: tell them apart
        if labels.count(group.label) > 1:
            group.label = f"{group.label} ({group.runs[0].run.path.parent.parent.name})"
    if not any(g.runs for g in groups):
        raise InspoError("none of the given directories holds a run that has started; train first")
    return [g for g in groups if g.runs]


def _ablation_groups(path: Path, rule: str) -> list[Group]:
    from inspo_cli.ablation.directory import ABSENT, AblationDir

    ablation = AblationDir.open(path)
    groups = []
    for variant in ablation.plan.variants:
        group = Group(variant.name, bars=list(variant.bars))
        for run in ablation.plan.runs():
            if run.variant == variant.name and ablation.status(run) != ABSENT:
                group.runs.append(read_run(ablation.run_dir(run), run.seed, rule))
        groups.append(group)
    return groups


def _group_loose(runs: Sequence[RunDir], rule: str) -> list[Group]:
    by_recipe: dict[str, Group] = {}
    for run in runs:
        recipe = run.recipe()
        seed = recipe.run.seed
        key = _recipe_without_seed(recipe)
        if key not in by_recipe:
            by_recipe[key] = Group(re.sub(r"-s\d+$", "", run.path.name))
        group = by_recipe[key]
        if any(r.seed == seed for r in group.runs):
            raise InspoError(f"{run} and {next(r.run for r in group.runs if r.seed == seed)} have the same recipe "
                             f"and seed {seed}; pass one of them")
        group.runs.append(read_run(run, seed, rule))
    for group in by_recipe.values():
        group.runs.sort(key=lambda r: r.seed)
    return list(by_recipe.values())


def _recipe_without_seed(recipe) -> str:
    from inspo_cli.config import dump_recipe

    recipe = copy.deepcopy(recipe)
    recipe.run.seed, recipe.run.name, recipe.run.output_dir = 0, None, "runs"
    return dump_recipe(recipe)


def read_run(run: RunDir, seed: int, rule: str = "best") -> SeedRun:
    from inspo_cli.ablation.results import read_result

    summary = run.summary()
    metrics_file, instructions_file = run.metrics_file, run.instructions_file
    if summary is not None and summary.get("stages"):  # a staged run: curves of training, instructions of evolving
        metrics_file = run.path / summary["metrics"]
        instructions_file = run.path / summary["instruction_source"] / RunDir.INSTRUCTIONS
    metrics = run.metrics(metrics_file)
    instructions = run.instructions(instructions_file)
    result, why = read_result(run, seed, rule)
    return SeedRun(run, seed, metrics, summary, instructions, result, why)
