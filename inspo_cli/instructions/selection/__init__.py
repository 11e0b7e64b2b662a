"""How each question group's instruction is drawn from the population: one file per strategy.

    selector = load_selection(config.selection)(arms, config, batch)     # once per step, from the population's state
    index = selector.draw(stable_random(seed, step, key))                # once per question group
    indices = draw_distinct(selector, rng, k)                            # k different ones (base.py)
    selector.probabilities()                                             # what each arm gets, for the plots

`softmax` is the paper's (eq. 4); `ucb`, `thompson` and `epsilon-greedy` come from the bandit and prompt-evolution
literature (beyond the paper; docs/faithfulness.md). A strategy is a module with `build(arms, config, batch)`
returning a `Selector` (base.py). Every strategy decides from the arms' statistics alone (the same on every process)
and draws only from the generator it is handed (seeded by run seed, step and question), so a question's pick is the
same on every process and after a resume; none keeps state of its own. To add one, write `selection/<name>.py` and
add its line to `inspo_cli/registry.py` (SELECTIONS); a recipe may also name one by import path
(`package.module:build`), whose selector is checked at every use: one finite chance >= 0 per arm, draws in range.
"""

from __future__ import annotations

import math
import operator
import random
from typing import TYPE_CHECKING, Any

from inspo_cli.errors import InspoError
from inspo_cli.registry import SELECTIONS, is_import_path

if TYPE_CHECKING:
    from inspo_cli.instructions.selection.base import Build


def load_selection(name: str) -> Build:
    """The `build` function of the strategy registered (or imported) as `name`."""
    build = SELECTIONS.load(name, _a_selector)
    if not is_import_path(name):
        return build
    return lambda arms, config, batch: CheckedSelector(name, build(arms, config, batch), len(arms))


def _a_selector(args: tuple, selector: Any) -> str | None:
    ok = callable(getattr(selector, "probabilities", None)) and callable(getattr(selector, "draw", None))
    return None if ok else "a Selector (with probabilities() and draw(rng); selection/base.py)"


class CheckedSelector:
    """An imported strategy's selector, whose answers are checked before the population uses them: a wrong count of
    chances would be zipped short against the arms, an index out of range would pick no instruction."""

    def __init__(self, name: str, selector: Any, arms: int):
        self.name, self.selector, self.arms = name, selector, arms

    def _refuse(self, method: str, result: Any, expected: str) -> InspoError:
        return InspoError(
            SELECTIONS.bad_result(self.name, result, expected).replace("build()", f"the selector's {method}()", 1)
        )

    def probabilities(self) -> list[float]:
        chances = self.selector.probabilities()
        try:  # any sequence of real numbers (a numpy array of float32 too), as plain floats
            values = [float(p) for p in chances if not isinstance(p, (bool, str, bytes))]
        except (TypeError, ValueError):
            values = []
        if len(values) != self.arms or not all(math.isfinite(p) and p >= 0 for p in values) or not sum(values) > 0:
            raise self._refuse(
                "probabilities", chances, f"a list of {self.arms} finite chances >= 0, one per arm, not all 0"
            )
        return values

    def draw(self, rng: random.Random) -> int:
        drawn = self.selector.draw(rng)
        try:  # an int of any kind (numpy's argmax gives an int64), never a bool or a float
            index = None if isinstance(drawn, bool) else operator.index(drawn)
        except TypeError:
            index = None
        if index is None or not 0 <= index < self.arms:
            raise self._refuse("draw", drawn, f"an arm's index, an int from 0 to {self.arms - 1}")
        return index
