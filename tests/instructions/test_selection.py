"""population.selection, beyond the paper's softmax (eq. 4): UCB, Thompson sampling and epsilon-greedy.

Each strategy's defining property on bandits with known success rates, and what every strategy must keep of the
population's contract: one draw per question group from the (seed, step, question) generator, the same in every
process and after a resume from `state_dict`. (The recipe's checks of the new fields: tests/config/test_config.py.)
"""

from __future__ import annotations

import random

import pytest

from inspo_cli.config.sections import PopulationConfig
from inspo_cli.instructions.population import InstructionPopulation
from inspo_cli.instructions.selection import load_selection
from inspo_cli.instructions.selection.base import Arm
from inspo_cli.registry import SELECTIONS

TEXTS = ["Answer the question.", "Search first, then answer.", "Think step by step.", "Search twice."]


def make(selection: str, texts=TEXTS, seed=3, **overrides) -> InstructionPopulation:
    settings = dict(
        instructions=list(texts), size=7, n_parent=1, weight_window=5, prune=False, evolve_until=0, selection=selection
    )
    settings.update(overrides)
    return InstructionPopulation(PopulationConfig(**settings), seed=seed)


def play(population: InstructionPopulation, rates: list[float], steps: int, groups: int, seed: int = 0) -> float:
    """Run the population as a bandit: each step `groups` questions draw an instruction and earn a Bernoulli reward
    of its rate. The regret: the reward lost against always drawing the best instruction."""
    outcome = random.Random(seed)
    by_id = {c.id: rate for c, rate in zip(population.alive(), rates)}
    regret = 0.0
    for step in range(steps):
        picks = population.sample([f"q{step}-{g}" for g in range(groups)], step)
        rewards = [float(outcome.random() < by_id[p.instruction_id]) for p in picks]
        population.observe(picks, rewards)
        population.end_step(step)
        regret += sum(max(rates) - by_id[p.instruction_id] for p in picks)
    return regret


@pytest.mark.parametrize("selection", ["ucb", "thompson", "epsilon-greedy"])
def test_on_two_instructions_of_known_rates_each_strategy_loses_less_than_uniform_sampling(selection):
    rates, steps, groups = [0.3, 0.6], 1000, 4
    uniform = [play(make("epsilon-greedy", TEXTS[:2], epsilon=1.0), rates, steps, groups, seed) for seed in range(3)]
    strategy = [play(make(selection, TEXTS[:2]), rates, steps, groups, seed) for seed in range(3)]
    # uniform loses 0.15 per group: ~600 over 4,000 groups; each strategy should lose well under half of that
    assert sum(uniform) / 3 == pytest.approx(0.15 * steps * groups, rel=0.05)
    assert sum(strategy) / 3 < 0.5 * sum(uniform) / 3


def test_ucb_tries_every_instruction_first_then_spreads_a_batch_by_its_bonus():
    config = PopulationConfig(instructions=TEXTS[:3], size=7, selection="ucb", ucb_exploration=1.0)
    build = load_selection("ucb")
    untried = build([Arm("i0", 0.9, 50, 45.0), Arm("i1", 0.1, 50, 5.0), Arm("i2", 0.0, 0, 0.0)], config, 64)
    assert untried.probabilities()[2] > 0  # an instruction never tried gets groups at once
    tried = build([Arm("i0", 0.9, 500, 450.0), Arm("i1", 0.1, 500, 50.0)], config, 100).probabilities()
    assert tried[0] > 0.9  # a far better, well-measured instruction takes nearly all of the batch
    blind = build(
        [Arm("i0", 0.9, 500, 450.0), Arm("i1", 0.1, 500, 50.0)],
        PopulationConfig(instructions=TEXTS[:2], ucb_exploration=0.0),
        100,
    ).probabilities()
    assert blind == [1.0, 0.0]  # no bonus: pure exploitation


def test_thompson_draws_follow_the_beta_posteriors():
    config = PopulationConfig(instructions=TEXTS[:2])
    selector = load_selection("thompson")([Arm("i0", 0.5, 10, 5.0), Arm("i1", 0.5, 10, 5.0)], config, 20)
    assert selector.probabilities() == pytest.approx([0.5, 0.5], abs=0.03)  # equal posteriors: a coin
    selector = load_selection("thompson")([Arm("i0", 0.2, 40, 8.0), Arm("i1", 0.8, 40, 32.0)], config, 20)
    assert selector.probabilities()[1] > 0.99  # Beta(33, 9) against Beta(9, 33)


