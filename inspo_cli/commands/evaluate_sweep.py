"""`inspo evaluate --sweep`: one policy and instruction under each retriever setting, and the table that compares
them (`inspo_cli/evaluation/sweep.py`).

    inspo evaluate --run runs/demo --sweep retriever.topk=1,3,5 --sweep retriever.index=idx/bm25,idx/dense

Every setting's recipe is built and checked before the model loads; the model loads once for all of them. Each
setting is a whole evaluation in its own folder of --out (results and predictions, the judge's too when
evaluation.metrics names it), and --out gets sweep.md, sweep.json and sweep.png.
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


def run_sweep(swept: dict, methods, questions, instruction, device, seed, out_dir, provenance: dict) -> None:
    from inspo_cli.evaluation.report import iter_predictions
    from inspo_cli.evaluation.session import load_policy, run_evaluation
    from inspo_cli.evaluation.sweep import SWEEP_JSON, SWEEP_MD, SWEEP_PNG, compare_settings, figure, markdown
    from inspo_cli.jsonio import atomic_write_json, atomic_write_text

    built = swept["settings"]
    folders = unique_folders([setting for setting, _ in built])
    first = built[0][1]
    err_console.print(f"loading {first.model.name_or_path} once for {len(built)} retriever settings")
    loaded = load_policy(first, device, seed)
    results = []
    per_setting = len(methods) * sum(len(q) for q in questions.values())
    with progress_bar() as progress:
        task = progress.add_task("evaluating", total=per_setting * len(built))
        judging = "judge" in first.evaluation.metrics
        judged = progress.add_task("judging", total=per_setting * len(built), visible=judging)
        for setting, config in built:
            folder = out_dir / folders[setting]
            folder.mkdir()
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
    table = compare_settings(results, swept["reference"])
    command = "inspo " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    table["folders"] = {setting.label: folders[setting] for setting, _ in built}
    text = markdown(table, command)
    if "judge" in first.evaluation.metrics:  # the judge's table beside EM's, the same pairing (judged questions)
        table["judge"] = compare_settings(results, swept["reference"], "judge")
        text += "\n" + markdown(table["judge"], None, level=2)
    atomic_write_json(out_dir / SWEEP_JSON, {**table, "command": command})
    atomic_write_text(out_dir / SWEEP_MD, text)
    figure(table, swept["sweeps"], out_dir / SWEEP_PNG)
    console.print(text)
    console.print(f"sweep: {out_dir}/{SWEEP_MD} (and .json, .png); each setting's evaluation in its folder")
