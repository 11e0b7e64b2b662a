"""Sweep files: an ablation plan written out as variants and a grid, each resolved when planned.

    plan = plan_sweep(yaml.safe_load(open("sweep.yaml")), "sweep.yaml", recipe=None, seeds=None)

Keys: recipe (the base, relative to the sweep file's folder), seeds, set (overrides for every variant), variants
(name: [overrides] or name: {recipe: FILE, set: [overrides]}) and grid (key: [values], one variant per combination,
named from its values). Every name and value is checked before any variant is resolved, and a sweep planning more
than `MAX_VARIANTS` is refused (each variant is resolved now and trained for every seed).
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from inspo_cli.ablation.plan import MAX_NAME_CHARS, PAPER_SEEDS, Plan, Planner, Variant, clip
from inspo_cli.config.sections import RUN_NAME
from inspo_cli.errors import InspoError

SWEEP_KEYS = ("recipe", "seeds", "set", "variants", "grid")


def _beside(recipe: str, source: str) -> str:
    """A sweep file's `recipe:` is relative to the sweep file's folder, as `extends:` is to its recipe's; a path that
    is not there is taken as given (relative to the current directory or the project, or a bundled name)."""
    candidate = Path(source).parent / recipe
    return str(candidate) if not Path(recipe).is_absolute() and candidate.is_file() else recipe


MAX_VARIANTS = 500  # a sweep planning more is refused (--max-variants raises it): each variant is resolved when planned


def plan_sweep(
    sweep: Any,
    source: str,
    recipe: str | Path | None = None,
    seeds: Sequence[int] | None = None,
    common: Sequence[str] = (),
    max_variants: int = MAX_VARIANTS,
) -> Plan:
    """A sweep file's plan. Keys: recipe (the base; --recipe wins), seeds, set (overrides for every variant),
    variants (name: [overrides] or name: {recipe: FILE, set: [overrides]}), grid (key: [values], one variant per
    combination). `--seeds` and `--set` on the command line win over / add to the file's."""
    if not isinstance(sweep, dict):
        raise InspoError(f"{source}: a sweep file is a mapping with {', '.join(SWEEP_KEYS)}")
    unknown = [k for k in sweep if k not in SWEEP_KEYS]
    if unknown:
        raise InspoError(f"{source}: unknown key {unknown[0]!r}; a sweep file has {', '.join(SWEEP_KEYS)}")
    base = str(recipe) if recipe is not None else sweep.get("recipe")
    if not base:
        raise InspoError(f"{source}: name the base recipe with 'recipe: FILE' in the file or --recipe")
    if not isinstance(base, str):
        raise InspoError(
            f"{source}: recipe: must be a recipe file or bundled name, e.g. 'recipe: recipes/demo.yaml' "
            f"(got {type(base).__name__} {base!r})"
        )
    if recipe is None:
        base = _beside(base, source)
    file_set = _string_list(sweep.get("set", []), f"{source}: set")
    planner = Planner([*file_set, *common])
    variants = sweep.get("variants") or {}
    if not isinstance(variants, dict):
        raise InspoError(
            f"{source}: variants must map a name to its overrides, e.g. 'search-r1: [population.enabled=false]'"
        )
    if len(variants) > max_variants:
        raise InspoError(
            f"{source}: the sweep lists {len(variants):,} variants, more than the {max_variants:,} "
            "allowed; split it, or raise the cap with --max-variants"
        )
    for name, spec in variants.items():
        if not isinstance(name, str):
            kind = {type(None): "null", bool: "a boolean", int: "an integer", float: "a number"}.get(
                type(name), f"a {type(name).__name__}"
            )
            raise InspoError(
                f"{source}: variants: the name {clip(repr(name))} is {kind}, not text (YAML reads "
                "unquoted ~, yes/no/on/off, 017, 1:30 and dates so); quote it"
            )
        if isinstance(spec, dict):
            extra = [k for k in spec if k not in ("recipe", "set")]
            if extra:
                raise InspoError(f"{source}: variant {name}: unknown key {extra[0]!r}; use recipe and set")
            overrides = _string_list(spec.get("set", []), f"{source}: variant {name}")
            other = spec.get("recipe")
            if other is not None and not isinstance(other, str):
                raise InspoError(
                    f"{source}: variant {name}: recipe: must be a recipe file or bundled name (got "
                    f"{type(other).__name__} {other!r})"
                )
            planner.add(
                Variant(
                    str(name),
                    _beside(other, source) if other else base,
                    overrides,
                    [" ".join([*([f"recipe {other}"] if other else []), *overrides])],
                )
            )
        else:
            overrides = _string_list(spec or [], f"{source}: variant {name}")
            planner.add(Variant(str(name), base, overrides, [" ".join(overrides)] if overrides else []))
    grid = sweep.get("grid") or {}
    bad_keys = [k for k in grid if not isinstance(k, str)] if isinstance(grid, dict) else []
    if bad_keys:  # a list, not next(..., None): YAML's `~:` is the key None itself
        raise InspoError(
            f"{source}: grid: key {clip(repr(bad_keys[0]))} ({type(bad_keys[0]).__name__}) must be a "
            "recipe field such as population.n_parent (YAML reads unquoted ~, yes/no/on/off and numbers "
            "as other than text)"
        )
    if not isinstance(grid, dict) or not all(isinstance(v, list) and v for v in grid.values()):
        raise InspoError(
            f"{source}: grid must map a recipe key to a non-empty list of values, e.g. 'population.n_parent: [1, 2, 3]'"
        )
    count = math.prod(len(v) for v in grid.values()) if grid else 0
    if count + len(variants) > max_variants:
        raise InspoError(
            f"{source}: the sweep plans {count + len(variants):,} variants ({count:,} from the grid), "
            f"more than the {max_variants:,} allowed (each is resolved now and trained for every seed); "
            "shrink the grid, or raise the cap with --max-variants"
        )
    for key, values in grid.items():
        for value in values:
            _grid_value(key, value, source)
    combinations = [list(zip(grid, c)) for c in itertools.product(*grid.values())] if grid else []
    names = [_grid_name(pairs, source) for pairs in combinations]  # every name checked before any is resolved
    for name, pairs in zip(names, combinations):
        planner.add(
            Variant(
                name,
                base,
                [f"{key}={json.dumps(value)}" for key, value in pairs],
                [", ".join(f"{key}={value}" for key, value in pairs)],
            )
        )
    file_seeds = sweep.get("seeds", list(PAPER_SEEDS))
    if not isinstance(file_seeds, list) or not all(isinstance(s, int) and not isinstance(s, bool) for s in file_seeds):
        raise InspoError(f"{source}: seeds must be a list of integers, e.g. [0, 1, 2]")
    return planner.plan(Path(source).stem, seeds if seeds is not None else file_seeds)


