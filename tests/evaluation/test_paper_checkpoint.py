"""App. B's checkpoint ("evaluated every 100 steps, and we report the final checkpoint before any reward collapse") is
chosen among the evaluated steps only, by the tables and by `inspo evaluate`, which reports it by default; and the
recipes with Search-R1's own script settings load, differ from App. B's matched baseline only in those settings, and
hand TRL a schedule that really warms up."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml
from helpers.cli_helpers import assert_one_line_error, invoke

from inspo_cli.ablation.results import choose_step
from inspo_cli.config import dump_recipe, load_recipe
from inspo_cli.evaluation.checkpoints import default_checkpoint, paper_choice
from inspo_cli.runs import RunDir

# windows of 2: the mean peaks over steps 5-6 (0.65) and falls below half of it at step 8
COLLAPSING = [0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.1, 0.0]


def write_run(path, repo_root, sets, checkpoints, evaluations=(), model=None, finished=True, rewards=COLLAPSING):
    """A demo-recipe run as training leaves it (the static instruction: no population to save), one optimizer update
    per step, with checkpoints after `checkpoints` (holding `model` when given) and evaluations at `evaluations`."""
    recipe = load_recipe(
        repo_root / "recipes/demo.yaml", ["population.enabled=false", "evaluation.collapse_window=2", *sets]
    )
    path.mkdir(parents=True)
    (path / "recipe.yaml").write_text(dump_recipe(recipe))
    (path / "run.json").write_text("{}")
    (path / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": i, "update": i, "reward": r}) + "\n" for i, r in enumerate(rewards, start=1))
    )
    for step in checkpoints:
        folder = path / f"checkpoints/checkpoint-{step}"
        if model is not None:
            shutil.copytree(model, folder)
        (folder / f"global_step{step}").mkdir(parents=True)
        (folder / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    for step in evaluations:
        out = path / f"evaluations/step-{step}"
        out.mkdir(parents=True)
        (out / "results.json").write_text(
            json.dumps({"scores": {"agent": {"world": {"em": 0.5, "f1": 0.5, "subem": 0.5, "searches": 1.0, "n": 2}}}})
        )
    if finished:
        if model is not None:
            shutil.copytree(model, path / "checkpoints/final")
        (path / "summary.json").write_text(json.dumps({"steps": len(rewards), "best_instruction": "Answer."}))
    return RunDir(path)


def test_best_is_the_last_evaluated_step_before_the_collapse_never_a_save_in_between(tmp_path, repo_root):
    """Saved every 2 steps, evaluated every 4: the reward peaks at step 6, a save; App. B evaluated step 4."""
    run = write_run(
        tmp_path / "run",
        repo_root,
        ["training.eval_every=4", "training.save_every=2"],
        checkpoints=(2, 4, 6),
        evaluations=(4, 8),
    )
    choice = choose_step(run, "best")
    assert (choice.step, choice.collapse["peak_step"], choice.collapse["detected_at"]) == (4, 6, 8)
    assert paper_choice(run, run.recipe()) == "4"  # `inspo evaluate --checkpoint best` and summary.json agree
    assert choose_step(run, "final").step == 8


def test_a_checkpoint_after_the_peak_but_before_the_collapse_is_seen_is_never_the_choice(tmp_path, repo_root):
    """The reward peaks at step 6 and the collapse is seen at step 8; step 7's save is already past the peak."""
    run = write_run(
        tmp_path / "run", repo_root, ["training.eval_every=0", "training.save_every=1"], checkpoints=(5, 6, 7)
    )
    assert paper_choice(run, run.recipe()) == "6"


def test_without_a_collapse_or_a_final_policy_the_newest_checkpoint_is_the_choice(tmp_path, repo_root):
    rising = [0.1 * i for i in range(1, 9)]
    run = write_run(
        tmp_path / "run",
        repo_root,
        ["training.save_every=2"],
        checkpoints=(2, 4, 6),
        finished=False,
        rewards=rising,
    )
    assert paper_choice(run, run.recipe()) == "6"


def test_steps_are_training_steps_when_a_step_makes_several_updates(tmp_path, repo_root):
    """The paper's 10 optimizer updates per step: checkpoint-60 holds step 6, and --checkpoint 6 names it."""
    from inspo_cli.config.batch_plan import batch_plan
    from inspo_cli.evaluation.checkpoints import checkpoint_steps

    sets = ["training.mini_batch_trajectories=4", "training.micro_batch_size=4"]
    recipe = load_recipe(repo_root / "recipes/demo.yaml", sets)
    per_step = batch_plan(recipe).updates_per_step
    assert per_step > 1
    run = write_run(tmp_path / "run", repo_root, sets, checkpoints=(2 * per_step, 4 * per_step, 6 * per_step))
    assert sorted(checkpoint_steps(run, run.recipe())) == [2, 4, 6]


