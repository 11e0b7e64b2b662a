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

import json
from pathlib import Path

from rich.markup import escape

from inspo_cli.commands import ablate_options as opt
from inspo_cli.commands.ablate_options import DEMO_RECIPE, AblateOptions
from inspo_cli.commands.ablate_output import finish, print_commands, print_plan, run_here
from inspo_cli.console import err_console, user_errors
from inspo_cli.errors import InspoError

ABLATIONS_DIR = Path("runs/ablations")
MAX_WORKERS = 256  # processes on one machine, each loading a policy; --workers 10**9 must not allocate 10**9 slots


@user_errors
def ablate(
    recipe: opt.Recipe = None,
    proposer: opt.Proposer = None,
    stage: opt.Stage = None,
    components: opt.Components = None,
    selection: opt.Selection = None,
    parents: opt.Parents = None,
    tools: opt.Tools = None,
    protocol: opt.Protocol = None,
    n_parent: opt.NParent = None,
    temperature: opt.Temperature = None,
    study: opt.Study = None,
    sweep: opt.Sweep = None,
    seeds: opt.Seeds = None,
    overrides: opt.Overrides = None,
    out: opt.Out = None,
    dry_run: opt.DryRun = False,
    print_commands: opt.PrintCommands = False,
    launcher: opt.Launcher = "inspo",
    scheduler: opt.Scheduler = "local",
    partition: opt.Partition = None,
    account: opt.Account = None,
    qos: opt.Qos = None,
    time_limit: opt.TimeLimit = "24:00:00",
    workers: opt.Workers = 1,
    gpus_per_run: opt.GpusPerRun = None,
    cpus_per_run: opt.CpusPerRun = None,
    mem_per_run: opt.MemPerRun = None,
    nodes_per_run: opt.NodesPerRun = 1,
    array_parallelism: opt.ArrayParallelism = 256,
    max_timeouts: opt.MaxTimeouts = 10,
    sbatch_option: opt.SbatchOption = None,
    status: opt.Status = None,
    wait: opt.Wait = False,
    collect: opt.Collect = None,
    as_json: opt.AsJson = False,
    device: opt.Device = None,
    replay_optimizer: opt.ReplayOptimizer = None,
    checkpoint: opt.Checkpoint = "best",
    reference: opt.Reference = None,
    target_diff: opt.TargetDiff = 0.05,
    metric: opt.Metric = "em",
    max_variants: opt.MaxVariants = 500,
    replan: opt.Replan = False,
    keep_planned: opt.KeepPlanned = False,
) -> None:
    """Train and evaluate the variants of an ablation over seeds; write ablation.md/.json/.csv: EM with 95%
    intervals over seeds and questions, differences to a reference with p-values, power."""
    from inspo_cli.commands.ablate_flags import check_flags, given_flags

    arguments = dict(locals())
    check_flags(given_flags(ablate, arguments))  # a flag this mode would ignore is refused, not dropped
    run_ablate(AblateOptions.from_arguments(arguments))


