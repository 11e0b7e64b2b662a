"""Issue 37, item 14 and its planning warnings: what `inspo ablate` (and the recipe loader under it) is given that
no run could use is one line and exit 2 before anything is written; flags a mode would ignore are refused; a recipe
edited since planning is never used stale or mixed silently; two plannings into one --out leave one plan."""

from __future__ import annotations

import math
import threading
import time
from types import SimpleNamespace

import pytest
from helpers.cli_helpers import assert_one_line_error, invoke

from inspo_cli.ablation.directory import AblationDir
from inspo_cli.ablation.plan import plan_axes
from inspo_cli.instructions.selection import softmax
from inspo_cli.instructions.selection.base import Arm

DEMO = "recipes/demo.yaml"


def refused_before_writing(tmp_path, args, *fragments):
    """`inspo ablate ARGS --print-commands --out OUT` (which writes the plan when it passes): one line, exit 2, and
    OUT not created."""
    out = tmp_path / "out"
    assert_one_line_error(invoke("ablate", *args, "--print-commands", "--out", out), *fragments)
    assert not out.exists()


SWEEP_HEAD = f"recipe: {DEMO}\nseeds: [0]\n"


@pytest.mark.parametrize(
    "body, message",
    [
        ("grid:\n  run.name: [2024-01-01]\n", "grid: run.name: the value datetime.date(2024, 1, 1) (date)"),
        ("grid:\n  run.name: [2001-12-14t21:59:43.10-05:00]\n", "(datetime) is not a finite number, a string"),
        ("grid:\n  training.steps: [!!binary aGVsbG8=]\n", "(bytes) is not a finite number"),
        ("grid:\n  population.n_parent: [!!set {1, 2}]\n", "(set) is not a finite number"),
        ("grid:\n  population.n_parent: !!set {1, 2}\n", "grid must map a recipe key to a non-empty list"),
        ("variants: !!set {a, b}\n", "variants must map a name"),
        ("variants:\n  ~: [training.steps=2]\n", "variants: the name None is null, not text"),
        ("grid:\n  ~: [1, 2]\n", "grid: key None (NoneType) must be a recipe field such as population.n_parent"),
        ("grid:\n  population.n_parent: [1]\n  ~: [1, 2]\n", "grid: key None (NoneType)"),
        ("variants:\n  on: [training.steps=2]\n", "the name True is a boolean"),
        ("variants:\n  017: [training.steps=2]\n", "the name 15 is an integer"),
        ("grid:\n  evaluation.benchmarks: [[world], [world, nq]]\n", "make the variant name \"benchmarks-['world']\""),
        ("grid:\n  model.name_or_path: [HuggingFaceTB/SmolLM2-135M]\n", "list those values under variants:"),
        ("grid:\n  run.output_dir: [" + "x" * 250 + "]\n", "at most 188 letters"),
        # its runs are named <variant>-s<seed>, which run.name's 200 characters must hold for any seed
        ("variants:\n  " + "v" * 189 + ": [training.steps=2]\n", "must be at most 188 letters"),
    ],
)
def test_sweep_values_of_types_the_planner_does_not_expect_are_one_line_errors(
    repo_root, monkeypatch, tmp_path, body, message
):
    monkeypatch.chdir(repo_root)
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(SWEEP_HEAD + body)
    refused_before_writing(tmp_path, ["--sweep", sweep], message)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--seeds", "4294967296"], "seeds must be distinct integers in [0, 2**32 - 1]"),
        (["--seeds", ",".join(map(str, range(1001)))], "1,001 seeds: at most 1,000"),
        (["--set", "training.steps=10000000"], "training.steps: must be at most 1,000,000"),
        (["--set", "optimizer.max_calls=99999999999999999999"], "does not fit a 64-bit integer"),
        (["--set", "population.temperature=1e-310"], "population.temperature: must be at least 1e-06"),
        (["--set", "population.verify_size=5000"], "verify_size: is 5000, more than replay_capacity (4096)"),
        (["--set", "run.name=" + "r" * 201], "run.name: must be a plain directory name of at most 200"),
        (["--set", "run.name=2001-12-14t21:59:43.10-05:00"], "run.name: expected a string, got datetime"),
        (["--set", "population.instructions=!!set {a, b}"], "--set population.instructions[0]: expected a string"),
        # every run would stop at its first evolution: refused before the plan
        (["--replay-optimizer", "no-such-record.jsonl"], "--replay-optimizer: no-such-record.jsonl does not exist"),
        (["--replay-optimizer", "docs"], "--replay-optimizer: docs holds no optimizer_calls.jsonl"),
    ],
)
def test_values_no_run_can_use_are_refused_when_planned(repo_root, monkeypatch, tmp_path, args, message):
    monkeypatch.chdir(repo_root)
    refused_before_writing(tmp_path, ["--recipe", DEMO, "--proposer", "paraphrase", *args], message)


