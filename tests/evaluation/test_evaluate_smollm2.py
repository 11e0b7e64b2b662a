"""Slow: `inspo evaluate --method agent` with the packaged SmolLM2-135M on a few questions of the bundled world."""

from __future__ import annotations

import json

import pytest
from helpers.cli_helpers import invoke

from inspo_cli.config.instruction_defaults import WORKED_EXAMPLE_INSTRUCTION
from retriever.corpus import Passage

pytestmark = pytest.mark.slow


def test_smollm2_agent_searches_the_world(tmp_path, repo_root):
    out = tmp_path / "eval"
    result = invoke(
        "evaluate",
        "--benchmarks",
        "world",
        "--model",
        "smollm2-135m-instruct",
        "--method",
        "agent",
        "--limit",
        4,
        "--instruction",
        WORKED_EXAMPLE_INSTRUCTION,
        "--out",
        out,
        "--device",
        "cpu",
        "--set",
        "model.chat_template=off",
        "--set",
        "rollout.max_tokens_per_turn=48",
        "--set",
        "rollout.max_turns=2",
    )
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (out / "predictions.jsonl").open()]
    assert len(rows) == 4
    corpus_ids = {Passage.from_row(json.loads(line)).id for line in (repo_root / "data/world/corpus.jsonl").open()}
    searched = [r for r in rows if r["queries"]]
    assert searched, "SmolLM2 made no search with a worked example; the protocol or prompt is broken"
    for row in searched:
        assert "<information>Doc 1(Title: " in row["response"]
        inserted = [s["text"] for s in row["segments"] if s["by"] == "inserted"]  # passages, corrective messages
        assert sum("<information>" in text for text in inserted) == len(row["queries"])
        assert not any("<information>" in s["text"] for s in row["segments"] if s["by"] == "policy")
        assert all(pid in corpus_ids for hits in row["retrieved"] for pid in hits)
    scores = json.loads((out / "results.json").read_text())["scores"]["agent"]["world"]
    assert scores["searches"] == sum(len(r["queries"]) for r in rows) / 4
