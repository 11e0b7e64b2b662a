"""`inspo recipe check`: validate a recipe (with overrides) and print the fully resolved config.

Meant for CI pipelines and shell scripts: exit code 0 and the resolved YAML on stdout when the recipe is
valid; a one-line error on stderr and exit code 2 when it is not. `inspo recipe list` names the bundled recipes;
`inspo recipe explain FIELD` documents one recipe key (`inspo_cli.config.reference`); `inspo recipe plan` says what
memory a recipe needs per process and which launches fit (`inspo_cli.config.resource_plan`).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.syntax import Syntax
from rich.table import Table

from inspo_cli.commands.options import SetOption
from inspo_cli.config import dump_recipe, load_recipe, recipe_to_dict
from inspo_cli.config.resource_plan import DECODE_MS, DEFAULT_GPU_GIB, DEFAULT_GPUS
from inspo_cli.console import console, err_console, user_errors
from inspo_cli.errors import InspoError

app = typer.Typer(
    help="Validate recipes, show their fully resolved configuration, and explain their fields.", no_args_is_help=True
)


@app.command("check")
@user_errors
def check(
    recipe: Annotated[
        Path,
        typer.Argument(
            help="Recipe YAML file, e.g. recipes/demo.yaml, or a bundled recipe's name, e.g. qwen2.5-3b/inspo."
        ),
    ],
    overrides: SetOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of YAML.")] = False,
    trl: Annotated[
        bool,
        typer.Option(
            "--trl",
            help="Print the exact TRL GRPOConfig (SFTConfig for SFT) the recipe "
            "maps to, next to the paper's App. B settings (and INSPO's "
            "population).",
        ),
    ] = False,
    processes: Annotated[
        int,
        typer.Option(
            help="The processes accelerate will launch (8 for one 8-GPU node): the "
            "batch must divide over them, and with --trl they set gradient "
            "accumulation.",
            min=1,
        ),
    ] = 1,
    device: Annotated[str | None, typer.Option(help="With --trl: cpu or cuda (default: cuda when available).")] = None,
) -> None:
    """Validate RECIPE (types, values, referenced files) and print the resolved configuration."""
    from inspo_cli.config.training_section import loss_warnings
    from inspo_cli.training.preflight import check_recipe

    resolved = load_recipe(recipe, overrides or [])
    check_recipe(resolved, processes)  # what a run would refuse later: the batch arithmetic, the population, ...
    for line in loss_warnings(resolved.training, resolved.rollout.max_total_tokens):  # runs, but measures else
        err_console.print(f"warning: {line}", markup=False, highlight=False, soft_wrap=True)
    if trl:
        _print_trl(resolved, processes, device, as_json)
    elif as_json:
        console.print_json(json.dumps(recipe_to_dict(resolved)))
    elif console.is_terminal:
        console.print(Syntax(dump_recipe(resolved), "yaml", background_color="default"))
    else:
        typer.echo(dump_recipe(resolved), nl=False)


@app.command("list")
@user_errors
def list_recipes(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON (name, path, description) instead.")] = False,
) -> None:
    """List the bundled recipes: the names --recipe takes (qwen2.5-3b/inspo, or a short name such as qwen3b) and
    what each is for."""
    from inspo_cli.config import bundled_recipes, short_names

    bundled = bundled_recipes()
    rows = []
    for name, path in bundled.items():
        try:
            rows.append({"name": name, "path": str(path), "description": _description(path)})
        except InspoError as error:  # one unreadable file (not UTF-8, a FIFO, huge) must not hide the others
            err_console.print(f"warning: skipped {escape(str(error))}", soft_wrap=True)
    described = {row["name"]: row["description"] for row in rows}
    rows[:0] = [  # the paper's main runs first, by the names the paper's readers use
        {
            "name": short,
            "path": str(bundled[name]),
            "short_for": name,
            "description": _shortened(f"short for {name}, {described[name]}" if name in described else name),
        }
        for short, name in short_names(bundled).items()
    ]
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    table = Table("name", "what it is", box=None, pad_edge=False)
    for row in rows:
        table.add_row(row["name"], row["description"])
    console.print(table)


@app.command("explain")
@user_errors
def explain_field(
    field: Annotated[
        str | None,
        typer.Argument(
            help="A recipe key, section.field: e.g. population.accept or "
            "training.loss_type (a section name lists its keys)."
        ),
    ] = None,
    list_all: Annotated[
        bool, typer.Option("--list", help="Print every recipe key with its default, one per line.")
    ] = False,
) -> None:
    """Explain FIELD: its type, default and meaning, the paper's value, and its row of docs/faithfulness.md."""
    from inspo_cli.config.reference import explain, fields, format_value

    if list_all and field is not None:
        raise InspoError(f"give a recipe key ({field}) or --list, not both")
    if not list_all and field is None:
        raise InspoError(
            "name a recipe key, e.g. `inspo recipe explain population.accept`, or pass --list to see them all"
        )
    if list_all:
        entries = list(fields())
        width = max(len(entry.key) for entry in entries)
        typer.echo("\n".join(f"{entry.key:<{width}}  {format_value(entry.default)}" for entry in entries))
    else:
        typer.echo(explain(field))


