"""The `inspo` command line. Run `inspo --help`; each command group lives in `inspo_cli/commands/`.

This is the only layer that reads flags and YAML (docs/architecture.md, "Layers"): commands turn them into typed
configs and hand those to the components. Heavy libraries are imported inside commands so `inspo --help` stays fast.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from inspo_cli import __version__
from inspo_cli.commands import ablate, data, distill, env, evaluate, evolve, index, recipe, report, serve, train, view
from inspo_cli.console import run_cli

app = typer.Typer(
    name="inspo",
    help="Train LLM search agents with RL while their instructions co-evolve with the policy (INSPO).",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,  # locals can hold API keys
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.command("index")(index.index)
app.command("serve-retriever")(serve.serve_retriever)
app.command("train")(train.train)
app.command("evolve")(evolve.evolve)
app.command("distill")(distill.distill)
app.command("evaluate")(evaluate.evaluate)
app.command("ablate")(ablate.ablate)
app.command("report")(report.report)
app.command("view")(view.view)
app.command("env")(env.env)
app.add_typer(recipe.app, name="recipe")
app.add_typer(data.app, name="data")


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"inspo {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool | None,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit."),
    ] = None,
) -> None:
    """Train LLM search agents with RL while their instructions co-evolve with the policy (INSPO)."""


def main() -> None:
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    if not (sys.stderr and sys.stderr.isatty()):  # a CI log, a pipe: our plain progress lines, not \r-redrawn bars
        for variable in ("TQDM_DISABLE", "HF_HUB_DISABLE_PROGRESS_BARS", "HF_DATASETS_DISABLE_PROGRESS_BARS"):
            os.environ.setdefault(variable, "1")  # read when tqdm is imported, which has not happened yet
    run_cli(app)


if __name__ == "__main__":
    main()
