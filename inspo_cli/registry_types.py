"""The record types and the lookup behind `inspo_cli/registry.py`'s tables: a `Strategy` (code the package or a
recipe names, loaded on first use), a `LossType` (one of TRL's losses, described by what it does to the gradient)
and the `Registry` that finds either by name, or a strategy by `package.module:object` import path.

Standard library only, like the tables that use it: the config validates recipe names against them without importing
a strategy (or torch, or TRL).
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Any

from inspo_cli.errors import InspoError

IMPORT_PATH_HINT = "package.module:object"
MAX_IMPORT_PATH = 300  # characters; every error quotes the path
ORIGINS = {  # Strategy.origin -> how help texts and the docs say where a strategy comes from
    "paper": "the paper",
    "ablation": "the paper's ablation",
    "baseline": "a paper baseline",
    "beyond": "beyond the paper",
    "search-r1": "Search-R1's code",
    "outside": "outside the package",
}


@dataclass(frozen=True)
class Strategy:
    """One registered strategy: where it lives and what the config, the CLI and the docs say of it."""

    target: str  # "package.module" (the registry's attribute is read from it) or "package.module:object"
    summary: str  # one line, for help texts, `inspo recipe explain` and the docs table
    origin: str = "paper"  # a key of ORIGINS
    min_parents: int = 1  # proposers: the parents one call combines; the config asks population.n_parent >= it
    sft: bool = False  # algorithms: trained by TRL's SFTTrainer on examples (not question groups)
    progress_before_training: bool = False  # algorithms: a first phase that saves its own progress
    chat_template: bool = False  # protocols: writes its prompts through one; the config asks model.chat_template on
    vllm_engine: bool = False  # rollout schedules: drives a vLLM engine request by request (model.backend vllm)

    @property
    def beyond_paper(self) -> bool:
        return self.origin in ("beyond", "outside")

    def describe(self, name: str) -> str:
        """ "ucb (beyond the paper): batched UCB1 on the window's rewards", for help texts."""
        return f"{name} ({ORIGINS[self.origin]}): {self.summary}"

    def traits(self) -> dict[str, Any]:
        """The traits that differ from a record's defaults, as `recipe explain` and the strategies page list them."""
        return {trait: getattr(self, trait) for trait in TRAITS if getattr(self, trait) != getattr(Strategy, trait)}


TRAITS = tuple(f.name for f in fields(Strategy) if f.name not in ("target", "summary", "origin"))
# what a module named by import path may declare as upper-case constants; the rest belong to registries that take no
# import path, and a proposer's own CHAT_TEMPLATE string is none of the registry's business
IMPORTED_TRAITS = ("min_parents", "sft", "progress_before_training")
DIVISORS = {  # LossType.divides_by -> what a trajectory's sum of per-token terms is divided by, as the docs say it
    "trajectory": "its own token count (a mean per trajectory, then over the trajectories)",
    "nothing": "nothing (a sum per trajectory, then a mean over the trajectories)",
    "micro-batch tokens": "the token count of its micro-batch",
    "batch tokens": "the token count of the whole generation batch",
    "max_total_tokens": "a constant, rollout.max_total_tokens per trajectory",
}
LEVELS = ("token", "sequence")  # training.importance_sampling_level


