"""The instruction population: eq. 6 weights, eq. 4 sampling, successive-halving pruning, schedule, state.

Expected numbers are computed by hand in the comments, not by calling the code under test.
"""

from __future__ import annotations

import json

import pytest

from inspo_cli.config.sections import PopulationConfig
from inspo_cli.errors import InspoError
from inspo_cli.instructions.population import InstructionPopulation
from inspo_cli.instructions.sampling import Pick, StaticInstruction

TEXTS = ["Answer the question.", "Search first, then answer.", "Think step by step."]


def make(texts=TEXTS, seed=7, **overrides) -> InstructionPopulation:
    settings = dict(
        instructions=list(texts),
        size=7,
        n_parent=1,
        temperature=0.2,
        weight_window=3,
        prune_every=5,
        evolve_every=15,
        evolve_until=150,
    )
    settings.update(overrides)
    return InstructionPopulation(PopulationConfig(**settings), seed=seed)


def reward(population, instruction_id, *group_rewards):
    population.observe([Pick(instruction_id, population[instruction_id].text)] * len(group_rewards), group_rewards)


def test_initial_candidates_have_fresh_ids_zero_weight_and_uniform_probability():
    population = make()
    assert [c.id for c in population.alive()] == ["i0", "i1", "i2"]
    assert all(c.proposer == "initial" and c.parent is None and c.step_born == 0 for c in population.alive())
    assert population.weights() == {"i0": 0.0, "i1": 0.0, "i2": 0.0}
    assert population.probabilities() == pytest.approx({"i0": 1 / 3, "i1": 1 / 3, "i2": 1 / 3})


def test_weight_is_moving_average_of_step_mean_group_reward_over_used_steps():
    population = make()  # weight_window = 3
    reward(population, "i0", 1.0, 0.0)  # step 0: mean 0.5
    reward(population, "i1", 0.2)
    population.end_step(0)
    assert population.weights() == pytest.approx({"i0": 0.5, "i1": 0.2, "i2": 0.0})

    reward(population, "i0", 1.0)  # step 1: window [0.5, 1.0] -> 0.75; i1 unused keeps 0.2
    population.end_step(1)
    assert population.weights() == pytest.approx({"i0": 0.75, "i1": 0.2, "i2": 0.0})

    reward(population, "i0", 0.0)  # step 2: window [0.5, 1.0, 0.0] -> 0.5
    population.end_step(2)
    reward(population, "i0", 0.25, 0.25, 0.25, 0.25)  # step 3: 0.5 leaves the window: [1.0, 0.0, 0.25] -> 5/12
    population.end_step(3)
    assert population["i0"].weight == pytest.approx(5 / 12)
    assert population["i0"].step_rewards == [[0, 0.5, 2], [1, 1.0, 1], [2, 0.0, 1], [3, 0.25, 4]]
    assert [step for step, _ in population["i0"].weight_history] == [0, 1, 2, 3]
    assert [w for _, w in population["i0"].weight_history] == pytest.approx([0.5, 0.75, 0.5, 5 / 12])
    assert population["i2"].weight_history == [[0, 0.0], [1, 0.0], [2, 0.0], [3, 0.0]]


def test_category_means_average_groups_over_the_weight_window():
    population = make(weight_window=2)
    pick = Pick("i0", population["i0"].text)
    population.observe([pick, pick, pick], [0.2, 0.6, 1.0], ["nq", "nq", "hotpotqa"])  # step 1: two nq groups
    population.end_step(1)
    assert population["i0"].category_means() == pytest.approx({"nq": 0.4, "hotpotqa": 1.0})  # (0.2 + 0.6) / 2
    population.observe([pick], [1.0], ["nq"])  # step 2: nq over three groups, (0.2 + 0.6 + 1.0) / 3
    population.end_step(2)
    assert population["i0"].category_means() == pytest.approx({"nq": 0.6, "hotpotqa": 1.0})
    population.observe([pick], [0.0], ["nq"])  # step 3: step 1 leaves the window of 2, and hotpotqa with it
    population.end_step(3)
    assert population["i0"].category_means() == pytest.approx({"nq": 0.5})


def test_end_step_rejects_a_step_that_does_not_increase_and_observe_an_unknown_id():
    population = make()
    population.end_step(4)
    with pytest.raises(ValueError, match="steps must increase"):
        population.end_step(4)
    with pytest.raises(ValueError, match="unknown instruction"):
        population.observe([Pick("i99", "x")], [1.0])
    with pytest.raises(ValueError, match="2 picks but 1"):
        population.observe([Pick("i0", "x")] * 2, [1.0])


