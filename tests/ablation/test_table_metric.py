"""Tables of another score than EM (`inspo ablate --metric`, `inspo report --metric`): the judge's verdicts, F1 and
SubEM with the same intervals over seeds and questions, written beside the EM table, never in its place."""

from __future__ import annotations

import json

import pytest
from helpers.cli_helpers import assert_one_line_error, invoke

from inspo_cli.ablation.compare import RunScores, compare, estimate
from inspo_cli.ablation.directory import AblationDir
from inspo_cli.ablation.plan import plan_axes
from inspo_cli.ablation.results import RunResult
from inspo_cli.ablation.table import collect
from inspo_cli.errors import InspoError

# seed -> per-question (EM, judge verdict or None: no verdict read), 6 questions; the judge passes more than EM
DEMO = {
    0: [(1, 1), (0, 1), (0, 0), (0, None), (1, 1), (0, 0)],
    1: [(0, 1), (0, 0), (1, 1), (0, 1), (0, 0), (0, 0)],
}
VARIED = {
    0: [(1, 1), (1, 1), (0, 1), (0, 0), (1, 1), (0, 1)],
    1: [(0, 0), (1, 1), (0, None), (0, 1), (1, 1), (1, 1)],
}


def write_run(ablation: AblationDir, name: str, pairs, judged: bool = True, steps: int = 4) -> None:
    """A finished run whose evaluation after its last step has these per-question EMs and verdicts."""
    run = ablation.runs_dir / name
    directory = run / f"evaluations/step-{steps}"
    directory.mkdir(parents=True)
    (run / "run.json").write_text("{}")
    (run / "summary.json").write_text(json.dumps({"steps": steps, "best_instruction": "Answer."}))
    rows, verdicts = [], [v for _, v in pairs if v is not None]
    for i, (em, verdict) in enumerate(pairs):
        row = {"method": "agent", "benchmark": "world", "id": f"q{i}", "em": float(em), "f1": (em + 1) / 2}
        if judged:
            row["judge"] = None if verdict is None else float(verdict)
        rows.append(row)
    em = sum(e for e, _ in pairs) / len(pairs)
    cell = {"em": em, "f1": (em + 1) / 2, "subem": em, "searches": 1.0, "n": len(pairs)}
    if judged:
        cell.update(
            judge=sum(verdicts) / len(verdicts), judge_n=len(verdicts), judge_unparsed=len(pairs) - len(verdicts)
        )
    (directory / "results.json").write_text(json.dumps({"scores": {"agent": {"world": cell}}}))
    (directory / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def judge_scores(runs: dict) -> list[RunScores]:
    out = []
    for seed, pairs in runs.items():
        kept = {f"q{i}": float(v) for i, (_, v) in enumerate(pairs) if v is not None}
        out.append(RunScores(seed, {"world": sum(kept.values()) / len(kept)}, {"world": kept}))
    return out


@pytest.fixture
def ablation(repo_root, monkeypatch, tmp_path):
    monkeypatch.chdir(repo_root)
    plan = plan_axes("recipes/demo.yaml", [("n-parent", ["2"])], seeds=[0, 1])
    ablation = AblationDir.start(tmp_path / "abl", plan)
    for seed in (0, 1):
        write_run(ablation, f"demo-s{seed}", DEMO[seed])
        write_run(ablation, f"n-parent-2-s{seed}", VARIED[seed])
    return ablation


def test_the_judge_table_has_the_verdicts_and_the_intervals_of_em(ablation):
    table = collect(ablation, metric="judge")
    assert (table["metric"], table["metric_label"]) == ("judge", "judge")
    demo, varied = table["rows"]
    expected = estimate(judge_scores(DEMO))  # the crossed seed x question design, on the judged questions only
    assert demo["average"]["mean"] == pytest.approx(expected.mean)
    assert demo["average"]["ci95"] == pytest.approx(expected.half_width)
    assert [r["em"]["world"] for r in demo["runs"]] == [pytest.approx(3 / 5), pytest.approx(3 / 6)]
    assert [r["n"]["world"] for r in demo["runs"]] == [5, 6]  # the questions with a verdict
    assert demo["runs"][0]["se"]["world"] == pytest.approx((0.6 * 0.4 / 5) ** 0.5)
    difference = compare(judge_scores(VARIED), judge_scores(DEMO), None)
    (comparison,) = table["comparisons"]
    assert comparison["average"]["diff"] == pytest.approx(difference.diff)
    assert comparison["average"]["p"] == pytest.approx(difference.p)
    em = collect(ablation)  # the default is still EM
    assert em["metric"] == "em" and em["rows"][0]["average"]["mean"] == pytest.approx((2 / 6 + 1 / 6) / 2)


def test_ablate_collect_writes_the_judge_table_beside_the_em_one(ablation):
    result = invoke("ablate", "--collect", ablation.path, "--metric", "judge")
    assert result.exit_code == 0, result.output
    assert "judge at" in result.output
    markdown = (ablation.path / "ablation-judge.md").read_text()
    assert markdown.splitlines()[2].startswith("The LLM judge's verdict (1 correct, 0 not;")
    assert (
        "Δ judge = variant − demo" in markdown
        and "| run | seed | step used | reward collapse | world judge ± SE" in markdown
    )
    assert json.loads((ablation.path / "ablation-judge.json").read_text())["metric"] == "judge"
    assert (ablation.path / "ablation-judge.csv").is_file() and not (ablation.path / "ablation.md").exists()
    assert invoke("ablate", "--collect", ablation.path).exit_code == 0
    assert "Exact match at" in (ablation.path / "ablation.md").read_text()
    assert_one_line_error(invoke("ablate", "--collect", ablation.path, "--metric", "bleu"), "--metric 'bleu'")
    assert_one_line_error(invoke("ablate", "--status", ablation.path, "--metric", "judge"), "--metric")


def test_a_run_evaluated_without_the_judge_says_how_to_add_it(ablation):
    import shutil

    shutil.rmtree(ablation.runs_dir / "demo-s1")
    write_run(ablation, "demo-s1", DEMO[1], judged=False)
    table = collect(ablation, metric="judge")
    (missing,) = table["rows"][0]["missing"]
    assert missing["run"] == "demo-s1" and "inspo evaluate --judge" in missing["why"]
    assert "demo-s1/evaluations/step-4" in missing["why"]
    assert collect(ablation)["rows"][0]["missing"] == []  # its EM is there


def test_a_cell_the_judge_read_no_verdict_in_is_missing_not_zero(ablation):
    directory = ablation.runs_dir / "demo-s0/evaluations/step-4"
    results = json.loads((directory / "results.json").read_text())
    results["scores"]["agent"]["world"].update(judge=None, judge_n=0)
    (directory / "results.json").write_text(json.dumps(results))
    (missing,) = collect(ablation, metric="judge")["rows"][0]["missing"]
    assert "no verdict it could read" in missing["why"]


def judged_by(ablation, run: str, identity: str, **cell) -> None:
    directory = ablation.runs_dir / run / "evaluations/step-4"
    results = json.loads((directory / "results.json").read_text())
    results["judge"] = {"identity": json.dumps([*identity.split(), None, 16]), "prompt_version": "judge-v1"}
    results["scores"]["agent"]["world"].update(cell)
    (directory / "results.json").write_text(json.dumps(results))


def test_runs_graded_by_different_judges_make_no_table(ablation):
    for run in ("demo-s0", "demo-s1", "n-parent-2-s0"):
        judged_by(ablation, run, "openai gpt-4o-mini")
    judged_by(ablation, "n-parent-2-s1", "local smollm2-135m-instruct")
    with pytest.raises(InspoError, match="judged by 2 different judges") as error:
        collect(ablation, metric="judge")
    assert "openai gpt-4o-mini (at most 16 output tokens, prompt judge-v1)" in str(error.value)
    assert "local smollm2-135m-instruct (at most 16" in str(error.value) and "n-parent-2-s1" in str(error.value)
    result = invoke("ablate", "--collect", ablation.path, "--metric", "judge")
    assert_one_line_error(result, "different judges", "inspo evaluate --judge")
    judged_by(ablation, "n-parent-2-s1", "openai gpt-4o-mini")  # one judge: one table
    assert collect(ablation, metric="judge")["rows"][1]["missing"] == []
    assert collect(ablation)["rows"][1]["missing"] == []  # EM never asks who judged


def test_a_cell_with_predictions_the_judge_never_answered_is_missing_not_scored_on_the_rest(ablation):
    judged_by(ablation, "demo-s0", "openai gpt-4o-mini", judge_failed=2)
    (missing,) = collect(ablation, metric="judge")["rows"][0]["missing"]
    assert missing["run"] == "demo-s0" and "2 on world" in missing["why"] and "inspo evaluate --judge" in missing["why"]


def test_f1s_standard_error_is_its_questions_variance():
    questions = {"world": {"q0": 0.5, "q1": 0.5, "q2": 0.5, "q3": 0.5}}
    f1 = RunResult("r", 0, 4, 4, "best", None, {"world": 0.5}, {"world": 4}, questions, metric="f1")
    assert f1.se() == 0.0  # every question scored 0.5: no spread
    binary = RunResult("r", 0, 4, 4, "best", None, {"world": 0.5}, {"world": 4}, questions, metric="subem")
    assert binary.se() == pytest.approx(0.25)
    spread = {"world": {"q0": 0.0, "q1": 1.0, "q2": 0.5, "q3": 0.5}}  # variance 0.125 over the 4 questions
    varied = RunResult("r", 0, 4, 4, "best", None, {"world": 0.5}, {"world": 4}, spread, metric="f1")
    assert varied.se() == pytest.approx((0.125 / 4) ** 0.5)
    bound = RunResult("r", 0, 4, 4, "best", None, {"world": 0.5}, {"world": 4}, None, metric="f1")
    assert bound.se() == pytest.approx(0.25)  # without predictions: the largest an F1 of mean 0.5 can have


def test_report_with_the_judge_writes_its_own_report(ablation):
    result = invoke("report", ablation.path, "--metric", "judge")
    assert result.exit_code == 0, result.output
    out = ablation.path / "report-judge"
    assert (out / "table1-judge.md").is_file() and not (out / "table1.md").exists()
    index = (out / "index.md").read_text()
    assert "## judge (Table 1 layout)" in index and "The LLM judge's verdict" in index
    assert not (ablation.path / "report").exists()
    assert_one_line_error(invoke("report", ablation.path, "--metric", "EM"), "--metric 'EM'")
    # an explicit --out never lets one metric's report replace another's: the EM report stays whole
    assert invoke("report", ablation.path).exit_code == 0
    em_report = ablation.path / "report"
    before = sorted(p.name for p in em_report.iterdir())
    refused = invoke("report", ablation.path, "--metric", "judge", "--out", em_report)
    assert_one_line_error(refused, "holds a report in another metric (table1.md)", "report-judge/")
    assert sorted(p.name for p in em_report.iterdir()) == before
    again = invoke("report", ablation.path, "--metric", "judge", "--out", out)  # its own metric: replaced
    assert again.exit_code == 0, again.output
    assert_one_line_error(invoke("report", ablation.path, "--out", out), "(table1-judge.md)", "report/")


def test_a_damaged_verdict_is_one_clear_error_not_a_number(ablation):
    from inspo_cli.errors import InspoError

    directory = ablation.runs_dir / "demo-s0/evaluations/step-4"
    rows = [json.loads(line) for line in (directory / "predictions.jsonl").open()]
    rows[0]["judge"] = 4.0
    (directory / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(InspoError, match="a prediction's judge is 4.0, not a score in"):
        collect(ablation, metric="judge")
    rows[0]["judge"] = 1.0
    (directory / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    results = json.loads((directory / "results.json").read_text())
    del results["scores"]["agent"]["world"]["judge_n"]
    (directory / "results.json").write_text(json.dumps(results))
    with pytest.raises(InspoError, match="no count of what it scored"):
        collect(ablation, metric="judge")


def test_a_damaged_judge_entry_is_shown_as_it_is_never_an_exception():
    from inspo_cli.ablation.results import judge_of

    assert judge_of({}) == "unknown judge"
    assert judge_of({"judge": {"identity": "[" * 100_000}}) == "[" * 200 + " (prompt ?)"  # nested past recursion
    assert judge_of({"judge": {"identity": '["openai", "m"]', "prompt_version": "v"}}) == '["openai", "m"] (prompt v)'
    assert judge_of({"judge": {"identity": 7}}) == "7 (prompt ?)"
