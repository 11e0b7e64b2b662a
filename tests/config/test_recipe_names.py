"""What `--recipe` finds: the product card's `inspo train --recipe qwen3b.yaml`, the bundled recipes by name, a user's
own file of the same name first, and, for a name that is none of these, the recipes a user most likely meant."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest
from helpers.cli_helpers import assert_one_line_error, invoke

from inspo_cli.config import RecipeError, find_recipe
from inspo_cli.config.recipe_files import PROJECT_ROOT

INSPO_3B = PROJECT_ROOT / "recipes/qwen2.5-3b/inspo.yaml"
INSPO_7B = PROJECT_ROOT / "recipes/qwen2.5-7b/inspo.yaml"


@pytest.mark.parametrize(
    ("value", "recipe"),
    [
        ("qwen3b.yaml", INSPO_3B),
        ("qwen3b", INSPO_3B),
        ("recipes/qwen3b.yaml", INSPO_3B),
        ("qwen7b.yaml", INSPO_7B),
        ("qwen7b", INSPO_7B),
    ],
)
def test_the_papers_short_names_are_its_inspo_recipes(tmp_path, monkeypatch, value, recipe):
    monkeypatch.chdir(tmp_path)
    assert find_recipe(value).resolve() == recipe
    by_short_name = invoke("recipe", "check", value, "--json")
    assert by_short_name.exit_code == 0, by_short_name.output
    assert by_short_name.stdout == invoke("recipe", "check", recipe, "--json").stdout


def test_train_runs_the_product_cards_command_line(tmp_path, monkeypatch):
    """`inspo train --recipe qwen3b.yaml` reads the 3B INSPO recipe: it gets as far as its optimizer's key (the SFT
    baseline, offered first before, has none), and a start that fails creates no run directory."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    result = invoke("train", "--recipe", "qwen3b.yaml", "--output-dir", tmp_path / "runs")
    assert_one_line_error(result, "optimizer.provider is gemini", "GEMINI_API_KEY is not set")
    assert list(tmp_path.iterdir()) == []


def test_a_users_own_file_of_a_short_names_name_wins(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "qwen3b.yaml").write_text("training: {steps: 7}\n")
    assert find_recipe("qwen3b.yaml") == tmp_path / "qwen3b.yaml" or find_recipe("qwen3b.yaml").samefile(
        tmp_path / "qwen3b.yaml"
    )
    result = invoke("recipe", "check", "qwen3b.yaml", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["training"]["steps"] == 7
    assert find_recipe("qwen3b").resolve() == INSPO_3B  # the file is qwen3b.yaml; the bare name is still short


def test_recipe_list_shows_the_short_names_first():
    rows = json.loads(invoke("recipe", "list", "--json").stdout)
    assert [(row["name"], row.get("short_for")) for row in rows[:2]] == [
        ("qwen3b", "qwen2.5-3b/inspo"),
        ("qwen7b", "qwen2.5-7b/inspo"),
    ]
    assert rows[0]["path"] == str(INSPO_3B) and rows[0]["description"].startswith("short for qwen2.5-3b/inspo, INSPO")
    assert all(len(row["description"]) <= 101 for row in rows)
    table = invoke("recipe", "list").stdout
    assert "qwen3b" in table and "short for qwen2.5-3b/inspo" in table


@pytest.mark.parametrize(
    ("value", "first"),
    [
        ("qwen-3b.yaml", "qwen2.5-3b/inspo"),  # like a short name: its recipe
        ("Qwen7B.yml", "qwen2.5-7b/inspo"),
        ("qwen/3b", "qwen2.5-3b/inspo"),  # not a model folder alone, but like a short name: its recipe
        ("qwen2.5-3b", "qwen2.5-3b/inspo"),  # a model folder alone: its main recipe, not its SFT baseline
        ("qwen2.5-7b/", "qwen2.5-7b/inspo"),
        ("qwen14b.yaml", "qwen2.5-3b/inspo"),  # a model we do not ship: a main recipe before any baseline
        ("qwen-3b/serch-r1", "qwen2.5-3b/search-r1"),  # a recipe named in the folder: that recipe
        ("qwen2.5-7b-search-r1", "qwen2.5-7b/search-r1"),
        ("qwen2.5-3b/sfft", "qwen2.5-3b/sft"),
    ],
)
def test_a_name_not_found_lists_first_what_the_user_most_likely_meant(tmp_path, monkeypatch, value, first):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RecipeError, match=rf"^recipe {value} not found .*; closest bundled recipes: {first}, "):
        find_recipe(value)


def test_evolve_evaluate_ablate_and_plan_take_the_short_names(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    assert_one_line_error(invoke("evolve", "--recipe", "qwen7b"), "GEMINI_API_KEY is not set")
    plan = invoke("ablate", "--recipe", "qwen3b.yaml", "--proposer", "paraphrase", "--dry-run", "--json")
    assert plan.exit_code == 0, plan.output
    assert {variant["recipe"] for variant in json.loads(plan.stdout)["variants"]} == {str(INSPO_3B)}
    for command in (("evaluate", "--recipe"), ("recipe", "plan"), ("recipe", "check")):  # found, then overridden
        result = invoke(*command, "qwen3b.yaml", "--set", "training.stepz=3")
        assert_one_line_error(result, "--set training.stepz: unknown key (did you mean 'steps'?)")
    assert list(tmp_path.iterdir()) == []


def test_a_tool_whose_tag_clashes_is_refused_before_train_makes_a_run_directory(tmp_path, monkeypatch):
    """docs/tools.md: a tool tagged `answer` is refused by the recipe check; `inspo train` runs that check before
    any directory exists, so the refused start leaves nothing behind."""
    (tmp_path / "lab_answer_tag.py").write_text(
        textwrap.dedent("""
        from inspo_cli.agent.tools import Observation, Tool

        class Clash(Tool):
            name, tag, argument, description = "clash", "answer", "text", "Ends every trajectory."
            parameters = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}

            def call(self, arguments):
                return [Observation(a["text"]) for a in arguments]

        def build(context):
            return Clash()
        """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "lab_answer_tag", raising=False)
    monkeypatch.chdir(tmp_path)
    tools = "agent.tools=[search, 'lab_answer_tag:build']"
    fragments = ("agent.tools: lab_answer_tag:build: tag 'answer' is the protocol's own element",)
    assert_one_line_error(invoke("recipe", "check", "demo", "--set", tools), *fragments)
    runs = tmp_path / "runs"
    assert_one_line_error(invoke("train", "--set", tools, "--output-dir", runs, "--device", "cpu"), *fragments)
    assert not runs.exists()
    assert_one_line_error(invoke("evolve", "--recipe", "demo", "--set", tools, "--output-dir", runs), *fragments)
    assert not runs.exists()
