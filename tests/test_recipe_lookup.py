"""Recipes by path or bundled name from any directory, the closest names for one not found, and `recipe check`
refusing what a run would refuse later."""

from __future__ import annotations

import json

import pytest
from helpers.cli_helpers import assert_one_line_error, invoke

# -- class 10: recipes by name from anywhere; recipe check refuses what a run would ----------------------------------


def test_bundled_recipes_are_found_by_path_or_name_from_any_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for value in (
        "recipes/demo.yaml",
        "demo",
        "qwen2.5-3b/inspo",
        "recipes/qwen2.5-3b/inspo.yaml",
        "qwen2.5-7b/search-r1.yaml",
    ):
        result = invoke("recipe", "check", value)
        assert result.exit_code == 0, (value, result.output)
    assert "population:" in invoke("recipe", "check", "qwen2.5-3b/inspo").stdout


def test_a_recipe_that_is_not_found_lists_the_closest_bundled_names(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = invoke("train", "--recipe", "qwen-3b.yaml")  # the product card's qwen3b.yaml, misspelt (it is found)
    assert_one_line_error(result, "recipe qwen-3b.yaml not found", "qwen2.5-3b/", "inspo recipe list")
    assert_one_line_error(
        invoke("recipe", "check", "qwen-3b/serch-r1"), "closest bundled recipes: qwen2.5-3b/search-r1"
    )
    assert list(tmp_path.iterdir()) == []


def test_one_unreadable_file_under_recipes_does_not_hide_the_others(tmp_path, monkeypatch):
    """Issue 29, class 8: a recipe file that is not UTF-8 is skipped with a warning naming it."""
    from inspo_cli.config import recipe_files

    (tmp_path / "good.yaml").write_text("# A good recipe: it reads.\ndata: {train: world}\n")
    (tmp_path / "bad.yaml").write_bytes("# caf\xe9\n".encode("latin-1"))
    monkeypatch.setattr(recipe_files, "RECIPES_DIR", tmp_path)
    result = invoke("recipe", "list", "--json")
    assert result.exit_code == 0, result.output
    assert [row["name"] for row in json.loads(result.stdout)] == ["good"]
    assert "warning: skipped" in result.stderr and "bad.yaml" in result.stderr


def test_recipe_list_names_every_bundled_recipe_and_what_it_is():
    import json as json_module

    rows = json_module.loads(invoke("recipe", "list", "--json").stdout)
    names = [row["name"] for row in rows]
    assert {"demo", "qwen2.5-3b/inspo", "qwen2.5-7b/search-r1", "world-table1/sft"} <= set(names)
    assert not any(name.startswith("accelerate/") for name in names)  # launch configs are not recipes
    assert all(row["description"] and len(row["description"]) <= 101 for row in rows)
    for row in rows:  # every name listed is one --recipe takes
        assert invoke("recipe", "check", row["name"]).exit_code == 0, row["name"]
    table = invoke("recipe", "list").stdout
    assert "qwen2.5-3b/inspo" in table and "INSPO on Qwen2.5-3B base" in table


@pytest.mark.parametrize(
    "sets, fragments",
    [
        (
            ["population.size=3", 'population.instructions=["A. {question}", "A.   {question}"]'],
            ["initial instruction 1 repeats an earlier one"],
        ),
        (
            ["population.size=1", "population.instruction_file={t}/two.jsonl"],
            ["2 initial instructions but population.size is 1"],
        ),
        (["model.name_or_path={t}"], ["has no config.json", "model.name_or_path"]),
        (["population.stage=pre-rl"], ["runs in one process"]),  # with --processes 2, below
        (["training.micro_batch_size=3"], ["training.micro_batch_size=3", "must divide"]),
    ],
)
def test_recipe_check_refuses_what_a_run_would_refuse_later(sets, fragments, tmp_path):
    (tmp_path / "two.jsonl").write_text('{"text": "A. {question}"}\n{"text": "B. {question}"}\n')
    processes = ["--processes", "2"] if "population.stage=pre-rl" in sets else []
    args = [a for s in sets for a in ("--set", s.replace("{t}", str(tmp_path)))]
    assert_one_line_error(invoke("recipe", "check", "demo", *args, *processes), *fragments)
