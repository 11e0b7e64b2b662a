"""`inspo distill RUN`: a bad source run, a bad option or an occupied --out is one line (exit 2) and writes nothing;
the derived run is planned from RUN's recipe and its teacher's checkpoint; the slow test distils a tiny run, resumes
it from a kill in either phase, says a finished one is done, and evaluates it with `inspo evaluate --run`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers.cli_helpers import assert_one_line_error, invoke
from helpers.runs import TIMING_KEYS, metrics

from inspo_cli.config import dump_recipe, load_recipe
from inspo_cli.config.instruction_defaults import WORKED_EXAMPLE_INSTRUCTION


def tree(root: Path) -> list[tuple[str, int]]:
    """Every path under `root` with its modification time: what a refused command must leave as it was."""
    return sorted((str(p.relative_to(root)), p.lstat().st_mtime_ns) for p in root.rglob("*"))


def refused(tmp_path: Path, *args, fragments=()):
    before = tree(tmp_path)
    result = invoke("distill", *args)
    assert_one_line_error(result, *fragments)
    assert tree(tmp_path) == before
    return result


def test_a_bad_source_run_is_one_line_and_nothing_is_written(tmp_path, trained):
    refused(tmp_path, tmp_path / "nowhere", fragments=("does not exist",))
    (tmp_path / "plain").mkdir()
    refused(tmp_path, tmp_path / "plain", fragments=("not a run directory",))
    static = tmp_path / "static"
    shutil.copytree(trained, static)
    recipe = load_recipe(static / "recipe.yaml", ["population.enabled=false"], written_by_run=True)
    (static / "recipe.yaml").write_text(dump_recipe(recipe))
    refused(tmp_path, static, fragments=(str(static), "static instruction", "population.enabled"))
    unfinished = tmp_path / "unfinished"  # cut off before its first checkpoint: no policy to be the teacher
    shutil.copytree(trained, unfinished)
    shutil.rmtree(unfinished / "checkpoints")
    (unfinished / "summary.json").unlink()
    refused(tmp_path, unfinished, fragments=("no final policy yet", "--step N"))


def test_bad_options_are_one_line_and_nothing_is_written(tmp_path, trained):
    refused(tmp_path, trained, "--keep", "best", fragments=("--keep best", "all or correct"))
    refused(tmp_path, trained, "--form", "on-policy", fragments=("--form on-policy", "docs/distill.md"))
    refused(tmp_path, trained, "--step", "7", fragments=("--step '7'", "steps 4"))
    refused(tmp_path, trained, "--step", " 4", fragments=("--step ' 4': not a step number", "steps 4"))
    refused(tmp_path, trained, "--samples", "0", fragments=("--samples",))
    refused(tmp_path, trained, "--samples", "999999999999", fragments=("--samples must be at most 1024",))
    refused(tmp_path, trained, "--set", "sampling.samples=5000", fragments=("sampling.samples: must be at most 1024",))
    refused(tmp_path, trained, "--learning-rate", "0", fragments=("--learning-rate",))
    refused(tmp_path, trained, "--instruction", f"@{tmp_path / 'none.txt'}", fragments=("--instruction",))
    # the teacher's own I* (the finished run's best, "Answer.") as the student's: nothing to distil
    refused(tmp_path, trained, "--instruction", "Answer.", fragments=("nothing to distil",))
    refused(tmp_path, trained, "--set", "training.learning_rate=-1", fragments=("--set training.learning_rate",))
    refused(tmp_path, trained, "--out", trained / "recipe.yaml", fragments=("not a run directory",))
    refused(tmp_path, trained, "--out", trained, fragments=("did not make",))


def test_the_distilled_run_is_planned_from_the_source_recipe_and_its_teacher(tmp_path, trained, tiny_model_dir):
    from inspo_cli.training.distill_plan import DistillOptions, plan_distillation

    plan = plan_distillation(trained)  # App. B's choice: no collapse, so the final policy with the run's I*
    assert plan.status == "new" and plan.out.path == trained / "distill" and not plan.out.path.exists()
    assert plan.info == {
        "distilled_from": str(trained.resolve()),
        "form": "off-policy",
        "keep": "all",
        "teacher_checkpoint": "final",
        "teacher_step": 4,
        "teacher_model": str((trained / "checkpoints/final").resolve()),
        "teacher_instruction": "Answer.",
        "teacher_instruction_id": "i0",
        "student_instruction": WORKED_EXAMPLE_INSTRUCTION,
        "student_instruction_source": "seed",
        "student_prompt_instruction": WORKED_EXAMPLE_INSTRUCTION,
    }
    recipe, source = plan.recipe, load_recipe(trained / "recipe.yaml", written_by_run=True)
    t = recipe.training
    assert (t.algorithm, t.batch_size, t.learning_rate) == ("distill", 16, source.training.learning_rate)
    assert t.steps == -(-len(_questions(recipe)) * source.sampling.samples // 16)  # one epoch over the samples
    assert recipe.model.name_or_path == plan.info["teacher_model"] and recipe.model.backend == "transformers"
    assert not recipe.population.enabled and recipe.population.instructions == [WORKED_EXAMPLE_INSTRUCTION]
    assert (recipe.run.name, recipe.run.output_dir) == ("distill", str(trained))

    options = DistillOptions(instruction="none", step="4", keep="correct", samples=2, steps=3, learning_rate=1e-5)
    plan = plan_distillation(trained, tmp_path / "elsewhere", options)
    assert plan.info["teacher_checkpoint"] == "4" and plan.info["teacher_step"] == 4
    assert plan.info["teacher_instruction"] == "Search first. {question}"  # I* of the checkpoint's own population
    assert plan.info["teacher_model"] == str((trained / "checkpoints/checkpoint-4").resolve())
    assert (plan.info["student_instruction"], plan.info["student_prompt_instruction"]) == ("", "{question}")
    t = plan.recipe.training
    assert (t.steps, t.learning_rate, plan.recipe.sampling.samples, plan.info["keep"]) == (3, 1e-5, 2, "correct")
    text = tmp_path / "student.txt"
    text.write_text("Think, then answer. {question}\n")
    plan = plan_distillation(trained, None, DistillOptions(instruction=f"@{text}", overrides=("training.steps=5",)))
    assert plan.info["student_instruction_source"] == "file" and plan.recipe.training.steps == 5
    plan = plan_distillation(trained, None, DistillOptions(samples=3, overrides=("data.max_train_questions=7",)))
    assert plan.recipe.training.steps == 2  # 7 questions x 3 samples = 21 trajectories: two updates of 16


def _questions(recipe):
    from inspo_cli.training.trainer_inputs import train_questions

    return train_questions(recipe)


def test_an_output_directory_with_other_settings_is_refused_and_a_finished_one_is_done(tmp_path, trained):
    from inspo_cli.runs import RunDir
    from inspo_cli.training.distill_plan import plan_distillation

    plan = plan_distillation(trained, tmp_path / "d")
    made = RunDir.create(plan.recipe, output_dir=tmp_path)  # as `inspo distill` starts it
    (made.path / made.DISTILL_INFO).write_text(json.dumps(plan.info))
    assert made.path == tmp_path / "d" and plan_distillation(trained, made.path).status == "resume"
    refused(tmp_path, trained, "--out", made, "--steps", "2", fragments=("training.steps=", "--out"))
    refused(tmp_path, trained, "--out", made, "--keep", "correct", fragments=('keep="all"', "--out"))
    (made.path / "summary.json").write_text(json.dumps({"steps": 1, "best_instruction": "x"}))
    result = invoke("distill", trained, "--out", made)
    assert result.exit_code == 0 and "distilled already" in result.output and "inspo evaluate --run" in result.output


@pytest.mark.slow
def test_distill_trains_resumes_from_either_phase_and_evaluates(tmp_path, trained):
    """The tiny model as teacher and student (every trajectory kept, so its random words train), two batches of
    sampling and two SFT steps; then cut back as kills would leave it and resumed by the same command."""
    out = tmp_path / "distilled"
    args = [
        trained, "--out", out, "--samples", "2", "--steps", "2",
        "--set", "data.max_train_questions=4", "--set", "sampling.batch_size=2", "--set", "training.save_every=1",
        "--set", "training.keep_checkpoints=0", "--set", "evaluation.limit=2", "--set", "evaluation.batch_size=2",
    ]  # fmt: skip
    result = invoke("distill", *args)
    assert result.exit_code == 0, result.output
    assert "sampling: batch 2/2" in result.output and "distill: SFT on 8 teacher trajectories" in result.output
    info = json.loads((out / "distill.json").read_text())
    assert info["teacher_instruction"] == "Answer." and info["student_instruction_source"] == "seed"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 2 and summary["sampling"]["kept"] == summary["sampling"]["trajectories"] == 8
    assert (
        summary["best_instruction"] == WORKED_EXAMPLE_INSTRUCTION and (out / "checkpoints/final/config.json").is_file()
    )
    straight = metrics(out)
    strip = lambda rows: [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in rows]  # noqa: E731

    for later in ("checkpoints/checkpoint-2", "checkpoints/final", "summary.json"):  # killed after step 1's save
        shutil.rmtree(out / later) if (out / later).is_dir() else (out / later).unlink()
    result = invoke("distill", *args)
    assert result.exit_code == 0, result.output
    for have, want in zip(strip(metrics(out)), strip(straight), strict=True):
        assert have == pytest.approx(want)

    sampled = (out / "sampling/batch-00000.jsonl").read_text()
    for later in (
        "checkpoints",
        "summary.json",
        "metrics.jsonl",
        "sampling/summary.json",
        "sampling/batch-00001.jsonl",
    ):
        shutil.rmtree(out / later) if (out / later).is_dir() else (out / later).unlink()  # killed in phase 1
    result = invoke("distill", *args)
    assert result.exit_code == 0, result.output
    assert (
        "1 of 2 batches already sampled" in result.output
        and (out / "sampling/batch-00000.jsonl").read_text() == sampled
    )
    assert [r["loss"] for r in metrics(out)] == pytest.approx([r["loss"] for r in straight])

    result = invoke("distill", *args)
    assert result.exit_code == 0 and "distilled already" in result.output
    result = invoke("evaluate", "--run", out, "--limit", "2")
    assert result.exit_code == 0, result.output
    evaluated = json.loads(next((out / "evaluations").rglob("results.json")).read_text())
    assert evaluated["instruction"] == WORKED_EXAMPLE_INSTRUCTION


def test_a_teacher_checkpoint_without_its_population_names_the_steps_that_have_one(tmp_path, trained):
    # --instruction chooses the student's instruction: the teacher's I* cannot be given, only found
    shutil.copytree(trained / "checkpoints/checkpoint-4", trained / "checkpoints/checkpoint-2")
    (trained / "checkpoints/checkpoint-2/coevolution.json").unlink()
    result = refused(
        tmp_path,
        trained,
        "--step",
        "2",
        fragments=(
            "checkpoint-2 has no coevolution.json",
            "teacher's instruction I*",
            "--step whose checkpoint has it (4)",
        ),
    )
    assert "--instruction" not in result.output
    (trained / "checkpoints/checkpoint-4/coevolution.json").unlink()
    result = refused(tmp_path, trained, "--step", "4", fragments=("checkpoint-4 has no", "copy the run again"))
    assert "--step whose" not in result.output


def test_an_out_that_cannot_be_made_is_one_line_before_the_teacher_loads(tmp_path, trained, monkeypatch):
    import os

    (tmp_path / "file").write_text("")
    refused(tmp_path, trained, "--out", tmp_path / "file" / "d", fragments=("--out", "a part of the path is a file"))
    locked = tmp_path / "locked"  # the tests run as root, where permissions do not stop a write: os.access says so
    locked.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: False if Path(path) == locked else real(path, mode))
    refused(tmp_path, trained, "--out", locked / "d", fragments=(f"--out {locked / 'd'}: permission denied",))


def test_ctrl_c_before_the_distillation_wrote_anything_leaves_no_out_and_it_starts_again(
    tmp_path, trained, monkeypatch
):
    """Ctrl-C while distill.json was written, or while the teacher loaded: before, the --out directory stayed (without
    distill.json it was refused ever after as not inspo distill's); now it goes, and the same command starts again."""
    from inspo_cli import experiment
    from inspo_cli.training.distill_plan import plan_distillation

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    before = [path for path, _ in tree(tmp_path)]  # RUN's own mtime changes: distill/ was made in it and removed
    for name in ("atomic_write_json", "run_training"):
        real = getattr(experiment, name)
        monkeypatch.setattr(experiment, name, interrupted)
        result = invoke("distill", trained)
        monkeypatch.setattr(experiment, name, real)
        assert result.exit_code == 130 and "Traceback" not in result.output, result.output
        assert f"was removed; start it again: inspo distill {trained}" in result.stderr
        assert [path for path, _ in tree(tmp_path)] == before
        assert plan_distillation(trained).status == "new"


def test_the_teacher_of_an_unfinished_run_is_its_newest_checkpoint_and_a_lora_one_is_not_merged_into_it(
    tmp_path, trained, tiny_model_dir
):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from inspo_cli.training.distill_plan import DistillOptions, plan_distillation

    shutil.rmtree(trained / "checkpoints/final")
    (trained / "summary.json").unlink()
    shutil.copytree(trained / "checkpoints/checkpoint-4", trained / "checkpoints/checkpoint-2")
    assert plan_distillation(trained).info["teacher_checkpoint"] == "4"  # as `inspo evaluate --run` takes it

    lora = trained / "checkpoints/checkpoint-6"  # a LoRA run's checkpoint: the adapter alone
    model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(tiny_model_dir), LoraConfig(r=2, target_modules=["q_proj"])
    )
    model.save_pretrained(lora)
    for name in ("trainer_state.json", "coevolution.json"):
        shutil.copy(trained / "checkpoints/checkpoint-4" / name, lora / name)
    before = tree(trained)
    plan = plan_distillation(trained, tmp_path / "d", DistillOptions(step="6"))
    assert plan.info["teacher_model"] == str(lora.resolve()) and plan.recipe.model.name_or_path == str(lora.resolve())
    assert tree(trained) == before  # merged into the cache when it loads, never into the source run


