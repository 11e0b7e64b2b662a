"""results.md and results.csv, what a reader copies into a paper: each table in its own metric, per benchmark and in
the Avg. column, as percentages with one decimal (searches as counts), and the CSV at four decimals."""

from __future__ import annotations

import csv

from inspo_cli.evaluation.report import write_results


def score(em, f1, subem, searches, n=50):
    return {"em": em, "f1": f1, "subem": subem, "searches": searches, "n": n, "seconds": 1.5, "retrieval_seconds": 0.25}


SCORES = {
    "agent": {"nq": score(0.3125, 0.4375, 0.375, 1.25), "hotpotqa": score(0.1875, 0.25, 0.2500, 2.5)},
    "rag": {"nq": score(0.125, 0.1875, 0.15625, 1.0), "hotpotqa": score(0.0625, 0.125, 0.09375, 1.0)},
}


def tables(markdown: str) -> dict[str, list[list[str]]]:
    """Each `## Title` section's table rows, cells stripped, header row first."""
    out, title = {}, None
    for line in markdown.splitlines():
        if line.startswith("## "):
            title, out[line[3:]] = line[3:], []
        elif title and line.startswith("|") and not line.startswith("|---"):
            out[title].append([cell.strip() for cell in line.strip("|").split("|")])
    return out


def test_each_table_of_results_md_is_in_its_own_metric(tmp_path):
    write_results(tmp_path, SCORES, {"model": "m", "limit": 50})
    shown = tables((tmp_path / "results.md").read_text())
    assert list(shown) == ["Exact match (%)", "F1 (%)", "SubEM (%)", "Searches per question"]
    assert shown["Exact match (%)"][0] == ["Method", "NQ", "HotpotQA", "Avg."]
    assert shown["Exact match (%)"][1:] == [["agent", "31.2", "18.8", "25.0"], ["rag", "12.5", "6.2", "9.4"]]
    assert shown["F1 (%)"][1:] == [["agent", "43.8", "25.0", "34.4"], ["rag", "18.8", "12.5", "15.6"]]
    assert shown["SubEM (%)"][1:] == [["agent", "37.5", "25.0", "31.2"], ["rag", "15.6", "9.4", "12.5"]]
    assert shown["Searches per question"][1:] == [["agent", "1.25", "2.50", "1.88"], ["rag", "1.00", "1.00", "1.00"]]


def test_results_csv_keeps_four_decimals_of_every_score(tmp_path):
    write_results(tmp_path, SCORES, {"model": "m"})
    rows = list(csv.DictReader((tmp_path / "results.csv").open()))
    assert [(r["method"], r["benchmark"]) for r in rows] == [
        ("agent", "nq"),
        ("agent", "hotpotqa"),
        ("rag", "nq"),
        ("rag", "hotpotqa"),
    ]
    assert rows[2] == {
        "method": "rag",
        "benchmark": "nq",
        "em": "0.1250",
        "f1": "0.1875",
        "subem": "0.1562",
        "searches": "1.0000",
        "n": "50",
        "seconds": "1.5",
        "retrieval_seconds": "0.25",
    }
