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


# -- the k study: instructions per question (population.instructions_per_question) --------------------------------


def test_at_k_1_a_run_is_the_run_made_before_the_k_axis(sim):
    # pinned from the simulator before it had --k (with this fixture's 32 steps x 64 questions x 5 rollouts)
    before = {
        "paper": (1, 0.04428666938501204, 0.802476549592186),
        "thompson": (2, 0.03727171814360249, 0.4812207129694728),
    }
    for config, (seed, regret, best_rate) in before.items():
        result = sim.simulate(config, seed=seed, shift=-0.1, spread=0.2, k=1, group_size=sim.ROLLOUTS)
        assert (result.regret, result.best_rate) == (regret, best_rate)


@pytest.mark.parametrize("k", [1, 2, 4])
def test_every_k_spends_the_same_rollouts_split_into_blocks_of_distinct_instructions(sim, monkeypatch, k):
    from inspo_cli.instructions.population import InstructionPopulation

    steps, worlds = [], []
    sample, observe = InstructionPopulation.sample, InstructionPopulation.observe

    def spy_sample(self, keys, step, *args, **kwargs):
        picks = sample(self, keys, step, *args, **kwargs)
        strongest = [max(worlds[0].strength[c.text][cat] for c in self.alive()) for cat in range(sim.CATEGORIES)]
        steps.append({"step": step, "keys": list(keys), "picks": picks, "alive": len(self.alive()), "best": strongest})
        return picks

    def spy_observe(self, picks, rewards, categories=None):
        steps[-1].update(observed=list(picks), rewards=list(rewards))
        return observe(self, picks, rewards, categories)

    monkeypatch.setattr(InstructionPopulation, "sample", spy_sample)
    monkeypatch.setattr(InstructionPopulation, "observe", spy_observe)
    world_class = sim.World
    monkeypatch.setattr(sim, "World", lambda rng: worlds.append(world_class(rng)) or worlds[-1])
    result = sim.simulate("paper", seed=3, shift=-0.1, spread=0.2, k=k, group_size=8)
    assert result.rollouts == sim.STEPS * sim.QUESTIONS_PER_STEP * 8  # the same for every k
    assert len(steps) == sim.STEPS
    split, regret, reward = 0, 0.0, 0.0
    world = worlds[0]
    for step in steps:
        assert len(step["keys"]) == sim.QUESTIONS_PER_STEP * 8
        expected_blocks = max(d for d in range(1, min(k, step["alive"]) + 1) if 8 % d == 0)
        observed = 0
        for q in range(sim.QUESTIONS_PER_STEP):
            keys, picks = step["keys"][8 * q : 8 * q + 8], step["picks"][8 * q : 8 * q + 8]
            assert len(set(keys)) == 1  # a question's rollouts in a row, as the trainer hands them over
            blocks = sim.blocks(picks)
            assert [size for _, size in blocks] == [8 // expected_blocks] * expected_blocks
            assert len({pick.instruction_id for pick, _ in blocks}) == expected_blocks  # without replacement
            assert step["observed"][observed : observed + expected_blocks] == [pick for pick, _ in blocks]
            question, t = int(keys[0]), step["step"]
            for (pick, size), mean in zip(blocks, step["rewards"][observed : observed + expected_blocks]):
                best = sim.sigmoid(step["best"][world.category[question]] + world.difficulty[question] + world.drift(t))
                regret += (best - world.success(pick.text, question, t)) * size / 8  # a block's share of the group
                reward += mean * size
            observed += expected_blocks
            split += expected_blocks > 1
        assert observed == len(step["observed"]) == len(step["rewards"])  # one reward per block, its mean
        assert all(r * (8 // expected_blocks) == round(r * (8 // expected_blocks)) for r in step["rewards"])
    assert (split > 0) == (k > 1)
    assert result.regret == pytest.approx(regret / (sim.STEPS * sim.QUESTIONS_PER_STEP), rel=1e-9)
    assert result.mean_reward == pytest.approx(reward / result.rollouts, rel=1e-9)


def test_blocks_are_the_runs_of_one_instruction_in_a_row(sim):
    from inspo_cli.instructions.sampling import Pick

    a, b = Pick("i0", "A"), Pick("i1", "B")
    assert sim.blocks([a, a, b, b, b]) == [(a, 2), (b, 3)]
    assert sim.blocks([a] * 4) == [(a, 4)] and sim.blocks([a, b, a]) == [(a, 1), (b, 1), (a, 1)]


def test_the_weights_are_measured_against_each_instruction_s_rate_over_the_whole_pool(sim):
    import random
    import statistics

    world = sim.World(random.Random(0))
    world.strength = {"A": [0.5, -0.3, 0.1, 1.2], "B": [-1.0, -1.0, -1.0, -1.0]}
    measures = sim.Measures(world)
    rates = measures.true_rates([world.strength["A"], world.strength["B"]], [0, 20])
    for text, step, rate in zip("AB", [0, 20], rates):
        assert rate == pytest.approx(statistics.fmean(world.success(text, q, step) for q in range(sim.POOL)))


def test_a_weight_s_error_is_its_distance_from_the_true_rates_of_its_window_s_steps(sim):
    import random

    from inspo_cli.config.sections import PopulationConfig
    from inspo_cli.instructions.population import InstructionPopulation
    from inspo_cli.instructions.sampling import Pick

    world = sim.World(random.Random(0))
    world.strength = {"A": [0.2, 0.4, -0.1, 0.0], "B": [-0.5] * 4}
    config = PopulationConfig(enabled=True, instructions=["A", "B"], size=2, weight_window=3)
    population = InstructionPopulation(config, seed=0)
    a, b = (Pick(c.id, c.text) for c in population.alive())
    measures = sim.Measures(world)
    for step in range(1, 5):  # the weight averages steps 2-4, whose rollouts ran at steps 1-3 (0-based)
        rates = measures.true_rates([world.strength["A"], world.strength["B"]], [step - 1, step - 1])
        population.observe([a, b], [rates[0], rates[1] + 0.1])  # A earns exactly its rate, B 0.1 above it
        population.end_step(step)
    measures.weights_read(population)
    assert measures.estimates == 2 and measures.squared_error == pytest.approx(0.1**2, rel=1e-6)


def test_the_k_columns_summarize_runs_with_intervals(sim):
    fields = dict.fromkeys(sim.RunResult.__dataclass_fields__, 0)
    runs = [
        sim.RunResult(
            **{
                **fields,
                "weight_squared_error": 0.04,
                "weight_estimates": 4,
                "generations": 3,
                "identified": 2,
                "steps_to_identify": 10,
                "mean_reward": 0.5,
                "rollouts": 8,
            }
        ),
        sim.RunResult(
            **{
                **fields,
                "weight_squared_error": 0.09,
                "weight_estimates": 1,
                "generations": 1,
                "identified": 0,
                "steps_to_identify": 0,
                "mean_reward": 0.7,
                "rollouts": 8,
            }
        ),
    ]
    summary = sim.summarize_k(runs)
    assert summary["weight_rmse"] == pytest.approx((0.1 + 0.3) / 2)  # per run, then the mean over runs
    assert (summary["p_identified"], summary["generations"]) == (0.5, 4)
    assert summary["steps_to_identify"] == 5.0  # runs that identified nothing have no steps to count
    assert summary["mean_reward"] == pytest.approx(0.6) and summary["mean_reward_ci"][0] < 0.6
    assert sim.summarize_k(runs[1:])["steps_to_identify"] is None


class FakePopulation:
    def __init__(self, *ids):
        self.order = [type("C", (), {"id": i, "text": i})() for i in ids]

    def alive(self):
        return self.order

    def ranked(self):
        return self.order


def test_a_generation_counts_as_identified_when_its_best_ends_ranked_first_and_from_when(sim):
    import random

    world = sim.World(random.Random(0))
    world.strength = {"strong": [1.0] * 4, "weak": [0.0] * 4, "only": [0.5] * 4}
    measures = sim.Measures(world)
    population = FakePopulation("weak", "strong")
    measures.generation_started(population, 0)  # the best is "strong", though ranked second
    for ranking in (["weak", "strong"], ["strong", "weak"], ["weak", "strong"], ["strong", "weak"], ["strong"]):
        population.order = [c for i in ranking for c in population.order if c.id == i]
        measures.step_ended(population)
    measures.generation_ended()
    assert (measures.generations, measures.identified, measures.steps_to_identify) == (1, 1, 4)  # first for good at 4
    measures.generation_started(FakePopulation("strong", "weak"), 5)
    measures.step_ended(FakePopulation("strong", "weak"))
    measures.step_ended(FakePopulation("weak"))  # the best was pruned
    measures.generation_ended()
    assert (measures.generations, measures.identified) == (2, 1)
    measures.generation_started(FakePopulation("only"), 10)  # nothing to choose: not a generation of the count
    measures.step_ended(FakePopulation("only"))
    measures.generation_ended()
    assert (measures.generations, measures.identified, measures.steps_to_identify) == (2, 1, 4)


def test_each_evolution_starts_a_generation_judged_on_its_own_best(sim, monkeypatch):
    starts = []

    class Recording(sim.Measures):
        def generation_started(self, population, step):
            super().generation_started(population, step)
            members = population.alive()
            rates = self.true_rates([self.world.strength[c.text] for c in members], [step] * len(members))
            starts.append((step, self.target, max(zip(rates, (c.id for c in members)))[1]))

    monkeypatch.setattr(sim, "Measures", Recording)
    result = sim.simulate("paper", seed=1, shift=-0.1, spread=0.2)
    assert [step for step, _, _ in starts] == [0, 15, 30]  # the run's start and its two evolutions
    assert all(target == best for _, target, best in starts) and result.generations == 2


def test_k_must_divide_the_group_so_every_instruction_gets_equal_rollouts(sim):
    assert sim.parse_ks("1,2,4", 8) == [1, 2, 4]
    for bad in ("1,3", "0,1", "2,2", "two"):
        with pytest.raises(SystemExit, match="--k"):
            sim.parse_ks(bad, 8)


def test_the_k_study_writes_its_own_results_and_readme_section(sim, monkeypatch, tmp_path):
    import json

    sections = {}
    monkeypatch.setattr(sim, "RESULTS", tmp_path / "selection.json")
    monkeypatch.setattr(sim, "RESULTS_K", tmp_path / "k.json")
    monkeypatch.setattr(sim, "update_readme_section", lambda name, text: sections.update({name: text}))
    sim.main(["--runs", "2", "--k", "1,2", "--workers", "1"])
    saved = json.loads((tmp_path / "k.json").read_text())
    assert list(saved["results"]) == ["paper k=1", "paper k=2"] and saved["settings"]["rollouts"] == 8
    assert saved["configs"]["paper k=2"] == {"instructions_per_question": 2}
    for row in saved["results"].values():
        assert row["runs"] == 2 and 0 < row["weight_rmse"] < 0.2 and 0 < row["mean_reward"] < 1
        assert row["weight_rmse_ci"][0] <= row["weight_rmse"] <= row["weight_rmse_ci"][1]
        assert row["generations"] == 2 * 2 and row["p_identified_ci"][0] <= row["p_identified"] <= 1
    assert list(sections) == ["population_sim_k"] and "| paper k=2 |" in sections["population_sim_k"]
    assert not (tmp_path / "selection.json").exists()  # the selection table's results are left as they were
