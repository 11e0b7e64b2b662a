"""Cost beside every difference: hours from wall time and processes, optimizer calls, tokens and dollars from the
run's record, means over seeds, one line per comparison; and never a number the run cannot tell."""

from __future__ import annotations

import json

import pytest
from helpers.cli_helpers import invoke
from helpers.run_dirs import make_run

from inspo_cli.ablation.cost import cost_line, cost_sentence, run_cost, variant_cost
from inspo_cli.reporting.report import overhead_rows
from inspo_cli.reporting.sources import load_groups
from inspo_cli.runs import RunDir


def set_summary(run, **fields) -> None:
    summary = json.loads((run / "summary.json").read_text())
    (run / "summary.json").write_text(json.dumps({**summary, **fields}))


def record(run, *calls) -> None:
    """optimizer_calls.jsonl lines as the record writes them: (input tokens, output tokens, cost or None, answered)."""
    rows = [
        {
            "hash": f"sha256:{i}",
            "provider": "gemini",
            "model": "gemini-2.5-pro",
            "parameters": {},
            "prompt": "p",
            "answer": "a" if answered else None,
            "truncated": False if answered else None,
            "stop_reason": None,
            "input_tokens": i_tok if answered else 0,
            "output_tokens": o_tok if answered else 0,
            "latency_s": 1.0,
            "error": None if answered else "HTTP 500",
            "cost_usd": cost if answered else None,
        }
        for i, (i_tok, o_tok, cost, answered) in enumerate(calls)
    ]
    (run / "optimizer_calls.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture
def runs(tmp_path, repo_root, monkeypatch):
    monkeypatch.chdir(repo_root)
    root = tmp_path / "runs"
    made = {}
    for seed in (0, 1):
        inspo = make_run(root, f"inspo-s{seed}", seed, [0.1, 0.3, 0.5], 0.30 + 0.1 * seed)
        static = make_run(root, f"static-s{seed}", seed, [0.2, 0.2, 0.2], 0.20 + 0.1 * seed, population=False)
        set_summary(inspo, wall_seconds=3600.0 * (1 + seed) * 1.1, compute={"processes": 8, "device": "cuda"})
        set_summary(static, wall_seconds=3600.0 * (1 + seed), compute={"processes": 8, "device": "cuda"})
        record(inspo, (1000, 500, 6.0, True), (2000, 0, None, False), (1000, 1500, 6.0, True))
        made[("inspo", seed)], made[("static", seed)] = inspo, static
    return made


def test_a_runs_cost_is_its_wall_time_times_processes_and_its_records_totals(runs):
    cost = run_cost(RunDir(runs[("inspo", 1)]))
    assert cost["hours"] == pytest.approx(2 * 1.1 * 8) and cost["gpu_hours"] == cost["hours"]
    assert (cost["optimizer_calls"], cost["tokens"], cost["cost_usd"]) == (2, 4000, 12.0)  # the failed call: none
    assert cost["evolution_share"] == 0.1
    static = run_cost(RunDir(runs[("static", 0)]))
    assert (static["optimizer_calls"], static["tokens"], static["cost_usd"], static["evolution_share"]) == (
        0,
        0,
        0.0,
        0.0,
    )


def test_what_a_run_cannot_tell_is_unknown_never_a_guess(runs):
    run = runs[("inspo", 0)]
    summary = json.loads((run / "summary.json").read_text())
    del summary["compute"]  # a run finished before summaries recorded processes and device
    (run / "summary.json").write_text(json.dumps(summary))
    record(run, (1000, 500, 6.0, True), (1000, 500, None, True))  # one answered call without a price
    cost = run_cost(RunDir(run))
    assert cost["hours"] is None and cost["gpu_hours"] is None and cost["cost_usd"] is None
    assert cost["tokens"] == 3000
    (run / "optimizer_calls.jsonl").unlink()  # no record: the summary's counts, no dollars
    cost = run_cost(RunDir(run))
    assert (cost["optimizer_calls"], cost["tokens"], cost["cost_usd"]) == (2, 900, None)
    mean = variant_cost([cost, run_cost(RunDir(runs[("inspo", 1)]))])
    assert mean["hours"] is None and mean["cost_usd"] is None  # not the mean of the one seed that has it
    assert mean["tokens"] == pytest.approx((900 + 4000) / 2)


def test_a_cpu_run_counts_process_hours_not_gpu_hours(runs):
    set_summary(runs[("static", 0)], compute={"processes": 1, "device": "cpu"})
    cost = run_cost(RunDir(runs[("static", 0)]))
    assert cost["hours"] == pytest.approx(1.0) and cost["gpu_hours"] is None
    assert cost_sentence(variant_cost([cost]), variant_cost([cost])).startswith("for +0% CPU process-hours")


def test_the_comparison_line_says_the_difference_and_what_it_cost():
    variant = {"hours": 103.0, "cost_usd": 12.0, "optimizer_calls": 4.0, "tokens": 5000.0, "device": "cuda"}
    reference = {"hours": 100.0, "cost_usd": 0.0, "optimizer_calls": 0.0, "tokens": 0.0, "device": "cuda"}
    line = cost_line("inspo", "search-r1", {"diff": 0.04, "low": 0.01, "high": 0.07, "p": 0.012}, variant, reference)
    assert line == (
        "inspo vs search-r1: +0.040 EM [+0.010, +0.070], p = 0.012, for +3% GPU-hours and $12.00 more "
        "of optimizer calls per run"
    )
    unpriced = {**variant, "cost_usd": None}
    assert cost_sentence(unpriced, reference) == (
        "for +3% GPU-hours and 4 optimizer calls and 5,000 tokens per run (price unknown)"
    )


def test_the_report_puts_the_cost_table_and_lines_beside_the_differences(runs, tmp_path):
    result = invoke(
        "report",
        *[runs[(v, s)] for v in ("inspo", "static") for s in (0, 1)],
        "--out",
        tmp_path / "report",
        "--reference",
        "static",
    )
    assert result.exit_code == 0, result.output
    text = (tmp_path / "report" / "table1.md").read_text()
    assert "## What each variant cost" in text
    assert "| inspo | 2 | 13.200 (GPU-hours) | 2.0 | 4,000 | $12.00 | 10.0% |" in text
    assert "| static | 2 | 12.000 (GPU-hours) | 0.0 | 0 | $0.00 | 0.0% |" in text
    assert "- inspo vs static: +0.100 EM for +10% GPU-hours and $12.00 more of optimizer calls per run." in text
    table = json.loads((tmp_path / "report" / "table1.json").read_text())
    assert table["rows"][0]["cost"]["gpu_hours"] == pytest.approx(13.2)


def test_a_run_without_a_result_adds_nothing_to_its_variants_cost(runs, tmp_path, repo_root):
    """A third inspo seed that was never evaluated (40 hours): the table's cost is that of the runs it holds."""
    unevaluated = make_run(tmp_path / "runs", "inspo-s2", 2, [0.1, 0.3, 0.5], None)
    set_summary(unevaluated, wall_seconds=3600.0 * 40, compute={"processes": 8, "device": "cuda"})
    every = [*[runs[(v, s)] for v in ("inspo", "static") for s in (0, 1)], unevaluated]
    result = invoke("report", *every, "--out", tmp_path / "report", "--reference", "static")
    assert result.exit_code == 0, result.output
    text = (tmp_path / "report" / "table1.md").read_text()
    assert "| inspo | 2 | 13.200 (GPU-hours) | 2.0 | 4,000 | $12.00 | 10.0% |" in text


def test_a_population_that_never_evolved_spent_nothing_on_the_optimizer(runs):
    """Fig. 3's constant population: no evolution, no optimizer, no record."""
    run = runs[("inspo", 0)]
    (run / "optimizer_calls.jsonl").unlink()
    set_summary(
        run,
        overhead={
            "evolutions": 0,
            "evolution_seconds": 0,
            "share_of_wall_time": 0.0,
            "verification_rollouts": 0,
            "training_rollouts": 128,
            "optimizer": None,
        },
    )
    cost = run_cost(RunDir(run))
    assert (cost["optimizer_calls"], cost["tokens"], cost["cost_usd"], cost["evolution_share"]) == (0, 0, 0.0, 0.0)
    # App. C's table says the same: 0 calls and 0 tokens, not unknown ones
    row = next(r for r in overhead_rows(load_groups([run])) if r[1] == run.name)
    assert row[2:5] == [0, 0, 0]
