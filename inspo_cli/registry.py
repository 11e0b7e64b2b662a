"""Every strategy by name, as plain data: one record per strategy, one registry per recipe key.

    PROPOSERS["merge"].summary             # "two parents' instructions combined, GEPA's merge"
    PROPOSERS["merge"].min_parents         # 2: the config asks population.n_parent >= 2 of it
    PROPOSERS.load("reflection")           # the module's `prompt` function, imported now
    PROPOSERS.load("my_lab.opro:prompt")   # a strategy from outside the package, by import path
    ALGORITHMS.resolve("sft").sft          # True: trained by TRL's SFTTrainer on examples

Adding a strategy is one file plus one line here (docs/contributing.md walks through one, and a test follows it).
Everything a user reads about strategies is generated from these records: the recipe fields' help (and so `inspo
recipe explain` and docs/reference/recipe.md), the commands' help (`inspo ablate --selection`, `inspo evaluate
--method`, `inspo train`), the config's checks and their errors, the ablation axes and docs/reference/strategies.md
(`python -m inspo_cli.registry > docs/reference/strategies.md`; a test keeps it current).

A recipe may also name a strategy by import path, `package.module:object`: the object is what a registered module
provides under the registry's attribute (a proposer's `prompt` function, a selection's `build`, ...). The config
imports it when the recipe is loaded and refuses, in one line, a path that does not import, names no callable, or
names one that cannot be called as the registry calls it (`Registry.call`: `os:getcwd` is no proposer), so nothing
outside the package is found wrong after a model has loaded. What it returns is checked after every call
(`Registry.load(name, check)`), with one line naming the path, what came back and what was expected. Its summary
is the first line of its docstring, and its traits are the module's upper-case constants of the same names
(`MIN_PARENTS = 2`, `SFT = True`, ...), defaulting as a record's do.

This module sits on the lowest floor and imports nothing of the project but `retriever.kinds` and `errors` (standard
library only), so the config validates recipe names against it without importing the strategies (or torch, or TRL); the
packages that run a strategy load it through its registry, on first use. Retriever kinds are registered in the
standalone `retriever` package (`retriever.kinds.KINDS`, which `inspo index` and `retriever` use without inspo);
`RETRIEVER_KINDS` here reads that table live, so it is listed, documented and checked like the others.
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

    @property
    def beyond_paper(self) -> bool:
        return self.origin in ("beyond", "outside")

    def describe(self, name: str) -> str:
        """ "ucb (beyond the paper): batched UCB1 on the window's rewards", for help texts."""
        return f"{name} ({ORIGINS[self.origin]}): {self.summary}"


TRAITS = tuple(f.name for f in fields(Strategy) if f.name not in ("target", "summary", "origin"))


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


class Registry(Mapping[str, Strategy]):
    """The strategies a recipe key accepts, by name, plus any `package.module:object` import path."""

    def __init__(
        self,
        key: str,
        what: str,
        attribute: str | None,
        entries: Mapping[str, Strategy],
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

    def __getitem__(self, name: str) -> Strategy:
        return self.entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def unknown(self, name: str) -> str:
        """The one line for a name that is neither registered nor (where allowed) an import path."""
        own = f"; or name your own as {IMPORT_PATH_HINT}" if self.import_paths else ""
        return f"must be one of {', '.join(self)} (got {_shown(name)}){own}"

    def resolve(self, name: str) -> Strategy:
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
        traits = {trait: getattr(module, trait.upper()) for trait in TRAITS if hasattr(module, trait.upper())}
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


def _kinds() -> Mapping[str, Strategy]:
    from retriever.kinds import KINDS

    class LiveKinds(Mapping[str, Strategy]):  # retriever.kinds.KINDS as records, read at each use
        def __getitem__(self, name: str) -> Strategy:
            kind = KINDS[name]
            return Strategy(kind.module, kind.summary, kind.origin)

        def __iter__(self) -> Iterator[str]:
            return iter(KINDS)

        def __len__(self) -> int:
            return len(KINDS)

    return LiveKinds()


PROPOSERS = Registry(
    "population.proposer",
    "proposer",
    "prompt",
    parameters=("parent", "population", "buffer", "config", "rng"),
    entries={
        "reflection": Strategy(
            "inspo_cli.instructions.proposers.reflection", "INSPO's: reflect on the parent's failed rollouts, App. E"
        ),
        "paraphrase": Strategy(
            "inspo_cli.instructions.proposers.paraphrase", "rewrite the parent without feedback, Fig. 3", "ablation"
        ),
        "history": Strategy(
            "inspo_cli.instructions.proposers.history", "OPRO's scored history of instructions, Fig. 3", "ablation"
        ),
        "merge": Strategy(
            "inspo_cli.instructions.proposers.merge",
            "two parents' instructions combined, GEPA's merge",
            "beyond",
            min_parents=2,
        ),
    },
)

SELECTIONS = Registry(
    "population.selection",
    "selection",
    "build",
    parameters=("arms", "config", "batch"),
    entries={
        "softmax": Strategy("inspo_cli.instructions.selection.softmax", "softmax(w / tau_s) over the weights, eq. 4"),
        "ucb": Strategy(
            "inspo_cli.instructions.selection.ucb",
            "batched UCB1 on the window's rewards, with ucb_exploration",
            "beyond",
        ),
        "thompson": Strategy(
            "inspo_cli.instructions.selection.thompson",
            "Beta posteriors of the window's rewards, one draw per group",
            "beyond",
        ),
        "epsilon-greedy": Strategy(
            "inspo_cli.instructions.selection.epsilon_greedy",
            "the best weight, or a uniform draw with chance epsilon",
            "beyond",
        ),
    },
)

PARENTS = Registry(
    "population.parents",
    "parent rule",
    "choose",
    parameters=("ranked", "config"),
    entries={
        "top": Strategy("inspo_cli.instructions.parents.top", "the top n_parent by weight"),
        "pareto": Strategy(
            "inspo_cli.instructions.parents.pareto",
            "GEPA's Pareto front over question categories, topped up to n_parent by weight",
            "beyond",
        ),
    },
)

METHODS = Registry(
    "evaluation.method",
    "inference method",
    "predict",
    parameters=("ctx", "questions"),
    entries={
        # Table 1's order, which reports keep
        "direct": Strategy("inspo_cli.evaluation.methods.direct", "FlashRAG's direct generation", "baseline"),
        "rag": Strategy("inspo_cli.evaluation.methods.rag", "FlashRAG's standard RAG", "baseline"),
        "ircot": Strategy("inspo_cli.evaluation.methods.ircot", "IRCoT, Trivedi et al. 2023", "baseline"),
        "search-o1": Strategy("inspo_cli.evaluation.methods.search_o1", "Search-o1, Li et al. 2025", "baseline"),
        "agent": Strategy("inspo_cli.evaluation.methods.agent", "the Search-R1 protocol with an instruction"),
    },
)

ALGORITHMS = Registry(
    "training.algorithm",
    "training algorithm",
    None,
    parameters=("ctx",),
    entries={
        "grpo": Strategy("inspo_cli.training.grpo:build_grpo", "GRPO, eq. 2, through TRL's GRPOTrainer"),
        "sft": Strategy(
            "inspo_cli.training.sft:build_sft",
            "SFT on data.trajectories through TRL's SFTTrainer",
            "baseline",
            sft=True,
        ),
        "rejection-sampling": Strategy(
            "inspo_cli.training.rejection_sampling:build_rejection_sampling",
            "Search-R1's: sample with search, SFT on the correct trajectories",
            "baseline",
            sft=True,
            progress_before_training=True,
        ),
    },
)

RETRIEVER_KINDS = Registry("retriever.kind", "retriever kind", None, _kinds(), import_paths=False)

TOOLS = Registry(
    "agent.tools",
    "tool",
    "build",
    parameters=("context",),
    entries={  # docs/tools.md: adding one
        "search": Strategy("inspo_cli.agent.tools.search", "the retriever's top k passages for a query"),
        "calculator": Strategy(
            "inspo_cli.agent.tools.calculator", "exact, bounded arithmetic on integers and decimals", "beyond"
        ),
    },
)

REGISTRIES = (PROPOSERS, SELECTIONS, PARENTS, METHODS, ALGORITHMS, RETRIEVER_KINDS, TOOLS)


def is_sft(algorithm: str) -> bool:
    """Whether `training.algorithm` trains on examples with SFTTrainer (False for a name that does not resolve)."""
    try:
        return ALGORITHMS.resolve(algorithm).sft
    except ValueError:
        return False


def markdown() -> str:
    """docs/reference/strategies.md: every registry's names, origins and summaries, as tables."""
    out = [
        "# Strategies",
        "",
        "<!-- Generated by `python -m inspo_cli.registry > docs/reference/strategies.md`; do not edit. -->",
        "",
        "Every strategy a recipe can name, from `inspo_cli/registry.py`. A recipe may also name one by import "
        f"path, `{IMPORT_PATH_HINT}` (docs/contributing.md), except retriever kinds, which an index records in "
        "its index.json and `retriever` opens without inspo.",
        "",
    ]
    for registry in REGISTRIES:
        out += [f"## `{registry.key}`", "", "| name | origin | what it does | traits |", "|---|---|---|---|"]
        for name, entry in registry.items():
            traits = ", ".join(
                f"{trait} = {getattr(entry, trait)}"
                for trait in TRAITS
                if getattr(entry, trait) != getattr(Strategy, trait)
            )
            out.append(f"| `{name}` | {ORIGINS[entry.origin]} | {entry.summary} | {traits} |")
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    print(markdown(), end="")