@pytest.mark.parametrize(
    "weights, temperature, expected",
    [
        ([0.5, 0.0], 0.2, [0.9241, 0.0759]),  # e^2.5 / (e^2.5 + 1)
        ([1.0, 0.0], 0.2, [0.9933, 0.0067]),  # e^5 / (e^5 + 1)
        ([0.5, 0.3, 0.0], 0.2, [0.6897, 0.2537, 0.0566]),  # e^2.5, e^1.5, 1 over 17.664
        ([0.5, 0.5, 0.0], 1.0, [0.3837, 0.3837, 0.2327]),  # e^.5, e^.5, 1 over 4.2974
        ([1.0, 0.0], 0.001, [1.0, 0.0]),  # e^1000 overflows a float unless the max is subtracted first
    ],
)
def test_probabilities_are_softmax_of_weights_over_temperature(weights, temperature, expected):
    population = make(texts=[f"instruction {i}" for i in range(len(weights))], temperature=temperature)
    for i, w in enumerate(weights):
        reward(population, f"i{i}", w)
    population.end_step(0)
    assert list(population.probabilities().values()) == pytest.approx(expected, abs=1e-4)


def test_sampling_is_identical_across_processes_and_repeated_keys_share_a_pick():
    keys = [f"world:q{i}" for i in range(200)]
    rank0, rank1 = make(seed=3), make(seed=3)  # two processes built from the same recipe
    for population in (rank0, rank1):
        reward(population, "i1", 0.1)
        population.end_step(0)
    picks0 = rank0.sample(keys, step=1)
    assert picks0 == rank1.sample(keys, step=1)
    assert rank1.sample(list(reversed(keys)), step=1) == list(reversed(picks0))  # a key's draw ignores the batch
    assert len(set(picks0)) == 3  # all three instructions are drawn somewhere

    group = rank0.sample(["world:q5"] * 5 + ["world:q6"] * 5, step=1)  # a question group's rollouts
    assert len(set(group[:5])) == 1 and len(set(group[5:])) == 1
    assert group[0] == picks0[5]

    assert make(seed=4).sample(keys, step=1) != make(seed=3).sample(keys, step=1)
    assert rank0.sample(keys, step=2) != picks0  # the step is part of the draw


def test_empirical_pick_frequency_matches_the_probabilities():
    population = make(texts=["a", "b", "c"])
    reward(population, "i0", 0.5)  # weights [0.5, 0.3, 0.0] at tau 0.2 -> [0.6897, 0.2537, 0.0566]
    reward(population, "i1", 0.3)
    population.end_step(0)
    picks = population.sample([f"q{i}" for i in range(20000)], step=1)
    frequency = {i: sum(p.instruction_id == i for p in picks) / len(picks) for i in ("i0", "i1", "i2")}
    # 4 standard deviations of a frequency over 20000 draws is at most 4 * 0.5 / sqrt(20000) = 0.014
    assert frequency == pytest.approx({"i0": 0.6897, "i1": 0.2537, "i2": 0.0566}, abs=0.014)


def test_prune_halves_by_weight_down_to_n_parent():
    population = make(texts=[f"instruction {i}" for i in range(7)])
    for i, w in enumerate([0.1, 0.7, 0.0, 0.5, 0.3, 0.6, 0.2]):
        reward(population, f"i{i}", w)
    population.end_step(5)
    # ranked: i1 .7, i5 .6, i3 .5, i4 .3 | i6 .2, i0 .1, i2 0 -> keep ceil(7/2) = 4
    assert population.prune(5) == ["i6", "i0", "i2"]
    assert [c.id for c in population.alive()] == ["i1", "i3", "i4", "i5"]
    assert population["i2"].step_pruned == 5 and population["i1"].step_pruned is None
    assert population.prune(10) == ["i3", "i4"]  # 4 -> 2
    assert population.prune(15) == ["i5"]  # 2 -> max(n_parent=1, 1)
    assert population.prune(20) == []  # already at n_parent
    assert [c.id for c in population.alive()] == ["i1"] and len(population) == 1


def test_prune_never_goes_below_n_parent_and_breaks_ties_by_age():
    population = make(texts=[f"instruction {i}" for i in range(5)], n_parent=3)
    assert population.prune(5) == ["i3", "i4"]  # all weights 0: the older three stay; max(3, ceil(5/2)) = 3
    assert population.prune(10) == []  # 3 alive is not more than n_parent
    population = make(texts=[f"instruction {i}" for i in range(4)], n_parent=3)
    reward(population, "i3", 1.0)
    population.end_step(0)
    assert population.prune(5) == ["i2"]  # max(3, ceil(4/2)) = 3 kept: i3 first, then i0, i1 by age


