"""`population.instructions_per_question` in the trainer: blocks sampled over every process's rows, each block's mean
reward to its own instruction (eq. 6), and the advantage baseline per question or per instruction block, on the tiny
model with a scripted policy that answers better under one instruction than the other.

Expected numbers are computed by hand in the comments, not by calling the code under test.
"""

from __future__ import annotations

import pytest
import torch
from helpers.scripted_trainer import QUESTIONS, AlternatingPolicy

from inspo_cli.config.sections import PopulationConfig
from inspo_cli.instructions.population import InstructionPopulation
from inspo_cli.instructions.sampling import Pick
from inspo_cli.policy.generation import Generation
from inspo_cli.training.instruction_blocks import informative_questions, sample_blocks

RIGHT, SOMETIMES = "Always answer right.", "Answer as you can."
G = 4  # rollouts per question: two blocks of 2 with k = 2


class InstructionAwarePolicy(AlternatingPolicy):
    """Searches, then answers: always right under RIGHT; under the other instruction right on even rows and wrong on
    odd ones (`sometimes`) or always wrong."""

    def __init__(self, tokenizer, sometimes: bool = True):
        super().__init__(tokenizer)
        self.sometimes = sometimes

    def generate(self, contexts, max_new_tokens, stop=()):
        out = []
        for row, context in enumerate(contexts):
            text = self.tokenizer.decode(context)
            if "<information>" not in text:
                reply = self.search
            else:
                gold = "Ada Vell" if "Hokin" in text.split("Question:")[-1].split("\n")[0] else "1714"
                right = RIGHT in text or (self.sometimes and row % 2 == 0)
                reply = f"<think> found it </think> <answer> {gold if right else 'castle'} </answer>"
            out.append(Generation(self.tokenizer(reply, add_special_tokens=False)["input_ids"], "stop"))
        return out


def blocks_trainer(make_trainer, baseline="question", sometimes=True, **training):
    population = InstructionPopulation(
        PopulationConfig(enabled=True, instructions=[RIGHT, SOMETIMES], instructions_per_question=2), seed=0
    )
    trainer = make_trainer(population, group_size=G, mini_batch_trajectories=2 * G, micro_batch_size=2 * G, **training)
    trainer.instructions_per_question, trainer.baseline = 2, baseline  # what trainer_switches(recipe) hands over
    trainer.engine.backend = InstructionAwarePolicy(trainer.processing_class, sometimes)
    return trainer, population


def batch():
    return [
        {"prompt": q.question, "qid": f"t:{q.id}", "category": q.category, "golden_answers": list(q.golden_answers)}
        for q in QUESTIONS
        for _ in range(G)
    ]


def expected_rewards(picks) -> list[float]:
    """RIGHT's rows 1; the other instruction's block of two rows [1, 0] (its first row sits on an even row)."""
    return [1.0 if pick.instruction_id == "i0" else float(row % 2 == 0) for row, pick in enumerate(picks)]


# a question's rewards are a RIGHT block [1, 1] and a SOMETIMES block [1, 0]: mean 0.75, sample deviation 0.5 over the
# four; per block: mean 1 and deviation 0, mean 0.5 and deviation sqrt(0.5); over the batch (six 1s, two 0s): mean
# 0.75, deviation sqrt((6 x 0.0625 + 2 x 0.5625) / 7) = sqrt(1.5 / 7)
BATCH_STD = (1.5 / 7) ** 0.5


def by_hand(reward: float, instruction_id: str, baseline: str, scale: str) -> float:
    if baseline == "question":
        centred, deviation = reward - 0.75, 0.5
    else:
        centred, deviation = (0.0, 0.0) if instruction_id == "i0" else (reward - 0.5, 0.5**0.5)
    if scale == "none":
        return centred
    return centred / ((BATCH_STD if scale == "batch" else deviation) + 1e-4)


