"""How each question group's instruction is drawn from the population: one file per strategy.

    selector = load_selection(config.selection)(arms, config, batch)     # once per step, from the population's state
    index = selector.draw(stable_random(seed, step, key))                # once per question group
    selector.probabilities()                                             # what each arm gets, for the plots

`softmax` is the paper's (eq. 4); `ucb`, `thompson` and `epsilon-greedy` come from the bandit and prompt-evolution
literature (beyond the paper; docs/faithfulness.md). A strategy is a module with `build(arms, config, batch)`
returning a `Selector` (base.py). Every strategy decides from the arms' statistics alone (the same on every process)
and draws only from the generator it is handed (seeded by run seed, step and question), so a question's pick is the
same on every process and after a resume; none keeps state of its own. To add one, write `selection/<name>.py` and
add its line to `inspo_cli/registry.py` (SELECTIONS); a recipe may also name one by import path
(`package.module:build`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from inspo_cli.registry import SELECTIONS

if TYPE_CHECKING:
    from inspo_cli.instructions.selection.base import Build


def load_selection(name: str) -> Build:
    """The `build` function of the strategy registered (or imported) as `name`."""
    return SELECTIONS.load(name)
