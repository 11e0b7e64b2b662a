"""`inspo evaluate` end to end on the tiny random model and the bundled world, and its errors."""

from __future__ import annotations

import csv
import json
import shutil
import sys
from pathlib import Path

import pytest
from helpers.cli_helpers import assert_one_line_error, invoke

FAST = [
    "--set",
    "rollout.max_tokens_per_turn=6",
    "--set",
    "rollout.max_observation_tokens=40",
    "--set",
    "rollout.max_turns=1",
    "--device",
    "cpu",
]


def test_all_five_methods_write_a_table_1_report(tiny_model_dir, tmp_path):
    out = tmp_path / "eval"
    result = invoke(
        "evaluate",
        "--benchmarks",
        "world",
        "--model",
        tiny_model_dir,
        "--method",
        "all",
        "--limit",
        3,
        "--batch-size",
        2,
        "--out",
        out,
        *FAST,
    )
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
    assert len(predictions) == 15 and {
        "prediction",
        "golden_answers",
        "em",
        "f1",
        "subem",
        "queries",
        "turns",
        "invalid_actions",
    } <= set(predictions[0])


def make_unfinished_inspo_run(tiny_model_dir, tmp_path, repo_root):
    """A run killed after step 10 (the demo recipe: one update per step) whose saved populations each had another
    best instruction, and whose reward collapsed after step 5."""
    import yaml

    from inspo_cli.config import load_recipe
    from inspo_cli.instructions.population import InstructionPopulation
    from inspo_cli.instructions.sampling import Pick

    run = tmp_path / "run"
    recipe = yaml.safe_load((repo_root / "recipes" / "demo.yaml").read_text())
    recipe["evaluation"].update(collapse_window=2, collapse_drop=0.5)
    recipe["training"]["eval_every"] = 4  # App. B's candidates for `best`: the evaluated steps 4 and 8
    (run / "checkpoints").mkdir(parents=True)
    (run / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    (run / "run.json").write_text(json.dumps({"name": "run"}))
    config = load_recipe(run / "recipe.yaml").population
    for step in (4, 10, 9):  # the newest by step number, not by name
        folder = run / "checkpoints" / f"checkpoint-{step}"
        shutil.copytree(tiny_model_dir, folder)
        (folder / "trainer_state.json").write_text(json.dumps({"global_step": step}))
        population = InstructionPopulation(
            config, seed=0, initial_texts=["Search first. {question}", f"Best at step {step}. {{question}}"]
        )
        population.observe([Pick("i1", "")], [1.0])
        population.end_step(step)
        (folder / "coevolution.json").write_text(
            json.dumps({"population": population.state_dict(), "replay": {"capacity": 8, "entries": []}})
        )
    rewards = [0.1, 0.3, 0.5, 0.6, 0.6, 0.5, 0.2, 0.0, 0.0, 0.0]  # 2-step means peak at step 5, halve by step 8
    (run / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": i, "update": i, "reward": r}) + "\n" for i, r in enumerate(rewards, start=1))
    )
    return run


def evaluated(run, *args):
    result = invoke("evaluate", "--run", run, "--method", "agent", "--limit", 2, *args, *FAST)
    assert result.exit_code == 0, result.output
    newest = max(run.glob("eval-*"), key=lambda p: p.stat().st_mtime_ns)
    results = json.loads((newest / "results.json").read_text())
    shutil.rmtree(newest)  # the next call in the same second gets the same directory name
    return results


def test_each_checkpoint_is_evaluated_with_the_best_instruction_of_its_own_population(
    tiny_model_dir, tmp_path, repo_root
):
    run = make_unfinished_inspo_run(tiny_model_dir, tmp_path, repo_root)
    latest = evaluated(run)  # no final policy yet: the newest checkpoint, with ITS best instruction
    assert latest["model"].endswith("checkpoint-10") and latest["instruction"] == "Best at step 10. {question}"
    assert (latest["checkpoint"], latest["instruction_id"]) == ("step 10 (checkpoint-10)", "i1")
    early = evaluated(run, "--checkpoint", "4")
    assert early["model"].endswith("checkpoint-4") and early["instruction"] == "Best at step 4. {question}"
    # App. B: "the final checkpoint before any reward collapse": the reward peaked at step 5 and halved by step 8
    assert evaluated(run, "--checkpoint", "best")["checkpoint"] == "step 4 (checkpoint-4)"
    fixed = evaluated(run, "--checkpoint", "9", "--instruction", "Mine. {question}")
    assert fixed["instruction"] == "Mine. {question}" and fixed["instruction_id"] is None

    assert_one_line_error(
        invoke("evaluate", "--run", run, "--checkpoint", "7", *FAST),
        "--checkpoint '7'",
        "checkpoints at steps 4, 9, 10",
    )
    assert_one_line_error(
        invoke("evaluate", "--run", run, "--checkpoint", "²", *FAST), "--checkpoint '²'", "use a step number"
    )  # a digit to str.isdigit, not to int()
    assert_one_line_error(
        invoke("evaluate", "--run", run, "--checkpoint", " 4", *FAST), "--checkpoint ' 4': not a step number"
    )  # int() reads it as 4: never silently the step it looks like
    assert_one_line_error(
        invoke("evaluate", "--run", run, "--checkpoint", "final", *FAST), "no final policy yet", "inspo train --resume"
    )
    assert_one_line_error(invoke("evaluate", "--checkpoint", "4", *FAST), "--checkpoint", "--run")
    (run / "checkpoints/checkpoint-9/coevolution.json").unlink()  # its population lost: I* unknown
    assert_one_line_error(
        invoke("evaluate", "--run", run, "--checkpoint", "9", *FAST),
        "checkpoint-9 has no coevolution.json",
        "evaluate it with --instruction TEXT_OR_FILE",
    )


@pytest.mark.parametrize(
    "args, fragments",
    [
        (["--method", "cot"], ["--method", "cot", "direct, rag, ircot, search-o1, agent"]),
        (["--benchmarks", "nq"], ["nq", "inspo data fetch"]),
        (["--benchmarks", "squad"], ["squad"]),
        (["--run", "nowhere"], ["nowhere", "run directory"]),
        (["--set", "evaluation.temperature=-1"], ["evaluation.temperature", ">= 0"]),
        (["--instruction", ""], ["--instruction", "empty"]),
        # callables that cannot be a method: refused before the model loads (minutes for a 7B), not with a traceback
        # after
        (
            ["--method", "builtins:len"],
            [
                "--method: inference method builtins:len takes (obj, /), but an inference method "
                "is called as predict(ctx, questions)"
            ],
        ),
        (["--method", "rag,os:_exit"], ["inference method os:_exit takes (status)"]),
    ],
)
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


def test_method_help_lists_the_registered_methods():
    result = invoke("evaluate", "--help")
    assert result.exit_code == 0
    from inspo_cli.registry import METHODS

    shown = " ".join(result.output.replace("│", " ").split())
    assert all(
        f"{name} ({' '.join(METHODS[name].describe(name).split(' (', 1)[1].split())}" in shown for name in METHODS
    )


def test_a_qa_file_of_ones_own_is_a_benchmark_named_by_its_stem(tiny_model_dir, tmp_path):
    """--benchmarks takes a path to a FlashRAG-style file next to built-in names; a stem that is a built-in
    benchmark's name is told apart by its folder."""
    world_test = (Path(__file__).resolve().parents[2] / "data/world/test.jsonl").read_text().splitlines()
    mine = tmp_path / "lab" / "my-questions.jsonl"
    mine.parent.mkdir()
    mine.write_text("\n".join(world_test[:2]) + "\n")
    clash = tmp_path / "lab" / "nq.jsonl"
    clash.write_text(world_test[2] + "\n")
    out = tmp_path / "eval"
    result = invoke(
        "evaluate",
        "--benchmarks",
        f"world,{mine},{clash}",
        "--model",
        tiny_model_dir,
        "--method",
        "direct",
        "--limit",
        2,
        "--out",
        out,
        *FAST,
    )
    assert result.exit_code == 0, result.output
    scores = json.loads((out / "results.json").read_text())["scores"]["direct"]
    assert {name: s["n"] for name, s in scores.items()} == {"world": 2, "my-questions": 2, "lab/nq": 1}
    missing = invoke(
        "evaluate",
        "--benchmarks",
        str(tmp_path / "absent.jsonl"),
        "--model",
        tiny_model_dir,
        "--out",
        tmp_path / "o2",
        *FAST,
    )
    assert_one_line_error(missing, "absent.jsonl", "no such file")


OUTSIDE_METHODS = """
from inspo_cli.evaluation.methods.base import Prediction


def one_short(ctx, questions):
    return [Prediction("x", "x") for _ in questions][:-1]


def nothing(ctx, questions):
    return None
"""


@pytest.mark.parametrize("method, returned", [("one_short", "a list of 1 (Prediction)"), ("nothing", "None")])
def test_an_outside_method_that_returns_too_few_predictions_scores_nothing(
    tiny_model_dir, tmp_path, monkeypatch, method, returned
):
    """A list one short was zipped against the questions: exit 0, the table over the wrong questions."""
    (tmp_path / "lab_methods.py").write_text(OUTSIDE_METHODS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "lab_methods", raising=False)
    out = tmp_path / "eval"
    result = invoke(
        "evaluate",
        "--benchmarks",
        "world",
        "--model",
        tiny_model_dir,
        "--method",
        f"lab_methods:{method}",
        "--limit",
        2,
        "--batch-size",
        2,
        "--out",
        out,
        *FAST,
    )
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    last = result.stderr.strip().splitlines()[-1]  # after the progress lines
    assert last.startswith(
        f"error: inference method lab_methods:{method}: predict() returned {returned}, not a list of 2 Prediction"
    ), result.stderr
    assert not out.exists()
    sys.modules.pop("lab_methods", None)
