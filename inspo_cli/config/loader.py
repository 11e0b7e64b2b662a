"""Recipe files → a validated `Recipe`.

    recipe = load_recipe("recipes/demo.yaml", overrides=["training.steps=3", "model.lora=true"])

A recipe is YAML with one mapping per section of `Recipe`. Optional `extends: other.yaml` (relative to the
recipe's own directory) starts from another recipe and deep-merges this one over it, so a baseline differs
from the paper recipe by a few lines. `--set a.b=value` overrides are parsed as YAML values and applied last.

Every problem is an `InspoError` whose one-line message names where the value came from (the file, or
`--set`), the dotted key, what is wrong and how to fix it. Relative paths are resolved against the current
directory, then against the project checkout, so `inspo train` works from anywhere in an editable install.
Which file a recipe name means is `recipe_files`; checking and converting the values to the typed sections, `build`.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from pathlib import Path
from typing import Any

import yaml

from inspo_cli.config.build import build_section
from inspo_cli.config.recipe_files import (
    PROJECT_ROOT,
    RecipeError,
    bundled_recipes,
    find_recipe,
    resolve_path,
)
from inspo_cli.config.sections import Recipe, RolloutConfig, TrainingConfig
from inspo_cli.config.yamlfile import MAX_BYTES, load_yaml
from inspo_cli.files import INSTRUCTION_FILE_BYTES, read_text
from inspo_cli.registry import is_sft

__all__ = [  # what finds a recipe file is recipe_files'; imported from here too, as before
    "PROJECT_ROOT",
    "RecipeError",
    "bundled_recipes",
    "dump_recipe",
    "find_recipe",
    "load_recipe",
    "recipe_to_dict",
    "resolve_path",
]
MAX_EXTENDS = 16  # recipes extend each other at most this deep (the bundled ones: 3)


def load_recipe(
    path: str | Path | None,
    overrides: typing.Sequence[str] = (),
    check_paths: bool = True,
    written_by_run: bool = False,
    flags: typing.Mapping[str, typing.Any] | None = None,
) -> Recipe:
    """Read `path` (None: all defaults; a file, a bundled recipe's name or a short name: `find_recipe`), apply
    `overrides`, validate types, values and referenced paths. `written_by_run`: `path` is a run directory's resolved
    recipe, which may hold keys an older release wrote (`_upgrade_run_recipe`). `flags` maps a command-line option to
    the key it sets and its value (`{"--name": ("run.name", "demo")}`; None values are left out), applied after
    `overrides` and named as that option in errors."""
    flags = {flag: kv for flag, kv in (flags or {}).items() if kv[1] is not None}
    overrides = [*overrides, *(f"{key}={json.dumps(value)}" for key, value in flags.values())]
    flag_of = {key: flag for flag, (key, _) in flags.items()}
    raw: dict = _read_with_extends(find_recipe(path), seen=()) if path is not None else {}
    source = str(path) if path is not None else "defaults"
    if written_by_run:
        _check_whole(Path(path), raw)
        _upgrade_run_recipe(raw)
    override_keys: set[str] = set()
    for item in overrides:
        key, value = _parse_override(item)
        _set_dotted(raw, key, value)
        override_keys.add(key)

    def where(key: str) -> str:
        field = key.split("[")[0]  # an item of a list field came from where the list did
        if field in flag_of:
            return flag_of[field] if field == key else f"{flag_of[field]} {key}"
        return f"--set {key}" if field in override_keys else f"{source}: {key}"

    _refuse_renamed(raw, where)
    recipe = build_section(Recipe, raw, prefix="", where=where)
    if check_paths:
        _check_paths(recipe, where)
    return recipe


def recipe_to_dict(recipe: Recipe) -> dict:
    return dataclasses.asdict(recipe)


def dump_recipe(recipe: Recipe) -> str:
    """The fully resolved recipe as YAML, loadable again by `load_recipe`."""
    return yaml.safe_dump(recipe_to_dict(recipe), sort_keys=False, allow_unicode=True, width=120)


# -- reading -------------------------------------------------------------------------------------------------


def _read_yaml(path: Path, text: str | None = None) -> dict:
    text = read_text(path, "recipe", max_bytes=MAX_BYTES) if text is None else text
    try:
        data = load_yaml(text, str(path))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f" line {mark.line + 1}:" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise RecipeError(f"{path}:{line} invalid YAML ({problem}); fix the syntax") from None
    if data is None:  # a 0-byte file (cut short by a crash or a failed copy) would silently be every default
        raise RecipeError(
            f"{path}: the recipe is empty; write its sections (data:, model:, ...), or `extends: <a bundled recipe>` "
            "to start from one (`inspo recipe list`)"
        )
    if not isinstance(data, dict):
        raise RecipeError(
            f"{path}: the top level must be a mapping of sections (data:, model:, ...), got {type(data).__name__}"
        )
    return data


def _read_with_extends(path: Path, seen: tuple[Path, ...], size: int = 0) -> dict:
    """The recipe at `path` merged over the chain of recipes it extends. The chain is bounded as one recipe is:
    at most `MAX_EXTENDS` files and `MAX_BYTES` in all (each file alone is bounded when read)."""
    resolved = path.resolve()
    if resolved in seen:
        chain = " -> ".join(str(p) for p in (*seen, resolved))
        raise RecipeError(f"{path}: extends: recipes extend each other in a cycle ({chain}); remove one extends")
    if len(seen) > MAX_EXTENDS:
        raise RecipeError(
            f"{seen[0]}: extends: a chain of more than {MAX_EXTENDS} recipes (at {path}); no recipe "
            "needs that many, extend a recipe nearer the top"
        )
    text = read_text(path, "recipe", max_bytes=MAX_BYTES)
    size += len(text.encode("utf-8"))
    if size > MAX_BYTES:
        raise RecipeError(
            f"{seen[0] if seen else path}: extends: the chain of {len(seen) + 1} recipes holds more "
            f"than {MAX_BYTES:,} bytes (at {path}); a recipe is a few KB, point to data files instead"
        )
    data = _read_yaml(path, text)
    parent = data.pop("extends", None)
    if parent is None:
        return data
    if not isinstance(parent, str):
        raise RecipeError(f"{path}: extends: must be a path to another recipe, got {parent!r}")
    parent_path = (path.parent / parent) if not Path(parent).is_absolute() else Path(parent)
    if parent_path.is_dir():
        raise RecipeError(f"{path}: extends: {parent_path} is a directory; name a recipe file")
    if not parent_path.exists():
        raise RecipeError(f"{path}: extends: recipe {parent_path} not found; the path is relative to {path.parent}")
    return _deep_merge(_read_with_extends(parent_path, (*seen, resolved), size), data)


def _deep_merge(base: dict, update: dict) -> dict:
    merged = dict(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _parse_override(item: str) -> tuple[str, Any]:
    key, sep, text = item.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise RecipeError(
            f"--set {item!r}: expected KEY=VALUE with a dotted key, e.g. --set training.learning_rate=1e-6"
        )
    try:
        value = load_yaml(text, f"--set {key}") if text.strip() else ""
    except yaml.YAMLError:
        value = text  # not YAML (e.g. an unbalanced quote): keep the raw string and let the type check decide
    return key, value


def override_value(item: str) -> Any:
    """The value `--set KEY=VALUE` gives its key (YAML: "03" and "3" are both 3)."""
    return _parse_override(item)[1]


def _set_dotted(raw: dict, key: str, value: Any) -> None:
    node = raw
    parts = key.split(".")
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[parts[-1]] = value


# -- keys of older releases -------------------------------------------------------------------------------------


def _check_whole(path: Path, raw: dict) -> None:
    """A run's recipe is written whole (`dump_recipe`, atomically) and ends with its `run:` section and a newline; a
    copy cut short would otherwise load with defaults for what it lost."""
    text = read_text(path, "recipe")
    run = raw.get("run")
    if not text.endswith("\n") or not isinstance(run, dict) or "seed" not in run:
        raise RecipeError(
            f"{path}: cut short (a run writes it whole, ending with run: and its seed); copy it again "
            "from where the run ran"
        )


def _upgrade_run_recipe(raw: dict) -> None:
    """A run started before `training.mini_batch_size` (questions per update) became `mini_batch_trajectories`
    resumes and is evaluated with the schedule it started with: the same number of trajectories per update. One
    started before `rollout.single_turn_stop` and `rollout.max_response_tokens` (2026-11-29) resumes and is evaluated
    as it was trained: a turn without search ends at its first tag, and only `max_total_tokens` bounds a trajectory."""
    rollout = raw.get("rollout")
    if isinstance(rollout, dict):
        rollout.setdefault("single_turn_stop", "tag")
        if "max_response_tokens" not in rollout:
            rollout["max_response_tokens"] = rollout.get("max_total_tokens", RolloutConfig.max_total_tokens)
    training = raw.get("training")
    if isinstance(training, dict) and "mini_batch_size" in training and "mini_batch_trajectories" not in training:
        trajectories = _in_trajectories(training)
        del training["mini_batch_size"]  # SFT never used it
        if not is_sft(training.get("algorithm", "grpo")):
            training["mini_batch_trajectories"] = trajectories


def _refuse_renamed(raw: dict, where) -> None:
    """A renamed key whose unit changed is refused with the conversion, never read in the new unit."""
    training = raw.get("training")
    if isinstance(training, dict) and "mini_batch_size" in training:
        raise RecipeError(
            f"{where('training.mini_batch_size')}: renamed to training.mini_batch_trajectories, which counts "
            f"trajectories per optimizer update as Search-R1 does (the paper's 256 of 512 x 5 = 2,560 per step: 10 "
            f"updates); mini_batch_size: {training['mini_batch_size']} questions was mini_batch_trajectories: "
            f"{_in_trajectories(training)}; write that, or drop the key for the paper's schedule"
        )


def _in_trajectories(training: dict):
    """The old mini-batch (questions) in trajectories: times the group size (in the recipe, else the default)."""
    questions, group = training["mini_batch_size"], training.get("group_size", TrainingConfig.group_size)
    return questions * group if isinstance(questions, int) and isinstance(group, int) else f"{questions} x {group}"


# -- referenced files ----------------------------------------------------------------------------------------

_NAMED_TRAIN_SETS = ("world", "nq_hotpotqa")


def _check_paths(recipe: Recipe, where) -> None:
    """Fail early, before any model loads, when a file the recipe needs is missing; store absolute paths."""
    data, retriever = recipe.data, recipe.retriever
    needs_world = data.train == "world" or "world" in recipe.evaluation.benchmarks
    if needs_world:
        data.world_dir = _existing(
            data.world_dir,
            "data.world_dir",
            where,
            "generate one with `inspo data world --out DIR` or set data.world_dir=DIR",
            kind="dir",
        )
    if data.train not in _NAMED_TRAIN_SETS:
        data.train = _existing(
            data.train,
            "data.train",
            where,
            "use world, nq_hotpotqa, or the path of a FlashRAG JSONL/parquet file",
            kind="file",
        )
    if retriever.index is not None:
        retriever.index = _existing(
            retriever.index, "retriever.index", where, "build one with `inspo index --out DIR`", kind="dir"
        )
    elif retriever.kind == "bm25":
        retriever.corpus = _existing(
            retriever.corpus,
            "retriever.corpus",
            where,
            "set retriever.corpus=PATH to a Search-R1 corpus JSONL, or generate data/world",
            kind="file",
        )
    # a local model (or LoRA adapter) directory is found as data paths are; a hub id or packaged name stays as it is
    recipe.model.name_or_path = _local_or_as_is(recipe.model.name_or_path)
    recipe.sampling.model = _local_or_as_is(recipe.sampling.model)
    if recipe.population.instruction_file is not None:
        recipe.population.instruction_file = _existing(
            recipe.population.instruction_file,
            "population.instruction_file",
            where,
            "write the file or remove the key",
            kind="file",
        )
        read_text(
            recipe.population.instruction_file,
            where("population.instruction_file"),  # readable, UTF-8
            max_bytes=INSTRUCTION_FILE_BYTES,
        )


def _local_or_as_is(value: str) -> str:
    found = resolve_path(value) if value.strip() else None
    return str(found) if found is not None else value


def _existing(value: str, key: str, where, fix: str, kind: str) -> str:
    """The absolute path of `value`, which must exist and be a `kind` ("file" or "dir")."""
    found = resolve_path(value)
    if found is None:
        raise RecipeError(f"{where(key)}: path {value!r} does not exist; {fix}")
    if kind == "file" and found.is_dir():
        raise RecipeError(f"{where(key)}: {value!r} is a directory; name a file ({fix})")
    if kind == "dir" and not found.is_dir():
        raise RecipeError(f"{where(key)}: {value!r} is a file; name a directory ({fix})")
    return str(found)
