"""`inspo evaluate --sweep`: one policy and instruction under each retriever setting, and the table that compares
them (`inspo_cli/evaluation/sweep.py`); or several runs, the seeds of one recipe, each under every setting
(`inspo_cli/ablation/retriever_sweep.py`).

    inspo evaluate --run runs/demo --sweep retriever.topk=1,3,5 --sweep retriever.index=idx/bm25,idx/dense
    inspo evaluate --run runs/demo-s0 --run runs/demo-s1 --run runs/demo-s2 --sweep retriever.topk=1,3,5

Every setting's recipe (of every run) is built and checked before a model loads; each model loads once for all
settings. Each setting is a whole evaluation in its own folder of --out (<run>/<setting> with several runs: results
and predictions, the judge's too when evaluation.metrics names it), and --out gets sweep.md, sweep.json and
sweep.png.
"""

from __future__ import annotations

import shlex
import sys

from inspo_cli.console import console, err_console, progress_bar
from inspo_cli.errors import InspoError


def sweep_configs(recipe, overrides: list[str], flags: dict, specs: list[str], config) -> dict:
    """{"sweeps", "settings": [(Setting, Recipe)], "reference"}; every setting's recipe checked now."""
    from inspo_cli.config import load_recipe, resolve_path
    from inspo_cli.evaluation.sweep import parse_sweeps, reference_setting, settings
    from retriever import RetrieverError, check_spec

    sweeps = parse_sweeps(specs)
    built = []
    for setting in settings(sweeps):
        try:
            config_s = load_recipe(recipe, [*overrides, *setting.overrides()], flags=flags)
            section = config_s.retriever
            spec = str(
                (section.url if section.kind == "http" or section.url else section.index or section.corpus) or ""
            )
            check_spec(resolve_path(spec) or spec, "retriever")  # what a run would open, refused before the model
        except (InspoError, RetrieverError) as error:
            raise InspoError(f"--sweep setting {setting.label}: {error}") from None
        built.append((setting, config_s))
    fields = {key: str(getattr(config.retriever, key.split(".", 1)[1], "")) for key, _ in sweeps}
    return {"sweeps": sweeps, "settings": built, "reference": reference_setting([s for s, _ in built], fields)}


def unique_folders(settings) -> dict:
    """Each setting's folder name, made unique ("-2", "-3") where two settings' names come out the same."""
    folders: dict = {}
    for setting in settings:
        name, n = setting.folder, 1
        while name in folders.values():
            n += 1
            name = f"{setting.folder}-{n}"
        folders[setting] = name
    return folders


def evaluate_settings(swept: dict, methods, questions, instruction, device, seed, out_dir, provenance, bars):
    """Every setting of `swept` evaluated into its folder of `out_dir`, the model loaded once; [(setting, the
    prediction rows)]. `bars`: (progress, evaluating task, judging task)."""
    from inspo_cli.evaluation.report import iter_predictions
    from inspo_cli.evaluation.session import load_policy, run_evaluation

    progress, task, judged = bars
    built = swept["settings"]
    folders = unique_folders([setting for setting, _ in built])
    first = built[0][1]
    err_console.print(f"loading {first.model.name_or_path} once for {len(built)} retriever settings", soft_wrap=True)
    loaded = load_policy(first, device, seed)
    results = []
    for setting, config in built:
        folder = out_dir / folders[setting]
        folder.mkdir(parents=True)
        run_evaluation(
            config,
            methods,
            questions,
            instruction,
            folder,
            {**provenance, "sweep": dict(setting.values)},
            device=device,
            seed=seed,
            on_batch=lambda n: progress.advance(task, n),
            loaded=loaded,
            on_judged=lambda n: progress.advance(judged, n),
        )
        fix = "evaluate again into a new --out"
        results.append((setting, list(iter_predictions(folder / "predictions.jsonl", fix))))
    return results


def run_sweep(swept: dict, methods, questions, instruction, device, seed, out_dir, provenance: dict) -> None:
    from inspo_cli.evaluation.sweep import compare_settings, markdown

    built = swept["settings"]
    per_setting = len(methods) * sum(len(q) for q in questions.values())
    judging = "judge" in built[0][1].evaluation.metrics
    with progress_bar() as progress:
        task = progress.add_task("evaluating", total=per_setting * len(built))
        judged = progress.add_task("judging", total=per_setting * len(built), visible=judging)
        bars = (progress, task, judged)
        results = evaluate_settings(swept, methods, questions, instruction, device, seed, out_dir, provenance, bars)
    table = compare_settings(results, swept["reference"])
    table["folders"] = {s.label: f for s, f in unique_folders([s for s, _ in built]).items()}
    text = markdown(table, _command())
    if judging:  # the judge's table beside EM's, the same pairing (judged questions)
        table["judge"] = compare_settings(results, swept["reference"], "judge")
        text += "\n" + markdown(table["judge"], None, level=2)
    _write(out_dir, table, text, swept["sweeps"])


