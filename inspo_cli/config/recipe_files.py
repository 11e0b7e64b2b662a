"""Which file a `--recipe` value names: a path, a bundled recipe's name, or one of the paper's short names.

    find_recipe("recipes/demo.yaml")   # a path, as given or relative to the project checkout
    find_recipe("qwen2.5-3b/inspo")    # a bundled recipe by its name under recipes/
    find_recipe("qwen3b.yaml")         # a short name: recipes/qwen2.5-3b/inspo.yaml, the paper's 3B INSPO run

A file that exists always wins: `--recipe qwen3b.yaml` in a directory holding a `qwen3b.yaml` of the user's own
reads that file, as any path is read, and the short name is never looked at (the run's run.json records the value
given, its recipe.yaml what was read). A value that is none of these is a one-line error listing the bundled recipes
a user most likely meant.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from inspo_cli.errors import InspoError

PROJECT_ROOT = Path(__file__).resolve().parents[2]
RECIPES_DIR = PROJECT_ROOT / "recipes"
_NOT_RECIPES = ("accelerate",)  # recipes/accelerate/ holds accelerate's launch configs
# The paper's main runs by the names its readers use (the product card's `inspo train --recipe qwen3b.yaml`)
SHORT_NAMES = {"qwen3b": "qwen2.5-3b/inspo", "qwen7b": "qwen2.5-7b/inspo"}
MAIN_RECIPE = "inspo"  # a model folder's recipe for the paper's own method
_ALIKE = 0.8  # a name this similar to a short name or a model folder is taken to mean it


class RecipeError(InspoError):
    """A recipe or override that cannot be turned into a valid `Recipe`."""


def resolve_path(value: str) -> Path | None:
    """An existing path for `value`: as given / relative to the cwd, else relative to the project; None if absent."""
    path = Path(value).expanduser()
    if path.exists():
        return path.resolve()
    if not path.is_absolute() and (PROJECT_ROOT / path).exists():
        return (PROJECT_ROOT / path).resolve()
    return None


def bundled_recipes() -> dict[str, Path]:
    """The recipes shipped in recipes/, by name: `demo`, `qwen2.5-3b/inspo`, `world-table1/sft`, ..."""
    found = {}
    for path in sorted(RECIPES_DIR.rglob("*.yaml")):
        name = path.relative_to(RECIPES_DIR).with_suffix("").as_posix()
        if name.split("/")[0] not in _NOT_RECIPES:
            found[name] = path
    return found


def short_names(bundled: dict[str, Path] | None = None) -> dict[str, str]:
    """Each short name whose recipe is bundled, with that recipe's name."""
    bundled = bundled_recipes() if bundled is None else bundled
    return {short: name for short, name in SHORT_NAMES.items() if name in bundled}


def find_recipe(value: str | Path) -> Path:
    """The recipe file `value` names: a path (as given, or relative to the project, so `recipes/demo.yaml` works
    from any directory), a bundled recipe's name (`qwen2.5-3b/inspo`, `demo`) or a short name (`qwen3b`), each with
    or without `.yaml`; else a one-line error that lists the closest bundled names."""
    path = Path(value).expanduser()
    if path.exists():
        return path
    if not path.is_absolute() and (PROJECT_ROOT / path).exists():
        return PROJECT_ROOT / path
    name = _name_of(value)
    bundled = bundled_recipes()
    name = short_names(bundled).get(name, name)
    if name in bundled:
        return bundled[name]
    close = closest_recipes(str(value), bundled)
    raise RecipeError(
        f"recipe {value} not found (neither a file nor a bundled recipe); closest bundled recipes: "
        f"{', '.join(close)} (`inspo recipe list` shows all)"
    )


def _name_of(value: str | Path) -> str:
    return Path(value).as_posix().removeprefix("recipes/").removesuffix(".yaml").removesuffix(".yml")


def closest_recipes(value: str, bundled: dict[str, Path], count: int = 3) -> list[str]:
    """The `count` bundled recipes `value` most likely meant: the recipe of a short name it resembles (`qwen-3b`),
    then the main recipe of a model folder it resembles more than any recipe's name (`qwen2.5-3b`, `qwen14b`), then
    the names most like it."""
    query = _name_of(value).lower().rstrip("/")
    aliases = short_names(bundled)

    def similarity(text: str) -> float:
        return difflib.SequenceMatcher(None, query, text.lower()).ratio()

    def like_name(candidate: str) -> float:  # the whole name, or the part after the model folder
        return max(similarity(candidate), similarity(candidate.rsplit("/", 1)[-1]))

    most_like_a_name = max(map(like_name, bundled), default=0.0)

    def rank(candidate: str) -> tuple[float, float, float]:
        short = max((similarity(s) for s, name in aliases.items() if name == candidate), default=0.0)
        folder, _, recipe = candidate.rpartition("/")
        names_the_folder = (
            bool(folder) and recipe == MAIN_RECIPE and "/" not in query and similarity(folder) >= most_like_a_name
        )
        return (
            short if short >= _ALIKE else 0.0,
            similarity(folder) if names_the_folder and similarity(folder) >= 0.5 else 0.0,
            like_name(candidate),
        )

    ranked = sorted(bundled, key=rank, reverse=True)
    likely = [candidate for candidate in ranked[:count] if max(rank(candidate)) >= 0.4]
    return likely or ranked[:count]
