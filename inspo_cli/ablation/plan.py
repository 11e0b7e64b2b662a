"""Ablation plans: which variants of a recipe to train, over which seeds.

A plan is a list of variants (a recipe file plus `--set` overrides) times a list of seeds; each (variant, seed) is
one run. Plans come from the paper's named ablations, from studies that bundle them, or from a sweep file
(`sweep.py`):

    plan = plan_axes("recipes/qwen2.5-3b/inspo.yaml", [("proposer", ["paraphrase"])], seeds=[0, 1, 2])
    plan = plan_study("recipes/qwen2.5-3b/inspo.yaml", "fig3", seeds=[0, 1, 2])
    plan.runs()          # seed-major: every variant of seed 0, then seed 1, ...

Every variant's recipe is resolved (`load_recipe`) when planned, so a bad override fails before anything runs,
and variants that resolve to the same recipe are planned once: Fig. 3's three "full INSPO" bars (stage online,
proposer reflection, components full) are one run per seed, listed with all three bar names. The base recipe is
always a variant (named after its file) for the named ablations and studies; a sweep lists its own.

Named ablations (`AXES`): proposer (reflection | paraphrase | history), components (constant: no pruning and no
evolution; no-verify: prune + expand without verification; full), n-parent and temperature (Fig. 6, any values),
stage (online | pre | post: `population.stage`) and, beyond the paper, selection (`population.selection`),
parents (`population.parents`) and the proposers beyond the paper (a proposer combining k parents runs with
n_parent k): the strategy axes take any name of their registry (`inspo_cli.registry`) or an import path. The
`selection` study compares the paper's strategy and each one beyond the paper with the base recipe. `search-r1` is the
static-instruction reference (`population.enabled=false`) that Fig. 6 and Table 1 compare against.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from inspo_cli.config import Recipe, dump_recipe, load_recipe
from inspo_cli.config.sections import MAX_RUN_NAME, PROTOCOLS, RUN_NAME
from inspo_cli.errors import InspoError
from inspo_cli.registry import IMPORT_PATH_HINT, PARENTS, PROPOSERS, SELECTIONS, TOOLS, Registry, is_import_path

PAPER_SEEDS = (0, 1, 2)  # Fig. 2 and Fig. 5: three seeds
SEARCH_R1 = ("search-r1", ["population.enabled=false"])  # the static-instruction baseline


def _choices(options: dict[str, list[str]]):
    def overrides(value: str) -> list[str]:
        if value not in options:
            raise ValueError(f"one of {', '.join(options)}")
        return options[value]

    return overrides


def _number(key: str, kind: type, minimum: float):
    def overrides(value: str) -> list[str]:
        try:
            number = kind(value)
        except ValueError:
            number = None
        if number is None or number < minimum or (kind is float and number == minimum):
            raise ValueError(f"a number {'>' if kind is float else '>='} {minimum}")
        return [f"{key}={number}"]

    return overrides


def _tools(value: str) -> list[str]:
    """A set of tools joined by "+" (`search+calculator`), each registered or an import path."""
    names = value.split("+")
    for name in names:
        if name not in TOOLS and not is_import_path(name):
            raise ValueError(
                f"tools joined by + (e.g. search+calculator), each one of {', '.join(TOOLS)} or {IMPORT_PATH_HINT}"
            )
        try:
            TOOLS.resolve(name)
        except ValueError as error:
            raise ValueError(f"importable ({error})") from None
    return [f"agent.tools=[{', '.join(repr(n) for n in names)}]"]


def _strategy(registry: Registry):
    """A registered name or an import path of `registry`; a proposer that combines k parents gets n_parent k (the
    paper's n_parent is 1), so its variant runs."""

    def overrides(value: str) -> list[str]:
        if value not in registry and not is_import_path(value):
            raise ValueError(f"one of {', '.join(registry)}, or {IMPORT_PATH_HINT}")
        try:
            min_parents = registry.resolve(value).min_parents
        except ValueError as error:
            raise ValueError(f"importable ({error})") from None
        return [f"{registry.key}={value}", *([f"population.n_parent={min_parents}"] if min_parents > 1 else [])]

    return overrides


# axis -> (value -> its overrides). Every axis but those of AGENT_AXES varies INSPO's population, so the base must
# have one.
AXES = {
    "stage": _choices(
        {
            "online": ["population.stage=online"],
            "pre": ["population.stage=pre-rl"],
            "post": ["population.stage=post-rl"],
        }
    ),
    "proposer": _strategy(PROPOSERS),
    "parents": _strategy(PARENTS),
    "components": _choices(
        {
            "constant": ["population.prune=false", "population.evolve_until=0"],
            "no-verify": ["population.prune=true", "population.verify=false"],
            "full": ["population.prune=true", "population.verify=true"],
        }
    ),
    "selection": _strategy(SELECTIONS),
    "n-parent": _number("population.n_parent", int, 1),
    "temperature": _number("population.temperature", float, 0.0),
    "tools": _tools,
    "protocol": _choices({name: [f"agent.protocol={name}"] for name in PROTOCOLS}),
}
AGENT_AXES = ("tools", "protocol")  # axes of the agent, which a static-instruction recipe has too

# study -> its axes and values, and whether the Search-R1 reference joins
STUDIES = {
    "fig3": (
        [
            ("stage", ["pre", "post", "online"]),
            ("proposer", ["reflection", "paraphrase", "history"]),
            ("components", ["constant", "no-verify", "full"]),
        ],
        False,
    ),
    "fig6": ([("n-parent", ["1", "2", "3"]), ("temperature", ["0.05", "0.2", "1.0"])], True),
    "table1": ([], True),
    # beyond the paper: each selection rule against the paper's configuration (the base recipe, eq. 4's softmax)
    "selection": (
        [
            (
                axis,
                [name for name, entry in registry.items() if entry.origin == "paper"]
                + [name for name, entry in registry.items() if entry.beyond_paper],
            )
            for axis, registry in (("selection", SELECTIONS), ("parents", PARENTS), ("proposer", PROPOSERS))
        ],
        False,
    ),
}
# Table 1's trained baselines, taken from the base recipe's directory when they are there (recipes/qwen2.5-*/)
TABLE1_SIBLINGS = ("search-r1.yaml", "rejection-sampling.yaml", "sft.yaml", "grpo-no-search.yaml")

SEED_LIMIT = 2**32  # numpy and torch take seeds in [0, 2**32); run.seed is checked against the same range
# A variant names its recipe file and its runs, `<name>-s<seed>`, whose run.name may have MAX_RUN_NAME characters
MAX_NAME_CHARS = MAX_RUN_NAME - len(f"-s{SEED_LIMIT - 1}")
MAX_SEEDS = 1000  # the paper's figures use 3; more is a typo (0,1000 for 0..1000), not a study


@dataclass
class Variant:
    name: str  # its runs are <name>-s<seed>
    recipe: str  # the recipe file it starts from
    overrides: list[str] = field(default_factory=list)  # --set on top of it, in order
    bars: list[str] = field(default_factory=list)  # what it stands for: "proposer=paraphrase", ...


@dataclass(frozen=True)
class PlannedRun:
    name: str
    variant: str
    seed: int


@dataclass
class Plan:
    name: str  # what the ablation is, e.g. "inspo-fig3"; the default directory's name
    variants: list[Variant]
    seeds: list[int]
    merged: dict[str, str] = field(default_factory=dict)  # a variant left out -> the one with the same recipe

    def runs(self) -> list[PlannedRun]:
        """Seed-major, so a plan cut short still has every variant of its first seeds."""
        return [PlannedRun(run_name(v.name, s), v.name, s) for s in self.seeds for v in self.variants]

    def variant(self, name: str) -> Variant:
        return next(v for v in self.variants if v.name == name)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "seeds": list(self.seeds),
            "variants": [asdict(v) for v in self.variants],
            "runs": [asdict(r) for r in self.runs()],
            "merged": dict(self.merged),
        }

    SHAPE = {
        "name": str,
        "seeds": [int],
        "variants": [{"name": str, "recipe": str, "overrides?": [str], "bars?": [str]}],
        "merged?": {str: str},
    }  # plan.json

    @classmethod
    def from_dict(cls, data: dict) -> Plan:
        fields = set(Variant.__dataclass_fields__)
        return cls(
            data["name"],
            [Variant(**{k: v for k, v in variant.items() if k in fields}) for variant in data["variants"]],
            list(data["seeds"]),
            dict(data.get("merged", {})),
        )

    def same_as(self, other: Plan) -> bool:
        """The same variants (names, recipes, overrides) and seeds; names and descriptions do not matter."""

        def key(plan: Plan) -> str:
            return json.dumps([[(v.name, v.recipe, v.overrides) for v in plan.variants], plan.seeds])

        return key(self) == key(other)

    def added_seeds(self, planned: Plan) -> list[int]:
        """The seeds this plan appends to `planned`'s (same variants, its seeds first, in order), or [] when it is
        not such an extension. Runs are seed-major, so appended seeds append runs: those planned keep their place."""
        same_variants = [[v.name, v.recipe, v.overrides] for v in self.variants] == [
            [v.name, v.recipe, v.overrides] for v in planned.variants
        ]
        old, new = list(planned.seeds), list(self.seeds)
        if not same_variants or len(new) <= len(old) or new[: len(old)] != old:
            return []
        return new[len(old) :]


