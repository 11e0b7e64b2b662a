"""`inspo ablate --scheduler slurm`: the plan's runs as one SLURM job array, submitted through submitit.

    options = SlurmOptions(partition="gpu", gpus_per_run=8, time_min=2880)
    print(preview(ablation, options, launcher="accelerate launch ..."))   # --dry-run: the sbatch file, the tasks
    job_ids = submit(ablation, options, device="cuda")                     # {run: "4242_0", ...}; then status.py

Each array task is one planned run and does exactly what a local `inspo ablate` does for it (`runner.run_one`):
train (or resume), evaluate the step the table reports, record a failure in failures.json. A task that reaches
its time limit or is preempted gets SLURM's warning signal; submitit then requeues it (`RunTask.checkpoint`) and
the requeued task resumes the run from its newest whole checkpoint, as `--resume` does. Submitting again submits
only the runs that are neither finished nor queued or running. A run of several nodes is one task per node
(submitit's `nodes`, one task each); each node starts the launcher with its rank and the first node as the main
one (`node_launcher`), and the first node alone evaluates and records. The ablation directory keeps `slurm/`
(submitit's folder: each task's stdout and stderr) and jobs.json (per run: the array task it was last submitted
as, and how often it was requeued). When squeue cannot say which runs are queued or running, nothing is submitted
(`status.SchedulerUnavailable`, exit 3); a refusal by sbatch is one line quoting SLURM's reason. sbatch, srun and
squeue are checked before the plan is written. submitit (`pip install -e ".[slurm]"`) is imported only here.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeGuard

from inspo_cli.ablation.directory import ABSENT, FINISHED, AblationDir
from inspo_cli.ablation.runner import launcher_words, run_one, training_command
from inspo_cli.ablation.status import UNKNOWN, Queue, SchedulerUnavailable, checked_jobs
from inspo_cli.config.yamlfile import MAX_BYTES, load_yaml
from inspo_cli.errors import InspoError
from inspo_cli.files import read_text
from inspo_cli.training.stages import resume_possible

MULTI_NODE_LAUNCHERS = ("accelerate launch", "torchrun")


@dataclass
class SlurmOptions:
    """What users set on their clusters; None leaves SLURM's (or the partition's) default."""

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time_min: int = 24 * 60
    gpus_per_run: int | None = None
    cpus_per_run: int | None = None
    mem_gb: float | None = None
    nodes_per_run: int = 1
    array_parallelism: int = 256
    extra: dict[str, str] = field(default_factory=dict)  # free-form sbatch options, e.g. {"constraint": "a100"}
    max_timeouts: int = 10  # requeues after a time limit (preemptions do not count), as submitit's max_num_timeout


class RunTask:
    """One array task: one planned run, to its result. submitit calls `checkpoint` on SLURM's warning before a time
    limit or a preemption and requeues the task, which then resumes the run from its newest checkpoint."""

    def __call__(self, ablation_dir: str, run_name: str, device: str | None, rule: str, launcher: str) -> str:
        import submitit

        ablation = AblationDir.open(ablation_dir)
        run = next(r for r in ablation.plan.runs() if r.name == run_name)
        job = submitit.JobEnvironment()
        if job.num_nodes > 1:
            launcher = node_launcher(launcher, job.num_nodes, job.node, job.hostnames[0], main_port(job.job_id))
            if job.node != 0:  # the other nodes join the training; the first one evaluates and records
                return _join_training(ablation, run, device, launcher)
        return run_one(ablation, run, device, lambda line: print(line, flush=True), rule, launcher=launcher)

    def checkpoint(self, ablation_dir: str, run_name: str, *args, **kwargs):
        """Count the requeue; the same call again (it resumes, since the run directory has a checkpoint)."""
        from submitit.helpers import DelayedSubmission

        AblationDir.open(ablation_dir).count_requeue(run_name)
        return DelayedSubmission(self, ablation_dir, run_name, *args, **kwargs)


def node_launcher(launcher: str, nodes: int, node: int, main_host: str, port: int) -> str:
    """The launcher as node `node` of a `nodes`-node run starts it: accelerate's or torchrun's flags for the number
    of machines, this machine's rank and the main node (the first of SLURM's node list)."""
    words = launcher_words(launcher)
    if words[:2] == ["accelerate", "launch"]:
        per_node = launcher_gpus(launcher) or _visible_gpus()
        flags = [
            "--num_machines",
            nodes,
            "--machine_rank",
            node,
            "--main_process_ip",
            main_host,
            "--main_process_port",
            port,
            "--num_processes",
            per_node * nodes,
        ]
        words = words[:2] + [str(f) for f in flags] + words[2:]
    elif words[:1] == ["torchrun"]:
        flags = ["--nnodes", nodes, "--node_rank", node, "--master_addr", main_host, "--master_port", port]
        words = words[:1] + [str(f) for f in flags] + words[1:]
    else:
        raise InspoError(
            f"--nodes-per-run {nodes} needs a launcher that starts one node of a multi-node run: "
            f"{' or '.join(MULTI_NODE_LAUNCHERS)} (got {launcher!r})"
        )
    return shlex.join(words)


def launcher_gpus(launcher: str) -> int | None:
    """GPUs per node that an `accelerate launch --config_file FILE` launcher's config asks for (num_processes /
    num_machines), or None when the launcher names no config or the config does not say."""
    words = launcher_words(launcher)
    for flag in ("--config_file", "--config-file"):
        if flag in words[:-1]:
            config = read_launcher_config(words[words.index(flag) + 1])
            if not isinstance(config, dict):
                return None
            processes, machines = config.get("num_processes"), config.get("num_machines") or 1
            if _count(processes) and _count(machines):
                return max(processes // machines, 1)
    return None


def _count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def read_launcher_config(path: str):
    """An accelerate config file, read as a user's YAML is (`files.read_text`: a regular file, bounded by the bytes
    actually read, so a FIFO or /dev/zero is refused rather than read forever), one line on any damage."""
    import yaml

    what = "--launcher's --config_file"
    text = read_text(path, what, MAX_BYTES)
    try:
        return load_yaml(text, f"{what} {path}")
    except yaml.YAMLError as error:
        raise InspoError(f"{what} {path} is not valid YAML: {_said(str(error), 200)}") from None


def main_port(job_id: str) -> int:
    """A port for the main node's rendezvous, the same on every node of the job and different between jobs."""
    return 20000 + int("".join(c for c in job_id if c.isdigit()) or 0) % 20000


