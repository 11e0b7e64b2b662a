"""Job tracking fails closed: a queue that cannot be read is not an empty one (nothing is submitted twice, `--status`
says "unknown", `--wait` gives up with exit 3), a pid the OS reused is not the run, a run with its result is
finished, `--collect --wait` exits 0 / 1 / 2 / 3 for all results / some missing / bad input / no scheduler, sbatch's
refusals are one line quoting SLURM, and jobs.json, INSPO_POLL_SECONDS, sbatch options and the launcher's config
are checked like any input. squeue, sbatch and srun are stand-in scripts on PATH (the real SLURM is test_slurm.py)."""

from __future__ import annotations

import json
import os
import shutil
import socket

import pytest
from helpers.cli_helpers import assert_one_line_error, invoke
from helpers.run_dirs import fake_run_dir

from inspo_cli.ablation.directory import AblationDir
from inspo_cli.ablation.plan import plan_axes

UNREACHABLE = "slurm_load_jobs error: Unable to contact slurm controller (connect failure)"
SQUEUE_DOWN = f"echo '{UNREACHABLE}' >&2; exit 1"


def stand_ins(tmp_path, monkeypatch, **scripts: str):
    """SLURM's commands as shell scripts (name -> body) on a PATH of their own: a real SLURM installed here (CI
    installs one) must not answer instead, nor its sacct."""
    bin_dir = tmp_path / "bin"
    if not bin_dir.is_dir():
        bin_dir.mkdir()
        (bin_dir / "wc").symlink_to(shutil.which("wc"))  # what the scripts use besides the shell's builtins
    for name, body in scripts.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    return bin_dir


def sbatch_that_submits(tmp_path) -> str:
    return f"echo \"$@\" >> {tmp_path}/sbatch.calls; echo 'Submitted batch job 4242'"


def calls(tmp_path) -> int:
    file = tmp_path / "sbatch.calls"
    return len(file.read_text().splitlines()) if file.is_file() else 0


def assert_one_line(result, code: int, *fragments):
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == code, result.output
    assert lines and lines[-1].startswith("error: ") and "Traceback" not in result.output, result.output
    for fragment in fragments:
        assert fragment in lines[-1], lines[-1]


def ablation_of(tmp_path, repo_root, seeds=(0,)) -> AblationDir:
    plan = plan_axes(repo_root / "recipes/demo.yaml", [("proposer", ["paraphrase", "history"])], list(seeds), [])
    return AblationDir.start(tmp_path / "a", plan)


def states(path) -> dict[str, dict]:
    result = invoke("ablate", "--status", path, "--json")
    assert result.exit_code == 0, result.output
    return {row["run"]: row for row in json.loads(result.stdout)}


SUBMIT = ["ablate", "--proposer", "paraphrase", "--seeds", "0", "--scheduler", "slurm"]


def test_a_failing_squeue_is_not_an_empty_queue(tmp_path, repo_root, monkeypatch):
    monkeypatch.chdir(repo_root)
    out = tmp_path / "out"
    stand_ins(tmp_path, monkeypatch, sbatch=sbatch_that_submits(tmp_path), srun="exit 0", squeue="exit 0")
    first = invoke(*SUBMIT, "--out", out)
    assert first.exit_code == 0, first.output
    assert "submitted 2 of 2 runs as job array 4242" in first.stderr and calls(tmp_path) == 1
    stand_ins(tmp_path, monkeypatch, squeue="echo '4242_0|RUNNING'; echo '4242_1|PENDING'")
    assert "nothing to submit" in invoke(*SUBMIT, "--out", out).stderr and calls(tmp_path) == 1

    for squeue, why in (
        (SQUEUE_DOWN, f"squeue failed (exit 1): {UNREACHABLE}"),
        ("echo 'Segmentation fault'", "squeue answered 'Segmentation fault'"),
        ("exec /nonexistent", "squeue failed (exit 127)"),
    ):
        stand_ins(tmp_path, monkeypatch, squeue=squeue)
        again = invoke(*SUBMIT, "--out", out)
        assert_one_line(
            again,
            3,
            "cannot tell whether demo-s0 (job 4242_0) is still queued or running",
            why,
            "nothing was submitted",
        )
        assert calls(tmp_path) == 1  # the running tasks were not submitted a second time
        rows = states(out)
        assert {row["state"] for row in rows.values()} == {"unknown"}  # not "stopped"
        assert why in rows["demo-s0"]["why"]


