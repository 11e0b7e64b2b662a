"""`inspo ablate --replay-optimizer` (issue 51): an ablation of an evolving variant and Fig. 3's constant population
over two seeds, recorded with a scripted optimizer that answers every call differently, replays with the optimizer
unreachable into exactly each run's own lineage: no run is answered with another seed's or variant's calls."""

from __future__ import annotations

import pytest
from helpers.cli_helpers import invoke
from helpers.fake_providers import ScriptedOptimizer
from helpers.runs import write_inspo_recipe

# A different answer to every call (60 > the calls of the 4 runs): a run answered from another's record would have
# other instructions
DISTINCT_ANSWERS = [
    f"<ins_1>Look it up first ({i}). Question: {{question}}\n</ins_1><ins_2>Answer briefly ({i}). "
    f"Question: {{question}}\n</ins_2><ins_3>Check twice ({i}). Question: {{question}}\n</ins_3>"
    for i in range(60)
]


@pytest.mark.slow
def test_a_two_seed_ablation_replays_into_exactly_each_runs_lineage(tmp_path, repo_root, tiny_model_dir, monkeypatch):
    monkeypatch.setenv("SCRIPTED_KEY", "sk-test-not-a-secret")
    optimizer = ScriptedOptimizer(DISTINCT_ANSWERS)
    recipe = write_inspo_recipe(tmp_path, repo_root, str(tiny_model_dir), optimizer.url)
    # the initial rewrites: every run's first call, the same prompt in all four
    recipe.write_text(recipe.read_text().replace("population:\n", "population:\n  initial_rewrites: true\n", 1))
    args = ["ablate", "--recipe", recipe, "--components", "full,constant", "--seeds", "0,1", "--device", "cpu"]
    recorded, replayed = tmp_path / "recorded", tmp_path / "replayed"
    result = invoke(*args, "--out", recorded)
    assert result.exit_code == 0, result.output
    runs = sorted(p.name for p in (recorded / "runs").iterdir())
    assert len(runs) == 4 and len(optimizer.prompts) > 4  # the constant runs' rewrites, the full runs' evolutions too
    lineage = {run: (recorded / "runs" / run / "instructions.jsonl").read_text() for run in runs}
    assert len(set(lineage.values())) == 4  # every run's instructions are its own

    optimizer.server.shutdown()  # unreachable now, and no key either
    optimizer.server.server_close()
    monkeypatch.delenv("SCRIPTED_KEY")
    calls = len(optimizer.prompts)
    result = invoke(*args, "--out", replayed, "--replay-optimizer", recorded)
    assert result.exit_code == 0, result.output
    assert "failed" not in result.output and len(optimizer.prompts) == calls
    for run in runs:
        assert (replayed / "runs" / run / "instructions.jsonl").read_text() == lineage[run], run
        assert (replayed / "runs" / run / "best_instruction.txt").read_text() == (
            recorded / "runs" / run / "best_instruction.txt"
        ).read_text(), run