def run_name(variant: str, seed: int) -> str:
    return f"{variant}-s{seed}"


def resolve(variant: Variant, common: Sequence[str] = ()) -> Recipe:
    """The variant's recipe with its overrides; a bad one fails here, naming the variant."""
    try:
        return load_recipe(variant.recipe, [*common, *variant.overrides])
    except InspoError as error:
        raise InspoError(f"variant {variant.name}: {error}") from None


def static_reference(recipe: str, common: Sequence[str] = ()) -> Variant:
    """Search-R1's static-instruction baseline of `recipe`: its population off, and one instruction per question
    (the only number a static instruction has) where the recipe splits a question over several."""
    overrides = list(SEARCH_R1[1])
    try:
        several = load_recipe(recipe, list(common)).population.instructions_per_question != 1
    except InspoError:  # the base variant names the error when it is resolved
        several = False
    if several:
        overrides.append("population.instructions_per_question=1")
    return Variant(SEARCH_R1[0], recipe, overrides, ["search-r1"])


class Planner:
    """Collects variants, merging those that resolve to the same recipe (their bars join the first)."""

    def __init__(self, common: Sequence[str]):
        self.common, self.variants, self._by_recipe, self.merged = list(common), [], {}, {}

    def add(self, variant: Variant) -> Variant:
        if not RUN_NAME.match(variant.name) or len(variant.name) > MAX_NAME_CHARS:
            raise InspoError(
                f"variant name {clip(variant.name)!r} must be at most {MAX_NAME_CHARS} letters, "
                "digits, '.', '_' or '-' (it names run directories)"
            )
        if any(v.name == variant.name for v in self.variants):
            raise InspoError(f"variant {variant.name!r} is listed twice; give each variant its own name")
        recipe = resolve(variant, self.common)
        key = dump_recipe(recipe)
        if key in self._by_recipe:
            same = self._by_recipe[key]
            same.bars.extend(b for b in variant.bars if b not in same.bars)
            self.merged[variant.name] = same.name
            return same
        variant.overrides = [*self.common, *variant.overrides]
        self._by_recipe[key] = variant
        self.variants.append(variant)
        return variant

    def plan(self, name: str, seeds: Sequence[int]) -> Plan:
        if not self.variants:
            raise InspoError(
                "the ablation plans no variant; name an ablation (e.g. --proposer paraphrase), a "
                "--study, or a --sweep file with variants or a grid"
            )
        return Plan(name, self.variants, _seeds(seeds), self.merged)


