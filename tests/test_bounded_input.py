"""Issue 29, class 3 and the duplicate-key warning: a tiny recipe, sweep, `--set` value, instruction file or QA file
cannot ask for unbounded work (nesting, aliases of aliases, size), and a key given twice is refused, not silently
overwritten. Each case is one line and exit 2."""

from __future__ import annotations

import json

import pytest

from cli_helpers import assert_one_line_error, invoke

DEEP = "[" * 500 + "]" * 500
LAUGHS = "".join(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9) if i else ', '.join(['lol'] * 9)}]\n"
                 for i in range(9))  # 9^9 = 387 million values in ~530 bytes


@pytest.mark.parametrize("body, message", [
    (f"training:\n  steps: {DEEP}\n", "line 2: nested more than 32 deep"),
    (LAUGHS, "expands to more than 100,000 values"),
    ("a: &a [1, *a]\n", "an alias refers to the value that contains it"),
    ("training:\n  steps: 3\nmodel: {}\ntraining:\n  group_size: 2\n",
     "key 'training' is given twice (lines 1 and 4); keep one"),
    ("training:\n  steps: 3\n  learning_rate: 1.0e-6\n  steps: 4\n", "key 'steps' is given twice (lines 2 and 4)"),
], ids=["nested", "billion-laughs", "self-alias", "duplicate-section", "duplicate-key"])
def test_a_recipe_that_asks_for_unbounded_work_or_repeats_a_key_is_one_line(tmp_path, body, message):
    path = tmp_path / "r.yaml"
    path.write_text(body)
    assert_one_line_error(invoke("recipe", "check", path), str(path), message)


def test_merge_keys_still_override_and_are_not_duplicates():
    from inspo_cli.config.yamlfile import load_yaml

    text = "base: &b {steps: 3, group_size: 2}\ntraining:\n  <<: *b\n  steps: 4\n"
    assert load_yaml(text, "r.yaml")["training"] == {"steps": 4, "group_size": 2}


def test_a_huge_recipe_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "huge.yaml"
    path.write_text("# padding\n" * 200_000)
    assert_one_line_error(invoke("recipe", "check", path), "2,000,000 bytes, more than the 1,048,576")


def test_extends_naming_a_directory_says_so(tmp_path):
    (tmp_path / "parent").mkdir()
    path = tmp_path / "r.yaml"
    path.write_text("extends: parent\n")
    assert_one_line_error(invoke("recipe", "check", path), "is a directory; name a recipe file")


@pytest.mark.parametrize("value, message", [(DEEP, "--set training.steps: line 1: nested more than 32 deep"),
                                            ("{a: 1, a: 2}", "key 'a' is given twice")])
def test_a_set_value_is_bounded_like_a_recipe(repo_root, value, message):
    assert_one_line_error(invoke("recipe", "check", repo_root / "recipes/demo.yaml", "--set",
                                 f"training.steps={value}"), message)


@pytest.mark.parametrize("body, message", [
    (LAUGHS + "name: x\n", "expands to more than 100,000 values"),
    (f"name: x\nseeds: {DEEP}\n", "nested more than 32 deep"),
    ("name: x\nrecipe: recipes/demo.yaml\nname: y\n", "key 'name' is given twice (lines 1 and 3)"),
], ids=["billion-laughs", "nested", "duplicate-key"])
def test_a_sweep_file_is_bounded_and_refuses_repeated_keys(repo_root, monkeypatch, tmp_path, body, message):
    monkeypatch.chdir(repo_root)
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(body)
    assert_one_line_error(invoke("ablate", "--sweep", sweep, "--dry-run"), f"--sweep {sweep}", message)


@pytest.mark.parametrize("name, content, message", [
    ("instructions.jsonl", '{"text": "Answer."}\n' + DEEP * 4 + "\n", "must be a JSON object"),
    ("big.txt", "Answer the question. " * 400_000, "more than the 8,388,608 it may have"),
], ids=["nested-line", "too-big"])
def test_an_instruction_file_is_bounded(repo_root, tmp_path, name, content, message):
    path = tmp_path / name
    path.write_text(content)
    assert_one_line_error(invoke("recipe", "check", repo_root / "recipes/demo.yaml", "--set",
                                 f"population.instruction_file={path}"), message)


def test_a_qa_file_nested_too_deep_is_one_line(repo_root, tmp_path):
    path = tmp_path / "qa" / "test.jsonl"
    path.parent.mkdir()
    path.write_text(json.dumps({"id": "1", "question": "q?", "golden_answers": ["a"]}) + "\n" + "[" * 100_000 + "\n")
    assert_one_line_error(invoke("evaluate", "--recipe", repo_root / "recipes/demo.yaml", "--method", "direct",
                                 "--benchmarks", path), f"{path}:2", "nested too deep")