@dataclass(frozen=True)
class LossType:
    """One of TRL's `loss_type` values: what the config checks, `recipe check` warns and the docs say of it."""

    summary: str  # one line, for help texts, `inspo recipe explain` and the docs table
    source: str  # the paper (or code) it comes from
    origin: str = "beyond"  # a key of ORIGINS
    level: str | None = None  # the importance_sampling_level it needs (a key of LEVELS); None: either
    clips: bool = True  # clips the ratio to [1 - clip_epsilon, 1 + clip_epsilon_high] (PPO's clip)
    needs_cap: bool = False  # caps the importance weight itself at clip_epsilon_high, which must then be >= 1
    divides_by: str = "trajectory"  # a key of DIVISORS

    @property
    def divides_by_tokens(self) -> bool:
        """Whether it divides summed token terms by a token count: a sequence ratio then weighs by length."""
        return self.divides_by not in ("trajectory", "nothing")

    def describe(self, name: str) -> str:
        """ "dapo (beyond the paper, DAPO): one token mean over the whole batch ...", for help texts."""
        return f"{name} ({ORIGINS[self.origin]}, {self.source}): {self.summary}"

    def traits(self) -> dict[str, Any]:
        shown = {"from": self.source}
        for trait in ("level", "clips", "needs_cap", "divides_by"):
            if getattr(self, trait) != getattr(LossType, trait):
                shown[trait] = getattr(self, trait)
        return shown

    def __post_init__(self) -> None:  # a typo in a table is found when the package is imported
        if self.origin not in ORIGINS or self.divides_by not in DIVISORS or self.level not in (None, *LEVELS):
            raise ValueError(f"{self}: origin, divides_by or level is not one of the known values")


def is_import_path(name: str) -> bool:
    return ":" in name


def _shown(name: str, limit: int = 100) -> str:
    """A name as an error quotes it: a 1 MB value must not become a 1 MB message."""
    return repr(name if len(name) <= limit else name[:limit] + "...")


def _a(what: str) -> str:
    return f"{'an' if what[0] in 'aeiou' else 'a'} {what}"


def described(value: Any) -> str:
    """What a strategy returned, as an error shows it: "None", "a str 'abc'", "a list of 2 (Prediction, str)"."""
    if value is None:
        return "None"
    if isinstance(value, (list, tuple)):
        kinds = list(dict.fromkeys(type(item).__name__ for item in value))
        inside = f" ({', '.join(kinds[:3])}{', ...' if len(kinds) > 3 else ''})" if kinds else ""
        return f"{_a(type(value).__name__)} of {len(value)}{inside}"
    text = repr(value)
    return f"{_a(type(value).__name__)} {text if len(text) <= 60 else text[:60] + '...'}"


Check = Callable[[tuple, Any], "str | None"]  # (the call's arguments, its result) -> what was expected, or None: fine


def _first_line(doc: str | None) -> str:
    lines = (doc or "").strip().splitlines()
    return lines[0].strip() if lines else "(no docstring)"


