"""bench/population_sim.py drives the real population, evolution and verification code; a shortened run of each
kind of configuration keeps it working as that code changes (its committed results come from the full script)."""

from __future__ import annotations

import sys

import pytest


@pytest.fixture
def sim(repo_root, monkeypatch):
    monkeypatch.syspath_prepend(str(repo_root / "bench"))
    import population_sim

    monkeypatch.setattr(population_sim, "STEPS", 32)  # two evolutions (steps 15, 30), pruning every 5
    monkeypatch.setattr(population_sim, "QUESTIONS_PER_STEP", 64)
    yield population_sim
    sys.modules.pop("population_sim", None)


@pytest.mark.parametrize(
    "config",
    ["paper", "ucb", "thompson", "epsilon-greedy", "accept top-n", "pareto parents (N_parent 2)", "merge (N_parent 2)"],
)
def test_each_kind_of_configuration_simulates_to_sane_numbers(sim, config):
    result = sim.simulate(config, seed=1, shift=-0.1, spread=0.2)
    assert 0 <= result.regret < 0.5 and 0 < result.best_rate < 1
    assert 0 < result.accepted and 0 <= result.worse_in <= result.accepted  # two evolutions refilled the population
    assert 0 <= result.better_out <= result.better and 0 <= result.parent_best <= result.evolutions == 2
    again = sim.simulate(config, seed=1, shift=-0.1, spread=0.2)
    assert again == result  # a seed makes the same run


def test_the_summary_carries_intervals(sim):
    results = [sim.simulate("paper", seed=s, shift=-0.1, spread=0.2) for s in range(3)]
    summary = sim.summarize(results)
    assert summary["runs"] == 3 and summary["evolutions"] == 3 * 2
    assert summary["p_parent_best_ci"][0] <= summary["p_parent_best"] <= summary["p_parent_best_ci"][1]
    assert summary["regret_ci"][0] <= summary["regret"] <= summary["regret_ci"][1]
    assert "| paper |" in sim.table({"paper": summary})


def test_configuration_names_can_be_given_to_configs(sim):
    assert all("," not in name for name in sim.CONFIGS)  # --configs splits on commas
