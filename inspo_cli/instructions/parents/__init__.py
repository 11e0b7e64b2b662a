"""Which alive instructions parent the next generation (Alg. 1 line 16): one file per rule.

    # ranked: the alive candidates, best weight first
    parents = load_parent_rule(config.parents)(ranked, config)

`top` is the paper's (the top n_parent by weight); `pareto` is GEPA's (beyond the paper; docs/faithfulness.md). A
rule is a module with `choose(ranked, config) -> list[Candidate]`, best first, that decides from the candidates'
statistics alone (the same on every process). To add one, write `parents/<name>.py` and add its line to
`inspo_cli/registry.py` (PARENTS); a recipe may also name one by import path (`package.module:choose`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from inspo_cli.registry import PARENTS

# (ranked candidates, the population config) -> the parents; typed loosely because population.py imports this
# package (the population holds the candidates this choice is made among)
Choose = Callable[[Any, Any], list]


def load_parent_rule(name: str) -> Choose:
    """The `choose` function of the parent rule registered (or imported) as `name`."""
    return PARENTS.load(name, _parents_of_ranked)


def _parents_of_ranked(args: tuple, parents: Any) -> str | None:
    """What an imported rule must return: distinct candidates out of `ranked` (at least one when there are any)."""
    ranked = args[0]
    ok = (
        isinstance(parents, list)
        and (bool(parents) or not ranked)
        and all(any(parent is candidate for candidate in ranked) for parent in parents)
        and len({id(parent) for parent in parents}) == len(parents)
    )
    return None if ok else f"a non-empty list of distinct candidates taken from ranked ({len(ranked)} given)"