@pytest.mark.parametrize("scale", ["group", "batch", "none"])
@pytest.mark.parametrize("baseline", ["question", "instruction"])
def test_advantages_are_measured_against_the_question_or_the_instructions_block(make_trainer, baseline, scale):
    trainer, _ = blocks_trainer(make_trainer, baseline, scale_rewards=scale)
    output = trainer._generate_and_score_completions(batch())
    picks = trainer._picks
    for start in range(0, len(picks), G):  # each question: two blocks of two rows, both instructions
        ids = [p.instruction_id for p in picks[start : start + G]]
        assert ids[0] == ids[1] != ids[2] == ids[3]
    rewards = expected_rewards(picks)
    assert trainer._round_rewards.tolist() == rewards
    expected = [by_hand(r, p.instruction_id, baseline, scale) for r, p in zip(rewards, picks)]
    assert output["advantages"].tolist() == pytest.approx(expected, abs=1e-5)
    assert trainer.num_generations == G  # TRL's own count is back after scoring


def test_each_instruction_blocks_mean_reward_feeds_its_own_weight(make_trainer):
    trainer, population = blocks_trainer(make_trainer)
    trainer._generate_and_score_completions(batch())
    trainer._end_step(1)
    # RIGHT's two blocks (one per question) earn 1.0 each, the other's [1, 0] blocks 0.5 each: two groups apiece
    assert population.weights() == pytest.approx({"i0": 1.0, "i1": 0.5})
    rows = {c.id: [(r.step, r.mean, r.groups) for r in c.step_rewards] for c in population.alive()}
    assert rows == {"i0": [(1, 1.0, 2)], "i1": [(1, 0.5, 2)]}


def test_a_question_whose_blocks_are_each_all_equal_is_uninformative_per_instruction_only(make_trainer):
    # RIGHT's block [1, 1], the other's [0, 0]: the question's rewards differ, no block's do
    equal = {}
    for baseline in ("question", "instruction"):
        trainer, _ = blocks_trainer(make_trainer, baseline, sometimes=False)
        output = trainer._generate_and_score_completions(batch())
        equal[baseline] = trainer._metrics["train"]["groups/equal_rewards"]
        if baseline == "instruction":
            assert output["advantages"].abs().max() == 0
    assert equal == {"question": [0.0], "instruction": [1.0]}


def test_a_training_step_with_two_instructions_per_question_updates_the_policy_and_the_weights(make_trainer):
    trainer, population = blocks_trainer(make_trainer, "instruction")
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    trainer.train()
    assert any(not torch.equal(p, before[n]) for n, p in trainer.model.named_parameters() if p.requires_grad)
    assert population.weights() == pytest.approx({"i0": 1.0, "i1": 0.5})  # folded by the step-end callback


def test_a_group_split_over_two_processes_is_sampled_whole_and_each_keeps_its_rows():
    population = InstructionPopulation(
        PopulationConfig(enabled=True, instructions=["a", "b", "c"], instructions_per_question=2), seed=3
    )
    every = ["q1"] * 4 + ["q2"] * 4 + ["q3"] * 4  # 12 rows over 2 processes: q2's group straddles them
    whole = population.sample(every, 5, group_size=4)
    sliced = [sample_blocks(population, every[6 * p : 6 * p + 6], 5, 4, p, lambda _: list(every)) for p in (0, 1)]
    assert sliced[0][0] + sliced[1][0] == whole and sliced[0][1] == sliced[1][1] == 2
    q2 = [p.instruction_id for p in whole[4:8]]
    assert q2[0] == q2[1] != q2[2] == q2[3]  # the straddling group's blocks: one instruction each, as if unsplit


def test_informative_questions_count_rewards_that_share_a_baseline():
    rewards = torch.tensor([1.0, 1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0])
    assert informative_questions(rewards, 4, 4) == [True, True, False]  # per question
    assert informative_questions(rewards, 4, 2) == [False, True, False]  # per block of 2: [1,1|0,0] is equal
    assert informative_questions(torch.tensor([1.0, float("nan"), 0.0, 0.0]), 4, 2) == [False]