def _visible_gpus() -> int:
    import torch

    return max(torch.cuda.device_count(), 1)


def _join_training(ablation: AblationDir, run, device: str | None, launcher: str) -> str:
    """A node other than the first of a multi-node run: start its share of the training (the same command, the
    same resume decision as the first node), and nothing else: the first node removes, evaluates and records."""
    status = ablation.status(run)
    if status == FINISHED:
        return "skipped"
    resume = status != ABSENT and resume_possible(ablation.run_dir(run))
    done = subprocess.run(training_command(ablation, run, resume, device, launcher))
    return "finished" if done.returncode == 0 else "failed"


SLURM_TOOLS = ("sbatch", "srun", "squeue")  # submit, start each task (submitit), tell what is queued or running
# A path SLURM cannot carry: "%" starts its file-name patterns (and submitit's %j), and sbatch's #SBATCH parser and
# older SLURMs do not take every quoting of spaces, quotes, backslashes and "#".
_UNSAFE_PATH = re.compile(r"[\s%'\"\\#\x00-\x1f\x7f]")


def require_slurm() -> None:
    """SLURM's commands and submitit are here: checked before the plan is written, not by a traceback after."""
    _submitit()
    missing = [tool for tool in SLURM_TOOLS if shutil.which(tool) is None]
    if missing:
        raise InspoError(
            f"--scheduler slurm: {' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not on "
            "PATH; run on a SLURM login node (`inspo env` shows what is reachable), see the job array "
            "with --dry-run, or use --scheduler local"
        )


