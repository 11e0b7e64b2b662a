"""Where each run of an ablation is: `inspo ablate --status DIR` and `--collect DIR --wait`.

    states = run_states(ablation)          # one RunState per planned run
    print(states[0].line())                # inspo-s0: running, job 4242_0, step 37, requeued 1x
    wait(ablation)                         # block until no run is queued or running

A run's state comes from its directory (finished: summary.json; stopped: run.json without it), failures.json (the
last attempt's error), jobs.json (the job it was last started as: a SLURM array task `4242_0`, or a local process
`local:<host>:<pid>:<start>` of `--workers` or a sequential `inspo ablate`) and, for SLURM jobs, the queue (`squeue`).
A run with its result (summary.json and the evaluation the table reports) is finished whatever else is recorded;
otherwise a queued or running job wins over what the directory says. A SLURM job that ended without a result or an
error of its own (cancelled, out of memory, a node failure) is asked of `sacct` where accounting runs.

The signals fail closed. A queue that cannot be read (squeue missing, failing, timing out, answering garbage) is
not an empty queue: its runs are "unknown", submitting refuses and `--wait` gives up after `SCHEDULER_PATIENCE_S`
(`SchedulerUnavailable`, exit 3), since reading it as empty would submit running runs a second time into the same
run directory. A local process is identified by its pid and its start time (/proc/<pid>/stat), so a pid the OS has
given to another process since is not taken for the run; jobs.json files of earlier versions (a pid alone) are
checked against the time the job was recorded. No submitit needed: it also follows local runs.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import socket
import subprocess
import time
from dataclasses import asdict, dataclass

from inspo_cli.ablation.directory import ABSENT, FINISHED, PARTIAL, AblationDir
from inspo_cli.ablation.results import read_result
from inspo_cli.envvars import env_seconds
from inspo_cli.errors import InspoError

QUEUED, RUNNING, FAILED, UNKNOWN = "queued", "running", "failed", "unknown"
SLURM_ACTIVE = {
    "PENDING": QUEUED,
    "CONFIGURING": QUEUED,
    "REQUEUED": QUEUED,
    "REQUEUE_HOLD": QUEUED,
    "REQUEUE_FED": QUEUED,
    "RESV_DEL_HOLD": QUEUED,
    "SUSPENDED": QUEUED,
    "RUNNING": RUNNING,
    "COMPLETING": RUNNING,
    "STAGE_OUT": RUNNING,
    "SIGNALING": RUNNING,
    "RESIZING": RUNNING,
}
SCHEDULER_PATIENCE_S = 600.0  # --wait outlasts a controller restart, not an outage: then it says so (exit 3)
SCHEDULER_TIMEOUT_S = 60  # one squeue or sacct call
PID_MAX = 1 << 22  # Linux's largest pid_max
_SLURM_JOB = re.compile(r"[0-9]{1,18}(?:_[0-9]{1,9})?", re.ASCII)  # a job, or a task of an array
_LOCAL_JOB = re.compile(r"local:([A-Za-z0-9._-]{1,255}):([0-9]{1,10})(?::([0-9]{1,20}))?", re.ASCII)
_QUEUE_LINE = re.compile(r"([0-9][0-9_+\[\]%,-]*)\|([A-Z_]+)", re.ASCII)  # squeue --format=%i|%T
_FIX = "fix or delete that entry (jobs.json only records the job each run was last started as)"


class SchedulerUnavailable(InspoError):
    """SLURM (or the machine a local run was started on) could not be asked whether a run is still queued or
    running. Commands stop (exit 3) instead of guessing: a guess of "not running" submits a run twice."""

    exit_code = 3


@dataclass
class RunState:
    run: str
    state: str  # not started | queued | running | stopped | finished | finished (not evaluated) | failed | unknown
    job: str | None = None
    step: int | None = None  # the last step logged
    em: float | None = None  # finished: the average EM at the step the table reports
    error: str | None = None  # failed: the last error line
    requeued: int = 0
    slurm: str | None = None  # stopped: how SLURM ended its last job (sacct), e.g. OUT_OF_MEMORY
    why: str | None = None  # unknown: why it cannot be told whether the job is still queued or running

    def line(self) -> str:
        parts = [f"{self.run}: {self.state}"]
        if self.job:
            parts.append(f"job {self.job}")
        if self.step is not None and self.state in (RUNNING, "stopped", QUEUED, UNKNOWN):
            parts.append(f"step {self.step}")
        if self.em is not None:
            parts.append(f"EM {self.em:.3f}")
        if self.requeued:
            parts.append(f"requeued {self.requeued}x")
        if self.slurm:
            parts.append(f"SLURM: {self.slurm}")
        if self.why:
            parts.append(f"cannot tell: {self.why}")
        if self.error:
            parts.append(f"last error: {self.error}")
        return ", ".join(parts)


@dataclass(frozen=True)
class LocalProcess:
    host: str
    pid: int
    start: int | None  # clock ticks after boot (/proc/<pid>/stat field 22); None in jobs.json of earlier versions


def parse_job(job: str) -> str | LocalProcess:
    """A job as jobs.json records it: a SLURM job id (returned as is) or a `LocalProcess`; ValueError otherwise."""
    if _SLURM_JOB.fullmatch(job):
        return job
    match = _LOCAL_JOB.fullmatch(job)
    if match is None or not 0 < int(match[2]) < PID_MAX:
        raise ValueError(
            f"{json.dumps(job[:60])} is neither a SLURM job id (4242 or 4242_0) nor a local process "
            "(local:<host>:<pid>:<start>)"
        )
    return LocalProcess(match[1], int(match[2]), int(match[3]) if match[3] else None)


def local_job(pid: int | None = None) -> str:
    """How jobs.json names a run started on this machine: local:<host>:<pid>:<start> (the start time tells this
    process from a later one the OS gives the same pid; left out where there is no /proc)."""
    pid = pid or os.getpid()
    start = _proc_stat(pid)
    return f"local:{_host()}:{pid}" + (f":{start[1]}" if start else "")


def _host() -> str:
    """This machine's name as jobs.json records it (anything but a letter, digit, '.', '_' or '-' as '_')."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", socket.gethostname())[:255] or "_"


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, start time in clock ticks after boot) of a process, from /proc; None when there is no such process
    (or no /proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read(4096).decode("ascii", "replace")
        fields = text[text.rindex(")") + 2 :].split()  # after the command name, which may hold spaces and ")"
        return fields[0], int(fields[19])  # fields 3 and 22
    except (OSError, ValueError, IndexError):
        return None


def _boot_time() -> float | None:
    try:
        with open("/proc/stat", "rb") as f:
            for line in f.read(1 << 20).decode("ascii", "replace").splitlines():
                if line.startswith("btime "):
                    return float(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def _recorded_at(started: object) -> float | None:
    """When record_jobs noted the job (jobs.json's "started", local time with its offset), as a Unix time."""
    try:
        return datetime.datetime.strptime(str(started), "%Y-%m-%dT%H:%M:%S%z").timestamp()
    except ValueError:
        return None


def local_alive(process: LocalProcess, started: object = None) -> bool | None:
    """Whether the recorded process still runs: None when it ran on another machine (only that one can tell)."""
    if process.host != _host():
        return None
    now = _proc_stat(process.pid)
    if now is None and not os.path.isdir("/proc/self"):  # no /proc (macOS): the pid alone
        try:
            os.kill(process.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass  # alive, another user's
        return True
    if now is None or now[0] == "Z":  # gone, or exited and not yet reaped
        return False
    if process.start is not None:
        return now[1] == process.start
    # jobs.json of an earlier version, a pid alone: a process that started after the job was recorded is another
    # one the OS gave the same pid (2 s: "started" is in whole seconds, and the kernel's boot time may drift by 1 s)
    recorded, boot, ticks = _recorded_at(started), _boot_time(), os.sysconf("SC_CLK_TCK")
    if recorded is None or boot is None:
        return True
    return boot + now[1] / ticks <= recorded + 2


def checked_jobs(ablation: AblationDir) -> dict[str, dict]:
    """jobs.json (read and range-checked by `AblationDir.jobs`) with every job string checked too: a job id inspo
    writes, or one line naming the file."""
    jobs = ablation.jobs()
    for run, entry in jobs.items():
        try:
            if "job" in entry:
                parse_job(entry["job"])
        except ValueError as error:
            raise InspoError(f'{ablation.jobs_file}: {json.dumps(run)} -> "job": {error}; {_FIX}') from None
    return jobs


def _said(text: str, limit: int = 300) -> str:
    """A program's output on one line, cut short."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."


def slurm_jobs() -> dict[str, str]:
    """Queued and running SLURM jobs of this user as {"<array>_<task>" or "<job>": state}. `SchedulerUnavailable`
    when squeue is missing, fails, times out or answers anything but its table: only an answer is an empty queue."""
    if shutil.which("squeue") is None:
        raise SchedulerUnavailable("squeue is not on PATH (run this where SLURM's commands are, a login node)")
    try:
        out = subprocess.run(
            ["squeue", "--noheader", "--array", "--me", "--format=%i|%T"],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=SCHEDULER_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        raise SchedulerUnavailable(f"squeue did not answer within {SCHEDULER_TIMEOUT_S} s") from None
    except OSError as error:
        raise SchedulerUnavailable(f"squeue could not be started ({error.strerror})") from None
    if out.returncode != 0:
        said = _said(out.stderr + " " + out.stdout) or "it said nothing"
        raise SchedulerUnavailable(f"squeue failed (exit {out.returncode}): {said}")
    jobs = {}
    for line in out.stdout.splitlines():
        if line.strip():
            match = _QUEUE_LINE.fullmatch(line.strip())
            if match is None:
                raise SchedulerUnavailable(f"squeue answered {_said(line, 80)!r}, not a line of its job table")
            jobs[match[1]] = match[2]
    return jobs


def ended_jobs(jobs: list[str]) -> dict[str, str]:
    """How SLURM ended these jobs, {job: state} (CANCELLED, TIMEOUT, OUT_OF_MEMORY, ...); {} without accounting
    (it only adds the reason to a stopped run's line)."""
    if not jobs or shutil.which("sacct") is None:
        return {}
    try:
        out = subprocess.run(
            ["sacct", "--noheader", "--parsable2", "--format=JobID,State", f"--jobs={','.join(jobs)}"],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=SCHEDULER_TIMEOUT_S,
        )
    except (OSError, subprocess.SubprocessError):
        return {}
    ended = {}
    for line in out.stdout.splitlines() if out.returncode == 0 else []:
        job, _, state = line.strip().partition("|")
        if job in jobs and re.fullmatch(r"[A-Z_]+( by \d+)?", state):
            ended[job] = state.split()[0]  # "CANCELLED by 0" -> CANCELLED
    return ended


class Queue:
    """SLURM's queue, asked once and only when a recorded job is a SLURM job."""

    def __init__(self):
        self._jobs: dict[str, str] | None = None
        self.error: str | None = None

    def activity(self, entry: dict) -> tuple[str | None, str | None]:
        """(queued | running | unknown | None for neither, why unknown) of the job a jobs.json entry records."""
        if not entry.get("job"):
            return None, None
        job = parse_job(entry["job"])
        if isinstance(job, LocalProcess):
            alive = local_alive(job, entry.get("started"))
            if alive is None:
                return UNKNOWN, (
                    f"it was started on {job.host} (process {job.pid}), and only that machine can tell "
                    "whether it still runs"
                )
            return (RUNNING if alive else None), None
        if self._jobs is None and self.error is None:
            try:
                self._jobs = slurm_jobs()
            except SchedulerUnavailable as error:
                self.error = str(error)
        if self.error is not None or self._jobs is None:
            return UNKNOWN, self.error or "SLURM was not asked"
        return (SLURM_ACTIVE.get(self._jobs[job], RUNNING) if job in self._jobs else None), None


def run_states(ablation: AblationDir, rule: str = "best") -> list[RunState]:
    """Where every planned run is, from its directory, failures.json, jobs.json and the queue."""
    jobs, failures, queue = checked_jobs(ablation), ablation.failures(), Queue()
    states = []
    for run in ablation.plan.runs():
        entry = jobs.get(run.name, {})
        directory = ablation.run_dir(run)
        status = ablation.status(run)
        metrics = directory.metrics() if status != ABSENT else []
        row = RunState(
            run.name,
            "not started",
            entry.get("job"),
            metrics[-1]["step"] if metrics else None,
            requeued=entry.get("requeued", 0),
        )
        result = read_result(directory, run.seed, rule)[0] if status == FINISHED else None
        if result is not None:  # its result is there: finished, whatever a job record or the queue says
            row.state, row.em = "finished", result.average()
            states.append(row)
            continue
        active, row.why = queue.activity(entry)
        if run.name in failures:
            row.error = ([line for line in failures[run.name].splitlines() if line.strip()] or [""])[-1].strip()
        if active is not None:
            row.state = active
            row.error = row.error if active == UNKNOWN else None
        elif row.error is not None:
            row.state = FAILED
        elif status == FINISHED:
            row.state = "finished (not evaluated)"
        elif status == PARTIAL or row.job and not row.job.startswith("local:"):
            row.state = "stopped"
        states.append(row)
    stopped = {
        row.job: row for row in states if row.state == "stopped" and row.job and not row.job.startswith("local:")
    }
    for job, state in ended_jobs(list(stopped)).items():
        stopped[job].slurm = state
    return states


def wait(
    ablation: AblationDir, on_event=print, poll_s: float | None = None, patience_s: float | None = None
) -> list[RunState]:
    """Block until no run of the ablation is queued or running (a line whenever the counts change); the final
    states. It looks every `poll_s` seconds (default `INSPO_POLL_SECONDS`, else 30: squeue is a query to the
    controller, which clusters ask users not to make often). While SLURM cannot be asked it keeps asking, for at
    most `patience_s` (default `SCHEDULER_PATIENCE_S`), then raises `SchedulerUnavailable`; a run started on
    another machine cannot be followed from here at all."""
    poll_s = env_seconds("INSPO_POLL_SECONDS") if poll_s is None else poll_s
    patience_s = SCHEDULER_PATIENCE_S if patience_s is None else patience_s
    last, failing_since = None, None
    while True:
        states = run_states(ablation)
        unknown = [s for s in states if s.state == UNKNOWN]
        elsewhere = next((s for s in unknown if s.job and s.job.startswith("local:")), None)
        if elsewhere is not None:
            raise SchedulerUnavailable(
                f"--wait cannot follow {elsewhere.run}: {elsewhere.why}; wait there, or collect without --wait"
            )
        if not unknown:
            failing_since = None
        elif failing_since is None:
            failing_since = time.monotonic()
        if unknown and failing_since is not None and time.monotonic() - failing_since >= patience_s:
            raise SchedulerUnavailable(
                f"gave up waiting after SLURM could not be asked for {patience_s:g} s "
                f"({unknown[0].why}); {len(unknown)} runs may still be queued or running: run "
                "the same command again when squeue answers"
            )
        counts: dict[str, int] = {}
        for s in states:
            counts[s.state] = counts.get(s.state, 0) + 1
        summary = ", ".join(f"{n} {name}" for name, n in counts.items())
        if summary != last:
            on_event(
                f"{time.strftime('%H:%M:%S')} {summary}"
                + (
                    f" (cannot ask SLURM: {unknown[0].why}; asking again for at most {patience_s:g} s)"
                    if unknown
                    else ""
                )
            )
            last = summary
        if not any(s.state in (QUEUED, RUNNING, UNKNOWN) for s in states):
            return states
        time.sleep(poll_s)


def as_json(states: list[RunState]) -> str:
    return json.dumps([asdict(s) for s in states], indent=2)