def test_a_reused_pid_is_not_the_run_and_a_run_with_its_result_is_finished(tmp_path, repo_root, monkeypatch):
    from inspo_cli.ablation.status import local_job

    monkeypatch.chdir(repo_root)
    ablation = ablation_of(tmp_path, repo_root, seeds=(0, 1))
    names = [run.name for run in ablation.plan.runs()]
    me, host = local_job(os.getpid()), socket.gethostname()
    assert me.startswith(f"local:{host}:{os.getpid()}:")  # the pid and the process's start time
    jobs = {
        names[0]: {"job": me},  # this very process: running
        names[1]: {"job": me + "1"},  # this pid, but a process that started at another time: not the run
        names[2]: {"job": f"local:{host}:{os.getpid()}", "started": "2001-01-01T00:00:00+0000"},  # an earlier
        names[3]: {"job": f"local:{host}:{os.getpid()}", "started": "2100-01-01T00:00:00+0000"},  # version's
        names[4]: {"job": me},
    }  # alive, but its run is finished with its result
    (tmp_path / "a/jobs.json").write_text(json.dumps(jobs))
    fake_run_dir(ablation, names[4], {"world": 0.4})
    rows = states(tmp_path / "a")
    assert [rows[n]["state"] for n in names[:5]] == ["running", "not started", "not started", "running", "finished"]
    assert rows[names[4]]["em"] == pytest.approx(0.4)


def test_collect_wait_exits_0_1_2_or_3(tmp_path, repo_root, monkeypatch):
    import inspo_cli.ablation.status as status

    monkeypatch.chdir(repo_root)
    monkeypatch.setenv("INSPO_POLL_SECONDS", "1")
    ablation = ablation_of(tmp_path, repo_root)
    names = [run.name for run in ablation.plan.runs()]
    ablation.record_jobs({name: f"77_{i}" for i, name in enumerate(names)})
    stand_ins(tmp_path, monkeypatch, squeue=SQUEUE_DOWN)
    for name in names:
        fake_run_dir(ablation, name, {"world": 0.3})
    collected = invoke("ablate", "--collect", ablation.path, "--wait")  # results win: squeue is not even needed
    assert collected.exit_code == 0, collected.output

    for name in names[1:]:  # two failed runs: 1, not their number (2 would read as bad input)
        (ablation.runs_dir / name / "summary.json").unlink()
        ablation.record_failure(next(r for r in ablation.plan.runs() if r.name == name), "out of memory")
    stand_ins(tmp_path, monkeypatch, squeue="exit 0")
    assert invoke("ablate", "--collect", ablation.path, "--wait").exit_code == 1
    ablation.failures_file.unlink()  # stopped without an error (cancelled): no result, so not 0 either
    assert invoke("ablate", "--collect", ablation.path, "--wait").exit_code == 1

    stand_ins(tmp_path, monkeypatch, squeue=SQUEUE_DOWN)
    monkeypatch.setattr(status, "SCHEDULER_PATIENCE_S", 0.0)
    assert_one_line(invoke("ablate", "--collect", ablation.path, "--wait"), 3, "gave up waiting", UNREACHABLE)
    assert_one_line_error(invoke("ablate", "--collect", tmp_path, "--wait"), "not an ablation directory")


def test_wait_outlasts_a_brief_squeue_failure(tmp_path, repo_root, monkeypatch):
    from inspo_cli.ablation.status import SchedulerUnavailable, wait

    monkeypatch.chdir(repo_root)
    ablation = ablation_of(tmp_path, repo_root)
    ablation.record_jobs({ablation.plan.runs()[0].name: "77_0"})
    counter = tmp_path / "asked"
    answers_third_time = f"echo x >> {counter}; [ $(wc -l < {counter}) -gt 2 ] || {{ {SQUEUE_DOWN}; }}"
    stand_ins(tmp_path, monkeypatch, squeue=answers_third_time)
    events = []
    final = wait(ablation, events.append, poll_s=0.01, patience_s=30)
    assert final[0].state == "stopped" and len(counter.read_text().splitlines()) == 3
    assert "cannot ask SLURM" in events[0] and UNREACHABLE in events[0]
    stand_ins(tmp_path, monkeypatch, squeue=SQUEUE_DOWN)
    with pytest.raises(SchedulerUnavailable, match="gave up waiting after SLURM could not be asked for 0.05 s"):
        wait(ablation, events.append, poll_s=0.01, patience_s=0.05)