def check_directory(path: str | Path) -> None:
    """Refuse an ablation directory whose absolute path the sbatch file cannot carry (its logs live under it)."""
    absolute = str(Path(path).absolute())
    if (bad := _UNSAFE_PATH.search(absolute)) is not None:
        raise InspoError(
            f"--out {path}: its path {absolute!r} holds {bad[0]!r}, which SLURM's log-file names (%) and "
            "#SBATCH lines cannot carry; choose a directory whose path has no spaces, quotes, '#', '%' "
            "or backslashes"
        )


def sbatch_parameters(ablation: AblationDir, options: SlurmOptions) -> dict:
    """The job array's parameters in submitit's SLURM names: what `submit` submits and `preview` shows."""
    parameters = {
        "job_name": f"inspo-{ablation.plan.name}",
        "time": options.time_min,
        "nodes": options.nodes_per_run,
        "ntasks_per_node": 1,
        "array_parallelism": options.array_parallelism,
        "additional_parameters": dict(options.extra),
    }
    for key, value in (
        ("partition", options.partition),
        ("account", options.account),
        ("qos", options.qos),
        ("gpus_per_node", options.gpus_per_run),
        ("cpus_per_task", options.cpus_per_run),
        ("mem", None if options.mem_gb is None else _memory(options.mem_gb)),
    ):
        if value is not None:
            parameters[key] = value
    return parameters


def _memory(gb: float) -> str:
    return f"{gb:g}G" if float(gb).is_integer() else f"{max(round(gb * 1024), 1)}M"


def pending_runs(ablation: AblationDir) -> list:
    """The runs to submit: neither finished nor queued or running as the job jobs.json records. When that cannot be
    told (squeue fails, a process on another machine), nothing is submitted: a run submitted while it still runs
    would train twice into one directory."""
    jobs, queue = checked_jobs(ablation), Queue()
    pending = []
    for run in ablation.plan.runs():
        if ablation.status(run) == FINISHED:
            continue
        active, why = queue.activity(jobs.get(run.name, {}))
        if active == UNKNOWN:
            fix = (
                "run the same command again when squeue answers"
                if queue.error
                else f"if it no longer runs, delete the entry of {run.name} from {ablation.jobs_file}"
            )
            raise SchedulerUnavailable(
                f"cannot tell whether {run.name} (job {jobs[run.name]['job']}) is still queued "
                f"or running: {why}; nothing was submitted (a run submitted again while it "
                f"runs trains twice into one directory); {fix}"
            )
        if active is None:
            pending.append(run)
    return pending


def _submitit():
    try:
        import submitit
    except ImportError:
        raise InspoError('--scheduler slurm needs submitit: pip install -e ".[slurm]"') from None
    return submitit


def preview(ablation: AblationDir, options: SlurmOptions, device: str | None = None, launcher: str = "inspo") -> dict:
    """What `submit` would submit (--dry-run): the sbatch file of the array, the resources per task and what each
    task runs; "text" says it for a person."""
    _submitit()
    from submitit.slurm.slurm import _make_sbatch_string  # the sbatch file submitit writes for the array

    runs = ablation.plan.runs()
    folder = ablation.slurm_logs.absolute() / "%j"
    command = " ".join([shlex.quote(sys.executable), "-u -m submitit.core._submit", shlex.quote(str(folder))])
    script = _make_sbatch_string(
        command=command, folder=folder, map_count=len(runs), **sbatch_parameters(ablation, options)
    )
    tasks = [
        {"task": index, "run": run.name, "trains": shlex.join(training_command(ablation, run, False, device, launcher))}
        for index, run in enumerate(runs)
    ]
    lines = [
        f"job array of {len(runs)} tasks, one per run; each task: {describe(options)}",
        "",
        "the sbatch file (submitit writes it; each task unpickles its run and calls inspo's run API):",
        script.rstrip(),
        "",
        "what each task runs, then it evaluates the checkpoint the table reports (into the run's directory):",
    ]
    if options.nodes_per_run > 1:
        lines.append(
            f"  (on each of its {options.nodes_per_run} nodes, with the node's rank and the main node added "
            "to the launcher)"
        )
    lines += [f"  task {t['task']}  {t['run']}: {t['trains']}" for t in tasks]
    return {"resources": describe(options), "sbatch": script, "tasks": tasks, "text": "\n".join(lines)}


