"""`inspo evaluate` end to end on the tiny random model and the bundled world, and its errors."""

from __future__ import annotations

import csv
import json
import shutil

import pytest

from test_cli import assert_one_line_error, invoke

FAST = ["--set", "rollout.max_tokens_per_turn=6", "--set", "rollout.max_observation_tokens=40",
        "--set", "rollout.max_turns=1", "--device", "cpu"]


def test_all_five_methods_write_a_table_1_report(tiny_model_dir, tmp_path):
    out = tmp_path / "eval"
    result = invoke("evaluate", "--benchmarks", "world", "--model", tiny_model_dir, "--method", "all",
                    "--limit", 3, "--batch-size", 2, "--out", out, *FAST)
    assert result.exit_code == 0, result.output
    assert "Exact match (%)" in result.stdout and "search-o1" in result.stdout
    markdown = (out / "results.md").read_text()
    assert "| Method | World | Avg. |" in markdown
    for method in ("direct", "rag", "ircot", "search-o1", "agent"):
        assert f"| {method} |" in markdown
    results = json.loads((out / "results.json").read_text())
    assert set(results["scores"]) == {"direct", "rag", "ircot", "search-o1", "agent"}
    assert results["scores"]["rag"]["world"]["n"] == 3 and results["scores"]["rag"]["world"]["searches"] == 1.0
    assert results["instruction"].startswith("Answer the given question.")  # Search-R1's, App. F
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert len(rows) == 5 and {r["benchmark"] for r in rows} == {"world"}
    predictions = [json.loads(line) for line in (out / "predictions.jsonl").open()]
    assert len(predictions) == 15 and {"prediction", "golden_answers", "em", "f1", "subem", "queries"} <= set(predictions[0])


def test_a_run_directory_supplies_policy_instruction_and_recipe(tiny_model_dir, tmp_path, repo_root):
    run = tmp_path / "run"
    for step in (4, 10, 9):  # the newest by step number, not by name
        shutil.copytree(tiny_model_dir, run / "checkpoints" / f"checkpoint-{step}")
    (run / "run.json").write_text(json.dumps({"name": "run"}))
    (run / "recipe.yaml").write_text((repo_root / "recipes" / "demo.yaml").read_text())
    (run / "summary.json").write_text(json.dumps({"best_instruction": "Search, then answer. {question}"}))
    result = invoke("evaluate", "--run", run, "--method", "agent", "--limit", 2, *FAST)
    assert result.exit_code == 0, result.output
    [eval_dir] = run.glob("eval-*")
    results = json.loads((eval_dir / "results.json").read_text())
    assert results["instruction"] == "Search, then answer. {question}"
    assert results["model"].endswith("checkpoint-10")


@pytest.mark.parametrize("args, fragments", [
    (["--method", "cot"], ["--method", "cot", "direct, rag, ircot, search-o1, agent"]),
    (["--benchmarks", "nq"], ["nq", "inspo data fetch"]),
    (["--benchmarks", "squad"], ["squad"]),
    (["--run", "nowhere"], ["nowhere", "run directory"]),
    (["--set", "evaluation.temperature=-1"], ["evaluation.temperature", ">= 0"]),
    (["--instruction", ""], ["--instruction", "empty"]),
])
def test_bad_input_is_one_clear_line(args, fragments, tmp_path):
    result = invoke("evaluate", "--model", "smollm2-135m-instruct", "--out", tmp_path / "o", *args)
    assert_one_line_error(result, *fragments)


def test_existing_results_are_never_overwritten(tmp_path):
    out = tmp_path / "eval"
    out.mkdir()
    (out / "results.json").write_text("{}")
    result = invoke("evaluate", "--model", "smollm2-135m-instruct", "--out", out, "--limit", 1)
    assert_one_line_error(result, str(out), "already holds files")
    assert (out / "results.json").read_text() == "{}"
