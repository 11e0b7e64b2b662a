"""What training records for `inspo report --audit`: rollout_traits.jsonl from the trainer's two hooks and from
`inspo evolve`'s loop, the verifier's EM beside its reward, the training questions' types, and each evolution's
verification per question type."""

from __future__ import annotations

import json
from types import SimpleNamespace

from helpers.coevolution import BAD, GOOD, Optimizer, RuleEngine, evolve_recipe, make_loop

from inspo_cli.config import RewardConfig, load_recipe
from inspo_cli.errors import InspoError
from inspo_cli.instructions.replay import ReplayQuestion
from inspo_cli.runs import RunDir
from inspo_cli.training import rollout_traits
from inspo_cli.training.coevolution import PolicyVerifier, question_categories


def paris(n):
    return [ReplayQuestion(f"world:q{i}", f"capital {i}?", ("Paris",)) for i in range(n)]


def test_the_verifier_gives_em_beside_the_reward_which_may_hold_the_format_bonus():
    verifier = PolicyVerifier(RuleEngine(), RewardConfig(format_weight=0.2))
    assert verifier.score([GOOD, BAD], paris(2)) == [[1.0, 1.0], [0.2, 0.2]]  # "Rome" is wrong but well formed
    assert verifier.exact_match == [[1.0, 1.0], [0.0, 0.0]]


def test_the_frozen_loop_records_rollouts_and_each_evolution_its_verification_per_type(tmp_path):
    loop, run = make_loop(tmp_path, evolve_recipe(), Optimizer("<ins_1>Search twice, then answer. {question}</ins_1>"))
    loop.coevolution.categories = {f"world:q{i}": "temporal" if i % 2 else "single_hop" for i in range(4)}
    loop.run_steps(1, 3)
    rows = rollout_traits.read_rows(run)
    assert sorted({r["step"] for r in rows}) == [1, 2, 3]
    assert sum(r["rollouts"] for r in rows if r["step"] == 1) == 4  # batch 2 x group 2
    assert all(r["em"] == r["reward"] - r["format_bonus"] for r in rows)
    (evolution,) = json.loads(run.coevolution_file.read_text())["evolutions"]
    candidate = evolution["candidates"][0]
    assert candidate["reason"] == "accepted"
    kinds = candidate["by_type"]
    assert set(kinds) <= {"single_hop", "temporal"}  # every question of D_B has its type
    assert sum(k["questions"] for k in kinds.values()) == 2  # D_B's two questions
    assert all(k["candidate_em"] == 1.0 == k["candidate_reward"] for k in kinds.values())  # it says "Search"


def test_resumed_frozen_loop_repeats_no_step_in_the_record(tmp_path):
    loop, run = make_loop(tmp_path, evolve_recipe(), Optimizer("<ins_1>Search twice. {question}</ins_1>"))
    loop.run_steps(1, 3)
    again, _ = make_loop(tmp_path, evolve_recipe(), Optimizer("<ins_1>Search twice. {question}</ins_1>"))
    again.run_steps(3, 3)  # resumed after step 2
    keys = [(r["step"], r["instruction_id"]) for r in rollout_traits.read_rows(run)]
    assert keys == sorted(set(keys)) and {s for s, _ in keys} == {1, 2, 3}  # step 3 once per instruction


def test_training_question_types_by_key(repo_root, monkeypatch):
    recipe = load_recipe(
        None, ["population.enabled=true", f"data.world_dir={repo_root / 'data/world'}"], check_paths=False
    )
    kinds = question_categories(recipe)
    assert kinds["world:world-train-0001"] == "temporal" and kinds["world:world-train-0002"] == "single_hop"
    recipe.population.verify = False
    assert question_categories(recipe) == {}  # nothing is verified, so nothing is typed

    def unreadable(_recipe):
        raise InspoError("data/world/train.jsonl: no such file")

    recipe.population.verify = True
    monkeypatch.setattr("inspo_cli.training.trainer_inputs.train_questions", unreadable)
    assert question_categories(recipe) == {}


def _trainer(tmp_path, training=True):
    return SimpleNamespace(
        model=SimpleNamespace(training=training),
        step=4,  # steps done: the rollouts are step 5's
        _picks=[SimpleNamespace(instruction_id="i0"), SimpleNamespace(instruction_id="i1")],
        args=SimpleNamespace(output_dir=str(tmp_path / "checkpoints")),
        reward_config=RewardConfig(format_weight=0.1),
        accelerator=SimpleNamespace(is_main_process=True),
        train_dataset={"prompt": ["capital 0?", "capital 1?"], "golden_answers": [["Paris"], ["Rome"]]},
    )


def test_the_trainer_hooks_write_the_steps_rollouts(tmp_path):
    trainer = _trainer(tmp_path)
    trajectories = RuleEngine().run([GOOD, BAD], ["capital 0?", "capital 1?"])  # Paris, Rome: both right
    rollout_traits.collect_rollouts(trainer, ["capital 0?", "capital 1?"], trajectories)
    rollout_traits.write_step(trainer, 5)
    rows = rollout_traits.read_rows(RunDir(tmp_path))
    assert [(r["step"], r["instruction_id"], r["em"], r["reward"]) for r in rows] == [(5, "i0", 1, 1), (5, "i1", 1, 1)]
    evaluating = _trainer(tmp_path, training=False)
    rollout_traits.collect_rollouts(evaluating, ["capital 0?"], trajectories[:1])  # not a training rollout
    rollout_traits.write_step(evaluating, 6)
    assert len(rollout_traits.read_rows(RunDir(tmp_path))) == 2


def test_a_real_training_step_records_its_rollouts_per_instruction(make_trainer, tmp_path):
    from helpers.scripted_trainer import RecordingSource, generation_batch

    trainer = make_trainer(RecordingSource("Use the search engine wisely."))
    trainer._generate_and_score_completions(generation_batch())  # TRL's scoring, through the rollout function
    trainer._end_step(1)
    (row,) = rollout_traits.read_rows(RunDir(tmp_path))
    # one right and one wrong answer per question, one search each (the scripted policy), as TRL's metrics say
    assert (row["step"], row["instruction_id"], row["rollouts"], row["searches"]) == (1, "rec", 4, 4)
    assert row["em"] == 2 == row["reward"] and row["format_bonus"] == 0
    assert trainer._metrics["train"]["em"] == [0.5]
