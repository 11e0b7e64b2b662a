"""INSPO's step without a model: `MainProcessLM`, `PolicyVerifier`, `CoEvolution` and the frozen-policy loop of
`inspo evolve`, with a fake accelerator, a scripted optimizer and a rule-based rollout engine at the seams."""

from __future__ import annotations

import contextlib
import json
from types import SimpleNamespace

import pytest
from helpers.coevolution import BAD, GOOD, Optimizer, RuleEngine, evolve_recipe, fake_accelerator, make_loop

from inspo_cli.config import RewardConfig
from inspo_cli.errors import InspoError
from inspo_cli.instructions.providers.optimizer_lm import OptimizerBudgetExhausted
from inspo_cli.instructions.replay import ReplayQuestion
from inspo_cli.metric_names import undeclared
from inspo_cli.training.coevolution import MainProcessLM, PolicyVerifier
from inspo_cli.training.summary import run_summary


def paris(n):
    return [ReplayQuestion(f"world:q{i}", f"capital {i}?", ("Paris",)) for i in range(n)]


# -- MainProcessLM ---------------------------------------------------------------------------------------------


def test_main_process_lm_calls_the_optimizer_once_and_every_rank_gets_its_answer():
    sent = []

    def broadcast(payload):  # the main process's payload reaches every rank
        if payload != [None]:
            sent.append(payload)
        return sent[-1]

    optimizer = Optimizer("<ins_1>new</ins_1>")
    main = MainProcessLM(optimizer, fake_accelerator(0, 2), broadcast)
    other = MainProcessLM(None, fake_accelerator(1, 2), broadcast)  # ranks other than 0 have no optimizer at all
    assert main.complete("p") == "<ins_1>new</ins_1>" and other.complete("p") == "<ins_1>new</ins_1>"
    assert optimizer.prompts == ["p"]
    assert MainProcessLM(optimizer, fake_accelerator()).complete("q") == "<ins_1>new</ins_1>"  # one process


@pytest.mark.parametrize("error", [InspoError("optimizer key missing"), OptimizerBudgetExhausted("budget spent")])
def test_main_process_lm_raises_the_main_process_error_on_every_rank(error):
    sent = []

    def broadcast(payload):
        if payload != [None]:
            sent.append(payload)
        return sent[-1]

    with pytest.raises(type(error), match=str(error)):
        MainProcessLM(Optimizer(error), fake_accelerator(0, 2), broadcast).complete("p")
    with pytest.raises(type(error), match=str(error)):
        MainProcessLM(None, fake_accelerator(1, 2), broadcast).complete("p")


# -- PolicyVerifier --------------------------------------------------------------------------------------------


def test_verifier_scores_every_instruction_in_one_batched_rollout():
    engine, entered = RuleEngine(), []
    verifier = PolicyVerifier(engine, RewardConfig(), generation=lambda: entered.append(1) or contextlib.nullcontext())
    assert verifier.score([GOOD, BAD], paris(3)) == [[1.0] * 3, [0.0] * 3]  # per instruction, per question
    assert len(engine.calls) == 1 and engine.calls[0][0] == [GOOD] * 3 + [BAD] * 3 and entered == [1]


def test_verifier_rolls_out_each_question_the_asked_number_of_times_and_averages_them():
    class EveryOtherRight(RuleEngine):  # right on the 1st, 3rd, ... rollout of the batch, whatever the instruction
        def run(self, instructions, questions):
            trajectories = super().run(instructions, questions)
            for i, trajectory in enumerate(trajectories):
                trajectory.answer = trajectory.answer if i % 2 == 0 else "nowhere"
            return trajectories

    engine = EveryOtherRight()
    table = PolicyVerifier(engine, RewardConfig()).score([GOOD], paris(3), rollouts=2)
    assert engine.calls[0][1] == ["capital 0?", "capital 0?", "capital 1?", "capital 1?", "capital 2?", "capital 2?"]
    assert table == [[0.5, 0.5, 0.5]]


def test_verifier_splits_the_questions_over_ranks_and_sums_them_back():
    import torch

    engine, sent = RuleEngine(), []
    rank0 = torch.tensor([[1.0, 0, 1.0, 0, 1.0], [0.0] * 5], dtype=torch.float64)  # rank 0's share: 0, 2, 4

    def reduce(tensor, reduction):
        sent.append(tensor.clone())
        return tensor + rank0

    accelerator = SimpleNamespace(process_index=1, num_processes=2, device="cpu", reduce=reduce)
    table = PolicyVerifier(engine, RewardConfig(), accelerator=accelerator).score([GOOD, BAD], paris(5))
    assert engine.calls[0][1] == ["capital 1?", "capital 3?"] * 2  # rank 1's share: every second question
    assert sent[0].tolist() == [[0.0, 1.0, 0.0, 1.0, 0.0], [0.0] * 5]  # only its own questions filled in
    assert table == [[1.0] * 5, [0.0] * 5]