def sweep_runs(runs: list, checkpoint, benchmarks, method, instruction, flags, overrides, specs, out, device, seed):
    """`inspo evaluate --run A --run B ... --sweep ...`: the runs (the seeds of one recipe, checked) each under every
    setting, and the table over runs (`ablation.retriever_sweep`)."""
    from inspo_cli.ablation.retriever_sweep import compare_over_runs, markdown
    from inspo_cli.commands.evaluate_inputs import out_dir_for, parse_methods, read_instruction
    from inspo_cli.config import load_recipe
    from inspo_cli.evaluation.checkpoints import default_checkpoint, run_policy
    from inspo_cli.evaluation.runner import evaluation_questions
    from inspo_cli.files import output_dir
    from inspo_cli.reporting.sources import recipe_without_seed
    from inspo_cli.runs import RunDir

    trained = [RunDir.open(path) for path in runs]
    seen: dict = {}
    for run in trained:
        if (where := run.path.resolve()) in seen:
            raise InspoError(f"--run {run.path} is given twice (also as {seen[where]}); give each run once")
        seen[where] = run.path
    recipes = [recipe_without_seed(run.recipe()) for run in trained]
    for run, recipe in zip(trained[1:], recipes[1:]):
        if recipe != recipes[0]:
            raise InspoError(
                f"--run {run.path} and --run {trained[0].path} differ in more than their seed: a sweep over several "
                "runs averages the seeds of one recipe; sweep the other recipe's runs separately"
            )
    given = instruction is not None
    plans = []
    for run in trained:  # every run's policy and every setting of it checked before a model loads
        policy = run_policy(run, run.recipe(), checkpoint if checkpoint is not None else default_checkpoint(run))
        run_flags = {**flags, "--model": ("model.name_or_path", str(policy.path))}
        config = load_recipe(run.recipe_file, overrides, flags=run_flags)
        plans.append((run, policy, sweep_configs(run.recipe_file, overrides, run_flags, specs, config)))
    first = plans[0][2]["settings"][0][1]
    methods = parse_methods(method or first.evaluation.method)
    names = benchmarks.split(",") if benchmarks else first.evaluation.benchmarks
    questions = evaluation_questions(names, first.data, first.evaluation.split, first.evaluation.limit)
    text = read_instruction(instruction) if given else None
    folders = _run_folders([run for run, _, _ in plans])
    reference = plans[0][2]["reference"]
    per_setting = len(methods) * sum(len(q) for q in questions.values())
    total = per_setting * sum(len(swept["settings"]) for _, _, swept in plans)
    judging = "judge" in first.evaluation.metrics
    results = []
    with output_dir(out_dir_for(out, None), "--out") as out_dir, progress_bar() as progress:
        bars = (
            progress,
            progress.add_task("evaluating", total=total),
            progress.add_task("judging", total=total, visible=judging),
        )
        for index, (run, policy, swept) in enumerate(plans):
            err_console.print(f"run {index + 1} of {len(plans)}: {run.path} at {policy.label}", soft_wrap=True)
            provenance = {
                "run": str(run.path),
                "checkpoint": policy.label,
                "instruction_id": None if given else policy.instruction_id,
            }
            chosen = text if text is not None else policy.instruction
            for setting, rows in evaluate_settings(
                swept, methods, questions, chosen, device, seed, out_dir / folders[run], provenance, bars
            ):
                results.append((index, setting, rows))
        table = compare_over_runs(results, reference)
        table["runs_evaluated"] = {str(run.path): folders[run] for run, _, _ in plans}
        table["checkpoints"] = {str(run.path): policy.label for run, policy, _ in plans}
        body = markdown(table, _command())
        if judging:
            table["judge"] = compare_over_runs(results, reference, "judge")
            body += "\n" + markdown(table["judge"], None, level=2)
        _write(out_dir, table, body, plans[0][2]["sweeps"])


def _run_folders(runs: list) -> dict:
    """Each run's folder in --out: its directory's name, made unique ("-2") where two runs' names are the same."""
    folders: dict = {}
    for run in runs:
        name, n = run.path.resolve().name, 1
        while name in folders.values():
            n += 1
            name = f"{run.path.resolve().name}-{n}"
        folders[run] = name
    return folders


def _command() -> str:
    return "inspo " + " ".join(shlex.quote(a) for a in sys.argv[1:])


def _write(out_dir, table: dict, text: str, sweeps) -> None:
    from inspo_cli.evaluation.sweep import SWEEP_JSON, SWEEP_MD, SWEEP_PNG, figure
    from inspo_cli.jsonio import atomic_write_json, atomic_write_text

    atomic_write_json(out_dir / SWEEP_JSON, {**table, "command": _command()})
    atomic_write_text(out_dir / SWEEP_MD, text)
    figure(table, sweeps, out_dir / SWEEP_PNG)
    console.print(text)
    console.print(f"sweep: {out_dir}/{SWEEP_MD} (and .json, .png); each setting's evaluation in its folder")
