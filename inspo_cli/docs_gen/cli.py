"""docs/reference/cli.md, generated from the Typer app: every command and sub-command of `inspo` with its help, its
usage line and a table of its arguments and options, as `inspo COMMAND --help` prints them.

This package is the top layer (above `inspo_cli.cli`), so the app is imported as any module is. tests/docs/test_site.py
checks that the page's table cells show the help texts unchanged (a `|`, a `<timestamp>` or a `*` in a help text is
escaped, so the Markdown shows it as written).
"""

from __future__ import annotations

from collections.abc import Iterator
from enum import Enum
from typing import Any

import typer

from inspo_cli.cli import app as inspo_app
from inspo_cli.docs_gen.markdown import code, generated_note, paragraphs, prose

PAGE = "reference/cli.md"


def markdown(app: typer.Typer = inspo_app) -> str:
    """The whole page, for `inspo_cli.cli.app`."""
    out = [
        "# Command line",
        "",
        generated_note(),
        "",
        "Every command of `inspo`, from its Typer app (`inspo_cli/cli.py` and `inspo_cli/commands/`): what "
        "`inspo COMMAND --help` prints, as one page. Every command also takes `-h` / `--help`. Types are written "
        "as the help writes them (`<path>`, `<int>`; a flag takes no value). A blank default: the option has "
        "none of its own (the recipe's value, or what its text says, applies).",
        "",
    ]
    for ctx in contexts(app):
        out += _section(ctx)
    return "\n".join(out)


def contexts(app: typer.Typer) -> Iterator[typer.Context]:
    """A context for every visible command, depth first in the order the help lists them (`inspo`, `inspo index`,
    ..., `inspo recipe`, `inspo recipe check`, ...): its `command` and `command_path`; nothing is parsed."""

    def walk(ctx: typer.Context) -> Iterator[typer.Context]:
        yield ctx
        for name, sub in _subcommands(ctx.command):
            yield from walk(typer.Context(sub, info_name=name, parent=ctx))

    yield from walk(typer.Context(typer.main.get_command(app), info_name="inspo"))


def _subcommands(command: Any) -> list[tuple[str, Any]]:
    return [(name, sub) for name, sub in getattr(command, "commands", {}).items() if not sub.hidden]


def anchor(command_path: str) -> str:
    """The id MkDocs gives the heading `## inspo recipe check`."""
    return "-".join(command_path.lower().split())


def _section(ctx: typer.Context) -> list[str]:
    command = ctx.command
    out = [f"## {ctx.command_path}", ""]
    for paragraph in paragraphs(command.help):
        out += [prose(paragraph), ""]
    usage = " ".join([ctx.command_path, *command.collect_usage_pieces(ctx)])
    out += ["```text", usage, "```", ""]
    params = [param for param in command.params if not param.hidden]
    if params:
        out += ["| argument or option | type | default | what it does |", "|---|---|---|---|"]
        out += [_row(param, ctx) for param in params]
        out.append("")
    subcommands = _subcommands(command)
    if subcommands:
        out += ["| command | what it does |", "|---|---|"]
        for name, sub in subcommands:
            first = paragraphs(sub.help)[:1]
            full = f"{ctx.command_path} {name}"
            out.append(f"| [`{full}`](#{anchor(full)}) | {prose(first[0]) if first else ''} |")
        out.append("")
    return out


def _row(param: Any, ctx: typer.Context) -> str:
    if param.param_type_name == "argument":
        names = code(param.name + ("..." if param.nargs != 1 else ""))
    else:
        names = ", ".join(code(opt) for opt in param.opts)
        if param.secondary_opts:
            names += " / " + ", ".join(code(opt) for opt in param.secondary_opts)
    if getattr(param, "is_flag", False) and not getattr(param, "count", False):
        kind = "flag"
    else:
        kind = code(param.display_type(ctx))
        bounds = [f"x{sign}{limit}" for sign, limit in ((">=", param.min), ("<=", param.max)) if limit is not None]
        if bounds:
            kind += " " + code(" and ".join(bounds))
        if param.multiple:
            kind += ", repeatable"
    return f"| {names} | {kind} | {_default(param)} | {prose(param.help or '')} |"


def _default(param: Any) -> str:
    if param.required:
        return "required"
    if isinstance(param.show_default, str):
        return prose(param.show_default)
    default = param.default
    if default is None or param.show_default is False or callable(default):
        return ""
    if getattr(param, "is_flag", False):
        if param.secondary_opts:  # --force / --no-force: the one that holds when neither is given
            return code((param.opts if default else param.secondary_opts)[0])
        return "" if not default else code(param.opts[0])
    values = default if isinstance(default, (list, tuple)) else [default]
    shown = [str(value.value if isinstance(value, Enum) else value) for value in values]
    return ", ".join(code(value) for value in shown) if shown else ""