def test_a_distill_json_with_an_unknown_keep_rule_is_one_line(tmp_path, trained):
    from inspo_cli.errors import InspoError
    from inspo_cli.runs import RunDir
    from inspo_cli.training.distill import distill_info
    from inspo_cli.training.distill_plan import plan_distillation

    info = {**plan_distillation(trained).info, "keep": "best"}
    (tmp_path / RunDir.DISTILL_INFO).write_text(json.dumps(info))
    with pytest.raises(InspoError, match=r"keep is 'best', not one of all, correct; distil again"):
        distill_info(RunDir(tmp_path))


def test_a_set_of_what_distill_sets_an_out_without_a_place_and_odd_text_are_one_line(tmp_path, trained):
    """Each would make distill.json describe another teacher, student or directory than the one trained, or write
    where the source run's checkpoint rotation deletes, or could not be recorded."""
    for key, value in (
        ("training.algorithm", "grpo"),
        ("model.name_or_path", str(trained)),
        ("population.instructions", '["Guess. {question}"]'),
        ("run.output_dir", str(tmp_path)),
    ):
        refused(tmp_path, trained, "--set", f"{key}={value}", fragments=(f"--set {key}: inspo distill sets it",))
    for out in (".", "/", "..", tmp_path / "a b"):
        refused(tmp_path, trained, "--out", out, fragments=("--out", "plain name"))
    for out in ("checkpoints/distill", "checkpoints/checkpoint-8", "checkpoints/final/d"):
        refused(tmp_path, trained, "--out", trained / out, fragments=("inside the checkpoints of",))
    (trained / "distill").symlink_to(tmp_path / "gone")
    refused(tmp_path, trained, fragments=("a link to", "does not exist"))
    refused(tmp_path, trained, "--out", tmp_path / "d", "--instruction", "Answer \udcff {question}")
    assert not (tmp_path / "d").exists()