def describe(options: SlurmOptions) -> str:
    """Resources per task in words: 8 GPUs, 64 CPUs, 512 GB, 1 node, 48:00:00 on partition gpu."""
    parts = [
        f"{options.gpus_per_run} GPUs" if options.gpus_per_run else "no GPU",
        f"{options.cpus_per_run} CPUs" if options.cpus_per_run else "SLURM's default CPUs",
        f"{options.mem_gb:g} GB" if options.mem_gb else "SLURM's default memory",
        f"{options.nodes_per_run} node{'s' if options.nodes_per_run > 1 else ''}",
        f"{options.time_min // 60}:{options.time_min % 60:02d}:00 (requeued and resumed after it, at most "
        f"{options.max_timeouts} times)",
    ]
    text = ", ".join(parts)
    for name in ("partition", "account", "qos"):
        if getattr(options, name):
            text += f", {name} {getattr(options, name)}"
    return text + (f", at most {options.array_parallelism} at once" if options.array_parallelism else "")


def submit(
    ablation: AblationDir, options: SlurmOptions, device: str | None = None, rule: str = "best", launcher: str = "inspo"
) -> dict[str, str]:
    """Submit every run that is neither finished nor queued/running as one job array; {run: job id}."""
    require_slurm()
    check_directory(ablation.path)
    submitit = _submitit()
    from submitit.core.utils import FailedJobError, FailedSubmissionError

    pending = pending_runs(ablation)
    if not pending:
        return {}
    n = len(pending)
    # submitit prints sbatch's complaint to stderr before it raises: the one line below says it instead
    with contextlib.redirect_stderr(io.StringIO()):
        try:
            executor = submitit.SlurmExecutor(
                folder=ablation.slurm_logs.absolute() / "%j", max_num_timeout=options.max_timeouts
            )
            executor.update_parameters(**sbatch_parameters(ablation, options))
            jobs = executor.map_array(
                RunTask(),
                [str(ablation.path.absolute())] * n,
                [r.name for r in pending],
                [device] * n,
                [rule] * n,
                [launcher] * n,
            )
        except FailedSubmissionError as error:  # sbatch exited 0 but its answer names no job
            answer = re.search(r'output "(.*)"', str(error), re.DOTALL)
            raise InspoError(
                f"sbatch answered {_said(answer[1] if answer else str(error), 200)!r}, which names no "
                "job: the array may have been submitted or not; look with `squeue --me` before "
                "submitting again"
            ) from None
        except (FailedJobError, subprocess.CalledProcessError, OSError, RuntimeError) as error:
            raise InspoError(
                f"sbatch refused the job array: {_refusal(error)}; check the partition, account, qos, "
                "limits and --sbatch-option values"
            ) from None
    ablation.record_jobs({run.name: job.job_id for run, job in zip(pending, jobs)})
    for run in pending:
        ablation.record_failure(run, None)  # a resubmitted run is no longer failed
    return {run.name: job.job_id for run, job in zip(pending, jobs)}


def _said(text: str, limit: int = 400) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."


def _refusal(error: BaseException) -> str:
    """SLURM's reason, as sbatch said it: submitit's FailedJobError holds sbatch's stderr, and its cause (a
    CalledProcessError) the exit code and stdout."""
    if isinstance(error, OSError):
        return f"sbatch could not be started ({error.strerror or error})"
    cause = error if isinstance(error, subprocess.CalledProcessError) else error.__cause__
    said = "" if cause is error else str(error).strip()
    if isinstance(cause, subprocess.CalledProcessError):
        for part in (cause.stderr, cause.output):
            said = said or (part.decode(errors="replace") if isinstance(part, bytes) else str(part or "")).strip()
        said = said or f"it exited with code {cause.returncode} and said nothing"
    return _said(said or type(error).__name__)
