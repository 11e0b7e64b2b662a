"""`inspo ablate`: the paper's ablations (or any sweep) as variants x seeds, run, evaluated and tabulated.

    inspo ablate --recipe recipes/qwen2.5-3b/inspo.yaml --proposer paraphrase --dry-run
    inspo ablate --recipe recipes/qwen2.5-3b/inspo.yaml --study fig3 --seeds 0,1,2
    inspo ablate --sweep sweep.yaml --json --dry-run                   # the plan as JSON, for pipelines
    inspo ablate --study fig6 --print-commands \
        --launcher "accelerate launch --config_file recipes/accelerate/8gpu-zero3.yaml"
    inspo ablate --collect runs/ablations/inspo-fig3                  # the table from runs finished elsewhere
    inspo ablate --study fig3 --scheduler slurm --partition gpu ...   # a SLURM job array (commands/ablate_cluster.py)
    inspo ablate --status runs/ablations/inspo-fig3                   # where each run is

Exit codes (also of --collect [--wait]): 0 every planned run finished and has a result; 1 some run failed or has no
result (the others ran; the table holds what there is); 2 bad input (one line on stderr); 3 SLURM could not be asked
whether runs are still queued or running (nothing submitted; --wait gave up); 130 interrupted (the same command
continues).
"""

from __future__ import annotations

import functools
import json
import shlex
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from inspo_cli.console import console, err_console, user_errors
from inspo_cli.errors import InspoError
from inspo_cli.registry import IMPORT_PATH_HINT, PARENTS, PROPOSERS, SELECTIONS, TOOLS

DEMO_RECIPE = "recipes/demo.yaml"
# The help groups the options by what they are for (one command, not subcommands: `inspo ablate --status DIR` and
# `--collect DIR` are in users' scripts and job files, and a plan, its runs and its table share the same flags)
PLAN, RUN, SLURM, STATUS = (
    "What to compare",
    "Where and how to run",
    "On SLURM (--scheduler slurm)",
    "Status, collection and the table",
)
_plan, _run, _slurm, _status = (
    functools.partial(typer.Option, rich_help_panel=panel) for panel in (PLAN, RUN, SLURM, STATUS)
)
ABLATIONS_DIR = Path("runs/ablations")
MAX_WORKERS = 256  # processes on one machine, each loading a policy; --workers 10**9 must not allocate 10**9 slots