def test_epsilon_greedy_gives_the_best_weight_one_minus_epsilon_plus_its_share():
    config = PopulationConfig(instructions=TEXTS, epsilon=0.2)
    arms = [Arm("i0", 0.1, 5, 0.5), Arm("i1", 0.7, 5, 3.5), Arm("i2", 0.7, 5, 3.5), Arm("i3", 0.0, 0, 0.0)]
    assert load_selection("epsilon-greedy")(arms, config, 8).probabilities() == pytest.approx(
        [0.05, 0.85, 0.05, 0.05]
    )  # the tie goes to the older of i1 and i2


@pytest.mark.parametrize("selection", sorted(SELECTIONS))
def test_picks_are_the_same_in_every_process_and_after_a_resume(selection):
    population = make(selection)
    play(population, [0.2, 0.4, 0.6, 0.5], steps=6, groups=8)
    keys = [f"step7-{i}" for i in range(32)]
    picks = population.sample(keys, 7)
    resumed = InstructionPopulation.from_state_dict(population.config, population.state_dict())
    assert resumed.sample(keys, 7) == picks
    other_process = resumed.sample(keys[16:] + keys[:4], 7)  # another slice of the same step, in another order
    assert other_process == picks[16:] + picks[:4]
    assert resumed.probabilities() == pytest.approx(population.probabilities())


@pytest.mark.slow
@pytest.mark.parametrize("selection", ["ucb", "thompson", "epsilon-greedy"])
def test_the_tiny_model_trains_inspo_with_each_selection_and_resumes_to_the_same_picks(
    selection, tmp_path, repo_root, tiny_model_dir
):
    import shutil

    from helpers.cli_helpers import invoke
    from helpers.runs import metrics, resume_after_a_cut, write_recipe

    from inspo_cli.config.instruction_defaults import WORKED_EXAMPLE_INSTRUCTION

    population = {
        "enabled": True,
        "selection": selection,
        "prune_every": 2,
        "evolve_until": 0,
        "size": 3,
        "instructions": [
            WORKED_EXAMPLE_INSTRUCTION,
            "Search, then answer. Question: {question}\n",
            "Answer at once. Question: {question}\n",
        ],
    }
    recipe = write_recipe(
        tmp_path, repo_root, str(tiny_model_dir), population=population, training={"steps": 3, "save_every": 1}
    )
    straight, resumed = tmp_path / "runs/straight", tmp_path / "runs/resumed"
    result = invoke("train", "--recipe", recipe, "--output-dir", tmp_path / "runs", "--name", "straight")
    assert result.exit_code == 0, result.output
    assert [r["population/size"] for r in metrics(straight)] == [3, 2, 2]  # pruned at step 2 whatever the selection
    shutil.copytree(straight, resumed)
    resume_after_a_cut(resumed, straight)  # the same metrics rows, so the same picks, after the resume
    assert (resumed / "instructions.jsonl").read_text() == (straight / "instructions.jsonl").read_text()


# -- population.parents: pareto (GEPA) ------------------------------------------------------------------------


def test_pareto_parents_are_exactly_the_instructions_no_other_beats_in_every_category():
    from inspo_cli.instructions.sampling import Pick

    texts = ["A: single hops.", "B: bridges.", "C: both, a little.", "D: worse than A everywhere.", "E: unused."]
    population = make("softmax", texts, parents="pareto", n_parent=1)
    means = {  # per category: single_hop, bridge
        "i0": (0.9, 0.1),
        "i1": (0.1, 0.9),
        "i2": (0.5, 0.5),
        "i3": (0.8, 0.1),
    }
    for instruction_id, (single, bridge) in means.items():
        pick = Pick(instruction_id, population[instruction_id].text)
        population.observe([pick, pick], [single, bridge], ["single_hop", "bridge"])
    population.end_step(1)
    assert population["i0"].category_means() == {"single_hop": 0.9, "bridge": 0.1}
    # i3 is beaten by i0 in both; i4 earned nothing anywhere; i0, i1 and i2 each win a trade-off
    assert [c.id for c in population.parents()] == ["i0", "i1", "i2"]  # by weight (all 0.5), the oldest first
    assert population.keep_only_parents(15) == ["i3", "i4"]
    top = make("softmax", texts, n_parent=1)  # the paper's rule on the same rewards: one parent, by weight
    for instruction_id, (single, bridge) in means.items():
        pick = Pick(instruction_id, top[instruction_id].text)
        top.observe([pick, pick], [single, bridge], ["single_hop", "bridge"])
    top.end_step(1)
    assert [c.id for c in top.parents()] == ["i0"]