# TRL fields TRL computes from others (shown with how, not as defaults)
DERIVED_BY_TRL = {
    "generation_batch_size": "derived by TRL: per-device batch x processes x steps_per_generation (the trajectories "
    "of a step; the transformers backend's rows per call are rollout.generation_batch_size)",
}


@app.command("plan")
@user_errors
def plan(
    recipe: Annotated[
        Path, typer.Argument(help="Recipe YAML file or a bundled recipe's name, e.g. qwen2.5-7b/search-r1.")
    ],
    overrides: SetOption = None,
    gpus: Annotated[
        int, typer.Option(help="GPUs on the node the sharded launches (DDP, ZeRO-3, FSDP2) use.")
    ] = DEFAULT_GPUS,
    gpu_memory: Annotated[float, typer.Option("--gpu-memory", help="GiB of memory per GPU.")] = DEFAULT_GPU_GIB,
    launch: Annotated[
        str | None,
        typer.Option(
            help="The launch you mean to use: one-gpu | ddp | zero3 | fsdp2 (default: all; exit code 2 when none fits)."
        ),
    ] = None,
    decode_ms: Annotated[
        float,
        typer.Option(
            "--decode-ms", help="Milliseconds per decode step, your measurement (default: 35, HF generate on an H100)."
        ),
    ] = DECODE_MS,
    update_tokens_per_s: Annotated[
        float | None,
        typer.Option(
            "--update-tokens-per-s",
            help="Update throughput per GPU in trajectory tokens/s, your measurement (default: "
            "400 TFLOP/s over the model's FLOPs per token).",
        ),
    ] = None,
    prompt_tokens: Annotated[
        int | None, typer.Option(help="First prompt's tokens (default: rollout.max_prompt_tokens).")
    ] = None,
    observation_tokens: Annotated[
        int | None, typer.Option(help="One observation's tokens (default: rollout.max_observation_tokens).")
    ] = None,
    trajectory_tokens: Annotated[
        int | None,
        typer.Option(help="The longest trajectory of a batch, prompt included (default: the recipe's bound)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the same figures as JSON.")] = False,
) -> None:
    """Plan RECIPE's memory per process for each launch (one GPU, DDP, ZeRO-3, FSDP2, LoRA), the policy tokens of a
    step and its time, from the model's config alone: nothing is loaded, nothing is downloaded."""
    from inspo_cli.commands.resource_table import launch_table, plan_json, summary_lines
    from inspo_cli.config.resource_fit import fitting_elsewhere, refusal
    from inspo_cli.config.resource_plan import LAUNCHES, Hardware, Lengths, Timing, plan_lengths, resource_plan
    from inspo_cli.policy.models import model_architecture

    if gpus < 1:
        raise InspoError(f"--gpus {gpus}: give at least 1")
    for name, value, most in (
        ("--gpu-memory", gpu_memory, 1e5),
        ("--decode-ms", decode_ms, 1e6),
        ("--update-tokens-per-s", update_tokens_per_s, 1e12),
    ):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise InspoError(f"{name} {value}: give a positive finite number")
        if value is not None and value > most:  # beyond any hardware: a typo, and past it the figures overflow
            raise InspoError(f"{name} {value:g}: give at most {most:g}")
    if update_tokens_per_s is not None and update_tokens_per_s < 1:  # a step's seconds would overflow
        raise InspoError(f"--update-tokens-per-s {update_tokens_per_s:g}: give at least 1 token per second")
    for name, count in (
        ("--prompt-tokens", prompt_tokens),
        ("--observation-tokens", observation_tokens),
        ("--trajectory-tokens", trajectory_tokens),
    ):
        if count is not None and count < 1:
            raise InspoError(f"{name} {count}: give a positive number of tokens")
    if launch is not None and launch not in LAUNCHES:
        raise InspoError(f"--launch {launch}: use one of {', '.join(LAUNCHES)} (or leave it out for all)")
    resolved = load_recipe(recipe, overrides or [])
    lengths = Lengths(prompt_tokens, observation_tokens, trajectory_tokens)
    prompt = plan_lengths(resolved.rollout, lengths)["prompt"]
    if trajectory_tokens is not None and trajectory_tokens <= prompt:
        raise InspoError(
            f"--trajectory-tokens {trajectory_tokens}: not longer than the prompt ({prompt} tokens); give at least "
            f"{prompt + 1}, or a shorter --prompt-tokens"
        )
    architecture = model_architecture(resolved.model.name_or_path)
    requested = (launch,) if launch else LAUNCHES
    timing = Timing(decode_ms, update_tokens_per_s)
    hardware = Hardware(gpus, gpu_memory)
    result = resource_plan(resolved, architecture, hardware, lengths, timing)
    refused = refusal(result, requested)
    if refused and not any(p.fits for p in result.launches.values()):
        refused = refusal(result, requested, fitting_elsewhere(resolved, architecture, hardware, lengths, timing))
    if as_json:
        typer.echo(json.dumps(plan_json(result, refused), indent=2))
    else:
        shown = [p for name, p in result.launches.items() if name in requested or name == "one-gpu+lora"]
        for planned in shown:
            if planned.problem:
                console.print(f"{planned.label}: cannot run this recipe: {escape(planned.problem)}", soft_wrap=True)
            else:
                console.print(launch_table(planned))
        console.print("\n".join(escape(line) for line in summary_lines(result)), soft_wrap=True)
    if refused:
        err_console.print(escape(refused), soft_wrap=True)
        raise typer.Exit(2)


