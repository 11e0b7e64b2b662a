"""`inspo report`'s tool use per method (issue 40, item 5): calls per question by tool in the evaluation Table 1
uses, calls and errors per trajectory at training's last logged step, means over seeds checked against values
worked out by hand on run directories written here (no model); mixed tools never averaged; search-only runs leave
the report byte for byte as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.cli_helpers import invoke
from helpers.run_dirs import make_run

from inspo_cli.reporting import report as report_module
from inspo_cli.reporting.report import write_report
from inspo_cli.reporting.sources import load_groups
from inspo_cli.reporting.tools import evaluation_rows, training_rows

CALCULATOR = ("agent.tools=[search, calculator]",)


def set_tools(
    run: Path,
    calls: dict[str, float] | None = None,
    searches: float | None = None,
    training: dict[int, dict[str, tuple[float, float]]] | None = None,
    benchmark: str = "world",
) -> Path:
    """Give a run made by `make_run` what `inspo evaluate` writes for an agent with tools (calls/<tool> per question
    in the policy's scores) and what training logs per step (tools/<tool>/calls, errors, observation tokens)."""
    results = next(run.glob("evaluations/step-*/results.json"), None)
    if results is not None and (calls or searches is not None):
        data = json.loads(results.read_text())
        score = data["scores"]["agent"][benchmark]
        score.update({f"calls/{tool}": value for tool, value in (calls or {}).items()})
        if searches is not None:
            score["searches"] = searches
        results.write_text(json.dumps(data))
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    for row in rows:
        for tool, (tool_calls, errors) in (training or {}).get(row["step"], {}).items():
            row.update(
                {
                    f"tools/{tool}/calls": tool_calls,
                    f"tools/{tool}/errors": errors,
                    f"tools/{tool}/observation_tokens": None if tool_calls is None else 40.0 * tool_calls,
                }
            )
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run


@pytest.fixture
def runs(tmp_path, repo_root, monkeypatch):
    """calc: search and calculator, three seeds evaluated with calls by tool and a fourth evaluated before calls were
    counted; search: the paper's agent, one seed trained with tool metrics (search only), one from before them."""
    monkeypatch.chdir(repo_root)
    root = tmp_path / "runs"
    step1 = {"search": (9.0, 9.0), "calculator": (9.0, 9.0)}  # earlier steps: never the ones reported
    return [
        set_tools(
            make_run(root, "calc-s0", 0, [0.1, 0.3, 0.5], 0.30, overrides=CALCULATOR),
            {"search": 1.5, "calculator": 0.5},
            training={1: step1, 3: {"search": (1.0, 0.0), "calculator": (0.5, 0.25)}},
        ),
        set_tools(
            make_run(root, "calc-s1", 1, [0.3, 0.5, 0.5], 0.40, overrides=CALCULATOR),
            {"search": 2.0, "calculator": 0.25},
            training={1: step1, 3: {"search": (2.0, 0.5), "calculator": (1.0, 0.0)}},
        ),
        # its step 3 logged no tool metrics: its last logged step, 2, is the one reported
        set_tools(
            make_run(root, "calc-s2", 2, [0.2, 0.4, 0.8], 0.50, overrides=CALCULATOR),
            {"search": 1.25, "calculator": 0.125},
            training={1: step1, 2: {"search": (1.5, 0.0), "calculator": (0.75, 0.125)}},
        ),
        make_run(root, "calc-s3", 3, [0.2, 0.4, 0.6], 0.60, overrides=CALCULATOR),  # no calls/ in its evaluation
        set_tools(
            make_run(root, "search-s0", 0, [0.2, 0.2, 0.2], 0.20), searches=1.0, training={3: {"search": (1.25, 0.0)}}
        ),
        set_tools(make_run(root, "search-s1", 1, [0.3, 0.3, 0.3], 0.30), searches=3.0),
    ]


EVALUATION_TABLE = """| method | benchmark | n | search | calculator |
|---|---|---|---|---|
| calc | world | 3 | 1.583 | 0.292 |
| search | world | 2 | 2.000 | - |"""

TRAINING_TABLE = """| method | n | steps | search calls | search errors | calculator calls | calculator errors |
|---|---|---|---|---|---|---|
| calc | 3 | 3, 3, 2 | 1.500 | 0.167 | 0.750 | 0.125 |
| search | 1 | 3 | 1.250 | 0.000 | - | - |"""


def test_calls_per_question_are_the_mean_over_seeds_with_n_and_a_dash_for_a_tool_the_agent_lacked(runs):
    rows, unknown = evaluation_rows(load_groups(runs))
    calc, search = rows
    # search (1.5 + 2.0 + 1.25) / 3, calculator (0.5 + 0.25 + 0.125) / 3; calc-s3 counted none: not averaged in
    assert (calc["n"], calc["runs"]) == (3, ["calc-s0", "calc-s1", "calc-s2"])
    assert calc["calls"] == {"search": pytest.approx(4.75 / 3), "calculator": pytest.approx(0.875 / 3)}
    # the paper's agent: its searches per question are its search calls, (1.0 + 3.0) / 2; no calculator at all
    assert (search["n"], search["calls"]) == (2, {"search": 2.0})
    assert (
        len(unknown) == 1
        and unknown[0].startswith("calc-s3 (its recipe's agent.tools are search, calculator, but ")
        and "evaluate it again" in unknown[0]
    )


def test_training_calls_and_errors_are_each_runs_last_logged_step_averaged(runs):
    rows, unlogged = training_rows(load_groups(runs))
    calc, search = rows
    assert (calc["n"], calc["steps"]) == (3, [3, 3, 2])
    # calls (1.0 + 2.0 + 1.5) / 3 and (0.5 + 1.0 + 0.75) / 3; errors (0 + 0.5 + 0) / 3 and (0.25 + 0 + 0.125) / 3
    assert calc["calls"] == {"search": pytest.approx(1.5), "calculator": pytest.approx(0.75)}
    assert calc["errors"] == {"search": pytest.approx(0.5 / 3), "calculator": pytest.approx(0.125)}
    assert (search["n"], search["calls"], search["errors"]) == (1, {"search": 1.25}, {"search": 0.0})
    assert unlogged == ["calc-s3", "search-s1"]


def test_the_report_has_the_tables_in_index_md_tools_md_and_tools_csv(runs, tmp_path):
    out = tmp_path / "report"
    result = invoke("report", *runs, "--out", out)
    assert result.exit_code == 0, result.output
    index = (out / "index.md").read_text()
    assert "## Tool calls per question" in index and EVALUATION_TABLE in index and TRAINING_TABLE in index
    assert "Calls not known: calc-s3 (its recipe's agent.tools are search, calculator" in index
    assert "No tool metrics in training (runs from before they were logged): calc-s3, search-s1" in index
    assert index.index("![Final EM per variant](bars.png)") < index.index("## Tool calls per question")
    tools = (out / "tools.md").read_text()
    assert tools.startswith("# Tool calls per question\n") and "\n## Tool calls per trajectory in training\n" in tools
    assert EVALUATION_TABLE in tools and TRAINING_TABLE in tools
    assert (out / "tools.csv").read_text().splitlines() == [
        "where,method,benchmark,n,runs,steps,tool,calls,errors",
        "evaluation,calc,world,3,calc-s0 calc-s1 calc-s2,,search,1.5833,",
        "evaluation,calc,world,3,calc-s0 calc-s1 calc-s2,,calculator,0.2917,",
        "evaluation,search,world,2,search-s0 search-s1,,search,2.0000,",
        "training,calc,,3,calc-s0 calc-s1 calc-s2,3 3 2,search,1.5000,0.1667",
        "training,calc,,3,calc-s0 calc-s1 calc-s2,3 3 2,calculator,0.7500,0.1250",
        "training,search,,1,search-s0,3,search,1.2500,0.0000",
    ]
    listed = json.loads((out / ".inspo-report.json").read_text())["files"]
    assert "tools.md" in listed and "tools.csv" in listed


def test_seeds_with_different_tools_get_a_row_each_never_one_mean(tmp_path, repo_root, monkeypatch):
    monkeypatch.chdir(repo_root)
    root = tmp_path / "runs"
    runs = [
        set_tools(
            make_run(root, "mix-s0", 0, [0.1, 0.2], 0.3),
            {"search": 1.0, "calculator": 0.5},
            training={2: {"search": (1.0, 0.0), "calculator": (0.5, 0.0)}},
        ),
        set_tools(make_run(root, "mix-s1", 1, [0.1, 0.2], 0.3), searches=3.0, training={2: {"search": (2.0, 0.5)}}),
        set_tools(
            make_run(root, "mix-s2", 2, [0.1, 0.2], 0.3),
            {"search": 2.0, "calculator": 1.5},
            training={2: {"search": (3.0, 1.0), "calculator": (1.5, 0.5)}},
        ),
    ]
    rows, _ = evaluation_rows(load_groups(runs))
    assert [(r["method"], r["n"], r["calls"]) for r in rows] == [
        ("mix (mix-s0, mix-s2)", 2, {"search": 1.5, "calculator": 1.0}),
        ("mix (mix-s1)", 1, {"search": 3.0}),
    ]
    trained, _ = training_rows(load_groups(runs))
    assert [(r["method"], r["n"], r["calls"], r["errors"]) for r in trained] == [
        ("mix (mix-s0, mix-s2)", 2, {"search": 2.0, "calculator": 1.0}, {"search": 0.5, "calculator": 0.25}),
        ("mix (mix-s1)", 1, {"search": 2.0}, {"search": 0.5}),
    ]


def test_a_null_count_is_shown_as_not_known_and_never_a_traceback(tmp_path, repo_root, monkeypatch):
    """Issue 51, class 6: results.json and metrics.jsonl allow null; a null count is left out, not float(None)."""
    monkeypatch.chdir(repo_root)
    root = tmp_path / "runs"
    runs = [
        set_tools(
            make_run(root, "calc-s0", 0, [0.1, 0.2], 0.3, overrides=CALCULATOR),
            {"search": 1.0, "calculator": None},
            training={1: {"calculator": (0.5, 0.0)}, 2: {"search": (1.0, None), "calculator": (None, None)}},
        ),
        set_tools(
            make_run(root, "calc-s1", 1, [0.1, 0.2], 0.3, overrides=CALCULATOR),
            {"search": 2.0, "calculator": 0.5},
            training={2: {"search": (3.0, 0.5), "calculator": (1.5, 0.5)}},
        ),
    ]
    rows, _ = evaluation_rows(load_groups(runs))
    assert [(r["method"], r["n"], r["calls"]) for r in rows] == [
        ("calc (calc-s0)", 1, {"search": 1.0}),
        ("calc (calc-s1)", 1, {"search": 2.0, "calculator": 0.5}),
    ]
    trained, _ = training_rows(load_groups(runs))  # calc-s0's last logged step, 2, logged search's calls alone
    assert [(r["method"], r["steps"], r["calls"], r["errors"]) for r in trained] == [
        ("calc (calc-s0)", [2], {"search": 1.0}, {"search": None}),
        ("calc (calc-s1)", [2], {"search": 3.0, "calculator": 1.5}, {"search": 0.5, "calculator": 0.5}),
    ]
    out = tmp_path / "report"
    result = invoke("report", *runs, "--out", out)
    assert result.exit_code == 0, result.output
    tools = (out / "tools.md").read_text()
    assert "| calc (calc-s0) | world | 1 | 1.000 | - |" in tools
    assert "| calc (calc-s0) | 1 | 2 | 1.000 | - | - | - |" in tools
    assert "nan" not in tools.lower() and "nan" not in (out / "tools.csv").read_text().lower()


def test_each_benchmark_has_its_own_row(tmp_path, repo_root, monkeypatch):
    monkeypatch.chdir(repo_root)
    root = tmp_path / "runs"
    runs = [make_run(root, f"calc-s{seed}", seed, [0.1, 0.2], 0.3, overrides=CALCULATOR) for seed in (0, 1)]
    for run, (world, nq) in zip(runs, ((0.5, 2.0), (1.0, 0.0))):
        results = run / "evaluations/step-2/results.json"
        data = json.loads(results.read_text())
        score = data["scores"]["agent"]["world"]
        data["scores"]["agent"] = {
            "world": {**score, "calls/search": 1.0, "calls/calculator": world},
            "nq": {**score, "calls/search": 2.0, "calls/calculator": nq},
        }
        results.write_text(json.dumps(data))
    rows, _ = evaluation_rows(load_groups(runs))
    assert [(r["benchmark"], r["n"], r["calls"]) for r in rows] == [
        ("world", 2, {"search": 1.0, "calculator": 0.75}),
        ("nq", 2, {"search": 2.0, "calculator": 1.0}),
    ]


def _files(directory: Path) -> dict[str, bytes]:
    return {p.relative_to(directory).as_posix(): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def test_runs_with_search_alone_leave_the_report_byte_for_byte_as_before(tmp_path, repo_root, monkeypatch):
    monkeypatch.chdir(repo_root)

    def made(root: Path, search_metrics: bool) -> list[Path]:
        training = {step: {"search": (1.0 + step, 0.0)} for step in (1, 2, 3)} if search_metrics else None
        return [
            set_tools(make_run(root, "inspo-s0", 0, [0.1, 0.3, 0.5], 0.30, eval_em={3: 0.30}), training=training),
            set_tools(make_run(root, "inspo-s1", 1, [0.3, 0.5, 0.5], 0.40), training=training),
            make_run(root, "static-s0", 0, [0.2, 0.2, 0.2], 0.20, population=False),
        ]

    plain = load_groups(made(tmp_path / "plain", False))
    write_report(plain, tmp_path / "report")
    # search-only runs trained since tool metrics were logged (tools/search/...) report what runs without them do
    write_report(load_groups(made(tmp_path / "searched", True)), tmp_path / "searched-report")
    monkeypatch.setattr(report_module, "tool_section", lambda *args: [])  # the report without the tool section
    write_report(plain, tmp_path / "before")
    before = _files(tmp_path / "before")
    assert "tools.md" not in before and "index.md" in before and "fig2_training.png" in before
    assert _files(tmp_path / "report") == before
    assert _files(tmp_path / "searched-report") == before
