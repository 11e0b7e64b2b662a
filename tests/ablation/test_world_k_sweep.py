"""bench/ablations/world-k.yaml, the instructions-per-question ablation on the world: it plans (every override is a
recipe field the loader knows), sets k and the baseline on the variants it names, and spends equal rollouts."""

from __future__ import annotations

import json

from helpers.cli_helpers import invoke

from inspo_cli.config import load_recipe

SWEEP = "bench/ablations/world-k.yaml"


def test_the_k_sweep_plans_k_and_the_baseline_per_variant_at_equal_rollouts(repo_root, monkeypatch, tmp_path):
    monkeypatch.chdir(repo_root)
    result = invoke("ablate", "--sweep", SWEEP, "--dry-run", "--json", "--out", tmp_path / "k")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    assert [v["name"] for v in plan["variants"]] == ["k1", "k2", "k2-instruction-baseline"]
    assert plan["seeds"] == [0, 1, 2] and len(plan["runs"]) == 9 and not (tmp_path / "k").exists()
    recipes = {v["name"]: load_recipe(v["recipe"], v["overrides"]) for v in plan["variants"]}
    settings = {name: (r.population.instructions_per_question, r.population.baseline) for name, r in recipes.items()}
    assert settings == {"k1": (1, "question"), "k2": (2, "question"), "k2-instruction-baseline": (2, "instruction")}
    # equal rollouts: the same questions and G per step for every variant, G split evenly over k instructions
    assert len({(r.training.batch_size, r.training.group_size, r.training.steps) for r in recipes.values()}) == 1
    assert all(r.training.group_size % r.population.instructions_per_question == 0 for r in recipes.values())
    assert all(r.population.size >= r.population.instructions_per_question for r in recipes.values())
