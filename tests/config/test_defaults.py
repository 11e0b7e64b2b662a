"""The built-in instructions: one text each, the same wherever it is used."""

from inspo_cli.agent.protocol import user_message
from inspo_cli.config import load_recipe
from inspo_cli.config.instruction_defaults import WORKED_EXAMPLE_INSTRUCTION


def test_the_demo_recipe_spells_out_the_worked_example_instruction_verbatim(repo_root):
    recipe = load_recipe(repo_root / "recipes" / "demo.yaml")
    assert recipe.population.instructions[0] == WORKED_EXAMPLE_INSTRUCTION


def test_the_worked_example_shows_one_search_and_one_answer_and_ends_at_the_question():
    assert [WORKED_EXAMPLE_INSTRUCTION.count(tag) for tag in ("<search>", "<information>", "<answer>")] == [2, 2, 2]
    message = user_message(WORKED_EXAMPLE_INSTRUCTION, "who founded Vell Mills")
    assert message.endswith("<answer> Ada Vell </answer>\nQuestion: who founded Vell Mills?")
