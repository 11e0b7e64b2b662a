"""Proposers: one file plus one registry line, refusal of an unregistered one, and the merge proposer (beyond the
paper) whose prompts carry both parents and their failures."""

from __future__ import annotations

import random
import sys

import pytest
from helpers.evolution import PARENT, SCORES, DictVerifier, ScriptedLM, make_buffer, make_config, make_population
from helpers.evolution_rounds import ROUND_1, ROUND_2

from inspo_cli.instructions.evolution import (
    evolve,
)
from inspo_cli.instructions.population import InstructionPopulation
from inspo_cli.instructions.proposers import PROPOSERS
from inspo_cli.instructions.proposing import propose
from inspo_cli.instructions.replay import Experience
from inspo_cli.registry import Strategy

SHOUT_PROPOSER = """
def prompt(parent, population, buffer, config, rng):
    return f"SHOUT {config.candidates_per_call} VERSIONS OF: {parent.text.upper()}"
"""


def test_a_proposer_is_one_file_plus_one_registry_line(tmp_path, monkeypatch):
    (tmp_path / "shout_proposer.py").write_text(SHOUT_PROPOSER)  # the file ...
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "shout_proposer", raising=False)
    monkeypatch.setitem(PROPOSERS.entries, "shout", Strategy("shout_proposer", "shouts"))  # ... and the line
    config = make_config(proposer="shout")  # the config accepts the registered name
    population, lm = make_population(config), ScriptedLM(ROUND_1, ROUND_2)
    report = evolve(population, make_buffer(), lm, DictVerifier(SCORES), config, step=15, rng=random.Random(0))

    assert lm.prompts[0] == f"SHOUT 3 VERSIONS OF: {PARENT.upper()}"
    assert report.proposer == "shout" and report.stop_reason == "population full"
    assert {c.proposer for c in report.candidates} == {"shout"}
    assert {population[c.instruction_id].proposer for c in report.accepted()} == {"shout"}


def test_an_unregistered_proposer_is_refused_with_the_registered_names():
    config = make_config()
    population = make_population(config)
    with pytest.raises(ValueError, match="unknown proposer 'opro'; registered: reflection, paraphrase, history"):
        propose("opro", population["i0"], population, make_buffer(), ScriptedLM(ROUND_1), config, random.Random(0))


# -- the merge proposer (beyond the paper) ------------------------------------------------------------------


def test_merge_prompts_carry_both_parents_and_each_ones_failures():
    config = make_config(proposer="merge", n_parent=2, failures_per_call=3, size=4)  # two parents + two merges
    population = make_population(config)  # by weight: i0 (0.8), i2 (0.5), i1 (0.2): parents i0 and i2
    buffer = make_buffer()
    buffer.add(Experience("i2", "q6", "Capital q6?", ("Lima",), "wrong-6", 0.0, 2))
    lm = ScriptedLM("<ins_1>Merged: search, then plan.</ins_1>", "<ins_1>Merged: plan, then search.</ins_1>")
    report = evolve(
        population,
        buffer,
        lm,
        DictVerifier({**SCORES, "Merged: search, then plan.": 0.6, "Merged: plan, then search.": 0.6}),
        config,
        step=15,
        rng=random.Random(0),
    )
    assert report.parents == ["i0", "i2"] and report.proposer == "merge"
    first, second = sorted(lm.prompts, key=lambda p: p.index("Search first, then answer."))[::-1]
    # each prompt: the parent it was asked for first, the other parent second, each with its own failures
    assert first.index(PARENT) < first.index("Search first, then answer.")
    assert second.index("Search first, then answer.") < second.index(PARENT)
    blocks = lambda prompt: [part.split("</example>")[0] for part in prompt.split("<example>")[1:]]  # noqa: E731
    assert ["wrong-2" in b and "wrong-1" in b and "wrong-6" not in b for b in blocks(first)] == [True, False]
    assert "wrong-6" in blocks(first)[1]  # i0 asked for: its two latest failures, then i2's one
    assert "wrong-6" in blocks(second)[0]  # i2 asked for: its own failure first
    assert all("Merge the two prompts into 3 different but better candidates" in p for p in lm.prompts)
    assert {(c.parent, c.proposer) for c in report.candidates} == {("i0", "merge"), ("i2", "merge")}


def test_merge_needs_two_parents():
    from inspo_cli.config.validation import ConfigValueError
    from inspo_cli.instructions.proposers.merge import prompt

    with pytest.raises(ConfigValueError, match="merge combines 2 parents, but population.n_parent is 1"):
        make_config(proposer="merge", n_parent=1)
    config = make_config(proposer="merge", n_parent=2, instructions=[PARENT])  # one instruction: one parent alive
    population = InstructionPopulation(config, seed=0)
    from inspo_cli.instructions.proposers.base import NothingToPropose

    with pytest.raises(NothingToPropose, match="needs two parents"):
        prompt(population["i0"], population, make_buffer(), config, random.Random(0))
    report = evolve(population, make_buffer(), ScriptedLM(), DictVerifier(SCORES), config, 15, random.Random(0))
    assert report.stop_reason.startswith("the merge proposer needs two parents")  # training goes on