def test_without_evaluation_during_training_every_save_is_a_candidate(tmp_path, repo_root):
    run = write_run(
        tmp_path / "run", repo_root, ["training.eval_every=0", "training.save_every=2"], checkpoints=(2, 4, 6)
    )
    assert choose_step(run, "best").step == 6 and paper_choice(run, run.recipe()) == "6"


def test_no_evaluated_step_before_the_peak_is_said_in_one_line(tmp_path, repo_root):
    """Evaluated every 8 steps: nothing the paper would have evaluated lies before the peak at step 6."""
    run = write_run(
        tmp_path / "run",
        repo_root,
        ["training.eval_every=8", "training.save_every=2"],
        checkpoints=(2, 4, 6),
        evaluations=(8,),
    )
    choice = choose_step(run, "best")
    assert choice.step is None and "evaluation interval (every 8 steps" in choice.why
    assert "--checkpoint final" in choice.why
    result = invoke("evaluate", "--run", run.path, "--device", "cpu")
    assert_one_line_error(
        result,
        "reward collapse at step 8",
        "(every 8 steps, training.eval_every) by step 6",
        "--checkpoint final",
        "--checkpoint N",
        "checkpoints at steps 2, 4, 6",
    )
    assert not list(run.path.glob("eval-*"))  # nothing written


def test_evaluate_takes_app_b_s_checkpoint_unless_told_otherwise(tmp_path, repo_root):
    finished = write_run(tmp_path / "done", repo_root, ["training.eval_every=4"], checkpoints=(4, 6))
    assert default_checkpoint(finished) == "best"
    unfinished = write_run(tmp_path / "live", repo_root, [], checkpoints=(4,), finished=False)
    assert default_checkpoint(unfinished) is None  # no final policy yet: the newest checkpoint
    for extra in ({"frozen_policy": True}, {"stage": "pre-rl", "model": "stages/x/checkpoints/final"}):
        (finished.summary_file).write_text(json.dumps({"steps": 8, "best_instruction": "Answer.", **extra}))
        assert default_checkpoint(finished) is None  # one policy to report


FAST = [
    "--set",
    "rollout.max_tokens_per_turn=4",
    "--set",
    "rollout.max_observation_tokens=40",
    "--set",
    "rollout.max_turns=1",
    "--device",
    "cpu",
    "--method",
    "agent",
    "--limit",
    "1",
]


def test_evaluate_run_hands_the_papers_checkpoint_to_the_evaluation(tmp_path, repo_root, monkeypatch):
    """Fast: the model-loading seam (`_run`) records what would be evaluated."""
    from inspo_cli.commands import evaluate

    run = write_run(
        tmp_path / "run", repo_root, ["training.eval_every=4", "training.save_every=2"], checkpoints=(2, 4, 6)
    )
    for step in (2, 4, 6):
        (run.path / f"checkpoints/checkpoint-{step}/config.json").write_text("{}")
    seen = []
    monkeypatch.setattr(evaluate, "_run", lambda config, *args: seen.append((config.model.name_or_path, args[-1])))
    result = invoke("evaluate", "--run", run.path, "--out", tmp_path / "out", "--device", "cpu")
    assert result.exit_code == 0, result.output
    assert seen == [
        (str(run.path / "checkpoints/checkpoint-4"), {"checkpoint": "step 4 (checkpoint-4)", "instruction_id": "i0"})
    ]
    assert "App. B's choice" in " ".join(result.stderr.split())
    seen.clear()
    assert (
        invoke(
            "evaluate", "--run", run.path, "--checkpoint", "6", "--out", tmp_path / "six", "--device", "cpu"
        ).exit_code
        == 0
    )
    assert seen[0][1]["checkpoint"] == "step 6 (checkpoint-6)"  # any step when asked for


@pytest.mark.slow
def test_evaluate_run_reports_the_papers_checkpoint_by_default(tiny_model_dir, tmp_path, repo_root):
    run = write_run(
        tmp_path / "run",
        repo_root,
        ["training.eval_every=4", "training.save_every=2"],
        checkpoints=(2, 4, 6),
        model=tiny_model_dir,
    )
    result = invoke("evaluate", "--run", run.path, "--out", tmp_path / "default", *FAST)
    assert result.exit_code == 0, result.output
    results = json.loads((tmp_path / "default/results.json").read_text())
    assert results["checkpoint"] == "step 4 (checkpoint-4)" and results["model"].endswith("checkpoint-4")
    said = " ".join(result.stderr.split())
    assert "App. B's choice" in said and "every 4 steps" in said and "--checkpoint final" in said
    result = invoke("evaluate", "--run", run.path, "--checkpoint", "final", "--out", tmp_path / "final", *FAST)
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "final/results.json").read_text())["checkpoint"] == "final"