def test_sbatch_refusals_are_one_line_quoting_slurm(tmp_path, repo_root, monkeypatch):
    monkeypatch.chdir(repo_root)
    refusal = "sbatch: error: Batch job submission failed: Invalid partition name specified"
    for sbatch, fragments in (
        (f"echo '{refusal}' >&2; exit 1", ("sbatch refused the job array", refusal)),
        ("exit 1", ("sbatch refused the job array", "exited with code 1")),
        ("echo 'Hello from the cluster'", ("sbatch answered 'Hello from the cluster'", "names no job")),
    ):
        stand_ins(tmp_path, monkeypatch, sbatch=sbatch, srun="exit 0", squeue="exit 0")
        result = invoke(*SUBMIT, "--out", tmp_path / "out", "--partition", "nope")
        assert_one_line_error(result, *fragments)
        assert not (tmp_path / "out/jobs.json").exists()


@pytest.mark.parametrize("missing", ["sbatch", "srun", "squeue"])
def test_slurm_commands_are_checked_before_the_plan_is_written(tmp_path, repo_root, monkeypatch, missing):
    monkeypatch.chdir(repo_root)
    stand_ins(tmp_path, monkeypatch, **{tool: "exit 0" for tool in ("sbatch", "srun", "squeue") if tool != missing})
    assert_one_line_error(invoke(*SUBMIT, "--out", tmp_path / "out"), f"{missing} is not on PATH")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "content, fragment",
    [
        ("{", "not valid JSON"),
        ('{"demo-s0": {"job": 5}}', "expected a string"),
        ('{"demo-s0": {"job": "local:HOST:\u00b2"}}', "neither a SLURM job id"),  # passes str.isdigit, not int()
        ('{"demo-s0": {"job": "local:HOST:\u0661\u0662\u0663"}}', "neither a SLURM job id"),  # Arabic-Indic digits
        ('{"demo-s0": {"job": "local:HOST:' + "9" * 30 + '"}}', "neither a SLURM job id"),  # os.kill overflows
        ('{"demo-s0": {"job": "local:HOST:0"}}', "neither a SLURM job id"),
        ('{"demo-s0": {"job": "4242_0; rm -rf ~"}}', "neither a SLURM job id"),
        ('{"demo-s0": {"job": "4242_0", "requeued": -3}}', "expected an integer in [0, 1000000], got int -3"),
        ("DIR", "is not a regular file"),
        ("FIFO", "is not a regular file"),
        ("HUGE", "more than the 16,777,216"),
    ],
)
def test_a_damaged_jobs_json_is_one_line_naming_it(tmp_path, repo_root, monkeypatch, content, fragment):
    monkeypatch.chdir(repo_root)
    ablation = ablation_of(tmp_path, repo_root)
    file = ablation.jobs_file
    if content == "DIR":
        file.mkdir()
    elif content == "FIFO":
        os.mkfifo(file)
    elif content == "HUGE":
        with open(file, "wb") as f:
            f.truncate(17 << 20)
    else:
        file.write_text(content.replace("HOST", socket.gethostname()), encoding="utf-8")
    stand_ins(tmp_path, monkeypatch, squeue="exit 0")
    assert_one_line_error(invoke("ablate", "--status", ablation.path), "jobs.json", fragment)
    assert_one_line_error(invoke("ablate", "--collect", ablation.path, "--wait"), "jobs.json", fragment)


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "1e400", "soon", "1e9", "0.001"])
def test_a_hostile_poll_interval_is_refused_not_a_busy_loop(tmp_path, repo_root, monkeypatch, value):
    monkeypatch.chdir(repo_root)
    ablation = ablation_of(tmp_path, repo_root)
    monkeypatch.setenv("INSPO_POLL_SECONDS", value)
    assert_one_line_error(invoke("ablate", "--collect", ablation.path, "--wait"), "INSPO_POLL_SECONDS")
    stand_ins(tmp_path, monkeypatch, sbatch=sbatch_that_submits(tmp_path), srun="exit 0", squeue="exit 0")
    assert_one_line_error(invoke(*SUBMIT, "--out", tmp_path / "out", "--wait"), "INSPO_POLL_SECONDS")
    assert calls(tmp_path) == 0 and not (tmp_path / "out").exists()  # refused before anything was submitted


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--sbatch-option", "array=0-3"], "--sbatch-option array: set it with --array-parallelism"),
        (["--sbatch-option", "time=5"], "set it with --time"),
        (
            ["--sbatch-option", "part=gpu"],
            "--sbatch-option part: set it with --partition",
        ),  # sbatch takes abbreviations
        (["--sbatch-option", "output=/tmp/x"], "set --output themselves"),
        (["--sbatch-option", "signal=USR1@60"], "set --signal themselves"),
        (["--sbatch-option", "parsable=1"], "set --parsable themselves"),
        (["--sbatch-option", "comment=a\tb"], "printable"),
        (["--sbatch-option", "comment=" + "x" * 2000], "at most 1000"),
        (["--partition", "gpu a100"], "without spaces"),
        (["--time", "9" * 5000], "--time"),
        (["--time", "400-00:00"], "more than a year"),
        (["--mem-per-run", "9" * 400 + "G"], "--mem-per-run"),
        (["--mem-per-run", "2000000T"], "more than"),
        (["--gpus-per-run", "100000"], "--gpus-per-run 100000: must be from 0 to 256"),
        (["--cpus-per-run", "10000000000000000000000"], "--cpus-per-run"),
        (["--out", "/tmp/my runs/a"], "cannot carry"),
        (["--out", "/tmp/100%/a"], "cannot carry"),
    ],
)
def test_sbatch_options_are_checked_before_anything_is_written(tmp_path, repo_root, monkeypatch, args, fragment):
    monkeypatch.chdir(repo_root)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # a dry run: no SLURM needed
    out = ["--out", tmp_path / "a"] if "--out" not in args else []
    assert_one_line_error(invoke(*SUBMIT, "--dry-run", *out, *args), fragment)
    assert not (tmp_path / "a").exists()