def test_the_source_is_asked_for_every_processes_rows_at_once_only_when_k_exceeds_one():
    asked = []

    class Source:
        def sample(self, keys, step, group_size=None):
            asked.append((list(keys), group_size))
            return [Pick("i0", "x")] * len(keys)

    picks, rows = sample_blocks(Source(), ["q"] * 2, 0, 4, 1, lambda local: ["q"] * 2 + local)
    assert asked == [(["q"] * 4, 4)] and len(picks) == 2 and rows == 4


def test_inspo_evolve_rolls_a_questions_group_out_under_k_instructions_and_weighs_each_by_its_block(tmp_path):
    from helpers.coevolution import BAD, GOOD, Optimizer, evolve_recipe, make_loop

    # group_size 2, k = 2: each question's two rollouts, one under each instruction; the rule engine answers right
    # exactly under GOOD, so GOOD's blocks earn 1.0 and BAD's 0.0, one block per question each
    loop, _ = make_loop(tmp_path, evolve_recipe(instructions_per_question=2), Optimizer("unused"))
    row = loop.step(1)
    (instructions, _), *_ = loop.engine.calls
    assert [sorted(instructions[i : i + 2]) for i in (0, 2)] == [sorted([BAD, GOOD])] * 2
    population = loop.coevolution.population
    assert {population[i].text: population[i].weight for i in ("i0", "i1")} == {BAD: 0.0, GOOD: 1.0}
    assert [(r.mean, r.groups) for r in population["i1"].step_rewards] == [(1.0, 2)]
    assert row["reward"] == 0.5


def test_the_static_stage_of_a_pre_rl_run_rolls_one_instruction_out_per_question():
    from dataclasses import asdict

    from helpers.coevolution import evolve_recipe

    from inspo_cli.training.stages import _static

    recipe = evolve_recipe(instructions_per_question=2, stage="pre-rl")
    stage = _static(recipe, "The evolved instruction.")
    assert (stage.population.enabled, stage.population.instructions_per_question) == (False, 1)
    PopulationConfig(**asdict(stage.population))  # what its run directory's recipe is read back as: valid


@pytest.mark.slow
def test_inspo_train_with_two_instructions_per_question_resumes_to_the_same_blocks(tmp_path, repo_root, tiny_model_dir):
    import json
    import shutil

    from helpers.cli_helpers import invoke
    from helpers.runs import resume_after_a_cut, write_recipe

    from inspo_cli.config.instruction_defaults import WORKED_EXAMPLE_INSTRUCTION

    population = {
        "enabled": True,
        "instructions_per_question": 2,
        "baseline": "instruction",
        "prune_every": 2,
        "evolve_until": 0,
        "size": 3,
        "instructions": [WORKED_EXAMPLE_INSTRUCTION, "Search, then answer. Question: {question}\n", "Answer at once."],
    }
    training = {"steps": 3, "group_size": 4, "mini_batch_trajectories": 8, "micro_batch_size": 8}
    recipe = write_recipe(tmp_path, repo_root, str(tiny_model_dir), population=population, training=training)
    straight, resumed = tmp_path / "runs/straight", tmp_path / "runs/resumed"
    result = invoke("train", "--recipe", recipe, "--output-dir", tmp_path / "runs", "--name", "straight")
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (straight / "instructions.jsonl").read_text().splitlines()]
    blocks = {step: sum(g for row in rows for s, _, g in row["step_rewards"] if s == step) for step in (1, 2, 3)}
    assert blocks == {1: 4, 2: 4, 3: 4}  # 2 questions x 2 instructions each step, also with 2 left after pruning
    shutil.copytree(straight, resumed)
    resume_after_a_cut(resumed, straight)
    assert (resumed / "instructions.jsonl").read_text() == (straight / "instructions.jsonl").read_text()
