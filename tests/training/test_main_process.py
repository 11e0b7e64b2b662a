"""Work done once on the main process and its outcome handed to every process (`broadcast_from_main`), and the
optimizer LM that processes other than the main one hold (`NoOptimizer`): never `None`."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from inspo_cli.config import load_recipe
from inspo_cli.errors import InspoError
from inspo_cli.instructions.providers.optimizer_lm import OptimizerBudgetExhausted
from inspo_cli.main_process import broadcast_from_main
from inspo_cli.training.coevolution import CoEvolution, MainProcessLM, NoOptimizer, instruction_source

ROOT = Path(__file__).resolve().parents[2]


def ranks(world: int = 2):
    return [
        SimpleNamespace(num_processes=world, is_main_process=rank == 0, process_index=rank) for rank in range(world)
    ]


def fake_broadcast():
    """What accelerate's broadcast_object_list does across ranks run one after the other, main first."""
    sent: list = []

    def broadcast(payload: list) -> list:
        if payload != [None]:
            sent.append(payload)
        return sent[-1]

    return broadcast


def test_the_work_runs_once_and_every_process_gets_its_result():
    calls, broadcast = [], fake_broadcast()
    results = [broadcast_from_main(state, lambda: calls.append(1) or "runs/demo-1", broadcast) for state in ranks()]
    assert results == ["runs/demo-1", "runs/demo-1"] and calls == [1]
    assert broadcast_from_main(SimpleNamespace(num_processes=1, is_main_process=True), lambda: 7) == 7


@pytest.mark.parametrize("error", [InspoError("no room on the disk"), OptimizerBudgetExhausted("budget spent")])
def test_an_expected_error_is_raised_on_every_process_with_its_class(error):
    broadcast = fake_broadcast()

    def work():
        raise error

    for state in ranks():
        with pytest.raises(InspoError) as info:
            broadcast_from_main(state, work, broadcast)
        assert type(info.value) is type(error) and str(info.value) == str(error)


def test_a_bug_on_the_main_process_is_not_dressed_up_as_an_outcome():
    def work():
        raise KeyError("a bug")

    with pytest.raises(KeyError):
        broadcast_from_main(ranks()[0], work, fake_broadcast())


def test_a_process_other_than_the_main_one_holds_a_no_optimizer_that_refuses_to_be_called():
    lm = NoOptimizer("on a process other than the main one")
    with pytest.raises(RuntimeError, match="the optimizer LM was called on a process other than the main one"):
        lm.complete("p")
    assert lm.accounting() is None
    lm.restore({"calls": 3})  # the main process's optimizer carries the budget


def test_instruction_source_on_another_rank_never_opens_the_optimizer():
    # the demo's optimizer is a local model: opening it on rank 1 would load it there
    recipe = load_recipe(ROOT / "recipes/demo.yaml")
    assert recipe.population.enabled and recipe.population.evolve_until > 0
    _, make = instruction_source(recipe, None, ranks()[1])
    coevolution = make(verifier=None)
    assert isinstance(coevolution, CoEvolution) and isinstance(coevolution.lm, MainProcessLM)
    assert isinstance(coevolution.lm.lm, NoOptimizer) and coevolution.optimizer_accounting() is None


def test_a_run_that_never_evolves_holds_no_optimizer():
    recipe = load_recipe(ROOT / "recipes/demo.yaml", ["population.evolve_until=0"])
    _, make = instruction_source(recipe, None, ranks(1)[0])
    coevolution = make(verifier=None)
    assert isinstance(coevolution.lm, NoOptimizer) and coevolution.state_dict()["optimizer"] is None
