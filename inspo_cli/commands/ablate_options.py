"""`inspo ablate`'s options: each declared once (flag, help and help panel), and the values of one invocation gathered
into what they are for (`AblateOptions.from_arguments`), so the command reads as what it does.

    def ablate(recipe: opt.Recipe = None, proposer: opt.Proposer = None, ...):
        options = AblateOptions.from_arguments(locals())

The help groups the options by what they are for (one command, not subcommands: `inspo ablate --status DIR` and
`--collect DIR` are in users' scripts and job files, and a plan, its runs and its table share the same flags).
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Annotated, Any

import typer

from inspo_cli.registry import IMPORT_PATH_HINT, PARENTS, PROPOSERS, PROTOCOLS, SELECTIONS, TOOLS

DEMO_RECIPE = "recipes/demo.yaml"
PLAN, RUN, SLURM, STATUS = (
    "What to compare",
    "Where and how to run",
    "On SLURM (--scheduler slurm)",
    "Status, collection and the table",
)
_plan, _run, _slurm, _status = (
    functools.partial(typer.Option, rich_help_panel=panel) for panel in (PLAN, RUN, SLURM, STATUS)
)
# the axis flags, in the order their variants are planned
AXES = (
    ("stage", "stage"),
    ("proposer", "proposer"),
    ("components", "components"),
    ("selection", "selection"),
    ("parents", "parents"),
    ("n-parent", "n_parent"),
    ("temperature", "temperature"),
    ("tools", "tools"),
    ("protocol", "protocol"),
)

Recipe = Annotated[Path | None, _plan(help=f"Base recipe (default: the sweep file's, else {DEMO_RECIPE}).")]
Proposer = Annotated[
    str | None,
    _plan(
        help="Proposers to compare, comma-separated (Fig. 3; "
        "one combining k parents runs with n_parent k): "
        f"{PROPOSERS.choices()}; or {IMPORT_PATH_HINT}."
    ),
]
Stage = Annotated[
    str | None,
    _plan(
        help="When the instruction is optimised, comma-separated: online "
        "(INSPO), pre (before RL), post (after RL) (Fig. 3)."
    ),
]
Components = Annotated[
    str | None,
    _plan(
        help="Population components, comma-separated: constant (no "
        "pruning, no evolution), no-verify (prune + expand without "
        "verification), full (Fig. 3)."
    ),
]
Selection = Annotated[
    str | None,
    _plan(help=f"Selection rules to compare, comma-separated: {SELECTIONS.choices()}; or {IMPORT_PATH_HINT}."),
]
Parents = Annotated[
    str | None, _plan(help=f"Parent rules to compare, comma-separated: {PARENTS.choices()}; or {IMPORT_PATH_HINT}.")
]
Tools = Annotated[
    str | None,
    _plan(
        help="Tool sets to compare (agent.tools), comma-separated, the tools "
        "of a set joined by +, e.g. search,search+calculator: "
        f"{TOOLS.choices()}; or {IMPORT_PATH_HINT}."
    ),
]
Protocol = Annotated[
    str | None,
    _plan(help=f"Tool-call protocols to compare (agent.protocol), comma-separated: {PROTOCOLS.choices()}."),
]
NParent = Annotated[str | None, _plan(help="Values of population.n_parent, comma-separated (Fig. 6a).")]
Temperature = Annotated[str | None, _plan(help="Values of population.temperature (tau_s), comma-separated (Fig. 6b).")]
Study = Annotated[
    str | None,
    _plan(
        help="A paper experiment: fig3 (stage, proposer, components), fig6 "
        "(N_parent, tau_s, vs Search-R1), table1 (INSPO, Search-R1 and "
        "the trained baselines beside the recipe), selection "
        "(beyond the paper: the paper's selection, parent rule and "
        "proposer and each registered one beyond the paper, against "
        "the recipe)."
    ),
]
Sweep = Annotated[Path | None, _plan(help="A sweep file (YAML): recipe, seeds, set, variants, grid.")]
Seeds = Annotated[str | None, _plan(help="Seeds, comma-separated (default: the sweep file's, else 0,1,2).")]
Overrides = Annotated[
    list[str] | None,
    _plan(
        "--set",
        help="Override a recipe field in every variant, e.g. --set training.steps=100 (repeatable; values are YAML).",
    ),
]
Out = Annotated[
    Path | None,
    _run(
        help="The ablation directory (default: runs/ablations/<name>); the "
        "same command with the same --out continues it."
    ),
]
DryRun = Annotated[
    bool,
    _run(
        "--dry-run",
        help="Print the planned runs (with --scheduler slurm, the "
        "job array: sbatch file, resources, each task's command) "
        "and exit; writes nothing.",
    ),
]
PrintCommands = Annotated[
    bool,
    _run(
        "--print-commands",
        help="Write the plan and print one training "
        "command per unfinished run (for SLURM, job arrays); then "
        "--collect.",
    ),
]
Launcher = Annotated[
    str,
    _run(
        help="What starts each run's training, e.g. \"accelerate launch "
        '--config_file recipes/accelerate/8gpu-zero3.yaml" (locally, in '
        "each SLURM task, or in --print-commands)."
    ),
]
Scheduler = Annotated[
    str,
    _slurm(
        help="local (one run after another here) or slurm (one job array "
        "through submitit; then --status, --collect --wait)."
    ),
]
Partition = Annotated[str | None, _slurm(help="slurm: the partition.")]
Account = Annotated[str | None, _slurm(help="slurm: the account.")]
Qos = Annotated[str | None, _slurm(help="slurm: the QOS.")]
TimeLimit = Annotated[
    str,
    _slurm(
        "--time",
        help="slurm: each run's time limit (MM, HH:MM:SS, D-HH:MM); a run that reaches it is requeued and resumes.",
    ),
]
Workers = Annotated[
    int,
    _run(help="local: runs at once on this machine, each in its own process (with --gpus-per-run, on its own GPUs)."),
]
GpusPerRun = Annotated[
    int | None,
    _slurm(
        help="GPUs per run: slurm, per node (default: the "
        "--launcher's accelerate config's num_processes); local "
        "with --workers, each worker's share of the visible "
        "GPUs."
    ),
]
CpusPerRun = Annotated[int | None, _slurm(help="slurm: CPUs per run.")]
MemPerRun = Annotated[str | None, _slurm(help="slurm: memory per run, e.g. 256G.")]
NodesPerRun = Annotated[int, _slurm(help="slurm: nodes per run.")]
ArrayParallelism = Annotated[int, _slurm(help="slurm: runs at once, at most.")]
MaxTimeouts = Annotated[
    int, _slurm(help="slurm: how often a run may reach --time and be requeued (preemptions do not count).")
]
SbatchOption = Annotated[
    list[str] | None, _slurm(help="slurm: any other sbatch option as KEY=VALUE (repeatable), e.g. constraint=a100.")
]
Status = Annotated[
    Path | None,
    _status(
        help="Print where every run of this ablation directory is "
        "(queued, running with its step, finished with EM, failed "
        "with its error, requeues); --json too."
    ),
]
Wait = Annotated[
    bool,
    _status(
        "--wait",
        help="With --scheduler slurm or --collect: block until no run is "
        "queued or running, then tabulate; exit code 0 when every run "
        "has a result, 1 when some run has none, 3 when SLURM cannot "
        "be asked.",
    ),
]
Collect = Annotated[
    Path | None, _status(help="Build the table of this ablation directory from its finished runs; loads no model.")
]
AsJson = Annotated[bool, _status("--json", help="Print the plan (--dry-run) or the table as JSON.")]
Device = Annotated[str | None, _run(help="cpu or cuda (default: cuda when available).")]
ReplayOptimizer = Annotated[
    Path | None,
    _run(
        help="Answer every run's optimizer calls from records: an "
        "earlier ablation's directory (each run from the run of "
        "its name there) or one record; no key or server needed "
        "(optimizer.replay)."
    ),
]
Checkpoint = Annotated[
    str,
    _run(
        help="Which evaluation of each run the table uses: best (App. B: the "
        "final checkpoint before any reward collapse; evaluated when "
        "missing) or final."
    ),
]
Reference = Annotated[
    str | None,
    _status(
        help="The variant every other is compared with (default: "
        "search-r1 when planned, else the first variant with no "
        "instruction population, else the first)."
    ),
]
TargetDiff = Annotated[float, _status(help="The EM difference whose needed number of seeds the power lines give.")]
Metric = Annotated[
    str,
    _status(
        help="The score the table reports: em (the paper's), f1, subem, or judge (the LLM judge's verdicts, "
        "evaluation.metrics; `inspo evaluate --judge DIR` adds them to an evaluation without). Another score "
        "than em is written beside the EM table, as ablation-<metric>.md/.json/.csv."
    ),
]
MaxVariants = Annotated[int, _plan(help="The most variants a sweep may plan.")]
Replan = Annotated[
    bool,
    _plan(
        "--replan",
        help="A recipe changed since --out was planned and no run has started: plan it again with the current recipes.",
    ),
]
KeepPlanned = Annotated[
    bool,
    _plan(
        "--keep-planned",
        help="A recipe changed since --out was planned: go on with the recipes planned then (in OUT/recipes/).",
    ),
]


@dataclasses.dataclass(frozen=True)
class WhatToCompare:
    """The plan: a base recipe and the axes, study or sweep that make its variants, over seeds."""

    recipe: Path | None
    axes: list[tuple[str, str]]  # (axis, its comma-separated values) for each axis flag given
    study: str | None
    sweep: Path | None
    seeds: str | None
    overrides: list[str]
    max_variants: int
    replan: bool
    keep_planned: bool


@dataclasses.dataclass(frozen=True)
class HowToRun:
    """Where the plan's runs go and what starts them: here (one after another, or --workers at once), by SLURM, or
    as printed commands."""

    out: Path | None
    dry_run: bool
    print_commands: bool
    launcher: str
    scheduler: str
    workers: int
    gpus_per_run: int | None
    device: str | None
    replay_optimizer: Path | None


@dataclasses.dataclass(frozen=True)
class OnSlurm:
    """What a SLURM job array asks for (--scheduler slurm)."""

    partition: str | None
    account: str | None
    qos: str | None
    time_limit: str
    cpus_per_run: int | None
    mem_per_run: str | None
    nodes_per_run: int
    array_parallelism: int
    max_timeouts: int
    sbatch_option: list[str]


@dataclasses.dataclass(frozen=True)
class StatusAndTable:
    """--status and --collect, and how the table is made and printed."""

    status: Path | None
    wait: bool
    collect: Path | None
    as_json: bool
    checkpoint: str
    reference: str | None
    target_diff: float
    metric: str


@dataclasses.dataclass(frozen=True)
class AblateOptions:
    compare: WhatToCompare
    run: HowToRun
    slurm: OnSlurm
    table: StatusAndTable

    @classmethod
    def from_arguments(cls, arguments: dict[str, Any]) -> AblateOptions:
        """The command's parameters by name, grouped (each group's fields are parameters of the same name)."""
        axes = [(axis, arguments[parameter]) for axis, parameter in AXES if arguments[parameter]]
        given = {**arguments, "axes": axes, "overrides": arguments["overrides"] or []}
        given["sbatch_option"] = arguments["sbatch_option"] or []

        def group(kind):
            return kind(**{field.name: given[field.name] for field in dataclasses.fields(kind)})

        return cls(group(WhatToCompare), group(HowToRun), group(OnSlurm), group(StatusAndTable))
