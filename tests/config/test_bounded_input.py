"""Issue 29, class 3 and the duplicate-key warning: a tiny recipe, sweep, `--set` value, instruction file or QA file
cannot ask for unbounded work (nesting, aliases of aliases, size), and a key given twice is refused, not silently
overwritten. Each case is one line and exit 2."""

from __future__ import annotations

import json

import pytest
from helpers.cli_helpers import assert_one_line_error, invoke
from helpers.damaged_files import HUGE, SPECIAL, fifo

DEEP = "[" * 500 + "]" * 500
LAUGHS = "".join(
    f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9) if i else ', '.join(['lol'] * 9)}]\n" for i in range(9)
)  # 9^9 = 387 million values in ~530 bytes


@pytest.mark.parametrize(
    "body, message",
    [
        (f"training:\n  steps: {DEEP}\n", "line 2: nested more than 32 deep"),
        (LAUGHS, "expands to more than 100,000 values"),
        ("a: &a [1, *a]\n", "an alias refers to the value that contains it"),
        (
            "training:\n  steps: 3\nmodel: {}\ntraining:\n  group_size: 2\n",
            "key 'training' is given twice (lines 1 and 4); keep one",
        ),
        ("training:\n  steps: 3\n  learning_rate: 1.0e-6\n  steps: 4\n", "key 'steps' is given twice (lines 2 and 4)"),
    ],
    ids=["nested", "billion-laughs", "self-alias", "duplicate-section", "duplicate-key"],
)
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


@pytest.mark.parametrize(
    "value, message",
    [(DEEP, "--set training.steps: line 1: nested more than 32 deep"), ("{a: 1, a: 2}", "key 'a' is given twice")],
)
def test_a_set_value_is_bounded_like_a_recipe(repo_root, value, message):
    assert_one_line_error(
        invoke("recipe", "check", repo_root / "recipes/demo.yaml", "--set", f"training.steps={value}"), message
    )


@pytest.mark.parametrize(
    "body, message",
    [
        (LAUGHS + "name: x\n", "expands to more than 100,000 values"),
        (f"name: x\nseeds: {DEEP}\n", "nested more than 32 deep"),
        ("name: x\nrecipe: recipes/demo.yaml\nname: y\n", "key 'name' is given twice (lines 1 and 3)"),
    ],
    ids=["billion-laughs", "nested", "duplicate-key"],
)
def test_a_sweep_file_is_bounded_and_refuses_repeated_keys(repo_root, monkeypatch, tmp_path, body, message):
    monkeypatch.chdir(repo_root)
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(body)
    assert_one_line_error(invoke("ablate", "--sweep", sweep, "--dry-run"), f"--sweep {sweep}", message)


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("instructions.jsonl", '{"text": "Answer."}\n' + DEEP * 4 + "\n", "must be a JSON object"),
        ("big.txt", "Answer the question. " * 400_000, "more than the 8,388,608 it may have"),
    ],
    ids=["nested-line", "too-big"],
)
def test_an_instruction_file_is_bounded(repo_root, tmp_path, name, content, message):
    path = tmp_path / name
    path.write_text(content)
    assert_one_line_error(
        invoke("recipe", "check", repo_root / "recipes/demo.yaml", "--set", f"population.instruction_file={path}"),
        message,
    )


def test_a_qa_file_nested_too_deep_is_one_line(repo_root, tmp_path):
    path = tmp_path / "qa" / "test.jsonl"
    path.parent.mkdir()
    path.write_text(json.dumps({"id": "1", "question": "q?", "golden_answers": ["a"]}) + "\n" + "[" * 100_000 + "\n")
    assert_one_line_error(
        invoke("evaluate", "--recipe", repo_root / "recipes/demo.yaml", "--method", "direct", "--benchmarks", path),
        f"{path}:2",
        "nested too deep",
    )


# -- issue 37, class 10: non-regular, oversized and NUL-byte files -------------------------------------------------
#
# `st_size` is 0 for a FIFO or a device, so a cap on the size does not hold for them, and a FIFO without a writer
# blocks `open` forever: a file that must be a regular file is refused as none, and a file read whole is bounded by
# the bytes actually read. A huge file (3 GB of NUL bytes, sparse) is refused by its size, or, streamed, by a line
# cap, before it is held whole; a small one of NUL bytes (what a crash can leave) is not taken for text.


QA_ROW = json.dumps({"id": "1", "question": "q?", "golden_answers": ["a"]}) + "\n"


