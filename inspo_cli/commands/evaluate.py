"""`inspo evaluate`: the paper's inference methods on QA benchmarks, reported in Table 1's layout.

    inspo evaluate --benchmarks world --model smollm2-135m-instruct --method all --limit 20
    inspo evaluate --benchmarks nq,hotpotqa --model Qwen/Qwen2.5-3B-Instruct --method rag,agent --limit 500 \
        --retriever http://127.0.0.1:8000/retrieve
    inspo evaluate --run runs/qwen3b-inspo --benchmarks nq,triviaqa,popqa,hotpotqa,2wikimultihopqa,musique,bamboogle
    inspo evaluate --run runs/qwen3b-inspo --checkpoint final    # the final policy, even after a reward collapse

With --run and no --checkpoint, a finished run is evaluated at App. B's checkpoint (`best`: the final policy, or
the last evaluated checkpoint before a reward collapse), which is what the paper reports.

Writes results.json, results.csv, results.md and predictions.jsonl (one row per method and question) into
--out (default: evals/<timestamp>, or <run>/eval-<timestamp> with --run), and prints the EM table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from inspo_cli.commands.evaluate_inputs import out_dir_for as _out_dir
from inspo_cli.commands.evaluate_inputs import parse_methods, read_instruction
from inspo_cli.commands.options import DeviceOption, SetOption
from inspo_cli.console import console, err_console, progress_bar, user_errors
from inspo_cli.errors import InspoError
from inspo_cli.files import output_dir
from inspo_cli.registry import IMPORT_PATH_HINT, METHODS


@user_errors
def evaluate(
    benchmarks: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated: world (the bundled world's test split), "
            "nq, triviaqa, popqa, hotpotqa, 2wikimultihopqa, musique, "
            "bamboogle, all, or a path to your own QA file (JSONL, "
            "JSON or parquet with id, question, golden_answers; "
            "named by its stem)."
        ),
    ] = None,
    method: Annotated[
        str | None, typer.Option(help=f"Comma-separated, or all: {METHODS.choices()}; or {IMPORT_PATH_HINT}.")
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(help="Hub id, local directory, or packaged model (smollm2-135m-instruct, gemma3-270m)."),
    ] = None,
    instruction: Annotated[
        str | None,
        typer.Option(
            help="agent: the instruction, as text or a file; default: the recipe's first (Search-R1's, App. F)."
        ),
    ] = None,
    run: Annotated[
        list[Path] | None,
        typer.Option(
            help="A training run directory: its policy, best instruction and recipe. With --sweep, repeat it for "
            "the seeds of one recipe: every run under every setting, the differences paired by run and question."
        ),
    ] = None,
    checkpoint: Annotated[
        str | None,
        typer.Option(
            help="With --run: a training step, final, or best (App. B: the "
            "final checkpoint before any reward collapse, among the "
            "steps evaluated every training.eval_every); each is "
            "evaluated with the best instruction of its own saved "
            "population. Default: best for a finished run, else the "
            "newest checkpoint."
        ),
    ] = None,
    recipe: Annotated[
        Path | None,
        typer.Option(
            help="Recipe YAML (or a bundled recipe's name) for model, retriever and limits (default: paper defaults)."
        ),
    ] = None,
    retriever: Annotated[
        str | None,
        typer.Option(
            help="Index directory, corpus .jsonl or server URL; default: BM25 over the bundled world, in-process."
        ),
    ] = None,
    limit: Annotated[int | None, typer.Option(help="First N questions per benchmark.")] = None,
    split: Annotated[
        str | None, typer.Option(help="Benchmark split (default: evaluation.split, else the one the paper reports).")
    ] = None,
    batch_size: Annotated[int | None, typer.Option(help="Questions generated together.")] = None,
    temperature: Annotated[
        float | None, typer.Option(help="Sampling temperature; 0 is greedy (default: evaluation.temperature).")
    ] = None,
    device: DeviceOption = None,
    out: Annotated[Path | None, typer.Option(help="Directory for results (default: evals/<timestamp>).")] = None,
    seed: Annotated[int, typer.Option(help="Random seed for sampling.")] = 0,
    overrides: SetOption = None,
    sweep: Annotated[
        list[str] | None,
        typer.Option(
            "--sweep",
            help="KEY=V1,V2,...: evaluate the same policy and instruction under each value of a retriever field "
            "(repeat for several; every combination), e.g. --sweep retriever.topk=1,3,5; writes each setting's "
            "evaluation and sweep.md/.json/.png with paired differences to the recipe's own setting.",
        ),
    ] = None,
    judge: Annotated[
        Path | None,
        typer.Option(
            "--judge",
            help="Add the LLM judge's verdicts to this evaluation directory from its predictions (no generation): "
            "the judge of --recipe, else of the run it belongs to, else the packaged local model; --set judge.* "
            "on top. Judged predictions are cached, so judging again costs nothing.",
        ),
    ] = None,
) -> None:
    """Evaluate inference methods on benchmarks: a Table-1 style EM table, plus F1, SubEM and searches."""
    if judge is not None:
        given = {
            "--benchmarks": benchmarks,
            "--method": method,
            "--model": model,
            "--instruction": instruction,
            "--run": run,
            "--checkpoint": checkpoint,
            "--retriever": retriever,
            "--limit": limit,
            "--split": split,
            "--batch-size": batch_size,
            "--temperature": temperature,
            "--device": device,
            "--out": out,
            "--sweep": sweep,
        }
        if ignored := [flag for flag, value in given.items() if value]:
            raise InspoError(
                f"--judge grades the predictions already in {judge}, with only --recipe and --set (judge.*); "
                f"drop {', '.join(ignored)}"
            )
        _judge_only(judge, recipe, overrides or [])
        return
    from inspo_cli.config import load_recipe
    from inspo_cli.evaluation.checkpoints import default_checkpoint, run_policy
    from inspo_cli.evaluation.runner import evaluation_questions
    from inspo_cli.policy.models import check_device
    from inspo_cli.runs import RunDir

    check_device(device)
    runs = list(run or [])
    if len(runs) > 1:
        if not sweep:
            raise InspoError(
                f"--run is given {len(runs)} times: several runs are evaluated together only with --sweep (the seeds "
                "of one recipe under each retriever setting); evaluate the others one at a time"
            )
        from inspo_cli.commands.evaluate_sweep import sweep_runs

        if recipe is not None or model is not None or retriever is not None:
            raise InspoError(
                "--run names each run's recipe and policy, and --sweep the retriever; drop --recipe, --model "
                "and --retriever"
            )
        flags = {
            "--temperature": ("evaluation.temperature", temperature),
            "--batch-size": ("evaluation.batch_size", batch_size),
            "--limit": ("evaluation.limit", limit),
            "--split": ("evaluation.split", split),
        }
        settings = (benchmarks, method, instruction, flags, list(overrides or []), sweep, out, device, seed)
        sweep_runs(runs, checkpoint, *settings)
        return
    run_dir = runs[0] if runs else None
    if retriever is not None:  # before the model loads (minutes for a 7B), not after
        from retriever import check_spec

        check_spec(retriever, "--retriever")
    overrides = list(overrides or [])
    policy = None
    if run_dir is not None:
        trained = RunDir.open(run_dir)
        if recipe is not None:
            raise InspoError("--run and --recipe both name a recipe; drop --recipe (the run's own recipe is used)")
        recipe = trained.recipe_file
        policy = run_policy(
            trained, trained.recipe(), checkpoint if checkpoint is not None else default_checkpoint(trained)
        )
    elif checkpoint is not None:
        raise InspoError("--checkpoint picks a policy of a training run; add --run RUN_DIR")
    trained_model = str(policy.path) if policy is not None else None
    flags = {
        "--model": ("model.name_or_path", model if model is not None else trained_model),
        "--temperature": ("evaluation.temperature", temperature),
        "--batch-size": ("evaluation.batch_size", batch_size),
        "--limit": ("evaluation.limit", limit),
        "--split": ("evaluation.split", split),
    }
    config = load_recipe(recipe, overrides, flags=flags)
    swept = None
    if sweep:
        from inspo_cli.commands.evaluate_sweep import sweep_configs

        if retriever is not None:
            raise InspoError("--retriever and --sweep: give the retriever with --set retriever.index=... or sweep it")
        swept = sweep_configs(recipe, overrides, flags, sweep, config)
    methods = parse_methods(method or config.evaluation.method)
    if instruction is not None:
        agent_instruction = read_instruction(instruction)
    elif policy is not None:
        agent_instruction = policy.instruction
    else:
        agent_instruction = config.population.instructions[0]
    names = benchmarks.split(",") if benchmarks else config.evaluation.benchmarks
    questions = evaluation_questions(names, config.data, config.evaluation.split, config.evaluation.limit)
    target = _out_dir(out, run_dir)
    if policy is not None:
        source = "--instruction" if instruction is not None else f"instruction {policy.instruction_id}"
        why = f" ({policy.why})" if policy.why else ""
        err_console.print(f"evaluating {run_dir} at {policy.label} with {source}{why}", soft_wrap=True)
    provenance = {
        "checkpoint": policy.label if policy else None,
        "instruction_id": policy.instruction_id if policy and instruction is None else None,
    }
    if swept is not None:
        from inspo_cli.commands.evaluate_sweep import run_sweep

        with output_dir(target, "--out") as out_dir:
            run_sweep(swept, methods, questions, agent_instruction, device, seed, out_dir, provenance)
        return
    with output_dir(target, "--out") as out_dir:  # removed again if the evaluation fails before writing
        _run(
            config,
            methods,
            questions,
            agent_instruction,
            retriever,
            device,
            seed,
            out_dir,
            provenance,
        )


def _judge_only(directory: Path, recipe: Path | None, overrides: list[str]) -> None:
    from rich.markdown import Markdown

    from inspo_cli.evaluation.judge import open_judge
    from inspo_cli.evaluation.rejudge import add_verdicts, judge_recipe, judging, read_evaluation

    config = judge_recipe(directory, recipe, overrides)
    with judging(directory):  # one judging of a directory at a time
        evaluation = read_evaluation(directory)  # checked before the judge loads
        judge = open_judge(config.judge)  # a missing key fails here, before anything is asked
        rows = len(evaluation[1])
        err_console.print(
            f"judging {rows} predictions in {directory} with {config.judge.provider} {config.judge.model}",
            soft_wrap=True,
        )
        with progress_bar() as progress:
            task = progress.add_task("judging", total=rows)
            report, section = add_verdicts(directory, judge, lambda n: progress.advance(task, n), evaluation)
    console.print(Markdown("\n".join(section)))
    failed = report["failed_calls"]
    console.print(
        f"verdicts: {directory}/results.md and predictions.jsonl; where the judge and EM differ: "
        f"{directory}/judge_disagreements.jsonl" + (f"; {failed} calls failed" if failed else ""),
        soft_wrap=True,
    )


def _run(config, methods, questions, instruction, retriever_spec, device, seed, out_dir, provenance: dict) -> None:
    from inspo_cli.evaluation.report import rich_table
    from inspo_cli.evaluation.session import run_evaluation

    total = len(methods) * sum(len(q) for q in questions.values())
    err_console.print(f"loading {config.model.name_or_path} and the retriever")
    with progress_bar() as progress:
        task = progress.add_task("evaluating", total=total)
        judged = progress.add_task("judging", total=total, visible="judge" in config.evaluation.metrics)
        scores = run_evaluation(
            config,
            methods,
            questions,
            instruction,
            out_dir,
            provenance,
            retriever_spec=retriever_spec,
            device=device,
            seed=seed,
            on_batch=lambda n: progress.advance(task, n),
            on_judged=lambda n: progress.advance(judged, n),
        )
    console.print(rich_table(scores, "em"))
    console.print(rich_table(scores, "searches"))
    console.print(f"results: {out_dir}/results.md (and .json, .csv); predictions: {out_dir}/predictions.jsonl")
