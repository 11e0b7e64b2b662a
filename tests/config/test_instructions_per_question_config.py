"""population.instructions_per_question and population.baseline in a recipe: the paper's values by default, and a
one-line error naming the field, the value and the fix for a split the trainer cannot make."""

from __future__ import annotations

import pytest

from inspo_cli.config import RecipeError, load_recipe
from inspo_cli.config.reference import explain


@pytest.fixture
def recipe(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"id": "0", "contents": "\\"T\\"\\ntext"}\n')
    path = tmp_path / "recipe.yaml"
    path.write_text(
        f"data:\n  train: nq_hotpotqa\nretriever:\n  corpus: {corpus}\nevaluation:\n  benchmarks: [nq]\n"
        "population:\n  enabled: true\n"
    )
    return path


def error_of(path, overrides) -> str:
    with pytest.raises(RecipeError) as info:
        load_recipe(path, overrides)
    assert "\n" not in str(info.value)
    return str(info.value)


def test_the_default_is_the_papers_one_instruction_per_question_group(recipe):
    population = load_recipe(recipe).population
    assert (population.instructions_per_question, population.baseline) == (1, "question")
    split = load_recipe(
        recipe, ["training.group_size=4", "population.instructions_per_question=2", "population.baseline=instruction"]
    )
    assert (split.population.instructions_per_question, split.population.baseline) == (2, "instruction")


@pytest.mark.parametrize(
    "overrides, expected",
    [
        (["population.instructions_per_question=0"], "--set population.instructions_per_question: must be > 0 (got 0)"),
        (
            ["population.instructions_per_question=5", "population.size=4"],
            "--set population.instructions_per_question: is 5, more than population.size (4)",
        ),
        (
            ["population.instructions_per_question=5", "population.enabled=false"],
            "--set population.instructions_per_question: is 5, but population.enabled is false and a static "
            "instruction is only one; set instructions_per_question: 1",
        ),
        (
            ["population.instructions_per_question=2"],  # the paper's group_size 5
            "--set population.instructions_per_question: is 2, which does not divide training.group_size (5) into "
            "equal blocks of rollouts; set it to one of 1, 5",
        ),
        (
            ["population.instructions_per_question=5", "population.baseline=instruction"],
            "--set population.baseline: is instruction, but training.group_size 5 / instructions_per_question 5 "
            "leaves one rollout per instruction",
        ),
        (["population.baseline=prompt"], "--set population.baseline: must be one of question, instruction"),
    ],
)
def test_a_split_that_cannot_be_made_is_refused_naming_the_field_and_the_fix(recipe, overrides, expected):
    assert error_of(recipe, overrides).startswith(expected)


def test_recipe_explain_says_what_each_field_does():
    assert "k > 1 draws k different instructions" in explain("population.instructions_per_question")
    assert "per block" in explain("population.baseline")
