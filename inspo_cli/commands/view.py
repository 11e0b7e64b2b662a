"""`inspo view`: look at runs and ablations in a browser, or export the same pages as static HTML.

    inspo view runs/demo-20261128-110213                 # http://127.0.0.1:8765/
    inspo view runs/ablations/world --port 9000
    inspo view runs/ --export site/                      # every page as files, to share

Read-only: nothing is written into a run or an ablation. Through an SSH tunnel: `ssh -L 8765:127.0.0.1:8765 node`,
then open http://127.0.0.1:8765/ on your machine.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from inspo_cli.console import console, err_console, user_errors
from inspo_cli.errors import InspoError


def _check_export(out: Path, sources) -> None:
    target = out.resolve()
    inputs = [r.run.path for r in sources.runs.values()] + [a.path for a in sources.ablations.values()]
    for path in inputs:
        resolved = path.resolve()
        if target == resolved or resolved in target.parents:
            raise InspoError(
                f"--export {out} is inside {path}, which inspo view only reads; choose a folder outside it"
            )
        if target in resolved.parents:
            raise InspoError(f"--export {out} holds {path}, and an export replaces its folder whole; choose another")


@user_errors
def view(
    paths: Annotated[
        list[Path],
        typer.Argument(
            metavar="RUN_OR_ABLATION...",
            help="Run directories, ablation directories (an `inspo ablate --out`), or a folder holding them (runs/).",
            show_default=False,
        ),
    ],
    host: Annotated[
        str, typer.Option(help="Address to listen on; anything but loopback exposes the runs to the network.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port (0: any free one).")] = 8765,
    export: Annotated[
        Path | None,
        typer.Option("--export", metavar="DIR", help="Write every page as static HTML into DIR instead of serving."),
    ] = None,
) -> None:
    """Look at runs in a browser: curves, trajectories (policy and inserted tokens), instructions, evaluations."""
    from inspo_cli.viewer.site import Site
    from inspo_cli.viewer.sources import discover

    if not 0 <= port <= 65535:
        raise InspoError(f"--port is {port}; use 0..65535")
    sources = discover(paths)
    site = Site(sources)
    if export is not None:
        from inspo_cli.files import check_can_create
        from inspo_cli.progress import progress_bar
        from inspo_cli.viewer.export import export_site

        check_can_create(export, "--export")
        _check_export(export, sources)
        with progress_bar(transient=True) as bar:
            task = bar.add_task("exporting pages", total=None)
            written = export_site(site, export, lambda path: bar.advance(task))
        console.print(f"{written} files in {export}; open {export / 'index.html'}", soft_wrap=True, markup=False)
        return
    from inspo_cli.viewer.server import serve
    from retriever.serving import bind_socket, is_loopback

    sock = bind_socket(host, port)
    bound = sock.getsockname()[1]
    url_host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    url_host = f"[{url_host}]" if ":" in url_host else url_host
    if not is_loopback(host):
        err_console.print(
            f"[bold yellow]warning:[/] listening on {host}: anyone who can reach this machine can read these runs "
            "(trajectories, instructions, recipes); there is no authentication"
        )
    console.print(
        f"{len(sources.runs)} runs, {len(sources.ablations)} ablations at http://{url_host}:{bound}/  (Ctrl-C to stop)",
        soft_wrap=True,
        markup=False,
    )
    try:
        serve(site, sock)
    finally:
        sock.close()
    raise typer.Exit(0)
