"""`inspo ablate` on a cluster: `--scheduler slurm` (one job array through submitit), `--status DIR`, `--wait`.

    inspo ablate --study fig3 --scheduler slurm --partition gpu --gpus-per-run 8 --time 48:00:00 \
        --launcher "accelerate launch --config_file recipes/accelerate/8gpu-zero3.yaml"
    inspo ablate --status runs/ablations/inspo-fig3 [--json]
    inspo ablate --collect runs/ablations/inspo-fig3 --wait         # block until no run is queued or running

The options are checked before anything is written or submitted; `inspo_cli.ablation.slurm` does the work.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from inspo_cli.console import console, err_console
from inspo_cli.errors import InspoError

if TYPE_CHECKING:
    from inspo_cli.ablation.slurm import SlurmOptions
    from inspo_cli.commands.ablate_options import OnSlurm

SCHEDULERS = ("local", "slurm")


MAX_MINUTES = 366 * 1440  # --time: a year is past every partition's MaxTime
MAX_MEM_GB = 1 << 20  # --mem-per-run: 1 PB, past every node
# flag -> (least, most); the most is past any real node or cluster, so a typo is refused here, not by sbatch
COUNTS = {
    "--gpus-per-run": (0, 256),
    "--cpus-per-run": (1, 100_000),
    "--nodes-per-run": (1, 10_000),
    "--array-parallelism": (1, 1_000_000),
    "--max-timeouts": (0, 10_000),
}
# sbatch options inspo sets itself (the flag to use instead), or that would break the submission or the array: the
# array's size, its logs and the requeue signal submitit relies on, an answer submitit can read, a script of its own
OWN_SBATCH = {
    "partition": "--partition",
    "account": "--account",
    "qos": "--qos",
    "time": "--time",
    "mem": "--mem-per-run",
    "cpus-per-task": "--cpus-per-run",
    "gpus-per-node": "--gpus-per-run",
    "nodes": "--nodes-per-run",
    "array": "--array-parallelism",
    "ntasks": None,
    "ntasks-per-node": None,
    "output": None,
    "error": None,
    "input": None,
    "open-mode": None,
    "signal": None,
    "job-name": None,
    "requeue": None,
    "no-requeue": None,
    "wrap": None,
    "parsable": None,
    "wait": None,
    "test-only": None,
    "help": None,
    "usage": None,
    "version": None,
}
SBATCH_EXACT = {"gpus"}  # real sbatch options that are also the start of one above (getopt abbreviates)
MAX_VALUE = 1000


def parse_time(text: str) -> int:
    """SLURM's time formats (MM, HH:MM:SS, D-HH, D-HH:MM[:SS]) in minutes, at least 1, at most a year."""
    match = re.fullmatch(r"(?:(\d{1,6})-)?(\d{1,9})(?::(\d{1,9}))?(?::(\d{1,9}))?", text.strip(), re.ASCII)
    if match is None:
        raise InspoError(f"--time {text[:40]!r}: use minutes (90), HH:MM:SS (48:00:00) or D-HH:MM (2-00:00)")
    days_text, first_text, second_text, third_text = match.groups()
    first = int(first_text)  # the one number the pattern requires
    days, second, third = (int(g) if g else None for g in (days_text, second_text, third_text))
    if days is not None:  # D-HH[:MM[:SS]]
        minutes = days * 1440 + first * 60 + (second or 0) + ((third or 0) + 59) // 60
    elif second is None:  # MM
        minutes = first
    elif third is None:  # MM:SS
        minutes = first + (second + 59) // 60
    else:  # HH:MM:SS
        minutes = first * 60 + second + (third + 59) // 60
    if minutes < 1:
        raise InspoError(f"--time {text!r}: must be at least a minute")
    if minutes > MAX_MINUTES:
        raise InspoError(
            f"--time {text!r}: {minutes:,} minutes is more than a year; give each run's limit, e.g. "
            "48:00:00 (a run that reaches it is requeued and resumes)"
        )
    return minutes


def parse_memory(text: str | None) -> float | None:
    """64G, 500M, 1T or a number of GB."""
    if text is None:
        return None
    match = re.fullmatch(r"(\d{1,12}(?:\.\d{1,6})?)\s*([MGT]?)B?", text.strip(), re.IGNORECASE | re.ASCII)
    if match is None or float(match.group(1)) <= 0:
        raise InspoError(f"--mem-per-run {text[:40]!r}: use e.g. 64G, 500M or 1T")
    gb = float(match.group(1)) * {"M": 1 / 1024, "G": 1, "T": 1024, "": 1}[match.group(2).upper()]
    if gb > MAX_MEM_GB:
        raise InspoError(
            f"--mem-per-run {text!r}: more than {MAX_MEM_GB // 1024:,} TB; give the memory one run needs, e.g. 512G"
        )
    return gb


