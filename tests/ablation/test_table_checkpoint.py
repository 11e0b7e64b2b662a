"""The tables report each run at App. B's checkpoint (before any reward collapse), say which step they used, and
compare variants question by question. Run directories are written here as training leaves them (no model)."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from helpers.cli_helpers import assert_one_line_error, invoke

from inspo_cli.ablation import runner
from inspo_cli.ablation.directory import AblationDir
from inspo_cli.ablation.results import choose_step, read_result
from inspo_cli.ablation.sweep import plan_sweep
from inspo_cli.ablation.table import collect
from inspo_cli.ablation.table_files import write_table
from inspo_cli.config import dump_recipe, load_recipe

STEADY = [0.2, 0.3, 0.3, 0.4, 0.4, 0.4, 0.5, 0.5]
COLLAPSING = [0.3, 0.3, 0.5, 0.5, 0.1, 0.1, 0.0, 0.0]  # windows of 2: best 0.5 (steps 3-4), then 0.1 at step 6


def write_evaluation(run, step: int, answers: np.ndarray) -> None:
    out = run / f"evaluations/step-{step}"
    out.mkdir(parents=True)
    em = float(answers.mean())
    (out / "results.json").write_text(
        json.dumps(
            {"scores": {"agent": {"world": {"em": em, "f1": em, "subem": em, "searches": 1.0, "n": len(answers)}}}}
        )
    )
    (out / "predictions.jsonl").write_text(
        "".join(
            json.dumps({"method": "agent", "benchmark": "world", "id": f"w{i}", "em": float(a)}) + "\n"
            for i, a in enumerate(answers)
        )
    )


def write_run(
    ablation: AblationDir, variant: str, seed: int, rewards, evaluations: dict[int, np.ndarray], checkpoints=()
) -> None:
    run = ablation.runs_dir / f"{variant}-s{seed}"
    run.mkdir(parents=True)
    recipe = load_recipe(ablation.recipe_file(variant), [f"run.seed={seed}"])
    (run / "recipe.yaml").write_text(dump_recipe(recipe))
    (run / "run.json").write_text("{}")
    (run / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": i + 1, "reward": r}) + "\n" for i, r in enumerate(rewards))
    )
    (run / "summary.json").write_text(json.dumps({"steps": len(rewards), "best_instruction": "Answer."}))
    for step, answers in evaluations.items():
        write_evaluation(run, step, answers)
    for update in checkpoints:  # what RunDir.checkpoints() accepts as complete
        (run / f"checkpoints/checkpoint-{update}/global_step{update}").mkdir(parents=True)
        (run / f"checkpoints/checkpoint-{update}/trainer_state.json").write_text("{}")


@pytest.fixture
def ablation(tmp_path, repo_root, monkeypatch):
    """INSPO and Search-R1, seeds 0-2, 8 steps, evaluated on 60 questions at steps 4 and 8. inspo-s1's reward
    collapses after step 4, where its EM was much better than at the end."""
    monkeypatch.chdir(repo_root)
    plan = plan_sweep(
        {
            "recipe": "recipes/demo.yaml",
            "seeds": [0, 1, 2],
            "set": ["evaluation.collapse_window=2", "training.eval_every=4"],
            "variants": {"inspo": [], "search-r1": ["population.enabled=false"]},
        },
        "world.yaml",
    )
    abl = AblationDir.start(tmp_path / "abl", plan)
    rng = np.random.default_rng(0)
    hard = rng.random(60)  # how hard each question is, shared by every run
    for seed in (0, 1, 2):
        base = (hard < 0.3).astype(float)
        better = np.maximum(base, (rng.random(60) < 0.15).astype(float))
        write_run(abl, "search-r1", seed, STEADY, {4: base, 8: base})
        if seed == 1:
            write_run(abl, "inspo", seed, COLLAPSING, {4: better, 8: np.zeros(60)})
        else:
            write_run(abl, "inspo", seed, STEADY, {4: base, 8: better})
    return abl


def test_the_papers_checkpoint_rule_is_what_the_table_uses(ablation):
    collapsed = ablation.runs_dir / "inspo-s1"
    from inspo_cli.runs import RunDir

    choice = choose_step(RunDir(collapsed), "best")
    assert (choice.step, choice.last_step, choice.collapse["peak_step"], choice.collapse["detected_at"]) == (4, 8, 4, 6)
    assert choose_step(RunDir(collapsed), "final").step == 8
    best, final = collect(ablation, "best"), collect(ablation, "final")
    inspo_best, inspo_final = best["rows"][0], final["rows"][0]
    assert [(r["seed"], r["step"], r["collapsed"]) for r in inspo_best["runs"]] == [
        (0, 8, False),
        (1, 4, True),
        (2, 8, False),
    ]
    assert [r["step"] for r in inspo_final["runs"]] == [8, 8, 8]
    # the means are those of the steps used
    em = {s: read_result(RunDir(ablation.runs_dir / f"inspo-s{s}"), s, "best")[0].em["world"] for s in (0, 1, 2)}
    assert inspo_best["average"]["mean"] == pytest.approx(np.mean(list(em.values())))
    assert inspo_final["average"]["mean"] < inspo_best["average"]["mean"]  # seed 1's collapse is left out
    assert best["rule"] == "best" and "before any reward collapse" in best["rule_text"]


def test_the_table_compares_with_search_r1_paired_by_seed_and_question(ablation):
    table = collect(ablation, "best")
    assert table["reference"] == "search-r1" and [c["variant"] for c in table["comparisons"]] == ["inspo"]
    c = table["comparisons"][0]["average"]
    assert c["paired_seeds"] and c["paired_questions"] and c["questions"] == 60 and c["seeds"] == [3, 3]
    assert c["diff"] > 0 and c["low"] < c["diff"] < c["high"] and 0 <= c["p"] <= 1
    write_table(ablation, table)
    md = (ablation.path / "ablation.md").read_text()
    assert "| inspo | (base recipe) | 3 | 8, 4, 8 (s1: reward collapse) |" in md
    assert "| inspo-s1 | 1 | 4 of 8 | at step 6 (peak 4) |" in md
    assert f"- inspo − search-r1 on world: {c['diff']:+.3f}" in md and "with 3 seeds × 60 questions." in md
    assert "- inspo vs search-r1: with 3 seeds × 60 questions the smallest difference found with 80% power" in md
    assert "needs" in md.split("Power (80%")[1]


def test_ablate_evaluates_the_checkpoint_before_a_collapse_when_it_has_no_evaluation(ablation, monkeypatch):
    from inspo_cli.runs import RunDir

    run = RunDir(ablation.runs_dir / "inspo-s1")
    for name in ("results.json", "predictions.jsonl"):
        (run.evaluation_dir(4) / name).unlink()
    (run.evaluation_dir(4)).rmdir()
    assert choose_step(run, "best").step is None  # no evaluation and no checkpoint by the peak: nothing to report
    assert "report its final policy with --checkpoint final" in read_result(run, 1, "best")[1]
    (run.path / "checkpoints/checkpoint-4/global_step4").mkdir(parents=True)
    (run.path / "checkpoints/checkpoint-4/trainer_state.json").write_text("{}")
    result, why = read_result(run, 1, "best")
    assert result is None and "App. B's checkpoint is step 4" in why and "`inspo ablate` evaluates it" in why
    evaluated = []

    def evaluate_step(directory, step, out_dir, device):  # the model-loading seam: what would be evaluated where
        evaluated.append((directory.path.name, step, out_dir))
        write_evaluation(directory.path, step, np.ones(60))

    monkeypatch.setattr(runner, "evaluate_step", evaluate_step)
    monkeypatch.setattr("inspo_cli.experiment.run", lambda *a, **k: pytest.fail("finished runs are not retrained"))
    outcome = runner.run_plan(ablation, rule="best")
    assert evaluated == [("inspo-s1", 4, run.evaluation_dir(4))] and outcome.failed == []
    assert read_result(run, 1, "best")[0].em["world"] == 1.0


def test_the_command_line_chooses_the_checkpoint_and_the_reference(ablation, tmp_path):
    result = invoke("ablate", "--collect", ablation.path, "--checkpoint", "final", "--reference", "inspo", "--json")
    assert result.exit_code == 0, result.output
    table = json.loads(result.stdout)
    assert table["rule"] == "final" and table["reference"] == "inspo"
    assert [c["variant"] for c in table["comparisons"]] == ["search-r1"]
    assert_one_line_error(invoke("ablate", "--collect", ablation.path, "--checkpoint", "last"), "--checkpoint 'last'")
    assert_one_line_error(
        invoke("ablate", "--collect", ablation.path, "--reference", "sft"), "--reference 'sft' is not a variant"
    )
    assert_one_line_error(invoke("report", ablation.path, "--target-diff", "0"), "--target-diff 0.0")
    out = tmp_path / "report"
    result = invoke("report", ablation.path, "--out", out, "--target-diff", "0.1")
    assert result.exit_code == 0, result.output
    md = (out / "table1.md").read_text()
    assert "| inspo | 3 | 8, 4, 8 (s1: reward collapse) |" in md and "a difference of 0.1 needs" in md
    # the CSV's steps are the checkpoints reported (step 4 for the seed whose reward collapsed), and the LaTeX
    # interval is the JSON's, low then high
    steps = {row["method"]: row["steps"] for row in csv.DictReader((out / "table1.csv").open())}
    assert steps["inspo"] == "8 4 8"
    average = json.loads((out / "table1.json").read_text())["comparisons"][0]["average"]
    assert f"[${average['low']:+.3f}$, ${average['high']:+.3f}$]" in (out / "table1.tex").read_text()
    power = json.loads((out / "table1.json").read_text())["comparisons"][0]["power"]
    assert power["target_diff"] == 0.1
    # the seeds each target needs are the target's own: 0.05 (the default) is within reach of 3 seeds, 0.02 is not
    assert invoke("report", ablation.path, "--out", tmp_path / "small", "--target-diff", "0.02").exit_code == 0
    small = json.loads((tmp_path / "small/table1.json").read_text())["comparisons"][0]["power"]
    assert invoke("report", ablation.path, "--out", tmp_path / "default").exit_code == 0
    default = json.loads((tmp_path / "default/table1.json").read_text())["comparisons"][0]["power"]
    assert default["target_diff"] == 0.05 and small["seeds_needed"] != default["seeds_needed"]
    assert "### Differences to search-r1" in (out / "index.md").read_text()


def test_an_evaluation_cell_is_reused_only_for_the_same_limit_and_for_a_sampled_one_the_same_seed(repo_root):
    """The cache key of an ablation cell: a cell scored on 100 questions is not a cell of 200, and a sampled evaluation
    (temperature > 0) of another seed is another draw; a greedy one does not depend on the seed."""
    from inspo_cli.ablation.cells import cell_key
    from inspo_cli.config import load_recipe

    def key(sets, seed=0):
        recipe = load_recipe(repo_root / "recipes/demo.yaml", sets, check_paths=False)
        return cell_key("m", "Answer. {question}", recipe, seed)

    assert key(["evaluation.limit=100"]) != key(["evaluation.limit=200"])
    assert key(["evaluation.temperature=0"], seed=0) == key(["evaluation.temperature=0"], seed=1)
    assert key(["evaluation.temperature=0.7"], seed=0) != key(["evaluation.temperature=0.7"], seed=1)


def test_predictions_missing_a_benchmark_give_no_per_question_results_rather_than_a_partial_set(tmp_path):
    """A predictions.jsonl that lost one benchmark's rows: the cell falls back to seed-level error everywhere, never
    per-question error computed on the benchmarks that happen to be there."""
    import json

    from inspo_cli.ablation.results import read_scores

    cell = {"em": 0.75, "f1": 0.75, "subem": 0.75, "searches": 1.0, "n": 4}
    (tmp_path / "results.json").write_text(json.dumps({"scores": {"agent": {"nq": cell, "hotpotqa": cell}}}))
    rows = [{"method": "agent", "benchmark": "nq", "id": i, "em": v} for i, v in enumerate([1.0, 0.0, 1.0, 1.0])]
    (tmp_path / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    em, n, questions = read_scores(tmp_path / "results.json", "fix")
    assert em == {"nq": 0.75, "hotpotqa": 0.75} and questions is None