def test_evolve_refuses_a_replay_record_that_is_not_there_before_anything_else(repo_root, monkeypatch, tmp_path):
    """Even when the recipe's evolution would never ask the optimizer (evolve_until 0), and before the model."""
    monkeypatch.chdir(repo_root)
    runs = tmp_path / "runs"
    result = invoke(
        "evolve",
        "--recipe",
        DEMO,
        "--replay-optimizer",
        tmp_path / "nosuch",
        "--model",
        tmp_path / "no-model",
        "--set",
        "population.evolve_until=0",
        "--output-dir",
        runs,
    )
    assert_one_line_error(result, f"--replay-optimizer: {tmp_path / 'nosuch'} does not exist")
    assert not runs.exists()


def test_absurd_workers_are_refused_before_any_slot_or_file_is_made(repo_root, monkeypatch, tmp_path):
    monkeypatch.chdir(repo_root)
    out = tmp_path / "out"
    args = ["ablate", "--recipe", DEMO, "--proposer", "paraphrase", "--out", out, "--device", "cpu"]
    assert_one_line_error(invoke(*args, "--workers", "1000000000"), "--workers 1000000000", "from 1 to 256")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")  # one GPU to share out, two runs of one GPU each
    assert_one_line_error(invoke(*args[:-2], "--workers", "2", "--gpus-per-run", "1"), "2 GPUs, but 1 are visible")
    assert not out.exists()


def test_an_extends_chain_is_bounded_along_the_chain_not_only_per_file(repo_root, tmp_path):
    (tmp_path / "r0.yaml").write_text(f"extends: {repo_root / DEMO}\n")
    for i in range(1, 40):
        (tmp_path / f"r{i}.yaml").write_text(f"extends: r{i - 1}.yaml\n")
    assert invoke("recipe", "check", tmp_path / "r14.yaml").exit_code == 0  # 16 extends: as deep as allowed
    assert_one_line_error(invoke("recipe", "check", tmp_path / "r39.yaml"), "extends: a chain of more than 16")
    comment = "# " + "x" * 600_000 + "\n"  # each file under the 1 MiB cap, the two together over it
    (tmp_path / "big0.yaml").write_text(comment + f"extends: {repo_root / DEMO}\n")
    (tmp_path / "big1.yaml").write_text(comment + "extends: big0.yaml\n")
    assert_one_line_error(invoke("recipe", "check", tmp_path / "big1.yaml"), "the chain of 2 recipes holds more than")


@pytest.mark.parametrize(
    "launcher",
    [
        ".venv/bin/inspo",
        "inspo train",
        "python -m inspo_cli",
        "accelerate launch -m inspo_cli",
        "torchrun --nproc_per_node 2 inspo",
    ],
)
def test_a_launcher_that_is_inspo_itself_is_refused_before_commands_are_printed(
    repo_root, monkeypatch, tmp_path, launcher
):
    monkeypatch.chdir(repo_root)
    refused_before_writing(
        tmp_path,
        ["--recipe", DEMO, "--proposer", "paraphrase", "--launcher", launcher],
        "is inspo itself",
        "leave --launcher out",
    )


