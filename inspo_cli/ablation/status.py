"""Where each run of an ablation is: `inspo ablate --status DIR` and `--collect DIR --wait`.

    states = run_states(ablation)          # one RunState per planned run
    print(states[0].line())                # inspo-s0: running, job 4242_0, step 37, requeued 1x
    wait(ablation)                         # block until no run is queued or running

A run's state comes from its directory (finished: summary.json; stopped: run.json without it), failures.json (the
last attempt's error), jobs.json (the job it was last started as: a SLURM array task `4242_0`, or a local process
`local:<host>:<pid>` of `--workers` or a sequential `inspo ablate`) and, for SLURM jobs, the queue (`squeue`).
A queued or running job wins over what the directory says. A SLURM job that ended without a result or an error of
its own (cancelled, out of memory, a node failure) is asked of `sacct` where accounting runs. No submitit needed:
it also follows local runs.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from dataclasses import asdict, dataclass

from inspo_cli.ablation.directory import ABSENT, FINISHED, PARTIAL, AblationDir

QUEUED, RUNNING, FAILED = "queued", "running", "failed"
SLURM_ACTIVE = {"PENDING": QUEUED, "CONFIGURING": QUEUED, "REQUEUED": QUEUED, "REQUEUE_HOLD": QUEUED,
                "REQUEUE_FED": QUEUED, "RESV_DEL_HOLD": QUEUED, "SUSPENDED": QUEUED, "RUNNING": RUNNING,
                "COMPLETING": RUNNING, "STAGE_OUT": RUNNING, "SIGNALING": RUNNING, "RESIZING": RUNNING}


@dataclass
class RunState:
    run: str
    state: str  # not started | queued | running | stopped | finished | finished (not evaluated) | failed
    job: str | None = None
    step: int | None = None  # the last step logged
    em: float | None = None  # finished: the average EM at the step the table reports
    error: str | None = None  # failed: the last error line
    requeued: int = 0
    slurm: str | None = None  # stopped: how SLURM ended its last job (sacct), e.g. OUT_OF_MEMORY

    def line(self) -> str:
        parts = [f"{self.run}: {self.state}"]
        if self.job:
            parts.append(f"job {self.job}")
        if self.step is not None and self.state in (RUNNING, "stopped", QUEUED):
            parts.append(f"step {self.step}")
        if self.em is not None:
            parts.append(f"EM {self.em:.3f}")
        if self.requeued:
            parts.append(f"requeued {self.requeued}x")
        if self.slurm:
            parts.append(f"SLURM: {self.slurm}")
        if self.error:
            parts.append(f"last error: {self.error}")
        return ", ".join(parts)


def local_job(pid: int | None = None) -> str:
    """How jobs.json names a run started on this machine: local:<host>:<pid>."""
    return f"local:{socket.gethostname()}:{pid or os.getpid()}"


def slurm_jobs() -> dict[str, str]:
    """Queued and running SLURM jobs of this user as {"<array>_<task>" or "<job>": state}; {} without squeue."""
    if shutil.which("squeue") is None:
        return {}
    try:
        out = subprocess.run(["squeue", "--noheader", "--array", "--me", "--format=%i|%T"], capture_output=True,
                             text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return {}
    jobs = {}
    for line in out.stdout.splitlines():
        job, _, status = line.strip().partition("|")
        if job:
            jobs[job] = status
    return jobs


def ended_jobs(jobs: list[str]) -> dict[str, str]:
    """How SLURM ended these jobs, {job: state} (CANCELLED, TIMEOUT, OUT_OF_MEMORY, ...); {} without accounting."""
    if not jobs or shutil.which("sacct") is None:
        return {}
    try:
        out = subprocess.run(["sacct", "--noheader", "--parsable2", "--format=JobID,State", f"--jobs={','.join(jobs)}"],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return {}
    ended = {}
    for line in out.stdout.splitlines() if out.returncode == 0 else []:
        job, _, state = line.strip().partition("|")
        if job in jobs and state:
            ended[job] = state.split()[0]  # "CANCELLED by 0" -> CANCELLED
    return ended


def active_state(job: str | None, queue: dict[str, str]) -> str | None:
    """queued or running when `job` is (in SLURM's queue, or a live local process on this host), else None."""
    if not job:
        return None
    if job.startswith("local:"):
        _, host, pid = job.split(":", 2)
        if host != socket.gethostname() or not pid.isdigit():
            return None  # another machine's process: this one cannot tell
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass  # alive, another user's
        return RUNNING
    return SLURM_ACTIVE.get(queue[job], RUNNING) if job in queue else None


def run_states(ablation: AblationDir, rule: str = "best") -> list[RunState]:
    """Where every planned run is, from its directory, failures.json, jobs.json and the queue."""
    from inspo_cli.ablation.results import read_result

    jobs, failures = ablation.jobs(), ablation.failures()
    queue = slurm_jobs() if any(not e.get("job", "local:").startswith("local:") for e in jobs.values()) else {}
    states = []
    for run in ablation.plan.runs():
        entry = jobs.get(run.name, {})
        directory = ablation.run_dir(run)
        status = ablation.status(run)
        metrics = directory.metrics() if status != ABSENT else []
        row = RunState(run.name, "not started", entry.get("job"), metrics[-1]["step"] if metrics else None,
                       requeued=entry.get("requeued", 0))
        if (active := active_state(row.job, queue)) is not None:
            row.state = active
        elif run.name in failures:
            row.state, row.error = FAILED, ([line for line in failures[run.name].splitlines() if line.strip()]
                                            or [""])[-1].strip()
        elif status == FINISHED:
            result, _ = read_result(directory, run.seed, rule)
            row.state, row.em = ("finished", result.average()) if result else ("finished (not evaluated)", None)
        elif status == PARTIAL or row.job and not row.job.startswith("local:"):
            row.state = "stopped"
        states.append(row)
    stopped = {row.job: row for row in states
               if row.state == "stopped" and row.job and not row.job.startswith("local:")}
    for job, state in ended_jobs(list(stopped)).items():
        stopped[job].slurm = state
    return states


def wait(ablation: AblationDir, on_event=print, poll_s: float | None = None) -> list[RunState]:
    """Block until no run of the ablation is queued or running (a line whenever the counts change); the final
    states. It looks every `poll_s` seconds (default `INSPO_POLL_SECONDS`, else 30: squeue is a query to the
    controller, which clusters ask users not to make often)."""
    poll_s = float(os.environ.get("INSPO_POLL_SECONDS", 30)) if poll_s is None else poll_s
    last = None
    while True:
        states = run_states(ablation)
        counts: dict[str, int] = {}
        for s in states:
            counts[s.state] = counts.get(s.state, 0) + 1
        summary = ", ".join(f"{n} {name}" for name, n in counts.items())
        if summary != last:
            on_event(f"{time.strftime('%H:%M:%S')} {summary}")
            last = summary
        if not any(s.state in (QUEUED, RUNNING) for s in states):
            return states
        time.sleep(poll_s)


def as_json(states: list[RunState]) -> str:
    return json.dumps([asdict(s) for s in states], indent=2)
