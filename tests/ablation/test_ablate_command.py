"""`inspo ablate` on the command line: --dry-run, one-line errors for bad arguments, and --print-commands whose
commands run as printed. No model is loaded here; the end-to-end run is in test_ablate_run.py."""

from __future__ import annotations

import json
import shlex

import pytest
import yaml
from helpers.ablation_recipes import INSPO_3B
from helpers.cli_helpers import assert_one_line_error, invoke

from inspo_cli.ablation.directory import AblationDir

# -- the command ---------------------------------------------------------------------------------------------------


def test_dry_run_prints_the_plan_and_writes_nothing(repo_root, monkeypatch, tmp_path):
    monkeypatch.chdir(repo_root)
    result = invoke("ablate", "--recipe", INSPO_3B, "--proposer", "paraphrase", "--dry-run", "--out", tmp_path / "a")
    assert result.exit_code == 0, result.output
    assert "2 variants x 3 seeds (0, 1, 2) = 6 runs" in result.output
    assert "--set population.proposer=paraphrase" in result.output and not (tmp_path / "a").exists()
    result = invoke("ablate", "--recipe", INSPO_3B, "--study", "fig3", "--dry-run", "--json", "--seeds", "0,1")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    assert len(plan["variants"]) == 7 and len(plan["runs"]) == 14
    assert sum(len(v["bars"]) for v in plan["variants"]) == 9 and plan["out"] == "runs/ablations/inspo-fig3"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--recipe", INSPO_3B, "--proposer", "bogus"], "--proposer 'bogus': must be one of reflection, paraphrase"),
        (["--recipe", INSPO_3B, "--n-parent", "0"], "--n-parent '0': must be a number >= 1"),
        (["--recipe", "recipes/qwen2.5-3b/search-r1.yaml", "--proposer", "paraphrase"], "population.enabled: false"),
        (["--recipe", INSPO_3B], "name one ablation"),
        (["--recipe", INSPO_3B, "--study", "fig3", "--proposer", "history"], "--study and an axis flag"),
        (["--recipe", INSPO_3B, "--study", "fig9"], "unknown study 'fig9'"),
        (["--recipe", INSPO_3B, "--study", "fig3", "--seeds", "0,0"], "distinct"),
        (["--recipe", INSPO_3B, "--study", "fig3", "--seeds", "one"], "--seeds 'one'"),
    ],
)
def test_bad_ablation_arguments_are_one_line_errors(repo_root, monkeypatch, args, message):
    monkeypatch.chdir(repo_root)
    assert_one_line_error(invoke("ablate", *args, "--dry-run"), message)


def test_print_commands_writes_the_plan_and_one_train_command_per_run(repo_root, monkeypatch, tmp_path):
    monkeypatch.chdir(repo_root)
    out = tmp_path / "abl"
    result = invoke(
        "ablate",
        "--recipe",
        INSPO_3B,
        "--n-parent",
        "2",
        "--seeds",
        "0,1",
        "--out",
        out,
        "--print-commands",
        "--launcher",
        "accelerate launch --config_file recipes/accelerate/8gpu-zero3.yaml",
    )
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert len(lines) == 4
    first = shlex.split(lines[0])
    assert first[:6] == [
        "accelerate",
        "launch",
        "--config_file",
        "recipes/accelerate/8gpu-zero3.yaml",
        "-m",
        "inspo_cli",
    ]
    assert first[6:] == [
        "train",
        "--recipe",
        str(out / "recipes/inspo.yaml"),
        "--set",
        "run.seed=0",
        "--name",
        "inspo-s0",
        "--output-dir",
        str(out / "runs"),
    ]
    assert json.loads((out / "plan.json").read_text())["seeds"] == [0, 1]
    check = invoke("recipe", "check", out / "recipes/n-parent-2.yaml", "--json")
    assert check.exit_code == 0 and json.loads(check.stdout)["population"]["n_parent"] == 2
    # the same arguments continue the ablation; another plan in the same directory is refused
    assert (
        invoke(
            "ablate", "--recipe", INSPO_3B, "--n-parent", "2", "--seeds", "0,1", "--out", out, "--print-commands"
        ).exit_code
        == 0
    )
    assert_one_line_error(
        invoke("ablate", "--recipe", INSPO_3B, "--n-parent", "3", "--seeds", "0,1", "--out", out, "--print-commands"),
        "holds another ablation",
    )


