"""The metrics are the reward: their normalisation must match SQuAD/Search-R1 exactly."""

import pytest

from inspo_cli.metrics import cover_exact_match, exact_match, extract_answer, f1_score, normalize_answer


@pytest.mark.parametrize(
    "text, expected",
    [
        ("The Beatles", "beatles"),
        ("  An  apple,  a day! ", "apple day"),
        ("U.S.A.", "usa"),
        ("Théâtre   du\tSoleil", "théâtre du soleil"),
        ("there", "there"),  # 'the' inside a word stays
    ],
)
def test_normalize_answer_is_squad_normalisation(text, expected):
    assert normalize_answer(text) == expected


def test_exact_match_accepts_any_alias_and_a_bare_string():
    assert exact_match("the Beatles", ["Rolling Stones", "Beatles"]) == 1.0
    assert exact_match("Beatles", "The Beatles") == 1.0
    assert exact_match("Beatles band", ["Beatles"]) == 0.0
    assert exact_match(None, ["Beatles"]) == 0.0


def test_cover_exact_match_is_token_aligned_containment():
    assert cover_exact_match("It was Paris, France.", ["Paris"]) == 1.0
    assert cover_exact_match("Parisian", ["Paris"]) == 0.0
    assert cover_exact_match("anything", [""]) == 0.0


def test_f1_is_best_over_aliases():
    assert f1_score("new york city", ["New York"]) == pytest.approx(0.8)
    assert f1_score("new york city", ["Boston", "New York City"]) == 1.0
    assert f1_score("paris", ["london"]) == 0.0


def test_f1_of_answers_that_normalise_to_nothing_is_squads():
    """SQuAD: when either side has no tokens after normalisation, F1 is 1 if both have none, else 0."""
    assert f1_score("The", ["a"]) == 1.0 and f1_score("", [""]) == 1.0
    assert f1_score("The", ["Paris"]) == 0.0 and f1_score("Paris", ["an"]) == 0.0


def test_extract_answer_takes_the_last_complete_tag_of_the_response():
    response = "<think>x</think><answer> first </answer> more <answer>\n final answer \n</answer><answer>unclosed"
    assert extract_answer(response) == "final answer"
    assert extract_answer("<think>no answer here</think>") is None


def test_instruction_example_tags_cannot_change_the_reward():
    """Search-R1 extracts from prompt+response, so an instruction's example would be credited as the answer.

    `extract_answer` is documented to take the generated response only; this shows what that protects.
    """
    prompt = (
        "Answer inside <answer> and </answer>. For example, <answer> Beijing </answer>.\nQuestion: Capital of China?"
    )
    response = "<think>I do not know</think>"
    assert exact_match(extract_answer(prompt + response), ["Beijing"]) == 1.0  # the bug it avoids
    assert exact_match(extract_answer(response), ["Beijing"]) == 0.0
    assert extract_answer(response + "<answer> Beijing </answer>") == "Beijing"
