"""`inspo train` without a recipe runs the demo, `inspo evolve` with a frozen policy writes what `inspo train`
would and resumes, and two processes call the optimizer once per proposal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.cli_helpers import invoke
from helpers.fake_providers import ScriptedOptimizer
from helpers.runs import (
    TIMING_KEYS,
    launch_two_processes,
    metrics,
    write_recipe,
)

from inspo_cli.config.instruction_defaults import WORKED_EXAMPLE_INSTRUCTION
from inspo_cli.metric_names import undeclared


@pytest.mark.slow
def test_inspo_train_without_a_recipe_runs_the_demo(tmp_path, repo_root, monkeypatch):
    """The README's first command: `inspo train` trains recipes/demo.yaml (SmolLM2, the world, BM25, INSPO with the
    packaged SmolLM2 as the local optimizer) to the end, and the whole co-evolution loop shows, then the policy is
    evaluated on held-out questions. 2 of the demo's 8 steps, to keep CI short, with its one evolution at step 1
    instead of 2: evolution (step 1), pruning (step 2) and the evaluation after the last step all happen within
    them."""
    monkeypatch.chdir(tmp_path)  # run directories go under ./runs, as for a user
    result = invoke(
        "train", "--set", "training.steps=2", "--set", "population.evolve_every=1", "--set", "population.evolve_until=2"
    )
    assert result.exit_code == 0, result.output
    (run,) = (tmp_path / "runs").iterdir()
    assert run.name.startswith("demo-")
    rows = metrics(run)
    assert [r["step"] for r in rows] == [1, 2]
    assert undeclared({key for row in rows for key in row}) == []  # docs/reference/metrics.md names every one
    summary = json.loads((run / "summary.json").read_text())
    assert summary["steps"] == 2 and (run / "checkpoints/final/model.safetensors").is_file()
    assert f"policy:  runs/{run.name}/checkpoints/final" in result.output
    # one instruction; at step 1 the local optimizer wrote candidates (its answer opened with <ins_1>, so the 135M
    # model's text parses), each verified by 8 rollouts before it could join; pruned again at step 2
    sizes = [r["population/size"] for r in rows]
    assert sizes[0] > 1 and sizes[1] < sizes[0]
    records = [json.loads(line) for line in (run / "instructions.jsonl").read_text().splitlines()]
    assert records[0]["proposer"] == "initial" and records[0]["step_born"] == 0  # the one instruction before
    assert "eval/em" in rows[-1] and (run / "evaluations/step-2/results.json").is_file()  # after the last step
    # the optimizer may be asked again (max_verify_rounds 5) when a 135M model's answer holds no finished candidate
    (evolution,) = json.loads((run / "evolutions.json").read_text())
    assert evolution["step"] == 1 and 1 <= evolution["optimizer_calls"] <= 5 and evolution["candidates"]
    # a 135M model mostly runs into its 160-token limit: the unfinished last block is on record, never verified
    verified = [c for c in evolution["candidates"] if c["reason"] not in ("cut off", "leaked")]
    assert all(c["verification_score"] is not None and c["parent_score"] is not None for c in verified)
    assert all(c["verification_score"] is None for c in evolution["candidates"] if c["reason"] == "cut off")
    assert evolution["truncated_answers"] <= evolution["optimizer_calls"]
    # up to 8 replayed questions per verification (those the optimizer was shown are left out: leak_check), for the
    # parent and each candidate
    rolled_out = len(verified) + evolution["verification_calls"]
    assert rolled_out <= evolution["verification_rollouts"] <= 8 * rolled_out
    assert {r["proposer"] for r in records[1:]} == {"reflection"}
    assert any(r["step_pruned"] for r in records)
    overhead = summary["overhead"]
    assert (
        overhead["optimizer"]["provider"] == "local" and overhead["optimizer"]["calls"] == evolution["optimizer_calls"]
    )
    assert 0 < overhead["share_of_wall_time"] < 1 and overhead["training_rollouts"] == 2 * 16
    assert (run / "best_instruction.txt").read_text().strip() in {r["text"].strip() for r in records}
    # the quick start's last command, `inspo view` on this run: its pages show the run's own files (exported here)
    assert invoke("view", run, "--export", tmp_path / "site").exit_code == 0
    page = (tmp_path / f"site/run/{run.name}/trajectories/step-1-1.html").read_text()
    assert page.count('<article class="traj"') == 8  # save_rollouts 2: two questions' groups of 4
    assert '<span class="policy"' in page and '<span class="inserted"' in page and 'data-type="-"' not in page
    assert "EM at step 2" in (tmp_path / f"site/run/{run.name}/index.html").read_text()
    _browse_the_export(tmp_path / "site", run)


def _browse_the_export(site: Path, run: Path) -> None:
    """The exported pages of the real run in headless Chromium, from files (no server): every page of the run loads
    without a script error, the curves are drawn and the filter hides what the rollout file says is right."""
    import gzip

    from helpers.browser import chromium, visible

    rows = [
        json.loads(line) for line in gzip.decompress((run / "rollouts/step-000001.jsonl.gz").read_bytes()).splitlines()
    ]
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        for name in ("index.html", "trajectories.html", "instructions.html", "evals.html", "evals/step-2-1.html"):
            page.goto((site / f"run/{run.name}/{name}").as_uri())
            assert page.locator("h1").count() == 1, name
        page.goto((site / f"run/{run.name}/index.html").as_uri())
        assert page.locator("svg.chart").count() >= 3  # reward, EM, searches ...
        page.goto((site / f"run/{run.name}/trajectories/step-1-1.html").as_uri())
        page.check("input[name=wrong]")
        assert len(visible(page, "article.traj")) == sum(r["em"] < 1 for r in rows)
        assert errors == []


@pytest.mark.slow
def test_inspo_evolve_with_a_frozen_policy_writes_the_same_outputs_and_resumes(
    tmp_path, repo_root, tiny_model_dir, monkeypatch
):
    monkeypatch.setenv("SCRIPTED_KEY", "sk-test-not-a-secret")
    optimizer = ScriptedOptimizer(
        ["<ins_1>Look it up first. Question: {question}\n</ins_1><ins_2>Answer briefly. Question: {question}\n</ins_2>"]
    )
    population = {
        "enabled": True,
        "instructions": [WORKED_EXAMPLE_INSTRUCTION, "Search, then answer. Question: {question}\n"],
        "size": 3,
        "n_parent": 1,
        "prune_every": 1,
        "evolve_every": 2,
        "evolve_until": 3,
        "candidates_per_call": 2,
        "failures_per_call": 2,
        "verify_size": 2,
        "accept_top_n": 1,
    }
    recipe = write_recipe(tmp_path, repo_root, str(tiny_model_dir), population=population, training={"steps": 3})
    recipe.write_text(
        recipe.read_text() + f"optimizer:\n  provider: openai\n  model: scripted\n  base_url: "
        f"{optimizer.url}\n  api_key_env: SCRIPTED_KEY\n  max_retries: 0\n"
    )
    runs = tmp_path / "runs"
    result = invoke("evolve", "--recipe", recipe, "--output-dir", runs, "--name", "straight", "--device", "cpu")
    assert result.exit_code == 0, result.output
    run = runs / "straight"
    rows = metrics(run)
    assert [r["step"] for r in rows] == [1, 2, 3] and [r.get("population/evolved", 0) for r in rows] == [0, 1, 0]
    assert {"reward", "em", "search/searches_per_trajectory", "population/size"} <= set(rows[0])
    (evolution,) = json.loads((run / "evolutions.json").read_text())
    assert any(c["reason"] == "accepted" for c in evolution["candidates"])
    summary = json.loads((run / "summary.json").read_text())
    assert summary["frozen_policy"] and summary["overhead"]["verification_rollouts"] > 0
    assert (run / "best_instruction.txt").read_text().strip() == summary["best_instruction"].strip()
    assert not (run / "checkpoints").exists()  # the policy never changes

    # a run stopped after step 2 (its recipe said 2 steps), then told to go on to 3 and resumed
    result = invoke(
        "evolve",
        "--recipe",
        recipe,
        "--output-dir",
        runs,
        "--name",
        "resumed",
        "--device",
        "cpu",
        "--set",
        "training.steps=2",
    )
    assert result.exit_code == 0, result.output
    resumed = runs / "resumed"
    (resumed / "summary.json").unlink()
    (resumed / "recipe.yaml").write_text((resumed / "recipe.yaml").read_text().replace("steps: 2", "steps: 3"))
    result = invoke("evolve", "--resume", resumed, "--device", "cpu")
    assert result.exit_code == 0, result.output
    assert (resumed / "instructions.jsonl").read_text() == (run / "instructions.jsonl").read_text()
    strip = lambda rows: [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in rows]  # noqa: E731
    for have, want in zip(strip(metrics(resumed)), strip(metrics(run)), strict=True):
        assert have == pytest.approx(want)


@pytest.mark.slow
def test_inspo_with_two_processes_calls_the_optimizer_once_per_proposal(tmp_path, repo_root, tiny_model_dir):
    """Under `accelerate launch` only the main process calls the optimizer; every rank accepts the same candidates
    (or the ranks would disagree on the population and the run would fail or diverge)."""
    optimizer = ScriptedOptimizer(
        ["<ins_1>Look it up first. Question: {question}\n</ins_1><ins_2>Answer briefly. Question: {question}\n</ins_2>"]
    )
    population = {
        "enabled": True,
        "instructions": [WORKED_EXAMPLE_INSTRUCTION, "Search, then answer. Question: {question}\n"],
        "size": 3,
        "n_parent": 1,
        "prune_every": 1,
        "evolve_every": 2,
        "evolve_until": 3,
        "candidates_per_call": 2,
        "failures_per_call": 2,
        "verify_size": 4,
        "accept_top_n": 1,
    }
    recipe = write_recipe(
        tmp_path,
        repo_root,
        str(tiny_model_dir),
        population=population,
        training={"steps": 3, "save_every": 1, "micro_batch_size": 2},
    )
    recipe.write_text(
        recipe.read_text() + f"optimizer:\n  provider: openai\n  model: scripted\n  base_url: "
        f"{optimizer.url}\n  api_key_env: SCRIPTED_KEY\n  max_retries: 0\n"
    )
    done = launch_two_processes(
        repo_root,
        "train",
        "--recipe",
        str(recipe),
        "--output-dir",
        str(tmp_path / "runs"),
        "--name",
        "mp",
        env={"SCRIPTED_KEY": "k"},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run = tmp_path / "runs/mp"
    (evolution,) = json.loads((run / "evolutions.json").read_text())
    assert len(optimizer.prompts) == evolution["optimizer_calls"] == 2  # one per proposal, not one per rank
    assert [r["population/size"] for r in metrics(run)] == [1, 3, 2]