def test_seeds_appended_to_a_planned_ablation_add_its_runs(repo_root, monkeypatch, tmp_path):
    """Seeds appended to a planned ablation's: the runs planned keep their names and order (jobs.json and SLURM
    tasks in flight find theirs by name), the new seeds' runs follow, and stderr says so. Seeds that drop,
    reorder or replace the planned ones are another ablation, refused without touching plan.json."""
    monkeypatch.chdir(repo_root)
    out = tmp_path / "abl"

    def plan(seeds):
        return invoke(
            "ablate", "--recipe", INSPO_3B, "--n-parent", "2", "--seeds", seeds, "--out", out, "--print-commands"
        )

    first = plan("0,1")
    assert first.exit_code == 0, first.output
    before = (out / "plan.json").read_text()
    for seeds in ("1,0,2", "0,2", "0", "2,3", "5,0,1"):
        assert_one_line_error(plan(seeds), "plans seeds 0, 1); pass those to continue it, those followed by new")
        assert (out / "plan.json").read_text() == before, seeds
    other = ("ablate", "--recipe", INSPO_3B, "--n-parent", "3", "--seeds", "0,1,2", "--out", out, "--print-commands")
    assert_one_line_error(invoke(*other), "plans other variants); pass --out NEW_DIR")  # even with seeds added
    wider = plan("0,1,2,3")
    assert wider.exit_code == 0, wider.output
    assert f"added seeds 2, 3 to {out} (planned: 0, 1)" in " ".join(wider.stderr.split())
    planned = json.loads((out / "plan.json").read_text())
    assert planned["seeds"] == [0, 1, 2, 3]
    names = [r["name"] for r in planned["runs"]]
    assert names[:4] == [r["name"] for r in json.loads(before)["runs"]]
    assert names[4:] == ["inspo-s2", "n-parent-2-s2", "inspo-s3", "n-parent-2-s3"]
    assert wider.stdout.splitlines()[:4] == first.stdout.splitlines()[:4]
    assert len([line for line in wider.stdout.splitlines() if " train " in line]) == 8
    again = plan("0,1,2,3")  # now the planned seeds: continued, with nothing added
    assert again.exit_code == 0 and "added seed" not in again.stderr
    assert_one_line_error(plan("0,1"), "plans seeds 0, 1, 2, 3); pass those")  # fewer seeds than planned


def test_a_sweep_files_seeds_extended_add_runs_and_keep_the_finished_ones(repo_root, monkeypatch, tmp_path):
    monkeypatch.chdir(repo_root)
    sweep, out = tmp_path / "sweep.yaml", tmp_path / "abl"

    def plan(seeds):
        sweep.write_text(f"recipe: recipes/demo.yaml\nseeds: {seeds}\nvariants:\n  a: []\n  b: [training.steps=2]\n")
        return invoke("ablate", "--sweep", sweep, "--out", out, "--print-commands")

    assert plan("[0]").exit_code == 0
    (out / "runs/a-s0").mkdir(parents=True)  # a run already there stays, named as before
    wider = plan("[0, 1]")
    assert wider.exit_code == 0, wider.output
    assert "added seed 1" in wider.stderr and (out / "runs/a-s0").is_dir()
    assert [r["name"] for r in json.loads((out / "plan.json").read_text())["runs"]] == ["a-s0", "b-s0", "a-s1", "b-s1"]


def test_printed_commands_run_as_printed(repo_root, monkeypatch, tmp_path):
    """Issue 29, class 5: the launcher is split by shell rules; an empty one is refused; a cut-off run is resumed
    from its own directory (a new --name would make <name>-2, which --collect never reads), one cut off before its
    first checkpoint is removed and started over; booleans are not seeds."""
    monkeypatch.chdir(repo_root)
    out = tmp_path / "abl"
    args = [
        "ablate",
        "--recipe",
        "recipes/demo.yaml",
        "--components",
        "constant",
        "--seeds",
        "0",
        "--out",
        out,
        "--print-commands",
    ]
    assert_one_line_error(invoke(*args, "--launcher", ""), "--launcher is empty")
    assert_one_line_error(invoke(*args, "--launcher", "accelerate launch --config_file 'my cfg"), "--launcher")
    assert not out.exists()  # refused before anything was written
    result = invoke(*args, "--launcher", "accelerate launch --config_file 'my cfg/x.yaml'")
    assert result.exit_code == 0, result.output
    first = shlex.split(result.stdout.splitlines()[0])
    assert first[:4] == ["accelerate", "launch", "--config_file", "my cfg/x.yaml"]

    ablation = AblationDir.open(out)
    cut = ablation.runs_dir / "demo-s0"  # run.json and a checkpoint: resumable
    (cut / "checkpoints/checkpoint-2/global_step2").mkdir(parents=True)
    (cut / "checkpoints/checkpoint-2/trainer_state.json").write_text("{}")
    (cut / "recipe.yaml").write_text((out / "recipes/demo.yaml").read_text())
    (cut / "run.json").write_text("{}")
    early = ablation.runs_dir / "components-constant-s0"  # cut off before its first checkpoint
    early.mkdir(parents=True)
    (early / "recipe.yaml").write_text((out / "recipes/components-constant.yaml").read_text())
    (early / "run.json").write_text("{}")
    lines = invoke(*args).stdout.splitlines()
    assert shlex.split(lines[0]) == ["inspo", "train", "--resume", str(cut)]
    assert lines[1].startswith(f"rm -rf -- {shlex.quote(str(early))} && inspo train --recipe ")
    assert "--name components-constant-s0" in lines[1]

    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump({"recipe": "recipes/demo.yaml", "seeds": [True, False], "variants": {"a": []}}))
    assert_one_line_error(invoke("ablate", "--sweep", sweep, "--dry-run"), "seeds must be a list of integers")