def test_sbatch_options_of_the_users_own_pass(tmp_path, repo_root, monkeypatch):
    monkeypatch.chdir(repo_root)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    result = invoke(
        *SUBMIT,
        "--dry-run",
        "--out",
        tmp_path / "a",
        "--sbatch-option",
        "gpus=2",
        "--sbatch-option",
        "constraint=a100|h100",
        "--sbatch-option",
        "comment=paper run 3",
    )
    assert result.exit_code == 0, result.output
    for line in ("#SBATCH --gpus=2", "#SBATCH --constraint='a100|h100'", "#SBATCH --comment='paper run 3'"):
        assert line in result.stdout, line


def test_the_launchers_accelerate_config_is_read_as_checked_input(tmp_path, repo_root, monkeypatch):
    from inspo_cli.ablation.slurm import launcher_gpus
    from inspo_cli.errors import InspoError

    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "bad.yaml").write_text("num_processes: [8\n")
    (tmp_path / "bool.yaml").write_text("num_processes: true\n")
    (tmp_path / "huge.yaml").write_text("# " + "x" * (2 << 20) + "\n")
    for path, message in (
        (tmp_path / "fifo", "not a regular file"),
        (tmp_path, "is a directory"),
        ("/dev/zero", "not a regular file"),
        (tmp_path / "bad.yaml", "not valid YAML"),
        (tmp_path / "huge.yaml", "more than the 1,048,576 it may have"),
        (tmp_path / "none", "does not exist"),
    ):
        with pytest.raises(InspoError, match=message):
            launcher_gpus(f"accelerate launch --config_file {path}")
    assert launcher_gpus(f"accelerate launch --config_file {tmp_path / 'bool.yaml'}") is None