_SCALARS = (str, int, float, bool, type(None))


def _grid_value(key: str, value: Any, source: str) -> None:
    """A grid value is what `--set` could say: a scalar, or a list of scalars for a list field. Others (dates,
    timestamps, !!set, !!binary, mappings) would be written back as a different text or not at all."""
    scalar = isinstance(value, _SCALARS) and not (isinstance(value, float) and not math.isfinite(value))
    if not (scalar or (isinstance(value, list) and all(isinstance(v, (str, int, float, bool)) for v in value))):
        raise InspoError(
            f"{source}: grid: {key}: the value {clip(repr(value), 60)} ({type(value).__name__}) is not "
            "a finite number, a string, true/false, null or a list of them; quote it to pass it as text"
        )


def _grid_name(pairs: list[tuple[str, Any]], source: str) -> str:
    """A grid variant's name, `n_parent-2_temperature-0.05`; one that could not name a directory is refused."""
    name = "_".join(f"{key.rsplit('.', 1)[-1]}-{value}" for key, value in pairs)
    if not RUN_NAME.match(name) or len(name) > MAX_NAME_CHARS:
        raise InspoError(
            f"{source}: grid: {', '.join(f'{k}: {clip(repr(v), 40)}' for k, v in pairs)} make the "
            f"variant name {clip(name)!r}, which is not a directory name of at most {MAX_NAME_CHARS} "
            "letters, digits, '.', '_' or '-'; list those values under variants: with names of your own"
        )
    return name


def _string_list(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and "=" in v for v in value):
        raise InspoError(f"{where}: must be a list of KEY=VALUE overrides, e.g. [training.steps=2]")
    return list(value)