def test_a_run_split_over_several_instructions_and_its_teacher_step_plan_one_way(tmp_path, trained):
    from inspo_cli.errors import InspoError
    from inspo_cli.training.distill_plan import DistillOptions, plan_distillation

    split = ["population.instructions_per_question=2", "population.baseline=instruction"]
    (trained / "recipe.yaml").write_text(dump_recipe(load_recipe(trained / "recipe.yaml", split, written_by_run=True)))
    plan = plan_distillation(trained, None, DistillOptions(step="04"))  # the student has one static instruction
    assert plan.recipe.population.instructions_per_question == 1 and plan.info["teacher_checkpoint"] == "4"
    damaged = {"steps": 4, "best_instruction": " ", "best_instruction_id": "i0"}
    (trained / "summary.json").write_text(json.dumps(damaged))
    with pytest.raises(InspoError, match=r"teacher's instruction I\* at checkpoint final is empty"):
        plan_distillation(trained)


def test_a_distillation_that_another_one_started_in_the_same_out_first_is_refused(tmp_path, trained, monkeypatch):
    from inspo_cli import experiment
    from inspo_cli.errors import InspoError
    from inspo_cli.runs import RunDir

    create = RunDir.create.__func__

    def the_other_came_first(cls, recipe, *args, **kwargs):
        create(cls, recipe, *args, **kwargs)  # the other `inspo distill`, between this one's plan and its start
        return create(cls, recipe, *args, **kwargs)

    monkeypatch.setattr(RunDir, "create", classmethod(the_other_came_first))
    monkeypatch.setattr(experiment, "_run", lambda *_: pytest.fail("it trained beside the other, in d-2"))
    with pytest.raises(InspoError, match="another inspo distill started there"):
        experiment.distill(trained, out=tmp_path / "d")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("d")] == ["d"]  # its own, not d-2


def test_samples_per_question_are_bounded_in_the_recipe():
    from inspo_cli.config import load_recipe
    from inspo_cli.errors import InspoError

    with pytest.raises(InspoError, match="sampling.samples: must be at most 1024 trajectories per question"):
        load_recipe("recipes/demo.yaml", ["sampling.samples=1025"])
    assert load_recipe("recipes/demo.yaml", ["sampling.samples=1024"]).sampling.samples == 1024
