"""`population.instructions_per_question` (k): a question's group of rollouts split into blocks of rows in a row, one
instruction each, drawn without replacement by the selection rule; k = 1 draws what the paper's sampling always drew.

Expected numbers are computed by hand in the comments, not by calling the code under test.
"""

from __future__ import annotations

import math

import pytest

from inspo_cli.config.sections import PopulationConfig
from inspo_cli.instructions.population import InstructionPopulation
from inspo_cli.instructions.sampling import Pick, block_rows, question_groups

TEXTS = [f"Instruction number {i}." for i in range(5)]


def make(k=1, texts=TEXTS, seed=11, **overrides) -> InstructionPopulation:
    config = PopulationConfig(enabled=True, instructions=list(texts), instructions_per_question=k, **overrides)
    return InstructionPopulation(config, seed=seed)


def with_a_step_of_rewards(population: InstructionPopulation) -> InstructionPopulation:
    picks = [Pick(i, population[i].text) for i in ("i1", "i3", "i0")]
    population.observe(picks, [0.6, 0.3, 0.1])
    population.end_step(0)
    return population


def ids(picks) -> list[str]:
    return [p.instruction_id for p in picks]


@pytest.mark.parametrize(
    "selection, expected",
    [  # the picks the code before instructions_per_question made for this seed, step and state (checked against it)
        ("softmax", ["i3", "i1", "i1", "i1"]),
        ("thompson", ["i2", "i0", "i1", "i4"]),
        ("ucb", ["i4", "i3", "i3", "i2"]),
    ],
)
def test_one_instruction_per_question_draws_exactly_what_it_always_drew(selection, expected):
    population = with_a_step_of_rewards(make(selection=selection))
    keys = ["world:q1", "world:q2", "world:q3", "world:q4"]
    assert ids(population.sample(keys, 3)) == expected
    grouped = ids(population.sample([key for key in keys for _ in range(5)], 3, group_size=5))
    assert grouped == [pick for pick in expected for _ in range(5)]  # every rollout of a group: its question's pick


def test_a_group_is_split_into_k_blocks_of_rows_in_a_row_each_a_different_instruction():
    population = with_a_step_of_rewards(make(k=2))
    one = with_a_step_of_rewards(make(k=1))
    keys = [f"q{j}" for j in range(50) for _ in range(4)]
    picks = ids(population.sample(keys, 2, group_size=4))
    firsts = ids(one.sample(keys, 2, group_size=4))
    for start in range(0, len(keys), 4):
        a, b = picks[start : start + 2], picks[start + 2 : start + 4]
        assert a[0] == a[1] and b[0] == b[1] and a[0] != b[0]
        assert a[0] == firsts[start]  # the first block's instruction is the one k = 1 draws
    assert block_rows(population.sample(keys, 2, group_size=4), 4) == 2


def test_a_question_drawn_twice_in_a_row_is_two_groups_split_alike():
    population = make(k=2)
    picks = ids(population.sample(["q"] * 8 + ["r"] * 4, 0, group_size=4))
    assert picks[:4] == picks[4:8] and picks[0] == picks[1] != picks[2] == picks[3]
    assert [k for k, _ in question_groups(["q"] * 8 + ["r"] * 4, 4)] == ["q", "q", "r"]
    assert question_groups(["q"] * 8, None) == [("q", 8)]  # without group_size a run is one group


def test_with_fewer_instructions_alive_than_k_the_blocks_are_the_largest_divisor_of_the_group_that_fits():
    population = make(k=4, texts=TEXTS[:3], size=7)  # 3 alive: 8 rows -> 2 blocks of 4 (3 does not divide 8)
    picks = ids(population.sample(["q"] * 8, 0, group_size=8))
    assert picks[:4] == [picks[0]] * 4 and picks[4:] == [picks[4]] * 4 and picks[0] != picks[4]
    six = ids(population.sample(["r"] * 6, 0, group_size=6))  # 6 rows: 3 blocks of 2, all 3 instructions
    assert len(set(six)) == 3 and all(six[i] == six[i + 1] for i in (0, 2, 4))
    lone = make(k=2, texts=TEXTS[:1])
    assert ids(lone.sample(["q"] * 4, 0, group_size=4)) == ["i0"] * 4


def pair_probabilities(p: list[float]) -> dict[tuple[int, int], float]:
    """Sampling two without replacement: P(i then j) = p_i * p_j / (1 - p_i)."""
    return {(i, j): p[i] * p[j] / (1 - p[i]) for i in range(len(p)) for j in range(len(p)) if i != j}