def _seeds(seeds: Sequence[int]) -> list[int]:
    seeds = list(seeds)
    if len(seeds) > MAX_SEEDS:
        raise InspoError(f"{len(seeds):,} seeds: at most {MAX_SEEDS:,} (the paper uses 3), e.g. --seeds 0,1,2")
    if (
        not seeds
        or len(set(seeds)) != len(seeds)
        or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 or s >= SEED_LIMIT for s in seeds)
    ):
        raise InspoError(
            f"seeds must be distinct integers in [0, 2**32 - 1] (numpy's and torch's range), e.g. "
            f"--seeds 0,1,2 (got {clip(str(seeds))})"
        )
    return seeds


def clip(text: str, limit: int = 80) -> str:
    """A value quoted in a one-line error, cut to a readable length."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


def plan_axes(
    recipe: str | Path,
    axes: Sequence[tuple[str, Sequence[str]]],
    seeds: Sequence[int] = PAPER_SEEDS,
    common: Sequence[str] = (),
    reference: bool = False,
    name: str | None = None,
) -> Plan:
    """The base recipe, one variant per (axis, value), and (reference) the Search-R1 baseline."""
    recipe = str(recipe)
    planner = Planner(common)
    base = planner.add(Variant(Path(recipe).stem, recipe))
    population_axes = [axis for axis, _ in axes if axis not in AGENT_AXES]
    if population_axes and not resolve(base).population.enabled:
        raise InspoError(
            f"--{population_axes[0]} ablates INSPO's instruction population, but {recipe} has "
            "population.enabled: false; pass an INSPO recipe such as recipes/qwen2.5-3b/inspo.yaml"
        )
    for axis, values in axes:
        if axis not in AXES:
            raise InspoError(f"unknown ablation axis {axis!r}; choose from {', '.join(AXES)}")
        for value in values:
            try:
                overrides = AXES[axis](str(value))
            except ValueError as error:
                raise InspoError(f"--{axis} {value!r}: must be {error}") from None
            # an import path's ":" and a tool set's "+" cannot be in a run name: "proposer-my_lab.opro.prompt",
            # "tools-search_calculator"
            planner.add(
                Variant(
                    f"{axis}-{str(value).replace(':', '.').replace('+', '_')}",
                    recipe,
                    list(overrides),
                    [f"{axis}={value}"],
                )
            )
    if reference:
        planner.add(static_reference(recipe, common))
    return planner.plan(name or f"{Path(recipe).stem}-{'-'.join(a for a, _ in axes) or 'base'}", seeds)


def plan_study(recipe: str | Path, study: str, seeds: Sequence[int] = PAPER_SEEDS, common: Sequence[str] = ()) -> Plan:
    """A paper figure or table: fig3 (stage, proposer, components), fig6 (N_parent, tau_s, and Search-R1), table1
    (INSPO, Search-R1 and the trained baselines found beside the recipe); or selection (beyond the paper: every
    `population.selection` against the base recipe)."""
    if study not in STUDIES:
        raise InspoError(f"unknown study {study!r}; choose from {', '.join(STUDIES)}")
    axes, reference = STUDIES[study]
    name = f"{Path(recipe).stem}-{study}"
    if study != "table1":
        return plan_axes(recipe, axes, seeds, common, reference, name)
    planner = Planner(common)
    planner.add(Variant(Path(recipe).stem, str(recipe), bars=["INSPO"]))
    siblings = [Path(recipe).parent / f for f in TABLE1_SIBLINGS if (Path(recipe).parent / f).is_file()]
    if not any(s.name == "search-r1.yaml" for s in siblings):
        planner.add(static_reference(str(recipe), common))
    for sibling in siblings:
        planner.add(Variant(sibling.stem, str(sibling), bars=[sibling.stem]))
    return planner.plan(name, seeds)
