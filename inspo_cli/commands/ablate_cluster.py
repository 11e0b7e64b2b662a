"""`inspo ablate` on a cluster: `--scheduler slurm` (one job array through submitit), `--status DIR`, `--wait`.

    inspo ablate --study fig3 --scheduler slurm --partition gpu --gpus-per-run 8 --time 48:00:00 \
        --launcher "accelerate launch --config_file recipes/accelerate/8gpu-zero3.yaml"
    inspo ablate --status runs/ablations/inspo-fig3 [--json]
    inspo ablate --collect runs/ablations/inspo-fig3 --wait         # block until no run is queued or running

The options are checked before anything is written or submitted; `inspo_cli.ablation.slurm` does the work.
"""

from __future__ import annotations

import re
from typing import Sequence

import typer
from rich.markup import escape

from inspo_cli.console import console, err_console
from inspo_cli.errors import InspoError

SCHEDULERS = ("local", "slurm")


def parse_time(text: str) -> int:
    """SLURM's time formats (MM, HH:MM:SS, D-HH, D-HH:MM[:SS]) in minutes, at least 1."""
    match = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", text.strip())
    if match is None:
        raise InspoError(f"--time {text!r}: use minutes (90), HH:MM:SS (48:00:00) or D-HH:MM (2-00:00)")
    days, first, second, third = (int(g) if g else None for g in match.groups())
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
    return minutes


def parse_memory(text: str | None) -> float | None:
    """64G, 500M, 1T or a number of GB."""
    if text is None:
        return None
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([MGT]?)B?", text.strip(), re.IGNORECASE)
    if match is None or float(match.group(1)) <= 0:
        raise InspoError(f"--mem-per-run {text!r}: use e.g. 64G, 500M or 1T")
    return float(match.group(1)) * {"M": 1 / 1024, "G": 1, "T": 1024, "": 1}[match.group(2).upper()]


def parse_sbatch_options(items: Sequence[str]) -> dict[str, str]:
    extra = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip().lstrip("-")
        if not sep or not re.fullmatch(r"[a-z][a-z0-9-]*", key):
            raise InspoError(f"--sbatch-option {item!r}: use KEY=VALUE with sbatch's long option name, e.g. "
                             "constraint=a100 or exclude=node12")
        extra[key.replace("-", "_")] = value
    return extra


def slurm_options(partition, account, qos, time, gpus, cpus, mem, nodes, parallelism, sbatch_options,
                  launcher: str = "inspo", max_timeouts: int = 10):
    """The checked SLURM options; GPUs per run default to what the launcher's accelerate config asks for."""
    from inspo_cli.ablation.slurm import SlurmOptions, launcher_gpus, node_launcher

    if gpus is None:
        gpus = launcher_gpus(launcher)
    for flag, value, least in (("--gpus-per-run", gpus, 0), ("--cpus-per-run", cpus, 1), ("--nodes-per-run", nodes, 1),
                               ("--array-parallelism", parallelism, 1), ("--max-timeouts", max_timeouts, 0)):
        if value is not None and value < least:
            raise InspoError(f"{flag} {value}: must be at least {least}")
    extra = parse_sbatch_options(sbatch_options or [])
    for flag, value in (("--partition", partition), ("--account", account), ("--qos", qos),
                        *((f"--sbatch-option {key}", value) for key, value in extra.items())):
        if value is not None and (not value.strip() or any(c in value for c in "\n\r\0")):
            raise InspoError(f"{flag} {value!r}: must be one line of text (it becomes a line of the sbatch file)")
    options = SlurmOptions(partition, account, qos, parse_time(time), gpus, cpus, parse_memory(mem), nodes,
                           parallelism, extra, max_timeouts)
    if nodes > 1:
        node_launcher(launcher, nodes, 0, "main", 1)  # a launcher that cannot start one node of several fails here
    return options


def preview(ablation, options, device, launcher: str) -> dict:
    from inspo_cli.ablation import slurm

    return slurm.preview(ablation, options, device, launcher)


def submit(ablation, options, device, rule: str, launcher: str) -> None:
    from inspo_cli.ablation import slurm

    jobs = slurm.submit(ablation, options, device, rule, launcher)
    total = len(ablation.plan.runs())
    if jobs:
        array = next(iter(jobs.values())).split("_")[0]
        err_console.print(f"submitted {len(jobs)} of {total} runs as job array {array}: "
                          + ", ".join(f"{run} ({job})" for run, job in jobs.items()), soft_wrap=True)
    else:
        err_console.print(f"nothing to submit: every run of {ablation} is finished, queued or running")
    err_console.print(f"follow it: inspo ablate --status {ablation}; the table: inspo ablate --collect {ablation} "
                      "[--wait]", soft_wrap=True, markup=False)


def print_status(ablation, as_json: bool, rule: str) -> list:
    from inspo_cli.ablation import status

    states = status.run_states(ablation, rule)
    if as_json:
        typer.echo(status.as_json(states))
    else:
        for state in states:
            console.print(escape(state.line()), soft_wrap=True)
    return states


def wait(ablation) -> int:
    """Block until no run is queued or running; the number of runs that failed."""
    from inspo_cli.ablation import status

    states = status.wait(ablation, on_event=lambda line: err_console.print(escape(line)))
    return sum(s.state == status.FAILED for s in states)