def test_a_rank_without_questions_still_enters_generation():
    engine, entered = RuleEngine(), []
    verifier = PolicyVerifier(
        engine, RewardConfig(), lambda: entered.append(1) or contextlib.nullcontext(), fake_accelerator(rank=1, world=2)
    )
    assert verifier.score([GOOD], paris(1)) == [[0.0]] and entered == [1] and engine.calls == []


# -- CoEvolution and the frozen-policy loop ----------------------------------------------------------------------


def test_frozen_policy_loop_writes_a_row_per_step_evolves_on_schedule_and_saves_its_state(tmp_path, capsys):
    recipe = evolve_recipe()
    optimizer = Optimizer("<ins_1>Search twice, then answer. {question}</ins_1>")
    loop, run = make_loop(tmp_path, recipe, optimizer)
    loop.run_steps(1, 3)
    rows = run.metrics()
    assert [r["step"] for r in rows] == [1, 2, 3] == [r["update"] for r in rows]
    assert [r.get("population/evolved", 0) for r in rows] == [0, 1, 0] and len(optimizer.prompts) == 1
    # the rule policy is right exactly under instructions that say "Search": the rewards are the EM
    assert all(r["reward"] == r["em"] for r in rows) and {"search/answered", "population/size"} <= set(rows[0])
    assert undeclared({key for row in rows for key in row}) == []  # docs/reference/metrics.md names every one
    state = json.loads(run.coevolution_file.read_text())
    assert state["step"] == 3 and len(state["evolutions"]) == 1
    texts = [json.loads(line)["text"] for line in run.instructions_file.read_text().splitlines()]
    # the candidate says "Search", so it scores 1.0 on D_B, beats its parent (which has failures: BAD) and joins
    assert "Search twice, then answer. {question}" in texts
    assert state["evolutions"][0]["candidates"][0]["reason"] == "accepted"
    assert "step 3/3" in capsys.readouterr().err


def test_frozen_policy_loop_is_reproducible_step_by_step(tmp_path):
    timing = ("time", "step_seconds", "time/generation", "time/retrieval", "time/evolution")
    rows = []
    for name in ("a", "b"):
        loop, run = make_loop(tmp_path / name, evolve_recipe(evolve_until=0), None)
        loop.run_steps(1, 3)
        rows.append([{k: v for k, v in r.items() if k not in timing} for r in run.metrics()])
    assert rows[0] == rows[1]


def test_train_and_evolve_summaries_share_one_schema(tmp_path):
    recipe = evolve_recipe(evolve_until=0)
    loop, run = make_loop(tmp_path, recipe, None)
    loop.run_steps(1, 2)
    population = loop.coevolution.population
    frozen = run_summary(run, recipe, population, 10.0, None, [], frozen_policy=True)
    trained = run_summary(run, recipe, population, 10.0, None, [], frozen_policy=False)
    assert set(frozen) == set(trained)
    assert (frozen["model"], trained["model"]) == (None, "checkpoints/final")
    assert frozen["selected_checkpoint"] is None and frozen["steps"] == 2 and frozen["recipe_model"]


class FailingThenAnswering(Optimizer):
    """Fails its first `failures` calls with a 401-like error, then answers."""

    def __init__(self, failures, answer):
        super().__init__(answer)
        self.failures = failures

    def complete(self, prompt):
        if len(self.prompts) < self.failures:
            self.prompts.append(prompt)
            raise InspoError(
                "optimizer LM call failed: openai model 'm' at http://127.0.0.1:9 returned 401 "
                "Unauthorized; check the API key in the environment variable named by "
                "optimizer.api_key_env"
            )
        return super().complete(prompt)


def test_a_failed_evolution_is_one_warning_line_and_the_run_goes_on(tmp_path):
    """A bad key must not train for hours without evolution unnoticed: one console line per failed evolution
    (steps 1 and 2 here), none for the one that works (step 3), and every step still trains."""
    recipe = evolve_recipe(evolve_every=1, evolve_until=4, prune_every=100, size=4)
    warnings = []
    loop, run = make_loop(
        tmp_path, recipe, FailingThenAnswering(2, "<ins_1>Search twice. {question}</ins_1>"), warn=warnings.append
    )
    loop.run_steps(1, 3)
    assert [r["step"] for r in run.metrics()] == [1, 2, 3]
    assert len(warnings) == 2 and all("\n" not in w for w in warnings)
    assert warnings[0].startswith("warning: evolution at step 1 stopped: ") and "401" in warnings[0]
    assert "api_key_env" in warnings[1] and warnings[1].startswith("warning: evolution at step 2 ")
    state = json.loads(run.coevolution_file.read_text())
    assert [e["optimizer_error"] is not None for e in state["evolutions"]] == [True, True, False]