def test_schedule_follows_algorithm_1():
    population = make(prune_every=5, evolve_every=15, evolve_until=150)
    assert [s for s in range(0, 31) if population.should_prune(s)] == [5, 10, 15, 20, 25, 30]
    assert [s for s in range(0, 160) if population.should_evolve(s)] == [15, 30, 45, 60, 75, 90, 105, 120, 135]
    population = make(prune_every=5, prune=False)  # Fig. 3's constant population: never pruned
    assert [s for s in range(0, 31) if population.should_prune(s)] == []
    assert not make(evolve_until=0).should_evolve(15)


def test_parents_best_keep_only_parents_and_reset():
    population = make(texts=["a", "b", "c", "d"], n_parent=2)
    for instruction_id, w in (("i0", 0.2), ("i1", 0.9), ("i2", 0.4)):
        reward(population, instruction_id, w)
    population.end_step(14)
    assert [c.id for c in population.parents()] == ["i1", "i2"]
    assert population.best().id == "i1"
    assert population.keep_only_parents(15) == ["i0", "i3"]
    population.reset_weights()
    assert population.weights() == {"i1": 0.0, "i2": 0.0}
    assert population.probabilities() == pytest.approx({"i1": 0.5, "i2": 0.5})
    assert population["i1"].step_rewards == [[14, 0.9, 1]]  # the record survives the reset


def test_add_refuses_duplicates_and_overflow_and_never_reuses_ids():
    population = make(texts=["Answer  the\nquestion.", "b"], size=3)
    assert population.add(" Answer the question. ", parent="i0", proposer="reflection", step=3) is None
    child = population.add("Search, then answer.", parent="i0", proposer="reflection", step=3, verification_score=0.4)
    assert (child.id, child.parent, child.proposer, child.step_born, child.verification_score) == (
        "i2",
        "i0",
        "reflection",
        3,
        0.4,
    )
    assert population.add("one too many", parent="i0", proposer="paraphrase", step=3) is None  # size 3
    population.prune(5)  # 3 -> 2, i2 (weight 0, youngest) goes
    assert population.add("Search, then answer.", parent="i0", proposer="history", step=6).id == "i3"
    with pytest.raises(ValueError, match="unknown parent"):
        population.add("x", parent="i42", proposer="reflection", step=6)
    with pytest.raises(ValueError, match="proposer"):
        population.add("x", parent=None, proposer="magic", step=6)


def test_initial_instructions_that_a_user_got_wrong_raise_inspo_error():
    with pytest.raises(InspoError, match="repeats an earlier one"):
        make(texts=["Answer.", " Answer. "])
    config = PopulationConfig(size=2, n_parent=1)
    with pytest.raises(InspoError, match="population.size is 2"):
        InstructionPopulation(config, seed=0, initial_texts=["a", "b", "c"])
    with pytest.raises(InspoError, match="is empty"):
        InstructionPopulation(config, seed=0, initial_texts=["a", "  "])


def test_state_round_trips_through_json_exactly_and_resumes_identically():
    population = make(texts=[f"instruction {i}" for i in range(5)])
    reward(population, "i1", 0.3, 0.6)
    population.end_step(0)
    population.prune(5)
    population.add("new one", parent="i1", proposer="reflection", step=5, verification_score=0.25)
    reward(population, "i0", 1 / 3)  # pending: observed but the step has not ended
    state = population.state_dict()
    restored = InstructionPopulation.from_state_dict(population.config, json.loads(json.dumps(state)))
    assert restored.state_dict() == state
    assert restored.records() == population.records()
    keys = [f"q{i}" for i in range(50)]
    assert restored.sample(keys, 6) == population.sample(keys, 6)
    for p in (population, restored):
        p.end_step(6)
    assert restored.weights() == population.weights() and population["i0"].weight == pytest.approx(1 / 3)
    assert restored.add("another", parent=None, proposer="rewrite", step=7).id == "i6"  # the id counter resumed


def test_records_list_every_candidate_ever_alive_or_pruned():
    population = make(texts=["a", "b", "c"])
    reward(population, "i2", 1.0)
    population.end_step(5)
    population.prune(5)
    rows = population.records()
    assert [(r["id"], r["alive"], r["step_pruned"], r["weight"]) for r in rows] == [
        ("i0", True, None, 0.0),
        ("i1", False, 5, 0.0),
        ("i2", True, None, 1.0),
    ]
    assert {"text", "parent", "proposer", "step_born", "verification_score", "weight_history", "step_rewards"} <= set(
        rows[0]
    )
    json.dumps(rows)


def test_static_instruction_also_implements_end_step():
    source = StaticInstruction("Answer.")
    picks = source.sample(["q1", "q2"], step=0)
    source.observe(picks, [1.0, 0.0])
    assert source.end_step(0) is None and picks == [Pick("i0", "Answer.")] * 2
