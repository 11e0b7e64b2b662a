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
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from inspo_cli.ablation.directory import ABSENT, AblationDir
from inspo_cli.ablation.results import RunResult, read_result
from inspo_cli.config import dump_recipe
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
    label: str | None = None  # set where two inputs hold runs of the same directory name

    @property
    def name(self) -> str:
        """The run's name in the report (its tables, its lineage file): the directory's, unless that is not unique."""
        return self.label or self.run.path.name


@dataclass
class Group:
    label: str  # unique in the report: the variant's name, and where two share it, the path that tells them apart
    source: Path  # the ablation directory it is a variant of, else its first run's directory
    runs: list[SeedRun] = field(default_factory=list)
    bars: list[str] = field(default_factory=list)  # what the variant stands for (ablations)
    name: str = ""  # the variant's own name ("search-r1"), whatever the label

    def __post_init__(self):
        self.name = self.name or self.label


def load_groups(paths: Sequence[str | Path], rule: str = "best", metric: str = "em") -> list[Group]:
    """Groups of runs with their results under `rule` (`ablation.results`: "best", App. B's, or "final"), each
    with a label no other group has (tables look comparisons up by it). A directory given twice, or inside another
    input (a run of a given ablation), is refused: its runs would be counted twice."""
    given: dict[Path, Path] = {}  # resolved: as given
    for path in map(Path, paths):
        if (problem := not_a_directory(path, "input")) is not None:
            raise InspoError(problem)
        if not (path / "plan.json").is_file() and not (path / RunDir.INFO).is_file():
            raise InspoError(
                f"{path} is neither a run directory (no {RunDir.INFO}) nor an ablation directory (no "
                "plan.json); pass directories made by inspo train, inspo evolve or inspo ablate"
            )
        if path.resolve() in given:
            raise InspoError(f"{path} is given twice (also as {given[path.resolve()]}); give each directory once")
        given[path.resolve()] = path
    for inner, path in given.items():
        outer = next((given[p] for p in inner.parents if p in given), None)
        if outer is not None:
            raise InspoError(
                f"{path} lies inside {outer}, which is given too, so its runs would be reported twice; give one of them"
            )
    groups: list[Group] = []
    loose: list[RunDir] = []
    for path in given.values():
        if (path / "plan.json").is_file():
            groups += _ablation_groups(path, rule, metric)
        else:
            loose.append(RunDir(path))
    groups = [g for g in [*groups, *_group_loose(loose, rule, metric)] if g.runs]
    if not groups:
        raise InspoError("none of the given directories holds a run that has started; train first")
    _check_runs_once(groups)
    _label_uniquely(groups)
    return groups


def _check_runs_once(groups: Sequence[Group]) -> None:
    """A run reached through two inputs (a link, a copy's link) would be a seed of two variants, or two seeds."""
    seen: dict[Path, Path] = {}
    for run in (r.run.path for g in groups for r in g.runs):
        if run.resolve() in seen:
            raise InspoError(f"{run} and {seen[run.resolve()]} are the same run directory; give it once")
        seen[run.resolve()] = run


def tails(paths: Sequence[Path]) -> list[str]:
    """Each path's fewest last parts that no other path ends with (runs/a/world, runs/b/world: a/world, b/world)."""
    parts = [p.resolve().parts for p in paths]
    found = []
    for i, mine in enumerate(parts):
        n = next(
            (
                n
                for n in range(1, len(mine) + 1)
                if all(other[-n:] != mine[-n:] for j, other in enumerate(parts) if j != i)
            ),
            len(mine),
        )
        found.append("/".join(mine[-n:]).lstrip("/") or "/")
    return found


def _label_uniquely(groups: Sequence[Group]) -> None:
    """Variants of the same name (from two ablations, or two run folders) get the part of their path that tells
    them apart; so do runs of the same directory name (lineage files and run tables are named by them)."""
    labels = [g.label for g in groups]
    for label in {label for label in labels if labels.count(label) > 1}:
        clashing = [g for g in groups if g.label == label]
        for group, tail in zip(clashing, tails([g.source for g in clashing])):
            group.label = f"{label} ({tail})"
    runs = [r for g in groups for r in g.runs]
    names = [r.run.path.name for r in runs]
    clashing_runs = [r for r in runs if names.count(r.run.path.name) > 1]
    for run, tail in zip(clashing_runs, tails([r.run.path for r in clashing_runs])):
        run.label = tail.replace("/", "_")
        if run.result is not None:
            run.result.name = run.label
    for kind, values in (("variants", [g.label for g in groups]), ("runs", [r.name for r in runs])):
        twice = sorted({v for v in values if values.count(v) > 1})
        if twice:
            raise InspoError(
                f"two {kind} of the report would both be named {twice[0]!r}; rename one of their directories"
            )


def _ablation_groups(path: Path, rule: str, metric: str = "em") -> list[Group]:
    ablation = AblationDir.open(path)
    groups = []
    for variant in ablation.plan.variants:
        group = Group(variant.name, bars=list(variant.bars), source=path)
        for run in ablation.plan.runs():
            if run.variant == variant.name and ablation.status(run) != ABSENT:
                group.runs.append(read_run(ablation.run_dir(run), run.seed, rule, metric))
        groups.append(group)
    return groups


def _group_loose(runs: Sequence[RunDir], rule: str, metric: str = "em") -> list[Group]:
    by_recipe: dict[str, Group] = {}
    for run in runs:
        recipe = run.recipe()
        seed = recipe.run.seed
        key = recipe_without_seed(recipe)
        if key not in by_recipe:
            by_recipe[key] = Group(re.sub(r"-s\d+$", "", run.path.name), source=run.path)
        group = by_recipe[key]
        if any(r.seed == seed for r in group.runs):
            raise InspoError(
                f"{run} and {next(r.run for r in group.runs if r.seed == seed)} have the same recipe "
                f"and seed {seed}; pass one of them"
            )
        group.runs.append(read_run(run, seed, rule, metric))
    for group in by_recipe.values():
        group.runs.sort(key=lambda r: r.seed)
    return list(by_recipe.values())


def recipe_without_seed(recipe) -> str:
    """The recipe as YAML with its seed, name and output directory blanked: equal for the seeds of one recipe."""
    recipe = copy.deepcopy(recipe)
    recipe.run.seed, recipe.run.name, recipe.run.output_dir = 0, None, "runs"
    return dump_recipe(recipe)


def read_run(run: RunDir, seed: int, rule: str = "best", metric: str = "em") -> SeedRun:
    summary = run.summary()
    metrics_file, instructions_file = run.metrics_file, run.instructions_file
    if summary is not None and summary.get("stages"):  # a staged run: curves of training, instructions of evolving
        metrics_file = run.path / summary["metrics"]
        instructions_file = run.path / summary["instruction_source"] / RunDir.INSTRUCTIONS
    metrics = run.metrics(metrics_file)
    instructions = run.instructions(instructions_file)
    result, why = read_result(run, seed, rule, metric)
    return SeedRun(run, seed, metrics, summary, instructions, result, why)