def test_eq4_softmax_is_finite_at_every_positive_temperature():
    arms = [Arm("i0", 0.5, 4, 2.0), Arm("i1", 0.25, 4, 1.0), Arm("i2", 0.5, 4, 2.0)]
    for temperature in (1e-310, 5e-324, 1e-6, 0.2, 1e300):  # w / 1e-310 overflows to inf, and inf - inf is NaN
        probabilities = softmax.build(arms, SimpleNamespace(temperature=temperature), 8).probabilities()
        assert all(math.isfinite(p) for p in probabilities) and math.fsum(probabilities) == pytest.approx(1.0)
    assert softmax.build(arms, SimpleNamespace(temperature=1e-310), 8).probabilities() == [0.5, 0.0, 0.5]


def test_evaluate_checks_the_retriever_before_the_model_loads(repo_root, monkeypatch, tmp_path):
    import inspo_cli.policy.backends

    monkeypatch.chdir(repo_root)

    def no_model(*args, **kwargs):
        raise AssertionError("the model was loaded before --retriever was checked")

    monkeypatch.setattr(inspo_cli.policy.backends, "load_backend", no_model)
    args = ["evaluate", "--benchmarks", "world", "--model", "smollm2-135m-instruct", "--limit", "1"]
    for retriever, message in (
        (tmp_path / "missing", "does not exist"),
        ("ftp://host/x", "not an http(s)://HOST"),
        (tmp_path, "a directory without index.json"),
        ("http://", "not an http(s)://HOST"),
    ):
        assert_one_line_error(invoke(*args, "--retriever", retriever, "--out", tmp_path / "e"), "--retriever", message)
    assert not (tmp_path / "e").exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--status", "{t}/a", "--wait"], "--wait does nothing with --status"),
        (["--status", "{t}/a", "--proposer", "paraphrase"], "--proposer does nothing with --status"),
        (["--collect", "{t}/a", "--recipe", DEMO], "--recipe does nothing with --collect"),
        (["--collect", "{t}/a", "--workers", "2"], "--workers does nothing with --collect"),
        (["--proposer", "paraphrase", "--dry-run", "--print-commands"], "--dry-run and --print-commands together"),
        (["--proposer", "paraphrase", "--replan", "--keep-planned"], "--replan and --keep-planned together"),
        (["--proposer", "paraphrase", "--scheduler", "slurm", "--dry-run", "--wait"], "a dry run submits nothing"),
        (["--proposer", "paraphrase", "--partition", "gpu"], "--partition is a SLURM option"),
        (["--proposer", "paraphrase", "--time", "30", "--dry-run"], "--time is a SLURM option"),
        (
            ["--proposer", "paraphrase", "--gpus-per-run", "2"],
            "--gpus-per-run splits the visible GPUs between --workers",
        ),
        (["--proposer", "paraphrase", "--print-commands", "--workers", "2"], "--workers does nothing with --print"),
        (["--proposer", "paraphrase", "--print-commands", "--scheduler", "slurm"], "--scheduler does nothing with"),
        (["--proposer", "paraphrase", "--print-commands", "--reference", "demo"], "pass it there"),
        (["--proposer", "paraphrase", "--print-commands", "--json"], "--json does nothing with --print-commands"),
    ],
)
def test_flags_that_the_mode_would_ignore_are_refused(repo_root, monkeypatch, tmp_path, args, message):
    monkeypatch.chdir(repo_root)
    out = tmp_path / "out"
    args = [a.replace("{t}", str(tmp_path)) for a in args]
    assert_one_line_error(
        invoke("ablate", "--recipe", DEMO, *args, "--out", out)
        if "--status" not in args and "--collect" not in args
        else invoke("ablate", *args),
        message,
    )
    assert not out.exists()


def test_printed_commands_carry_the_device(repo_root, monkeypatch, tmp_path):
    monkeypatch.chdir(repo_root)
    result = invoke(
        "ablate",
        "--recipe",
        DEMO,
        "--proposer",
        "paraphrase",
        "--seeds",
        "0",
        "--print-commands",
        "--device",
        "cpu",
        "--out",
        tmp_path / "out",
    )
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 2 and all(line.endswith(" --device cpu") for line in lines)