class Registry(Mapping[str, Any]):
    """The records a recipe key accepts, by name, plus (where allowed) any `package.module:object` import path."""

    def __init__(
        self,
        key: str,
        what: str,
        attribute: str | None,
        entries: Mapping[str, Any],  # Strategy records; LossType for training.loss_type
        import_paths: bool = True,
        parameters: tuple[str, ...] = (),
    ):
        self.key = key  # the recipe key that names one: "population.proposer"
        self.what = what  # "proposer": for errors
        self.attribute = attribute  # what a registered module provides ("prompt"); None: the module itself
        self.entries = entries
        self.import_paths = import_paths
        self.parameters = parameters  # the positional arguments a run calls what it provides with

    @property
    def call(self) -> str:
        """How a run calls a strategy: "prompt(parent, population, buffer, config, rng)"."""
        return f"{self.attribute or 'build'}({', '.join(self.parameters)})"

    def __getitem__(self, name: str) -> Any:
        return self.entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def unknown(self, name: str) -> str:
        """The one line for a name that is neither registered nor (where allowed) an import path."""
        own = f"; or name your own as {IMPORT_PATH_HINT}" if self.import_paths else ""
        return f"must be one of {', '.join(self)} (got {_shown(name)}){own}"

    def resolve(self, name: str) -> Any:
        """The record of `name`, importing it when it is an import path; ValueError (one line) when there is none."""
        if name in self.entries:
            return self.entries[name]
        if not (self.import_paths and is_import_path(name)):
            raise ValueError(
                f"unknown {self.what} {_shown(name)}; registered: {', '.join(self)} (inspo_cli.registry, {self.key})"
            )
        module_name, _, attribute = name.partition(":")
        obj = self._import(name, module_name, attribute)
        module = importlib.import_module(module_name)
        traits = {trait: getattr(module, trait.upper()) for trait in IMPORTED_TRAITS if hasattr(module, trait.upper())}
        for trait, value in traits.items():
            default = getattr(Strategy, trait)
            if type(value) is not type(default):
                raise ValueError(
                    f"{self.what} {name}: {module_name}.{trait.upper()} must be a "
                    f"{type(default).__name__}, got {value!r}"
                )
        if traits.get("min_parents", 1) < 1:
            raise ValueError(f"{self.what} {name}: {module_name}.MIN_PARENTS must be >= 1, got {traits['min_parents']}")
        return Strategy(name, _first_line(obj.__doc__ or module.__doc__), "outside", **traits)

    def _import(self, name: str, module_name: str, attribute: str) -> Callable[..., Any]:
        if (
            not module_name
            or not attribute
            or not all(part.isidentifier() for part in module_name.split("."))
            or not attribute.isidentifier()
            or len(name) > MAX_IMPORT_PATH
        ):
            raise ValueError(
                f"{self.what} {_shown(name)} is not an import path {IMPORT_PATH_HINT} (e.g. "
                f"my_lab.strategies:{self.attribute or 'object'})"
            )
        try:
            module = importlib.import_module(module_name)
        except (Exception, SystemExit) as error:  # the user's code: any failure to import is one line
            raise ValueError(
                f"{self.what} {name}: cannot import {module_name} ({type(error).__name__}: "
                f"{str(error).splitlines()[0][:200] if str(error) else ''}); is its package installed "
                "or on PYTHONPATH?"
            ) from None
        obj = getattr(module, attribute, None)
        if not callable(obj):
            raise ValueError(
                f"{self.what} {name}: {module_name} has no callable {attribute!r}"
                + (f" (a {self.what} provides {self.attribute})" if self.attribute else "")
            )
        self.check_callable(name, obj)
        return obj

    def check_callable(self, name: str, obj: Callable[..., Any]) -> None:
        """Refuse (ValueError, one line) a callable a run could not call as `self.call`: found when the recipe is
        loaded, not when a run first calls it (a method after the model loaded, a proposer at the first evolution)."""
        if not self.parameters:
            return
        try:
            signature = inspect.signature(obj)
        except (TypeError, ValueError):  # a built-in that declares no signature: whether it can be called is unknown
            raise ValueError(
                f"{self.what} {name}: its signature cannot be read (a built-in?); {_a(self.what)} is a "
                f"Python callable {self.call}"
            ) from None
        try:
            signature.bind(*self.parameters)
        except TypeError:
            raise ValueError(
                f"{self.what} {name} takes {_shown(str(signature), 80)[1:-1]}, but {_a(self.what)} is "
                f"called as {self.call}"
            ) from None

    def load(self, name: str, check: Check | None = None) -> Any:
        """What the strategy named `name` provides (the registry's attribute of its module), imported now. For an
        import path, `check(args, result)` (when given) sees every call's result; what it says was expected instead
        is an `InspoError` naming the path and what came back."""
        target = self.resolve(name).target
        module_name, _, attribute = target.partition(":")
        if attribute:
            provided = self._import(name, module_name, attribute)
            return provided if check is None or name in self.entries else self._checked(name, provided, check)
        module = importlib.import_module(module_name)
        return module if self.attribute is None else getattr(module, self.attribute)

    def _checked(self, name: str, provided: Callable[..., Any], check: Check) -> Callable[..., Any]:
        @functools.wraps(provided)
        def call(*args):
            result = provided(*args)
            expected = check(args, result)
            if expected is not None:
                raise InspoError(self.bad_result(name, result, expected))
            return result

        return call

    def bad_result(self, name: str, result: Any, expected: str) -> str:
        """The one line for a result that breaks the contract: whose, what came back, and what a run needs."""
        return (
            f"{self.what} {name}: {self.call.partition('(')[0]}() returned {described(result)}, not {expected} "
            f"({_a(self.what)} is {self.call})"
        )

    def choices(self) -> str:
        """ "softmax (the paper): softmax(w / tau_s) ... | ucb (beyond the paper): ...", for help texts."""
        return " | ".join(entry.describe(name) for name, entry in self.items())