def parse_sbatch_options(items: Sequence[str]) -> dict[str, str]:
    """--sbatch-option KEY=VALUE items, refusing the options inspo sets itself or that break the array (also by an
    abbreviation sbatch would accept) and values that are not one line of printable text."""
    extra = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip().lstrip("-")
        if not sep or not re.fullmatch(r"[a-z][a-z0-9-]{0,63}", key):
            raise InspoError(
                f"--sbatch-option {item[:60]!r}: use KEY=VALUE with sbatch's long option name, e.g. "
                "constraint=a100 or exclude=node12"
            )
        own = (
            key
            if key in OWN_SBATCH
            else None
            if key in SBATCH_EXACT
            else next((name for name in OWN_SBATCH if name.startswith(key)), None)
        )
        if own is not None:
            instead = OWN_SBATCH[own]
            raise InspoError(
                f"--sbatch-option {key}: "
                + (
                    f"set it with {instead}"
                    if instead
                    else f"inspo and submitit set --{own} themselves (the array, its logs, the requeue signal, "
                    "sbatch's answer); leave it out"
                )
            )
        _check_value(f"--sbatch-option {key}", value)
        extra[key.replace("-", "_")] = value
    return extra


def _check_value(flag: str, value: str, spaces: bool = True) -> None:
    """A value that becomes an #SBATCH line: one line of printable text, of a sane length."""
    if not value.strip() or len(value) > MAX_VALUE or not value.isprintable() or (not spaces and " " in value):
        raise InspoError(
            f"{flag} {value[:60]!r}: must be one line of printable text"
            + ("" if spaces else " without spaces")
            + f", at most {MAX_VALUE} characters (it becomes a "
            "line of the sbatch file)"
        )


def slurm_options(slurm: OnSlurm, gpus: int | None, launcher: str = "inspo") -> SlurmOptions:
    """The checked SLURM options; GPUs per run default to what the launcher's accelerate config asks for."""
    from inspo_cli.ablation.slurm import SlurmOptions, launcher_gpus, node_launcher

    cpus, nodes, parallelism = slurm.cpus_per_run, slurm.nodes_per_run, slurm.array_parallelism
    max_timeouts = slurm.max_timeouts
    gpus_flag = "--gpus-per-run"
    if gpus is None:
        gpus, gpus_flag = launcher_gpus(launcher), "--gpus-per-run (the --launcher's config: num_processes)"
    for (flag, (least, most)), value in zip(COUNTS.items(), (gpus, cpus, nodes, parallelism, max_timeouts)):
        if value is not None and not least <= value <= most:
            raise InspoError(
                f"{gpus_flag if flag == '--gpus-per-run' else flag} {value}: must be from {least} to {most:,}"
            )
    extra = parse_sbatch_options(slurm.sbatch_option)
    for flag, text in (("--partition", slurm.partition), ("--account", slurm.account), ("--qos", slurm.qos)):
        if text is not None:
            _check_value(flag, text, spaces=False)
    options = SlurmOptions(
        slurm.partition,
        slurm.account,
        slurm.qos,
        parse_time(slurm.time_limit),
        gpus,
        cpus,
        parse_memory(slurm.mem_per_run),
        nodes,
        parallelism,
        extra,
        max_timeouts,
    )
    if nodes > 1:
        node_launcher(launcher, nodes, 0, "main", 1)  # a launcher that cannot start one node of several fails here
    return options


def check_slurm(target, dry_run: bool, wait: bool) -> None:
    """What --scheduler slurm needs beyond its options, checked before the plan is written: an ablation directory
    SLURM can carry; without --dry-run, SLURM's commands on PATH; with --wait, a sane INSPO_POLL_SECONDS."""
    from inspo_cli.ablation.slurm import check_directory, require_slurm
    from inspo_cli.envvars import env_seconds

    check_directory(target)
    if not dry_run:
        require_slurm()
    if wait:
        env_seconds("INSPO_POLL_SECONDS")


def preview(ablation, options, device, launcher: str) -> dict:
    from inspo_cli.ablation import slurm

    return slurm.preview(ablation, options, device, launcher)


def submit(ablation, options, device, rule: str, launcher: str) -> None:
    from inspo_cli.ablation import slurm

    jobs = slurm.submit(ablation, options, device, rule, launcher)
    total = len(ablation.plan.runs())
    if jobs:
        array = next(iter(jobs.values())).split("_")[0]
        err_console.print(
            f"submitted {len(jobs)} of {total} runs as job array {array}: "
            + ", ".join(f"{run} ({job})" for run, job in jobs.items()),
            soft_wrap=True,
        )
    else:
        err_console.print(f"nothing to submit: every run of {ablation} is finished, queued or running")
    err_console.print(
        f"follow it: inspo ablate --status {ablation}; the table: inspo ablate --collect {ablation} [--wait]",
        soft_wrap=True,
        markup=False,
    )


def print_status(ablation, as_json: bool, rule: str) -> list:
    from inspo_cli.ablation import status

    states = status.run_states(ablation, rule)
    unknown = [s for s in states if s.state == status.UNKNOWN]
    if unknown:
        err_console.print(
            f"{len(unknown)} runs are unknown: they may still be queued or running, and SLURM (or the "
            "machine they were started on) cannot say; submitting refuses until it can",
            soft_wrap=True,
        )
    if as_json:
        typer.echo(status.as_json(states))
    else:
        for state in states:
            console.print(escape(state.line()), soft_wrap=True)
    return states


def wait(ablation) -> None:
    """Block until no run is queued or running (SchedulerUnavailable, exit 3, when SLURM cannot be asked for long,
    or a run was started on another machine); the table then says which runs have no result (exit 1)."""
    from inspo_cli.ablation import status

    status.wait(ablation, on_event=lambda line: err_console.print(escape(line), soft_wrap=True))
