"""`training.algorithm: distill`: the teacher samples with I* and every trajectory is kept (`keep: all`; `correct`
keeps rejection sampling's); the student's examples are its own prompt, rebuilt under its instruction, then the
teacher's completion token for token, with the `<information>` observations masked out of the loss.

The teacher is the one fake here, at the `PolicyBackend` seam: with I* in its context it searches for each hop the
world names and then answers, right or wrong by a draw from torch's generator; without I* it answers at once."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from accelerate import PartialState
from helpers.sft import assert_loss_only_on_written_tokens, observation_runs, sft_recipe, world_engine

from inspo_cli.config import SamplingConfig
from inspo_cli.errors import InspoError
from inspo_cli.policy.generation import Generation
from inspo_cli.policy.models import load_tokenizer
from inspo_cli.runs import RunDir

TEACHER = "Look every entity up before you answer. Question: {question}\n"  # I*
STUDENT = "Answer. Question: {question}\n"  # the seed instruction


class Teacher:
    """Follows I* when its context holds it (searches each hop, then answers), else answers at once; records every
    context it was given."""

    def __init__(self, tokenizer, questions):
        self.tokenizer, self.by_text, self.contexts = tokenizer, {q.question: q for q in questions}, []

    def generate(self, contexts, max_new_tokens, stop=()):
        out = []
        for context, budget in zip(contexts, max_new_tokens):
            text = self.tokenizer.decode(context)
            self.contexts.append(text)
            q = next(q for question, q in self.by_text.items() if f"Question: {question}" in text)
            hop = text.split(f"Question: {q.question}")[-1].count("<information>")
            if TEACHER.split(".")[0] in text and hop < len(q.metadata["searches"]):
                reply = f"<search> {q.metadata['searches'][hop]} </search>"
            else:
                answer = q.golden_answers[0] if torch.rand(()) < 0.5 else "nobody knows"
                reply = f"<answer> {answer} </answer>"
            out.append(Generation(self.tokenizer(reply, add_special_tokens=False)["input_ids"][:budget], "stop"))
        return out

    def generating_with(self, model):
        raise AssertionError("the teacher is not trained")


@pytest.fixture
def teacher(monkeypatch, tiny_model_dir, repo_root):
    import inspo_cli.policy.backends as backends
    from inspo_cli.benchmarks import WORLD, load_benchmark

    tokenizer = load_tokenizer(sft_recipe(tiny_model_dir, "answers").model)
    made = []

    def load_backend(model, rollout, *args, **kwargs):
        made.append(Teacher(tokenizer, load_benchmark(WORLD, "train", world_dir=repo_root / "data/world")))
        return made[-1], tokenizer

    monkeypatch.setattr(backends, "load_backend", load_backend)
    return made


def distill_recipe(model_dir):
    recipe = sft_recipe(model_dir, "answers", algorithm="distill")
    return dataclasses.replace(recipe, sampling=SamplingConfig(samples=3, batch_size=3))


def sample(recipe, run_dir, keep: str):
    from inspo_cli.training.distill import KEEP
    from inspo_cli.training.rejection_sampling import sample_phase
    from inspo_cli.training.trainer_inputs import train_questions

    tokenizer = load_tokenizer(recipe.model)
    questions = train_questions(recipe)
    run_dir.mkdir(exist_ok=True)
    rows = sample_phase(recipe, RunDir(run_dir), questions, TEACHER, PartialState(), "cpu", tokenizer, KEEP[keep])
    return questions, rows


def test_the_teacher_samples_with_its_instruction_and_keep_all_keeps_every_trajectory(
    tmp_path, tiny_model_dir, teacher
):
    recipe = distill_recipe(tiny_model_dir)
    questions, kept = sample(recipe, tmp_path / "all", "all")
    assert len(kept) == 8 * 3 and {row["reward"] for row in kept} == {0.0, 1.0}  # wrong answers kept too
    assert all(TEACHER.split(".")[0] in context and STUDENT not in context for context in teacher[-1].contexts)
    _, correct = sample(recipe, tmp_path / "correct", "correct")
    assert correct and all(row["reward"] == 1.0 for row in correct) and len(correct) < len(kept)


def test_the_student_learns_the_teachers_completion_token_for_token_under_its_own_prompt(
    tmp_path, tiny_model_dir, teacher, world_retriever
):
    from inspo_cli.training.rejection_sampling import rejection_examples

    recipe = distill_recipe(tiny_model_dir)
    questions, kept = sample(recipe, tmp_path, "all")
    tokenizer = load_tokenizer(recipe.model)
    engine = world_engine(tokenizer, world_retriever)
    examples = rejection_examples(engine, STUDENT, questions, kept)
    by_key = {q.key: q for q in questions}
    assert len(examples) == len(kept)
    for row, example in zip(kept, examples):
        prompt = engine.prompt_ids(STUDENT, by_key[row["key"]].question)
        assert example["input_ids"] == prompt + row["completion_ids"]  # the teacher's tokens, unchanged
        assert example["completion_mask"] == [0] * len(prompt) + row["completion_mask"]
        assert TEACHER.split(".")[0] not in tokenizer.decode(example["input_ids"][: len(prompt)])
        runs = observation_runs(row["completion_ids"], row["completion_mask"])
        assert len(runs) == row["searches"] == by_key[row["key"]].metadata["hops"]
        assert all(tokenizer.decode(r).startswith("\n\n<information>") for r in runs)
    assert_loss_only_on_written_tokens(tmp_path / "checkpoints", recipe, tokenizer, examples)


def test_a_run_that_inspo_distill_did_not_make_is_refused_by_the_algorithm(tmp_path):
    from inspo_cli.training.distill import distill_info

    with pytest.raises(
        InspoError, match=r"trains only in a run directory that `inspo distill RUN` made .*distill\.json"
    ):
        distill_info(RunDir(tmp_path))
    (tmp_path / RunDir.DISTILL_INFO).write_text("{}")
    with pytest.raises(InspoError, match="distill.json"):
        distill_info(RunDir(tmp_path))
