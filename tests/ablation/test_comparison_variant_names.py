"""Each variant under a name of its own: the default reference, variants of the same name told apart, runs given
twice refused, and QA files never going by a name a table already shows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest


def fake_ablation(root, ems: dict[str, float], questions: int = 40, static: str = "search-r1"):
    """An ablation directory (inspo and `static`, without a population, seeds 0-2), each run finished and evaluated
    on `questions` world questions with about `ems[variant]` right (a seed's luck on each question)."""
    import json

    from inspo_cli.ablation.directory import AblationDir
    from inspo_cli.ablation.sweep import plan_sweep

    plan = plan_sweep(
        {
            "recipe": "recipes/demo.yaml",
            "seeds": [0, 1, 2],
            "variants": {"inspo": [], static: ["population.enabled=false"]},
        },
        "world.yaml",
    )
    ablation = AblationDir.start(root, plan)
    rng = np.random.default_rng(sum(Path(root).parent.name.encode()))  # by the folder's name: not the tmp path's
    for variant, em in ems.items():
        for seed in (0, 1, 2):
            run = ablation.runs_dir / f"{variant}-s{seed}"
            (run / "evaluations/step-4").mkdir(parents=True)
            (run / "run.json").write_text("{}")
            (run / "summary.json").write_text(json.dumps({"steps": 4, "best_instruction": "Answer."}))
            answers = (rng.random(questions) < em).astype(float)
            (run / "evaluations/step-4/results.json").write_text(
                json.dumps(
                    {
                        "scores": {
                            "agent": {
                                "world": {
                                    "em": float(answers.mean()),
                                    "f1": 0.0,
                                    "subem": 0.0,
                                    "searches": 1.0,
                                    "n": questions,
                                }
                            }
                        }
                    }
                )
            )
            (run / "evaluations/step-4/predictions.jsonl").write_text(
                "".join(
                    json.dumps({"method": "agent", "benchmark": "world", "id": f"w{i}", "em": a}) + "\n"
                    for i, a in enumerate(answers)
                )
            )
    return root


def test_the_default_reference_is_the_variant_without_a_population_whatever_its_name(tmp_path, repo_root, monkeypatch):
    from inspo_cli.ablation.directory import AblationDir
    from inspo_cli.ablation.table import collect

    monkeypatch.chdir(repo_root)
    ablation = AblationDir.open(fake_ablation(tmp_path / "abl/world", {"inspo": 0.9, "fixed": 0.35}, static="fixed"))
    table = collect(ablation)
    assert {row["variant"]: row["static"] for row in table["rows"]} == {"inspo": False, "fixed": True}
    assert table["reference"] == "fixed" and [c["variant"] for c in table["comparisons"]] == ["inspo"]


def test_report_tells_apart_variants_of_the_same_name_and_refuses_runs_given_twice(tmp_path, repo_root, monkeypatch):
    """Issue 37: two ablation folders of one name (copied from two clusters) gave two rows "inspo (world)", and
    the second showed the first's difference (EM 0.90 against 0.35 read as +0.000, p = 1.00)."""
    import json

    from helpers.cli_helpers import assert_one_line_error, invoke

    monkeypatch.chdir(repo_root)
    first = fake_ablation(tmp_path / "cluster-a/world", {"inspo": 0.9, "search-r1": 0.35})
    second = fake_ablation(tmp_path / "cluster-b/world", {"inspo": 0.35, "search-r1": 0.35})
    result = invoke("report", first, second, "--out", tmp_path / "report")
    assert result.exit_code == 0, result.output
    table = json.loads((tmp_path / "report/table1.json").read_text())
    means = {r["variant"]: r["average"]["mean"] for r in table["rows"]}
    assert sorted(means) == [
        "inspo (cluster-a/world)",
        "inspo (cluster-b/world)",
        "search-r1 (cluster-a/world)",
        "search-r1 (cluster-b/world)",
    ]
    assert table["reference"] == "search-r1 (cluster-a/world)"
    for c in table["comparisons"]:
        assert c["average"]["diff"] == pytest.approx(means[c["variant"]] - means[table["reference"]])
    best = next(c for c in table["comparisons"] if c["variant"] == "inspo (cluster-a/world)")["average"]
    assert best["diff"] > 0.4 and best["p"] < 0.05  # before: +0.000, p = 1.00
    names = [r["run"] for row in table["rows"] for r in row["runs"]]
    assert len(set(names)) == 12 and "cluster-a_world_runs_inspo-s0" in names
    md = (tmp_path / "report/table1.md").read_text()
    assert "| inspo (cluster-b/world) |" in md and "| seed, question |" in md
    # the same ablation twice, or with one of its own runs: its runs would be counted twice
    assert_one_line_error(
        invoke("report", first, tmp_path / "cluster-a/../cluster-a/world", "--out", tmp_path / "r2"), "given twice"
    )
    assert_one_line_error(
        invoke("report", first, first / "runs/inspo-s0", "--out", tmp_path / "r3"),
        "inspo-s0 lies inside",
        "give one of them",
    )
    (tmp_path / "link").symlink_to(first / "runs/inspo-s0")
    assert_one_line_error(invoke("report", first, tmp_path / "link", "--out", tmp_path / "r4"), "lies inside")


def test_qa_files_never_go_by_a_name_a_table_already_shows(tmp_path, monkeypatch):
    """Issue 37 (after issue 29's fix): a file NQ.jsonl was a column "NQ" beside the built-in nq's "NQ"; a file
    whose stem needed its path could be named like another's stem; "Avg." read as the average column."""
    from inspo_cli.evaluation.report import table_rows
    from inspo_cli.evaluation.runner import benchmark_file_labels

    monkeypatch.chdir(tmp_path)
    labels = benchmark_file_labels(["qa/NQ.jsonl", "qa/Hotpot_QA.jsonl", "qa/b/Avg..jsonl", "x/q.jsonl"])
    assert labels == {
        "qa/NQ.jsonl": "qa/NQ",
        "qa/Hotpot_QA.jsonl": "qa/Hotpot_QA",
        "qa/b/Avg..jsonl": "b/Avg.",
        "x/q.jsonl": "q",
    }
    # a.jsonl's stem is taken by c/a.json, so it went by its path "a.jsonl" -- the stem of b/a.jsonl.jsonl
    labels = benchmark_file_labels(["a.jsonl", "c/a.json", "b/a.jsonl.jsonl"])
    assert len(set(labels.values())) == 3 and labels["c/a.json"] == "c/a"
    assert labels["a.jsonl"] == str(tmp_path / "a.jsonl")
    # results written before: the columns still tell the file from the built-in benchmark
    score = {"em": 0.5, "f1": 0.5, "subem": 0.5, "searches": 1.0, "n": 2}
    header, _ = table_rows({"agent": {"nq": score, "NQ": score, "Avg.": score}}, "em")
    assert len(set(header)) == len(header) == 5
