"""`inspo ablate --scheduler slurm` on a real one-node SLURM (tests/helpers/slurm_cluster.py): a 2-variant x 2-seed
sweep of the tiny model as one job array; a task signalled as SLURM does before a time limit is requeued by submitit and
resumes from its checkpoint to the same metrics rows as an uninterrupted run; `--status`, `--collect --wait` and
the table agree; re-running the command submits nothing that is queued, running or finished."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time

import pytest
from helpers.ablation import tiny_sweep
from helpers.cli_helpers import assert_one_line_error, invoke
from helpers.runs import TIMING_KEYS, metrics


def test_bad_cluster_options_are_one_line_errors_before_anything_is_written(repo_root, monkeypatch, tmp_path):
    monkeypatch.chdir(repo_root)
    base = ["ablate", "--proposer", "paraphrase", "--seeds", "0", "--out", tmp_path / "a", "--scheduler", "slurm"]
    for extra, message in (
        (["--time", "soon"], "--time 'soon'"),
        (["--mem-per-run", "lots"], "--mem-per-run"),
        (["--sbatch-option", "constraint"], "--sbatch-option 'constraint'"),
        (["--array-parallelism", "0"], "--array-parallelism 0"),
    ):
        assert_one_line_error(invoke(*base, *extra), message)
    assert_one_line_error(invoke(*base[:-2], "--scheduler", "pbs"), "--scheduler 'pbs'")
    assert_one_line_error(invoke(*base[:-2], "--wait"), "--wait waits for SLURM jobs")
    assert not (tmp_path / "a").exists()


@pytest.mark.slow
def test_an_ablation_as_a_slurm_job_array_survives_a_requeue_and_tabulates(
    slurm, tmp_path, repo_root, tiny_model_dir, monkeypatch
):
    sweep = tiny_sweep(tmp_path, repo_root, tiny_model_dir)
    out = tmp_path / "ablation"
    args = [
        "ablate",
        "--sweep",
        sweep,
        "--out",
        out,
        "--device",
        "cpu",
        "--scheduler",
        "slurm",
        "--time",
        "30",
        "--cpus-per-run",
        "1",
        "--array-parallelism",
        "2",
    ]
    submitted = invoke(*args)
    assert submitted.exit_code == 0, submitted.output
    assert "submitted 4 of 4 runs as job array" in submitted.stderr
    jobs = {run: entry["job"] for run, entry in json.loads((out / "jobs.json").read_text()).items()}
    assert sorted(jobs) == ["inspo-s0", "inspo-s1", "static-s0", "static-s1"]
    assert "nothing to submit" in invoke(*args).stderr  # all queued or running: not submitted twice

    # SLURM's warning before a time limit (submitit asks for USR2): the task is requeued and resumes
    checkpoint = out / "runs/inspo-s0/checkpoints/checkpoint-1/trainer_state.json"
    deadline = time.time() + 900
    while not checkpoint.is_file() and time.time() < deadline:
        time.sleep(0.05)
    assert checkpoint.is_file(), (out / "slurm").iterdir()
    requeued = lambda: json.loads((out / "jobs.json").read_text())["inspo-s0"].get("requeued", 0)  # noqa: E731
    for _ in range(20):
        # scancel retries by itself while SLURM answers "Job can not be altered now" (as it does once the signal has
        # made submitit requeue the task): it would signal the requeued task again. Stop it after 3 s.
        with contextlib.suppress(subprocess.TimeoutExpired):
            subprocess.run(["scancel", "--signal=USR2", jobs["inspo-s0"]], capture_output=True, timeout=3)
        deadline = time.time() + 5
        while requeued() == 0 and time.time() < deadline:
            time.sleep(0.1)
        if requeued():
            break
    else:
        pytest.fail(f"scancel --signal=USR2 {jobs['inspo-s0']} never reached the task")

    monkeypatch.setenv("INSPO_POLL_SECONDS", "2")
    collected = invoke("ablate", "--collect", out, "--wait")
    assert collected.exit_code == 0, collected.output
    table = json.loads((out / "ablation.json").read_text())
    assert [(row["variant"], row["n"]) for row in table["rows"]] == [("inspo", 2), ("static", 2)]

    status = json.loads(invoke("ablate", "--status", out, "--json").stdout)
    by_run = {row["run"]: row for row in status}
    assert {row["state"] for row in status} == {"finished"} and by_run["inspo-s0"]["requeued"] == 1
    ems = {row["variant"]: row["em"]["world"]["mean"] for row in table["rows"]}
    assert (by_run["inspo-s0"]["em"] + by_run["inspo-s1"]["em"]) / 2 == pytest.approx(ems["inspo"])
    text = invoke("ablate", "--status", out).stdout
    assert "inspo-s0: finished" in text and "requeued 1x" in text

    # the requeued run ends with the rows of the same run uninterrupted
    straight = invoke(
        "train",
        "--recipe",
        out / "recipes/inspo.yaml",
        "--set",
        "run.seed=0",
        "--name",
        "straight",
        "--output-dir",
        tmp_path / "straight",
        "--device",
        "cpu",
    )
    assert straight.exit_code == 0, straight.output
    strip = lambda rows: [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in rows]  # noqa: E731
    for have, want in zip(
        strip(metrics(out / "runs/inspo-s0")), strip(metrics(tmp_path / "straight/straight")), strict=True
    ):
        assert have == pytest.approx(want)
    assert "nothing to submit" in invoke(*args).stderr  # finished: not submitted again


def test_workers_split_the_visible_gpus_and_refuse_more_than_there_are(monkeypatch):
    from inspo_cli.ablation.workers import gpu_groups
    from inspo_cli.errors import InspoError

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3,4,5,6,7")
    assert gpu_groups(4, 2, "cuda") == ["0,1", "2,3", "4,5", "6,7"]
    assert gpu_groups(3, None, "cuda") == [None, None, None] and gpu_groups(2, 4, "cpu") == [None, None]
    with pytest.raises(InspoError, match="--workers 3 x --gpus-per-run 4 = 12 GPUs, but 8 are visible"):
        gpu_groups(3, 4, "cuda")


@pytest.mark.slow
def test_local_workers_run_an_ablation_two_at_a_time(tmp_path, repo_root, tiny_model_dir):
    sweep = tiny_sweep(tmp_path, repo_root, tiny_model_dir, seeds=[0], steps=2)
    out = tmp_path / "ablation"
    args = ["ablate", "--sweep", sweep, "--out", out, "--device", "cpu", "--workers", "2"]
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    assert "2 at once" in result.stderr and "inspo-s0: worker 1" in result.stderr
    assert "static-s0: worker 2" in result.stderr
    table = json.loads((out / "ablation.json").read_text())
    assert [(row["variant"], row["n"]) for row in table["rows"]] == [("inspo", 1), ("static", 1)]
    status = json.loads(invoke("ablate", "--status", out, "--json").stdout)
    assert {row["state"] for row in status} == {"finished"}
    again = invoke(*args)  # finished and evaluated: no worker starts
    assert again.exit_code == 0 and ": worker " not in again.stderr


def test_gpus_per_run_default_to_the_launchers_accelerate_config(repo_root, monkeypatch):
    from inspo_cli.ablation.slurm import launcher_gpus

    monkeypatch.chdir(repo_root)
    assert launcher_gpus("accelerate launch --config_file recipes/accelerate/8gpu-zero3.yaml") == 8
    assert launcher_gpus("inspo") is None and launcher_gpus("accelerate launch") is None


def test_the_dry_run_prints_the_array_it_would_submit_without_sbatch(repo_root, monkeypatch, tmp_path):
    # the command, on a machine without SLURM: the sbatch file, the resources per task, each task's command
    monkeypatch.chdir(repo_root)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no sbatch, no squeue
    out = tmp_path / "fig3"
    launcher = "accelerate launch --config_file recipes/accelerate/8gpu-zero3.yaml"
    result = invoke(
        "ablate",
        "--recipe",
        "recipes/qwen2.5-3b/inspo.yaml",
        "--study",
        "fig3",
        "--scheduler",
        "slurm",
        "--dry-run",
        "--partition",
        "gpu",
        "--cpus-per-run",
        "64",
        "--mem-per-run",
        "512G",
        "--time",
        "2-00:00",
        "--launcher",
        launcher,
        "--sbatch-option",
        "constraint=h100",
        "--out",
        out,
    )
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "job array of 21 tasks, one per run; each task: 8 GPUs, 64 CPUs, 512 GB, 1 node, 48:00:00" in text
    for line in (
        "#SBATCH --array=0-20%21",
        "#SBATCH --gpus-per-node=8",
        "#SBATCH --cpus-per-task=64",
        "#SBATCH --mem=512G",
        "#SBATCH --time=2880",
        "#SBATCH --partition=gpu",
        "#SBATCH --constraint=h100",
        "#SBATCH --signal=USR2@90",
        "-m submitit.core._submit",
    ):
        assert line in text, line
    assert (
        f"task 0  inspo-s0: {launcher} -m inspo_cli train --recipe {out}/recipes/inspo.yaml --set run.seed=0 "
        f"--name inspo-s0 --output-dir {out}/runs"
    ) in text
    assert "task 20  components-no-verify-s2:" in text
    assert not out.exists()  # a dry run writes nothing
    plan = json.loads(
        invoke(
            "ablate",
            "--recipe",
            "recipes/qwen2.5-3b/inspo.yaml",
            "--study",
            "fig3",
            "--scheduler",
            "slurm",
            "--dry-run",
            "--json",
            "--launcher",
            launcher,
            "--out",
            out,
        ).stdout
    )
    assert len(plan["slurm"]["tasks"]) == 21 and plan["slurm"]["tasks"][0]["run"] == "inspo-s0"
    assert "#SBATCH --gpus-per-node=8" in plan["slurm"]["sbatch"]


def test_sbatch_lines_cannot_be_injected_and_multi_node_needs_a_launcher_that_ranks_nodes(
    repo_root, monkeypatch, tmp_path
):
    monkeypatch.chdir(repo_root)
    base = [
        "ablate",
        "--proposer",
        "paraphrase",
        "--seeds",
        "0",
        "--out",
        tmp_path / "a",
        "--scheduler",
        "slurm",
        "--dry-run",
    ]
    assert_one_line_error(invoke(*base, "--partition", "gpu\n#SBATCH --exclusive"), "--partition")
    assert_one_line_error(invoke(*base, "--sbatch-option", "comment=a\nb"), "--sbatch-option comment")
    assert_one_line_error(invoke(*base, "--nodes-per-run", "2"), "--nodes-per-run 2 needs a launcher")
    two = invoke(*base, "--nodes-per-run", "2", "--launcher", "torchrun --nproc_per_node 8")
    assert two.exit_code == 0, two.output
    assert "#SBATCH --nodes=2" in two.stdout and "on each of its 2 nodes" in two.stdout


def test_each_node_of_a_multi_node_run_starts_the_launcher_with_its_rank_and_the_main_node(repo_root, monkeypatch):
    from inspo_cli.ablation.slurm import main_port, node_launcher

    monkeypatch.chdir(repo_root)
    launcher = "accelerate launch --config_file recipes/accelerate/8gpu-zero3.yaml"
    assert node_launcher(launcher, 2, 1, "gpu-a17", 23456) == (
        "accelerate launch --num_machines 2 --machine_rank 1 --main_process_ip gpu-a17 --main_process_port 23456 "
        "--num_processes 16 --config_file recipes/accelerate/8gpu-zero3.yaml"
    )
    assert node_launcher("torchrun --nproc_per_node 8", 4, 3, "n1", 20001) == (
        "torchrun --nnodes 4 --node_rank 3 --master_addr n1 --master_port 20001 --nproc_per_node 8"
    )
    assert main_port("4242_3") == main_port("4242_3") != main_port("4242_4")
    assert 20000 <= main_port("987654321_12") < 40000


def test_a_multi_node_task_trains_on_every_node_and_evaluates_on_the_first_only(repo_root, monkeypatch, tmp_path):
    # SLURM's environment for node 1 of a 2-node array task (what submitit's JobEnvironment reads)
    import inspo_cli.ablation.slurm as slurm
    from inspo_cli.ablation.directory import AblationDir
    from inspo_cli.ablation.plan import plan_axes

    monkeypatch.chdir(repo_root)
    plan = plan_axes(repo_root / "recipes/demo.yaml", [("proposer", ["paraphrase"])], [0], [])
    ablation = AblationDir.start(tmp_path / "a", plan)
    for key, value in {
        "SUBMITIT_EXECUTOR": "slurm",
        "SLURM_JOB_ID": "4242",
        "SLURM_ARRAY_JOB_ID": "4242",
        "SLURM_ARRAY_TASK_ID": "0",
        "SLURM_JOB_NUM_NODES": "2",
        "SLURM_JOB_NODELIST": "gpu-a[17-18]",
        "SLURM_NODEID": "1",
        "SLURM_PROCID": "1",
        "SLURM_LOCALID": "0",
        "SLURM_NTASKS": "2",
    }.items():
        monkeypatch.setenv(key, value)
    started, evaluated = [], []
    monkeypatch.setattr(
        slurm.subprocess, "run", lambda command: started.append(command) or type("Done", (), {"returncode": 0})()
    )
    monkeypatch.setattr(slurm, "run_one", lambda *a, launcher: evaluated.append(launcher) or "finished")
    run = plan.runs()[0].name
    assert slurm.RunTask()(str(ablation.path), run, "cuda", "best", "torchrun --nproc_per_node 8") == "finished"
    assert started == [
        [
            "torchrun",
            "--nnodes",
            "2",
            "--node_rank",
            "1",
            "--master_addr",
            "gpu-a17",
            "--master_port",
            str(slurm.main_port("4242_0")),
            "--nproc_per_node",
            "8",
            "-m",
            "inspo_cli",
            "train",
            "--recipe",
            str(ablation.recipe_file(plan.runs()[0].variant)),
            "--set",
            "run.seed=0",
            "--name",
            run,
            "--output-dir",
            str(ablation.runs_dir),
            "--device",
            "cuda",
        ]
    ]
    assert evaluated == []  # node 1 neither evaluates nor records
    monkeypatch.setenv("SLURM_NODEID", "0")
    monkeypatch.setenv("SLURM_PROCID", "0")
    slurm.RunTask()(str(ablation.path), run, "cuda", "best", "torchrun --nproc_per_node 8")
    assert len(started) == 1  # node 0 does the whole run (train, evaluate, record), with its rank in the launcher
    assert evaluated == [
        f"torchrun --nnodes 2 --node_rank 0 --master_addr gpu-a17 --master_port "
        f"{slurm.main_port('4242_0')} --nproc_per_node 8"
    ]


def test_status_sees_a_local_run_while_its_process_lives(tmp_path, repo_root, monkeypatch):
    import os

    from inspo_cli.ablation.directory import AblationDir
    from inspo_cli.ablation.plan import plan_axes
    from inspo_cli.ablation.status import local_job

    monkeypatch.chdir(repo_root)
    plan = plan_axes(repo_root / "recipes/demo.yaml", [("proposer", ["paraphrase", "history"])], [0], [])
    ablation = AblationDir.start(tmp_path / "a", plan)
    dead = subprocess.Popen(["true"])
    dead.wait()
    first, second = (run.name for run in plan.runs()[:2])
    ablation.record_jobs({first: local_job(os.getpid()), second: local_job(dead.pid)})
    ablation.record_failure(plan.runs()[1], "Traceback (most recent call last):\n  ...\nValueError: something broke\n")
    rows = {row["run"]: row for row in json.loads(invoke("ablate", "--status", tmp_path / "a", "--json").stdout)}
    assert rows[first]["state"] == "running" and rows[second]["state"] == "failed"
    assert rows[second]["error"] == "ValueError: something broke"  # the last error line
    lines = invoke("ablate", "--status", tmp_path / "a").stdout.splitlines()
    assert lines[0].startswith(f"{first}: running, job local:") and "last error: ValueError" in lines[1]


def test_status_asks_squeue_for_active_jobs_and_sacct_why_a_job_ended(tmp_path, repo_root, monkeypatch):
    # squeue and sacct as they answer on a cluster with accounting (stand-ins on PATH: the test SLURM has none)
    from inspo_cli.ablation.directory import AblationDir
    from inspo_cli.ablation.plan import plan_axes

    monkeypatch.chdir(repo_root)
    plan = plan_axes(repo_root / "recipes/demo.yaml", [("proposer", ["paraphrase", "history"])], [0], [])
    ablation = AblationDir.start(tmp_path / "a", plan)
    names = [run.name for run in plan.runs()]
    ablation.record_jobs({names[0]: "77_0", names[1]: "77_1", names[2]: "77_2"})
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "squeue").write_text("#!/bin/sh\necho '77_0|PENDING'\necho '77_1|RUNNING'\n")
    (bin_dir / "sacct").write_text(
        "#!/bin/sh\necho '77_2|OUT_OF_MEMORY'\necho '77_2.batch|OUT_OF_MEMORY'\necho '77_0|CANCELLED by 0'\n"
    )
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    rows = {row["run"]: row for row in json.loads(invoke("ablate", "--status", tmp_path / "a", "--json").stdout)}
    assert [rows[n]["state"] for n in names] == ["queued", "running", "stopped"]
    assert rows[names[2]]["slurm"] == "OUT_OF_MEMORY" and rows[names[0]]["slurm"] is None
    assert f"{names[2]}: stopped, job 77_2, SLURM: OUT_OF_MEMORY" in invoke("ablate", "--status", tmp_path / "a").stdout