def run_ablate(options: AblateOptions) -> None:
    """The mode the options choose: --status, --collect, --dry-run, --print-commands, a SLURM job array, or the
    runs here."""
    from inspo_cli.ablation.directory import AblationDir
    from inspo_cli.commands import ablate_cluster as cluster

    shown, how = options.table, options.run
    table = table_options(shown.checkpoint, shown.reference, shown.target_diff, shown.metric)
    if shown.status is not None:
        cluster.print_status(AblationDir.open(shown.status), shown.as_json, table["rule"])
        return
    if shown.collect is not None:
        ablation = AblationDir.open(shown.collect)
        if shown.wait:
            cluster.wait(ablation)
        finish(ablation, shown.as_json, table)
        return
    slurm = _checked_launch(options)
    compare = options.compare
    overrides = compare.overrides
    if how.replay_optimizer is not None:  # absolute: each run may start elsewhere (a SLURM task, a worker)
        from inspo_cli.training.preflight import check_replay_source

        check_replay_source(how.replay_optimizer, "--replay-optimizer")  # before the plan: every run would fail
        overrides = [*overrides, f"optimizer.replay={json.dumps(str(how.replay_optimizer.resolve()))}"]
    plan = _make_plan(
        compare.recipe, compare.axes, compare.study, compare.sweep, compare.seeds, overrides, compare.max_variants
    )
    workers = min(how.workers, len(plan.runs()))  # more workers than runs would only sit idle
    target = how.out if how.out is not None else ABLATIONS_DIR / plan.name
    if shown.reference is not None and shown.reference not in [v.name for v in plan.variants]:
        raise InspoError(
            f"--reference {shown.reference!r} is not a variant of this ablation; choose from "
            f"{', '.join(v.name for v in plan.variants)}"
        )
    if slurm is not None:  # a path SLURM cannot carry; without --dry-run, sbatch, srun and squeue here
        cluster.check_slurm(target, how.dry_run, shown.wait)
    if how.dry_run:
        preview = None if slurm is None else cluster.preview(AblationDir(target, plan), slurm, how.device, how.launcher)
        print_plan(plan, target, shown.as_json, preview)
        return
    if not how.print_commands and slurm is None:  # a SLURM task checks the device on its node, not here
        from inspo_cli.policy.models import check_device

        check_device(how.device)
        if workers > 1:  # their GPUs are shared out before the plan is written, not after
            from inspo_cli.ablation.workers import gpu_groups

            gpu_groups(workers, how.gpus_per_run, how.device)
    ablation = AblationDir.start(target, plan, "replan" if compare.replan else "keep" if compare.keep_planned else None)
    if ablation.notice:
        err_console.print(escape(ablation.notice), soft_wrap=True)
    if how.print_commands:
        print_commands(ablation, how.launcher, how.device)
        return
    if slurm is not None:
        cluster.submit(ablation, slurm, how.device, table["rule"], how.launcher)
        if shown.wait:
            cluster.wait(ablation)
            finish(ablation, shown.as_json, table)
        return
    run_here(ablation, how.device, shown.as_json, table, how.launcher, workers, how.gpus_per_run)


def _checked_launch(options: AblateOptions):
    """The scheduler, launcher and workers checked before anything is planned; the SLURM options for a job array
    (None: the runs start here or are printed)."""
    from inspo_cli.ablation.runner import launcher_words
    from inspo_cli.commands import ablate_cluster as cluster

    how = options.run
    if how.scheduler not in cluster.SCHEDULERS:
        raise InspoError(f"--scheduler {how.scheduler!r}: choose local or slurm")
    launcher_words(how.launcher)  # a bad launcher fails before the plan is written
    slurm = None
    if how.scheduler == "slurm" and not how.print_commands:
        slurm = cluster.slurm_options(options.slurm, how.gpus_per_run, how.launcher)
    if how.gpus_per_run is not None and how.gpus_per_run < 0:
        raise InspoError(f"--gpus-per-run {how.gpus_per_run}: must be at least 0")
    if how.workers < 1 or how.workers > MAX_WORKERS or (how.workers > 1 and how.scheduler != "local"):
        raise InspoError(
            f"--workers {how.workers}: runs at once with --scheduler local, from 1 to {MAX_WORKERS} (SLURM's "
            "is --array-parallelism)"
        )
    return slurm


def table_options(checkpoint: str, reference: str | None, target_diff: float, metric: str = "em") -> dict:
    """The table's settings, checked before anything runs."""
    from inspo_cli.ablation.results import METRICS, RULES

    if checkpoint not in RULES:
        raise InspoError(
            f"--checkpoint {checkpoint!r}: choose best (App. B's checkpoint before any reward collapse) or final"
        )
    if not 0 < target_diff < 1:
        raise InspoError(f"--target-diff {target_diff}: must be an EM difference between 0 and 1, e.g. 0.05")
    if metric not in METRICS:
        raise InspoError(f"--metric {metric!r}: choose {', '.join(METRICS)}")
    return {"rule": checkpoint, "reference": reference, "target_diff": target_diff, "metric": metric}


def _make_plan(recipe, axes, study, sweep, seeds, overrides, max_variants):
    from inspo_cli.ablation.plan import PAPER_SEEDS, plan_axes, plan_study
    from inspo_cli.ablation.sweep import plan_sweep
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