@user_errors
def ablate(
    recipe: Annotated[Path | None, _plan(help=f"Base recipe (default: the sweep file's, else {DEMO_RECIPE}).")] = None,
    proposer: Annotated[
        str | None,
        _plan(
            help="Proposers to compare, comma-separated (Fig. 3; "
            "one combining k parents runs with n_parent k): "
            f"{PROPOSERS.choices()}; or {IMPORT_PATH_HINT}."
        ),
    ] = None,
    stage: Annotated[
        str | None,
        _plan(
            help="When the instruction is optimised, comma-separated: online "
            "(INSPO), pre (before RL), post (after RL) (Fig. 3)."
        ),
    ] = None,
    components: Annotated[
        str | None,
        _plan(
            help="Population components, comma-separated: constant (no "
            "pruning, no evolution), no-verify (prune + expand without "
            "verification), full (Fig. 3)."
        ),
    ] = None,
    selection: Annotated[
        str | None,
        _plan(help=f"Selection rules to compare, comma-separated: {SELECTIONS.choices()}; or {IMPORT_PATH_HINT}."),
    ] = None,
    parents: Annotated[
        str | None, _plan(help=f"Parent rules to compare, comma-separated: {PARENTS.choices()}; or {IMPORT_PATH_HINT}.")
    ] = None,
    tools: Annotated[
        str | None,
        _plan(
            help="Tool sets to compare (agent.tools), comma-separated, the tools "
            "of a set joined by +, e.g. search,search+calculator: "
            f"{TOOLS.choices()}; or {IMPORT_PATH_HINT}."
        ),
    ] = None,
    protocol: Annotated[
        str | None,
        _plan(help="Tool-call protocols to compare (agent.protocol), comma-separated: search-r1, function-calling."),
    ] = None,
    n_parent: Annotated[str | None, _plan(help="Values of population.n_parent, comma-separated (Fig. 6a).")] = None,
    temperature: Annotated[
        str | None, _plan(help="Values of population.temperature (tau_s), comma-separated (Fig. 6b).")
    ] = None,
    study: Annotated[
        str | None,
        _plan(
            help="A paper experiment: fig3 (stage, proposer, components), fig6 "
            "(N_parent, tau_s, vs Search-R1), table1 (INSPO, Search-R1 and "
            "the trained baselines beside the recipe), selection "
            "(beyond the paper: the paper's selection, parent rule and "
            "proposer and each registered one beyond the paper, against "
            "the recipe)."
        ),
    ] = None,
    sweep: Annotated[Path | None, _plan(help="A sweep file (YAML): recipe, seeds, set, variants, grid.")] = None,
    seeds: Annotated[str | None, _plan(help="Seeds, comma-separated (default: the sweep file's, else 0,1,2).")] = None,
    overrides: Annotated[
        list[str] | None,
        _plan(
            "--set",
            help="Override a recipe field in every variant, e.g. "
            "--set training.steps=100 (repeatable; values "
            "are YAML).",
        ),
    ] = None,
    out: Annotated[
        Path | None,
        _run(
            help="The ablation directory (default: runs/ablations/<name>); the "
            "same command with the same --out continues it."
        ),
    ] = None,
    dry_run: Annotated[
        bool,
        _run(
            "--dry-run",
            help="Print the planned runs (with --scheduler slurm, the "
            "job array: sbatch file, resources, each task's command) "
            "and exit; writes nothing.",
        ),
    ] = False,
    print_commands: Annotated[
        bool,
        _run(
            "--print-commands",
            help="Write the plan and print one training "
            "command per unfinished run (for SLURM, job arrays); then "
            "--collect.",
        ),
    ] = False,
    launcher: Annotated[
        str,
        _run(
            help="What starts each run's training, e.g. \"accelerate launch "
            '--config_file recipes/accelerate/8gpu-zero3.yaml" (locally, in '
            "each SLURM task, or in --print-commands)."
        ),
    ] = "inspo",
    scheduler: Annotated[
        str,
        _slurm(
            help="local (one run after another here) or slurm (one job array "
            "through submitit; then --status, --collect --wait)."
        ),
    ] = "local",
    partition: Annotated[str | None, _slurm(help="slurm: the partition.")] = None,
    account: Annotated[str | None, _slurm(help="slurm: the account.")] = None,
    qos: Annotated[str | None, _slurm(help="slurm: the QOS.")] = None,
    time_limit: Annotated[
        str,
        _slurm(
            "--time",
            help="slurm: each run's time limit (MM, HH:MM:SS, D-HH:MM); a run that reaches it is requeued and resumes.",
        ),
    ] = "24:00:00",
    workers: Annotated[
        int,
        _run(
            help="local: runs at once on this machine, each in its own process (with --gpus-per-run, on its own GPUs)."
        ),
    ] = 1,
    gpus_per_run: Annotated[
        int | None,
        _slurm(
            help="GPUs per run: slurm, per node (default: the "
            "--launcher's accelerate config's num_processes); local "
            "with --workers, each worker's share of the visible "
            "GPUs."
        ),
    ] = None,
    cpus_per_run: Annotated[int | None, _slurm(help="slurm: CPUs per run.")] = None,
    mem_per_run: Annotated[str | None, _slurm(help="slurm: memory per run, e.g. 256G.")] = None,
    nodes_per_run: Annotated[int, _slurm(help="slurm: nodes per run.")] = 1,
    array_parallelism: Annotated[int, _slurm(help="slurm: runs at once, at most.")] = 256,
    max_timeouts: Annotated[
        int, _slurm(help="slurm: how often a run may reach --time and be requeued (preemptions do not count).")
    ] = 10,
    sbatch_option: Annotated[
        list[str] | None, _slurm(help="slurm: any other sbatch option as KEY=VALUE (repeatable), e.g. constraint=a100.")
    ] = None,
    status: Annotated[
        Path | None,
        _status(
            help="Print where every run of this ablation directory is "
            "(queued, running with its step, finished with EM, failed "
            "with its error, requeues); --json too."
        ),
    ] = None,
    wait: Annotated[
        bool,
        _status(
            "--wait",
            help="With --scheduler slurm or --collect: block until no run is "
            "queued or running, then tabulate; exit code 0 when every run "
            "has a result, 1 when some run has none, 3 when SLURM cannot "
            "be asked.",
        ),
    ] = False,
    collect: Annotated[
        Path | None, _status(help="Build the table of this ablation directory from its finished runs; loads no model.")
    ] = None,
    as_json: Annotated[bool, _status("--json", help="Print the plan (--dry-run) or the table as JSON.")] = False,
    device: Annotated[str | None, _run(help="cpu or cuda (default: cuda when available).")] = None,
    replay_optimizer: Annotated[
        Path | None,
        _run(
            help="Answer every run's optimizer calls from records: an "
            "earlier ablation's directory (each run from the run of "
            "its name there) or one record; no key or server needed "
            "(optimizer.replay)."
        ),
    ] = None,
    checkpoint: Annotated[
        str,
        _run(
            help="Which evaluation of each run the table uses: best (App. B: the "
            "final checkpoint before any reward collapse; evaluated when "
            "missing) or final."
        ),
    ] = "best",
    reference: Annotated[
        str | None,
        _status(
            help="The variant every other is compared with (default: "
            "search-r1 when planned, else the first variant with no "
            "instruction population, else the first)."
        ),
    ] = None,
    target_diff: Annotated[
        float, _status(help="The EM difference whose needed number of seeds the power lines give.")
    ] = 0.05,
    max_variants: Annotated[int, _plan(help="The most variants a sweep may plan.")] = 500,
    replan: Annotated[
        bool,
        _plan(
            "--replan",
            help="A recipe changed since --out was planned and no run has "
            "started: plan it again with the current recipes.",
        ),
    ] = False,
    keep_planned: Annotated[
        bool,
        _plan(
            "--keep-planned",
            help="A recipe changed since --out was planned: go on with the recipes planned then (in OUT/recipes/).",
        ),
    ] = False,
) -> None:
    """Train and evaluate the variants of an ablation over seeds; write ablation.md/.json/.csv: EM with 95%
    intervals over seeds and questions, differences to a reference with p-values, power."""
    from inspo_cli.commands.ablate_flags import check_flags, given_flags

    check_flags(given_flags(ablate, dict(locals())))  # a flag this mode would ignore is refused, not dropped
    from inspo_cli.ablation.directory import AblationDir
    from inspo_cli.commands import ablate_cluster as cluster

    options = table_options(checkpoint, reference, target_diff)
    if status is not None:
        cluster.print_status(AblationDir.open(status), as_json, options["rule"])
        return
    axes = [
        (name, value)
        for name, value in (
            ("stage", stage),
            ("proposer", proposer),
            ("components", components),
            ("selection", selection),
            ("parents", parents),
            ("n-parent", n_parent),
            ("temperature", temperature),
            ("tools", tools),
            ("protocol", protocol),
        )
        if value
    ]
    if collect is not None:
        ablation = AblationDir.open(collect)
        if wait:
            cluster.wait(ablation)
        _finish(ablation, as_json, options)
        return
    if scheduler not in cluster.SCHEDULERS:
        raise InspoError(f"--scheduler {scheduler!r}: choose local or slurm")
    from inspo_cli.ablation.runner import launcher_words

    launcher_words(launcher)  # a bad launcher fails before the plan is written
    slurm = None
    if scheduler == "slurm" and not print_commands:
        slurm = cluster.slurm_options(
            partition,
            account,
            qos,
            time_limit,
            gpus_per_run,
            cpus_per_run,
            mem_per_run,
            nodes_per_run,
            array_parallelism,
            sbatch_option,
            launcher,
            max_timeouts,
        )
    if gpus_per_run is not None and gpus_per_run < 0:
        raise InspoError(f"--gpus-per-run {gpus_per_run}: must be at least 0")
    if workers < 1 or workers > MAX_WORKERS or (workers > 1 and scheduler != "local"):
        raise InspoError(
            f"--workers {workers}: runs at once with --scheduler local, from 1 to {MAX_WORKERS} (SLURM's "
            "is --array-parallelism)"
        )
    if replay_optimizer is not None:  # absolute: each run may start elsewhere (a SLURM task, a worker)
        from inspo_cli.training.preflight import check_replay_source

        check_replay_source(replay_optimizer, "--replay-optimizer")  # before the plan: every run would fail
        overrides = [*(overrides or []), f"optimizer.replay={json.dumps(str(replay_optimizer.resolve()))}"]
    plan = _make_plan(recipe, axes, study, sweep, seeds, overrides or [], max_variants)
    workers = min(workers, len(plan.runs()))  # more workers than runs would only sit idle
    target = out if out is not None else ABLATIONS_DIR / plan.name
    if reference is not None and reference not in [v.name for v in plan.variants]:
        raise InspoError(
            f"--reference {reference!r} is not a variant of this ablation; choose from "
            f"{', '.join(v.name for v in plan.variants)}"
        )
    if slurm is not None:  # a path SLURM cannot carry; without --dry-run, sbatch, srun and squeue here
        cluster.check_slurm(target, dry_run, wait)
    if dry_run:
        _print_plan(
            plan,
            target,
            as_json,
            None if slurm is None else cluster.preview(AblationDir(target, plan), slurm, device, launcher),
        )
        return
    if not print_commands and slurm is None:  # a SLURM task checks the device on its node, not here
        from inspo_cli.models import check_device

        check_device(device)
        if workers > 1:  # their GPUs are shared out before the plan is written, not after
            from inspo_cli.ablation.workers import gpu_groups

            gpu_groups(workers, gpus_per_run, device)
    ablation = AblationDir.start(target, plan, "replan" if replan else "keep" if keep_planned else None)
    if ablation.notice:
        err_console.print(escape(ablation.notice), soft_wrap=True)
    if print_commands:
        _print_commands(ablation, launcher, device)
        return
    if slurm is not None:
        cluster.submit(ablation, slurm, device, options["rule"], launcher)
        if wait:
            cluster.wait(ablation)
            _finish(ablation, as_json, options)
        return
    _run_here(ablation, device, as_json, options, launcher, workers, gpus_per_run)


