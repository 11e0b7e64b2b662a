"""`inspo ablate`'s flags that the chosen mode would not use are refused, not dropped.

Each mode reads some of the options: `--status DIR` prints once, `--collect DIR` tabulates (and with `--wait` waits),
`--dry-run` previews the command it is added to, `--print-commands` writes the plan and prints commands, and a run
(local or `--scheduler slurm`) uses the rest. A flag the mode ignores (`--status --wait`, `--dry-run
--print-commands`, `--partition` without `--scheduler slurm`) would leave the user believing it took effect, so it is
one line naming the flag and what to do instead, before anything is read or written.

    check_flags(given_flags(ablate, arguments))   # arguments: the command's parameters by name
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from inspo_cli.errors import InspoError

# parameters whose flag is not the parameter's name with dashes
_FLAG_NAMES = {"as_json": "--json", "overrides": "--set", "time_limit": "--time"}
SLURM_FLAGS = (
    "--partition",
    "--account",
    "--qos",
    "--time",
    "--cpus-per-run",
    "--mem-per-run",
    "--nodes-per-run",
    "--array-parallelism",
    "--max-timeouts",
    "--sbatch-option",
)
PLANNING_FLAGS = (
    "--recipe",
    "--proposer",
    "--stage",
    "--components",
    "--selection",
    "--parents",
    "--tools",
    "--protocol",
    "--n-parent",
    "--temperature",
    "--study",
    "--sweep",
    "--seeds",
    "--set",
    "--out",
    "--max-variants",
    "--replan",
    "--keep-planned",
    "--dry-run",
    "--print-commands",
    "--launcher",
    "--scheduler",
    "--workers",
    "--gpus-per-run",
    "--device",
    "--replay-optimizer",
    *SLURM_FLAGS,
)
TABLE_FLAGS = ("--checkpoint", "--reference", "--target-diff", "--metric")


def given_flags(command: Callable, arguments: dict[str, Any]) -> set[str]:
    """The flags whose value differs from the command's default (what the user set)."""
    given = set()
    for name, parameter in inspect.signature(command).parameters.items():
        value = arguments[name]
        if value != parameter.default and not (parameter.default is None and value in ([], False)):
            given.add(_FLAG_NAMES.get(name, "--" + name.replace("_", "-")))
    return given


def check_flags(given: set[str]) -> None:
    """One line for the first flag the mode these flags choose would ignore."""
    if "--status" in given:
        _refuse(
            given,
            {"--status", "--json", "--checkpoint"},
            "does nothing with --status (it prints where each run is, once)",
            {"--wait": "to wait for the runs, use --collect DIR --wait"},
        )
        return
    if "--collect" in given:
        _refuse(
            given,
            {"--collect", "--json", "--wait", *TABLE_FLAGS},
            "does nothing with --collect (it reads an existing ablation directory and tabulates it)",
            {},
        )
        return
    for a, b, why in (
        ("--replan", "--keep-planned", "pass one"),
        ("--dry-run", "--print-commands", "--dry-run writes nothing and --print-commands writes the plan; pass one"),
        ("--dry-run", "--wait", "a dry run submits nothing to wait for; drop --wait"),
    ):
        if a in given and b in given:
            raise InspoError(f"{a} and {b} together: {why}")
    slurm = "--scheduler" in given  # the only other scheduler; its name is checked later
    if "--print-commands" in given:
        ignored = {
            "--scheduler": "it submits a job array, --print-commands only prints the commands: pass one",
            "--workers": "the printed commands run as you start them",
            "--gpus-per-run": "the printed commands see the GPUs you give them",
            "--json": "--json prints the plan (with --dry-run) or the table (with --collect)",
            **{flag: "the table is made by --collect DIR: pass it there" for flag in TABLE_FLAGS},
        }
        _refuse(
            given,
            set(given) - set(ignored) - set(SLURM_FLAGS),
            "does nothing with --print-commands",
            ignored,
            extra={flag: "a SLURM option, and --print-commands submits nothing" for flag in SLURM_FLAGS},
        )
    if not slurm:
        for flag in SLURM_FLAGS:
            if flag in given:
                raise InspoError(
                    f"{flag} is a SLURM option, and this ablation runs here (--scheduler local); add "
                    "--scheduler slurm, or drop it"
                )
        if "--wait" in given:
            raise InspoError("--wait waits for SLURM jobs: use it with --scheduler slurm or --collect DIR")
        if "--gpus-per-run" in given and "--workers" not in given:
            raise InspoError(
                "--gpus-per-run splits the visible GPUs between --workers, and with one worker each run "
                "sees them all; add --workers N, or drop it"
            )


def _refuse(
    given: set[str], used: set[str], does_nothing: str, fixes: dict[str, str], extra: dict[str, str] | None = None
) -> None:
    """Refuse the first given flag outside `used` (in a fixed order), with its own fix where there is one."""
    fixes = {**fixes, **(extra or {})}
    order = [*fixes, *PLANNING_FLAGS, "--collect", "--status", "--wait", "--json", *TABLE_FLAGS]
    for flag in sorted(given - used, key=lambda f: order.index(f) if f in order else len(order)):
        raise InspoError(
            f"{flag} {does_nothing}: {fixes[flag]}" if flag in fixes else f"{flag} {does_nothing}; drop it"
        )