@pytest.mark.parametrize("selection", ["softmax", "epsilon-greedy"])
def test_draws_without_replacement_follow_the_selectors_probabilities(selection):
    population = make(k=2, texts=TEXTS[:3], selection=selection, temperature=0.2, epsilon=0.3)
    population.observe([Pick("i0", TEXTS[0]), Pick("i1", TEXTS[1])], [0.3, 0.1])
    population.end_step(0)
    if selection == "softmax":  # w = (0.3, 0.1, 0): exp(w / 0.2) = (e^1.5, e^0.5, 1), normalised
        raw = [math.exp(1.5), math.exp(0.5), 1.0]
    else:  # the best (i0) gets 0.7 + 0.3 / 3, the others 0.3 / 3 each
        raw = [0.8, 0.1, 0.1]
    p = [x / sum(raw) for x in raw]
    n = 6000
    picks = population.sample([f"q{j}" for j in range(n) for _ in range(2)], 1, group_size=2)
    counts: dict[tuple[int, int], int] = {}
    for start in range(0, 2 * n, 2):
        pair = (int(picks[start].instruction_id[1:]), int(picks[start + 1].instruction_id[1:]))
        counts[pair] = counts.get(pair, 0) + 1
    for pair, expected in pair_probabilities(p).items():
        tolerance = 5 * math.sqrt(expected * (1 - expected) / n)  # five binomial standard errors
        assert counts.get(pair, 0) / n == pytest.approx(expected, abs=tolerance), pair


def test_thompson_gives_a_question_the_best_k_of_one_posterior_draw_and_zero_chances_still_fill_k():
    thompson = with_a_step_of_rewards(make(k=3, selection="thompson"))
    keys = [f"q{j}" for j in range(30) for _ in range(3)]
    picks = ids(thompson.sample(keys, 1, group_size=3))
    firsts = ids(with_a_step_of_rewards(make(k=1, selection="thompson")).sample(keys, 1, group_size=3))
    assert all(len(set(picks[s : s + 3])) == 3 and picks[s] == firsts[s] for s in range(0, len(keys), 3))
    greedy = make(k=2, texts=TEXTS[:3], selection="epsilon-greedy", epsilon=0.0)  # i0 best: chances (1, 0, 0)
    greedy.observe([Pick("i0", TEXTS[0])], [1.0])
    greedy.end_step(0)
    pairs = [ids(greedy.sample([f"q{j}"] * 2, 1, group_size=2)) for j in range(40)]
    assert all(pair[0] == "i0" and pair[1] in ("i1", "i2") for pair in pairs)
    assert {pair[1] for pair in pairs} == {"i1", "i2"}  # the chance-0 arms are taken uniformly, not always the first


def test_each_block_feeds_its_own_instructions_weight_and_counts_as_a_group():
    population = make(k=2, texts=TEXTS[:2], weight_window=3)
    # G = 4, k = 2, two questions: blocks [1, 0 | 0, 0] and [1, 1 | 0, 1] with i0 first in the first question and i1
    # first in the second: i0 earns block means 0.5 and 0.5, i1 earns 0.0 and 1.0
    picks = [Pick("i0", TEXTS[0]), Pick("i1", TEXTS[1]), Pick("i1", TEXTS[1]), Pick("i0", TEXTS[0])]
    population.observe(picks, [0.5, 0.0, 1.0, 0.5])
    population.end_step(0)
    assert population.weights() == pytest.approx({"i0": 0.5, "i1": 0.5})
    assert [(row.mean, row.groups) for row in population["i0"].step_rewards] == [(0.5, 2)]
    assert sum(row.groups for c in population.alive() for row in c.step_rewards) == 4  # UCB's batch: blocks


def test_a_resumed_population_draws_the_same_blocks():
    population = with_a_step_of_rewards(make(k=3, selection="thompson"))
    keys = [f"q{j}" for j in range(10) for _ in range(6)]
    before = ids(population.sample(keys, 4, group_size=6))
    resumed = InstructionPopulation.from_state_dict(population.config, population.state_dict())
    assert ids(resumed.sample(keys, 4, group_size=6)) == before
    assert ids(resumed.sample(keys, 5, group_size=6)) != before  # a later step draws anew


def test_block_rows_refuses_picks_that_are_not_equal_blocks_of_whole_groups():
    a, b = Pick("i0", "a"), Pick("i1", "b")
    assert block_rows([a, a, b, b, b, b, a, a], 4) == 2
    assert block_rows([a, a, a, a], 4) == 4
    with pytest.raises(RuntimeError, match="blocks of \\[1, 3\\] rows"):
        block_rows([a, b, b, b], 4)
    with pytest.raises(RuntimeError, match="whole groups"):
        block_rows([a, a, b], 2)