def table_options(checkpoint: str, reference: str | None, target_diff: float) -> dict:
    """The table's settings, checked before anything runs."""
    from inspo_cli.ablation.results import RULES

    if checkpoint not in RULES:
        raise InspoError(
            f"--checkpoint {checkpoint!r}: choose best (App. B's checkpoint before any reward collapse) or final"
        )
    if not 0 < target_diff < 1:
        raise InspoError(f"--target-diff {target_diff}: must be an EM difference between 0 and 1, e.g. 0.05")
    return {"rule": checkpoint, "reference": reference, "target_diff": target_diff}


def _make_plan(recipe, axes, study, sweep, seeds, overrides, max_variants):
    from inspo_cli.ablation.plan import PAPER_SEEDS, plan_axes, plan_study, plan_sweep
    from inspo_cli.config import PROJECT_ROOT, find_recipe

    recipe = find_recipe(recipe) if recipe is not None else None  # a bundled name becomes its file
    chosen = [flag for flag, given in (("--study", study), ("--sweep", sweep), ("an axis flag", axes)) if given]
    if len(chosen) != 1:
        raise InspoError(
            "name one ablation: an axis (--proposer, --stage, --components, --selection, --parents, "
            "--n-parent, --temperature, --tools, --protocol; "
            "several may be combined), a --study, or a --sweep file"
            + (f" (got {' and '.join(chosen)})" if chosen else "")
        )
    seed_list = _parse_seeds(seeds)
    if sweep is not None:
        if max_variants < 1:
            raise InspoError(f"--max-variants {max_variants}: must be at least 1")
        return plan_sweep(_read_sweep(sweep), str(sweep), recipe, seed_list, overrides, max_variants)
    base = recipe if recipe is not None else PROJECT_ROOT / DEMO_RECIPE
    seed_list = seed_list if seed_list is not None else list(PAPER_SEEDS)
    if study is not None:
        return plan_study(base, study, seed_list, overrides)
    return plan_axes(
        base, [(name, [v.strip() for v in value.split(",") if v.strip()]) for name, value in axes], seed_list, overrides
    )