@pytest.mark.parametrize("size", ["3b", "7b"])
def test_search_r1_script_recipes_differ_from_the_matched_baseline_only_in_the_scripts_settings(repo_root, size):
    from dataclasses import replace

    load = lambda name: load_recipe(repo_root / f"recipes/qwen2.5-{size}/{name}.yaml", check_paths=False)  # noqa: E731
    matched, script = load("search-r1"), load("search-r1-script")
    t, r = script.training, script.rollout
    # scripts/nq_hotpotqa/v0.2/train_grpo.sh: lr, warm-up, steps, save/test frequency, turns, first-prompt length;
    # ppo_trainer.yaml: top_p 0.95 and the constant schedule
    assert (t.learning_rate, t.lr_scheduler, t.warmup_ratio, t.steps, t.save_every, t.eval_every) == (
        1e-6,
        "constant",
        0.285,
        1004,
        100,
        100,
    )
    assert (r.max_turns, r.top_p, r.max_prompt_tokens) == (4, 0.95, 2048)
    assert script.model.name_or_path == f"Qwen/Qwen2.5-{size.upper()}"
    same = lambda a, b, **changed: a == replace(b, **changed)  # noqa: E731
    assert t.loss_type == "bnpo"  # veRL's masked_mean over each micro-batch (core_algos.py, dp_actor.py)
    assert same(
        t,
        matched.training,
        learning_rate=1e-6,
        lr_scheduler="constant",
        warmup_ratio=0.285,
        steps=1004,
        save_every=100,
        loss_type="bnpo",
    )
    assert same(
        r, matched.rollout, max_turns=4, top_p=0.95, max_prompt_tokens=2048, max_total_tokens=r.max_total_tokens
    )
    assert r.max_total_tokens == 8192  # 4 turns, as the 3B matched baseline
    assert (script.reward, script.retriever, script.population, script.evaluation, script.data) == (
        matched.reward,
        matched.retriever,
        matched.population,
        matched.evaluation,
        matched.data,
    )
    assert invoke("recipe", "check", f"qwen2.5-{size}/search-r1-script").exit_code == 0


def test_the_script_recipes_constant_schedule_warms_up_as_verl(repo_root):
    """veRL: LR x min(1, step / 286); HF's "constant" would ignore the warm-up and start at the peak."""
    import torch
    from transformers import get_scheduler

    from inspo_cli.config.batch_plan import batch_plan
    from inspo_cli.training.grpo import grpo_kwargs

    recipe = load_recipe(repo_root / "recipes/qwen2.5-3b/search-r1-script.yaml", check_paths=False)
    kwargs = grpo_kwargs(recipe, batch_plan(recipe, 8), repo_root / "runs/x", device="cuda")
    assert (kwargs["max_steps"], kwargs["warmup_steps"]) == (10040, 2861)  # 286.1 of 1,004 steps
    optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=kwargs["learning_rate"])
    scheduler = get_scheduler(
        kwargs["lr_scheduler_type"],
        optimizer,
        num_warmup_steps=kwargs["warmup_steps"],
        num_training_steps=kwargs["max_steps"],
    )
    factor = scheduler.lr_lambdas[0]  # the LR of update n is learning_rate x factor(n)
    rates = [kwargs["learning_rate"] * factor(update) for update in range(kwargs["max_steps"])]
    assert scheduler.get_last_lr()[0] == rates[0] == 0.0 and rates[1430] == pytest.approx(1e-6 * 1430 / 2861)
    assert rates[2861] == rates[-1] == pytest.approx(1e-6)  # then flat to the end


def test_cosine_recipes_are_unchanged(repo_root):
    from inspo_cli.config.batch_plan import batch_plan
    from inspo_cli.training.grpo import grpo_kwargs

    recipe = load_recipe(repo_root / "recipes/qwen2.5-3b/search-r1.yaml", check_paths=False)
    kwargs = grpo_kwargs(recipe, batch_plan(recipe, 8), repo_root / "runs/x", device="cuda")
    assert (kwargs["lr_scheduler_type"], kwargs["warmup_steps"]) == ("cosine", 300)


def test_the_script_recipes_say_where_each_value_comes_from(repo_root):
    """Each value the script recipes set carries the file and line it was read from."""
    for size in ("3b", "7b"):
        text = (repo_root / f"recipes/qwen2.5-{size}/search-r1-script.yaml").read_text()
        for line in text.splitlines():
            if line.startswith(" ") and ":" in line and not line.lstrip().startswith("#"):
                comment = line.split("#", 1)[1] if "#" in line else ""
                assert "l. " in comment or "as recipes/" in comment, line
        assert yaml.safe_load(text)["extends"].endswith(".yaml")