def _user_file(where: str, tmp_path, repo_root):
    """(the file damaged, the command that reads it) for each kind of file a user hands the toolkit."""
    demo = repo_root / "recipes/demo.yaml"
    if where == "recipe":
        path = tmp_path / "r.yaml"
        path.write_text(demo.read_text())
        return path, ["recipe", "check", path]
    if where == "extends":
        path, child = tmp_path / "parent.yaml", tmp_path / "child.yaml"
        path.write_text(demo.read_text())
        child.write_text(f"extends: {path}\ntraining:\n  steps: 2\n")
        return path, ["recipe", "check", child]
    if where == "sweep":
        path = tmp_path / "sweep.yaml"
        path.write_text(f"name: s\nrecipe: {demo}\naxes:\n  n-parent: [1, 2]\n")
        return path, ["ablate", "--sweep", path, "--dry-run"]
    if where == "instruction-file":
        path = tmp_path / "instruction.txt"
        path.write_text("Answer the question. {question}\n")
        return path, ["recipe", "check", demo, "--set", f"population.instruction_file={path}"]
    if where == "qa-file":
        path = tmp_path / "qa" / "test.jsonl"
        path.parent.mkdir()
        path.write_text(QA_ROW)
        return path, ["evaluate", "--recipe", demo, "--method", "direct", "--benchmarks", path]
    path = tmp_path / "corpus.jsonl"  # a corpus
    path.write_text(json.dumps({"id": "1", "contents": '"T"\ntext'}) + "\n")
    return path, ["index", "--corpus", path, "--out", tmp_path / "idx"]


USER_FILES = ("recipe", "extends", "sweep", "instruction-file", "qa-file", "corpus")


@pytest.mark.parametrize("kind", SPECIAL)
@pytest.mark.parametrize("where", USER_FILES)
def test_a_special_file_given_for_a_users_file_is_one_line_and_never_read_whole(
    repo_root, tmp_path, monkeypatch, where, kind
):
    import time

    monkeypatch.chdir(repo_root)
    path, args = _user_file(where, tmp_path, repo_root)
    SPECIAL[kind](path)
    start = time.monotonic()
    result = invoke(*args)
    assert_one_line_error(result)
    assert str(path) in result.stderr or (kind == "dev-zero" and "/dev/zero" in result.stderr), result.stderr
    assert time.monotonic() - start < 8  # refused, not read: 3 GB would take minutes and a MemoryError
    assert not (tmp_path / "idx").exists()


def test_a_bound_counts_the_bytes_read_not_the_size_the_file_claims():
    """/proc files are regular files whose st_size is 0, like the size a FIFO or a device reports."""
    import os

    from inspo_cli.errors import InspoError
    from inspo_cli.files import read_bytes, read_text
    from retriever.checked import read_json_object
    from retriever.errors import RetrieverError

    claimed = "/proc/self/status"
    assert os.stat(claimed).st_size == 0 and len(read_bytes(claimed, "status", 1 << 20)) > 64
    for read in (lambda: read_bytes(claimed, "status", 64), lambda: read_text(claimed, "status", 64)):
        with pytest.raises(InspoError, match="status /proc/self/status: more than the 64 it may have"):
            read()
    with pytest.raises(RetrieverError, match="more than 64 bytes"):
        read_json_object(claimed, "status", 64, "fix")


def test_a_line_longer_than_the_cap_names_the_file_and_line_before_it_is_held_whole(repo_root, tmp_path):
    from inspo_cli.files import LINE_BYTES

    path = tmp_path / "qa" / "test.jsonl"
    path.parent.mkdir()
    path.write_text(QA_ROW + QA_ROW.replace('"1"', '"2"') + "x" * (LINE_BYTES + 1) + "\n")
    assert_one_line_error(
        invoke("evaluate", "--recipe", repo_root / "recipes/demo.yaml", "--method", "direct", "--benchmarks", path),
        f"{path}:3: a line of more than {LINE_BYTES:,} bytes",
    )
    path.write_text("[" + QA_ROW.strip() + "]")
    with open(path, "ab") as f:
        f.truncate(HUGE)  # a JSON array is read whole: refused by its size
    assert_one_line_error(
        invoke("evaluate", "--recipe", repo_root / "recipes/demo.yaml", "--method", "direct", "--benchmarks", path),
        "a JSON array of more than",
        "convert it to JSONL",
    )


def test_recipe_list_skips_a_fifo_under_recipes_with_a_warning_instead_of_hanging(tmp_path, monkeypatch):
    from inspo_cli.config import recipe_files

    (tmp_path / "good.yaml").write_text("# A good recipe: it reads.\ndata: {train: world}\n")
    fifo(tmp_path / "pipe.yaml")
    monkeypatch.setattr(recipe_files, "RECIPES_DIR", tmp_path)
    result = invoke("recipe", "list", "--json")
    assert result.exit_code == 0 and [row["name"] for row in json.loads(result.stdout)] == ["good"], result.output
    assert "warning: skipped recipe" in result.stderr and "pipe.yaml: is a FIFO" in result.stderr
