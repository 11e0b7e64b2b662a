"""Slow: `inspo evaluate --method agent` with the packaged SmolLM2-135M on a few questions of the bundled world."""

from __future__ import annotations

import json

import pytest

from retriever.corpus import Passage
from test_cli import invoke

pytestmark = pytest.mark.slow

# A short instruction with one worked example, as plain text: SmolLM2 follows the protocol with it (DESIGN.md §3).
WORKED_EXAMPLE = (
    "Answer the question. To look something up, write <search> your query </search> and the results will appear "
    "between <information> and </information>. When you know the answer, write it as <answer> short answer </answer>.\n"
    "Example:\nQuestion: Who founded Hokin Works?\n<search> Hokin Works founder </search>\n"
    "<information>Doc 1(Title: \"Hokin Works\") Hokin Works was founded by Ada Vell.</information>\n"
    "<answer> Ada Vell </answer>\nQuestion: {question}\n"
)


def test_smollm2_agent_searches_the_world(tmp_path, repo_root):
    out = tmp_path / "eval"
    result = invoke("evaluate", "--benchmarks", "world", "--model", "smollm2-135m-instruct", "--method", "agent",
                    "--limit", 4, "--instruction", WORKED_EXAMPLE, "--out", out, "--device", "cpu",
                    "--set", "model.chat_template=off", "--set", "rollout.max_tokens_per_turn=48",
                    "--set", "rollout.max_turns=2")
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (out / "predictions.jsonl").open()]
    assert len(rows) == 4
    corpus_ids = {Passage.from_row(json.loads(line)).id for line in (repo_root / "data/world/corpus.jsonl").open()}
    searched = [r for r in rows if r["queries"]]
    assert searched, "SmolLM2 made no search with a worked example; the protocol or prompt is broken"
    for row in searched:
        assert "<information>Doc 1(Title: " in row["response"]
        assert all(pid in corpus_ids for hits in row["retrieved"] for pid in hits)
    scores = json.loads((out / "results.json").read_text())["scores"]["agent"]["world"]
    assert scores["searches"] == sum(len(r["queries"]) for r in rows) / 4