def _description(path: Path) -> str:
    """A recipe's first comment sentence (its header says what it is for)."""
    from inspo_cli.config.yamlfile import MAX_BYTES
    from inspo_cli.files import read_text

    lines = []
    for line in read_text(path, "recipe", MAX_BYTES).splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("#").strip())
    text = " ".join(lines)
    match = re.search(r"(?<!App)(?<!Fig)(?<!e\.g)(?<!i\.e)[.:;](\s|$)", text)  # the first clause
    return _shortened(text[: match.start()] if match else text)


def _shortened(text: str) -> str:
    """At most 100 characters, cut at a word (with an ellipsis)."""
    return text if len(text) <= 100 else text[:99].rsplit(" ", 1)[0] + " …"


def _print_trl(resolved, processes: int, device: str | None, as_json: bool) -> None:
    import warnings

    import yaml

    from inspo_cli.policy.models import check_device, default_device
    from inspo_cli.training.trl_report import trl_report

    device = check_device(device, here=False) or default_device()  # the report may describe a GPU machine
    warnings.filterwarnings("ignore", category=FutureWarning)  # transformers' v6 renames, printed by GRPOConfig
    report = trl_report(resolved, processes, device)
    if as_json:
        typer.echo(json.dumps(report, indent=2))
        return
    if report["appendix_b"]:
        table = Table(title=f"Paper (App. B, §4) vs this recipe, for {processes} process(es) on {device}")
        for name in ("setting", "paper", "recipe", "TRL field / inspo", "check"):
            table.add_column(name)
        marks = {True: "[green]same[/]", False: "[red]differs[/]", "equivalent": "[yellow]equivalent[/]", None: "-"}
        for row in report["appendix_b"]:
            table.add_row(row["setting"], str(row["paper"]), str(row["recipe"]), row["target"], marks[row["matches"]])
        console.print(table)
        notes = [f"{row['setting']}: {row['note']}" for row in report["appendix_b"] if row["note"]]
        console.print("\n".join(notes), soft_wrap=True)
    else:
        console.print(
            f"training.algorithm={resolved.training.algorithm}: App. B lists the RL runs' settings; "
            "the paper gives none for SFT (the recipe's comment says where its values come from)",
            soft_wrap=True,
        )
    set_by_inspo = set(report["set_by_inspo"])
    name, config = (
        ("SFTConfig", report["sft_config"]) if "sft_config" in report else ("GRPOConfig", report["grpo_config"])
    )
    lines = [f"{key}: {json.dumps(config[key])}" for key in sorted(config) if key in set_by_inspo]
    lines += [
        f"{key}: {json.dumps(config[key])}  # " + (DERIVED_BY_TRL[key] if key in DERIVED_BY_TRL else "TRL default")
        for key in sorted(config)
        if key not in set_by_inspo
    ]
    console.print(f"\n[bold]TRL {name}[/] (set by the recipe first, then TRL's defaults):", soft_wrap=True)
    typer.echo("\n".join(lines))
    if report["population"] is not None:
        console.print("\n[bold]INSPO population[/] (inspo's own; TRL never sees it):")
        typer.echo(yaml.safe_dump(report["population"], sort_keys=False, width=120), nl=False)