def test_an_ablation_whose_recipe_changed_since_planning_is_never_continued_stale_or_mixed(
    repo_root, monkeypatch, tmp_path
):
    monkeypatch.chdir(repo_root)
    base, out = tmp_path / "base.yaml", tmp_path / "out"
    base.write_text((repo_root / DEMO).read_text())
    args = ["ablate", "--recipe", base, "--proposer", "paraphrase", "--seeds", "0", "--out", out, "--print-commands"]
    assert invoke(*args).exit_code == 0

    def edit(old: str, new: str) -> None:
        base.write_text(base.read_text().replace(old, new))

    planned = lambda: (out / "recipes/base.yaml").read_text()  # noqa: E731
    edit("learning_rate: 3.0e-5", "learning_rate: 1.0e-5")
    assert_one_line_error(
        invoke(*args),
        "planned with other recipes",
        "training.learning_rate is 1e-05 now, 3e-05 planned",
        "no run has started: pass --replan",
    )
    assert "learning_rate: 3.0e-05" in planned()  # refused: nothing rewritten
    replanned = invoke(*args, "--replan")
    assert replanned.exit_code == 0 and "re-planned" in replanned.stderr
    assert (
        "learning_rate: 1.0e-05" in planned()
        and "learning_rate: 1.0e-05" in (out / "recipes/proposer-paraphrase.yaml").read_text()
    )
    (out / "runs/base-s0").mkdir(parents=True)  # a run started with the re-planned recipes
    edit("learning_rate: 1.0e-5", "learning_rate: 2.0e-5")
    assert_one_line_error(invoke(*args), "1 of 2 runs started with the planned recipes", "--keep-planned")
    assert_one_line_error(invoke(*args, "--replan"), "--replan would mix them")
    kept = invoke(*args, "--keep-planned")
    assert kept.exit_code == 0 and "going on with the recipes planned" in kept.stderr
    assert "learning_rate: 1.0e-05" in planned()
    edit("learning_rate: 2.0e-5", "learning_rate: 1.0e-5")  # back as planned: continued without a word
    again = invoke(*args)
    assert again.exit_code == 0 and "planned" not in again.stderr.split("runs to go")[0]
    assert sorted(p.name for p in out.iterdir()) == [".lock", "plan.json", "recipes", "runs"]


def test_two_plannings_into_one_out_at_once_leave_one_complete_plan(repo_root, monkeypatch, tmp_path):
    from inspo_cli.ablation import directory

    monkeypatch.chdir(repo_root)
    plan = plan_axes(DEMO, [("n-parent", ["2", "3"])], seeds=[0])
    real = directory.atomic_write_text

    def slow(path, text):  # each recipe takes a while, so the two plannings overlap
        time.sleep(0.05)
        real(path, text)

    monkeypatch.setattr(directory, "atomic_write_text", slow)
    errors = []

    def planning():
        try:
            AblationDir.start(tmp_path / "abl", plan)
        except BaseException as error:  # noqa: BLE001 - reported by the assertion below
            errors.append(error)

    threads = [threading.Thread(target=planning) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(p.name for p in (tmp_path / "abl").iterdir()) == [".lock", "plan.json", "recipes"]
    assert sorted(p.name for p in (tmp_path / "abl/recipes").iterdir()) == [
        "demo.yaml",
        "n-parent-2.yaml",
        "n-parent-3.yaml",
    ]


def test_the_longest_variant_name_still_names_a_valid_run_at_the_largest_seed():
    """A variant plans runs `<variant>-s<seed>`, and run.name is refused past 200 characters when the run starts:
    the planner's bound leaves room for any seed (review of issue 37)."""
    from inspo_cli.ablation.plan import MAX_NAME_CHARS, SEED_LIMIT
    from inspo_cli.config import load_recipe

    longest = "v" * MAX_NAME_CHARS + f"-s{SEED_LIMIT - 1}"
    assert load_recipe(None, [f"run.name={longest}"], check_paths=False).run.name == longest