def test_pareto_parents_are_topped_up_to_n_parent_and_survive_a_resume():
    from inspo_cli.instructions.sampling import Pick

    population = make("softmax", TEXTS, parents="pareto", n_parent=3)
    for instruction_id, reward in (("i0", 0.9), ("i1", 0.5), ("i2", 0.4), ("i3", 0.1)):  # one category: a chain
        population.observe([Pick(instruction_id, population[instruction_id].text)], [reward], ["nq"])
    population.end_step(1)
    assert [c.id for c in population.parents()] == ["i0", "i1", "i2"]  # the front is i0 alone; then by weight
    population.observe([Pick("i1", population["i1"].text)], [1.0], ["hotpotqa"])  # pending at the checkpoint
    resumed = InstructionPopulation.from_state_dict(population.config, population.state_dict())
    population.end_step(2)
    resumed.end_step(2)
    assert resumed.records() == population.records()
    assert resumed["i1"].category_means() == {"nq": 0.5, "hotpotqa": 1.0}


@pytest.mark.slow
def test_the_tiny_model_evolves_with_pareto_parents_and_the_merge_proposer_and_resumes(
    tmp_path, repo_root, tiny_model_dir, monkeypatch
):
    import json
    import shutil

    from helpers.cli_helpers import invoke
    from helpers.fake_providers import ScriptedOptimizer
    from helpers.runs import metrics, write_recipe

    from inspo_cli.config.instruction_defaults import WORKED_EXAMPLE_INSTRUCTION

    monkeypatch.setenv("SCRIPTED_KEY", "sk-test-not-a-secret")
    optimizer = ScriptedOptimizer(
        ["<ins_1>Look it up first. Question: {question}\n</ins_1><ins_2>Answer briefly. Question: {question}\n</ins_2>"]
    )
    second = "Search, then answer. Question: {question}\n"
    population = {
        "enabled": True,
        "parents": "pareto",
        "proposer": "merge",
        "n_parent": 2,
        "instructions": [WORKED_EXAMPLE_INSTRUCTION, second],
        "size": 4,
        "prune_every": 5,
        "evolve_every": 2,
        "evolve_until": 3,
        "candidates_per_call": 2,
        "failures_per_call": 2,
        "verify_size": 2,
        "accept": "top_n",
        "accept_top_n": 1,
        "max_verify_rounds": 1,
    }
    recipe = write_recipe(
        tmp_path, repo_root, str(tiny_model_dir), population=population, training={"steps": 3, "save_every": 1}
    )
    recipe.write_text(
        recipe.read_text() + f"optimizer:\n  provider: openai\n  model: scripted\n  base_url: "
        f"{optimizer.url}\n  api_key_env: SCRIPTED_KEY\n  max_retries: 0\n"
    )
    straight = tmp_path / "runs/straight"
    result = invoke("train", "--recipe", recipe, "--output-dir", tmp_path / "runs", "--name", "straight")
    assert result.exit_code == 0, result.output
    (evolution,) = json.loads((straight / "evolutions.json").read_text())
    assert evolution["proposer"] == "merge" and sorted(evolution["parents"]) == ["i0", "i1"]
    assert {c["parent"] for c in evolution["candidates"]} == {"i0", "i1"}  # each parent asked for once
    for prompt in optimizer.prompts:  # every merge prompt carries both parents
        assert WORKED_EXAMPLE_INSTRUCTION.strip()[:60] in prompt and second.strip() in prompt
    records = [json.loads(line) for line in (straight / "instructions.jsonl").read_text().splitlines()]
    assert any(r["step_categories"] for r in records)  # rewards attributed per question type of the world
    resumed = tmp_path / "runs/resumed"
    shutil.copytree(straight, resumed)
    for later in ("checkpoint-3", "final"):
        shutil.rmtree(resumed / "checkpoints" / later)
    (resumed / "summary.json").unlink()
    assert invoke("train", "--resume", resumed).exit_code == 0
    assert (resumed / "instructions.jsonl").read_text() == (straight / "instructions.jsonl").read_text()
    assert len(metrics(resumed)) == len(metrics(straight)) == 3