def _parse_seeds(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise InspoError(f"--seeds {text!r}: must be integers separated by commas, e.g. 0,1,2") from None


def _read_sweep(path: Path):
    import yaml

    from inspo_cli.config.yamlfile import MAX_BYTES, load_yaml
    from inspo_cli.files import read_text

    text = read_text(path, "--sweep", max_bytes=MAX_BYTES)
    try:
        return load_yaml(text, f"--sweep {path}")
    except yaml.YAMLError as e:
        raise InspoError(f"--sweep {path} is not valid YAML: {' '.join(str(e).split())}") from None


def _print_plan(plan, target: Path, as_json: bool, slurm: dict | None = None) -> None:
    """The plan; with `slurm` (--scheduler slurm) also the job array it would submit."""
    if as_json:
        typer.echo(json.dumps({**plan.as_dict(), "out": str(target), **({"slurm": slurm} if slurm else {})}, indent=2))
        return
    typer.echo(
        f"ablation {plan.name}: {len(plan.variants)} variants x {len(plan.seeds)} seeds "
        f"({', '.join(map(str, plan.seeds))}) = {len(plan.runs())} runs -> {target}"
    )
    width = max(len(v.name) for v in plan.variants)
    for v in plan.variants:
        settings = " ".join([v.recipe, *(f"--set {shlex.quote(o)}" for o in v.overrides)])
        typer.echo(
            f"  {v.name:<{width}}  stands for: {', '.join(v.bars) or '(base recipe)'}\n  {'':<{width}}  {settings}"
        )
    for name, into in plan.merged.items():
        typer.echo(f"  {name} resolves to the same recipe as {into}: not run twice; its bars join {into}'s")
    typer.echo(f"runs, in order: {' '.join(r.name for r in plan.runs())}")
    if slurm:
        typer.echo(f"\n{slurm['text']}")


def _print_commands(ablation, launcher: str, device: str | None = None) -> None:
    """One shell line per unfinished run: a cut-off run resumes from its directory (a new `--name` would make
    <name>-2, which --collect never reads); one cut off before its first checkpoint is removed and started over."""
    from inspo_cli.ablation.directory import ABSENT, FINISHED
    from inspo_cli.ablation.runner import command_line
    from inspo_cli.training.stages import resume_possible

    pending = [r for r in ablation.plan.runs() if ablation.status(r) != FINISHED]
    lines = []
    on = ["--device", device] if device else []
    for run in pending:
        directory = ablation.run_dir(run)
        if ablation.status(run) == ABSENT:
            lines.append(shlex.join(command_line(ablation, run, launcher) + on))
        elif resume_possible(directory):
            lines.append(shlex.join(command_line(ablation, run, launcher, resume=True) + on))
        else:
            lines.append(
                f"rm -rf -- {shlex.quote(str(directory.path))} && "
                + shlex.join(command_line(ablation, run, launcher) + on)
            )
    for line in lines:
        typer.echo(line)
    err_console.print(
        f"{len(pending)} of {len(ablation.plan.runs())} runs to go; afterwards: inspo ablate "
        f"--collect {shlex.quote(str(ablation))}"
    )


def _run_here(
    ablation,
    device: str | None,
    as_json: bool,
    options: dict,
    launcher: str = "inspo",
    workers: int = 1,
    gpus_per_run: int | None = None,
) -> None:
    from inspo_cli.ablation.runner import run_plan
    from inspo_cli.ablation.workers import run_parallel

    err_console.print(
        f"ablation {ablation.plan.name}: {len(ablation.plan.runs())} runs in {ablation}"
        + (f", {workers} at once" if workers > 1 else "")
    )
    on_event = lambda line: err_console.print(escape(line))  # noqa: E731
    try:
        if workers > 1:
            run_parallel(ablation, workers, gpus_per_run, device, on_event, options["rule"], launcher)
        else:
            run_plan(ablation, device, on_event=on_event, rule=options["rule"], launcher=launcher)
    except KeyboardInterrupt:
        err_console.print(f"interrupted; the same command continues it (finished runs are kept): {ablation}")
        raise typer.Exit(130) from None
    _finish(ablation, as_json, options)


def _finish(ablation, as_json: bool, options: dict) -> None:
    """Write and print the table. Exit 1 when a planned run has no result (failed, stopped, not run)."""
    from inspo_cli.ablation.table import collect, write_table

    table = collect(ablation, **options)
    write_table(ablation, table)
    if as_json:
        typer.echo(json.dumps(table, indent=2))
    else:
        _print_table(table)
        console.print(f"table: {ablation.table_file('md')} (and .json, .csv)")
    missing = [m for row in table["rows"] for m in row["missing"]]
    if missing:
        err_console.print(
            f"{len(missing)} runs without a result: " + "; ".join(f"{m['run']} ({m['why']})" for m in missing[:5])
        )
        raise typer.Exit(1)


def _print_table(table: dict) -> None:
    from inspo_cli.ablation.table import cell, comparison_of, delta_cell, steps_cell

    shown = Table(
        title=f"ablation {table['name']}: EM at {table['rule_text']}, mean ± 95% interval over seeds and questions",
        title_justify="left",
    )
    for column in (
        "variant",
        "stands for",
        "n",
        "steps used",
        *table["benchmarks"],
        "avg.",
        f"Δ avg. vs {table['reference']}",
    ):
        shown.add_column(column)
    for row in table["rows"]:
        delta = (
            "(reference)"
            if row["variant"] == table["reference"]
            else delta_cell((comparison_of(table, row["variant"]) or {}).get("average"))
        )
        shown.add_row(
            row["variant"],
            ", ".join(row["bars"]) or "(base recipe)",
            str(row["n"]),
            steps_cell(row),
            *(cell(row["em"].get(b)) for b in table["benchmarks"]),
            cell(row["average"]),
            delta,
        )
    console.print(shown)
    for comparison in table["comparisons"]:
        console.print(escape(comparison["sentence"]), soft_wrap=True)
    for comparison in table["comparisons"]:
        console.print(escape(f"power: {comparison['power_sentence']}"), soft_wrap=True)
