"""`inspo serve-retriever`: serve an index over HTTP with Search-R1's API, for trainers on other machines.

    inspo index --corpus data/world/corpus.jsonl --kind bm25 --out indexes/world-bm25
    inspo serve-retriever --index indexes/world-bm25 --port 8000
    # trainers then set `retriever: http://<this host>:8000` in their recipe

Requests from many rollout workers are coalesced into batched searches (`--max-batch`,
`--batch-window-ms`); see `retriever/server.py` for the API.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated

import typer

from inspo_cli.console import console, err_console, user_errors
from inspo_cli.errors import InspoError

_GENERIC_META = ("format", "format_version", "kind", "corpus", "created", "build_seconds", "inspo_version")
MAX_CONNECTIONS = 1 << 20
MAX_WORKERS = 1024  # each is a thread and a task made at start: 10^20 of them never finished starting
SPARE_DESCRIPTORS = 64  # the index's files, the log, the listening socket


def _raise_descriptor_limit(max_connections: int) -> None:
    """Let the process open `max_connections` sockets: raise its soft descriptor limit (often 1024) as far as the
    hard one allows, else warn that the OS, not --max-connections, will turn connections away."""
    try:
        import resource
    except ImportError:  # not on this platform
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = max_connections + SPARE_DESCRIPTORS
    if soft != resource.RLIM_INFINITY and soft < wanted:
        target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
        if soft < wanted:
            err_console.print(
                f"[bold yellow]warning:[/] this process may open {soft} files (ulimit -n), fewer than "
                f"--max-connections {max_connections} + {SPARE_DESCRIPTORS}; lower --max-connections "
                "or raise the limit"
            )


def _index_info(retriever, index: Path) -> dict:
    """What /health reports about what is served: from index.json for an index directory."""
    from retriever import read_index_meta

    if index.is_dir():
        meta = read_index_meta(index)
        info = {
            "kind": meta["kind"],
            "passages": meta.get("corpus", {}).get("passages"),
            "path": str(index.resolve()),
            "corpus": meta.get("corpus", {}).get("path"),
            "created": meta.get("created"),
        }
        info.update({key: value for key, value in meta.items() if key not in _GENERIC_META})  # the kind's own
        return info
    return {
        "kind": "bm25 (in memory)",
        "passages": getattr(retriever, "num_docs", None),
        "corpus": str(index.resolve()),
    }


@user_errors
def serve_retriever(
    index: Annotated[
        Path,
        typer.Option(
            "--index", help="An index directory from `inspo index` (or a corpus .jsonl, searched with in-memory BM25)."
        ),
    ],
    host: Annotated[str, typer.Option(help="Address to listen on; 0.0.0.0 exposes it to the network.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    topk: Annotated[int, typer.Option(help="Passages per query when a request gives no topk.")] = 3,
    max_batch: Annotated[int, typer.Option(help="Most queries searched in one batched call.")] = 512,
    batch_window_ms: Annotated[float, typer.Option(help="How long a batch waits for more requests to join.")] = 2.0,
    workers: Annotated[int, typer.Option(help="Batches searched at the same time, each in its own thread.")] = 1,
    max_queries: Annotated[int, typer.Option(help="Most queries one request may carry.")] = 4096,
    max_query_chars: Annotated[int, typer.Option(help="Longest query accepted, in characters.")] = 2048,
    max_topk: Annotated[int, typer.Option(help="Largest topk a request may ask for.")] = 100,
    max_results: Annotated[
        int,
        typer.Option(help="Most passages one answer may hold (queries x topk); the client splits its requests to fit."),
    ] = 32768,
    max_body_mib: Annotated[float, typer.Option(help="Largest request body, in MiB (413 above).")] = 16.0,
    read_timeout_s: Annotated[
        float, typer.Option(help="Seconds a request body may take to arrive (408 after).")
    ] = 30.0,
    max_header_kib: Annotated[float, typer.Option(help="Largest request line and headers, in KiB (431 above).")] = 64.0,
    header_timeout_s: Annotated[
        float, typer.Option(help="Seconds a request's headers may take to arrive, from their first byte (408 after).")
    ] = 10.0,
    idle_timeout_s: Annotated[
        float,
        typer.Option(
            help="Seconds a connection may wait with no request under way "
            "(new, or kept alive after an answer) before it is closed."
        ),
    ] = 5.0,
    max_connections: Annotated[
        int, typer.Option(help="Most connections open at once; a new one past it is answered 503 and closed.")
    ] = 1024,
) -> None:
    """Serve a retrieval index over HTTP at POST /retrieve, compatible with Search-R1's retrieval server."""
    from retriever import open_retriever
    from retriever.server import bind_socket, is_loopback, serve

    for name, value, low in (
        ("--port", port, 0),
        ("--topk", topk, 1),
        ("--max-batch", max_batch, 1),
        ("--workers", workers, 1),
        ("--max-queries", max_queries, 1),
        ("--max-query-chars", max_query_chars, 1),
        ("--max-topk", max_topk, 1),
        ("--max-results", max_results, 1),
        ("--max-connections", max_connections, 1),
    ):
        if value < low:
            raise InspoError(f"{name} is {value}; use {low} or more")
    if workers > MAX_WORKERS:
        raise InspoError(
            f"--workers is {workers}; use at most {MAX_WORKERS} (each searches in a thread of its own; "
            "more than the machine's cores only take turns)"
        )
    if max_connections > MAX_CONNECTIONS:
        raise InspoError(
            f"--max-connections is {max_connections}; use at most {MAX_CONNECTIONS} (each open "
            "connection holds a file descriptor)"
        )
    for name, amount, least, most in (
        ("--max-body-mib", max_body_mib, 1 / 1024, math.inf),
        ("--read-timeout-s", read_timeout_s, 0.001, math.inf),
        ("--max-header-kib", max_header_kib, 1, 1024),
        ("--header-timeout-s", header_timeout_s, 0.001, 86400),
        ("--idle-timeout-s", idle_timeout_s, 0.001, 86400),
    ):
        # inf/nan pass "> 0"; 1e-9 MiB refuses every request; a header cap is memory held per connection
        if not (math.isfinite(amount) and least <= amount <= most):
            span = f"of at least {least:g}" if most == math.inf else f"from {least:g} to {most:g}"
            raise InspoError(f"{name} is {amount}; use a finite number {span}")
    if port > 65535:
        raise InspoError(f"--port is {port}; use 1..65535")
    if topk > max_topk:
        raise InspoError(f"--topk {topk} is above --max-topk {max_topk}; lower --topk or raise --max-topk")
    if not (math.isfinite(batch_window_ms) and batch_window_ms >= 0):
        raise InspoError(f"--batch-window-ms is {batch_window_ms}; use a finite 0 (no waiting) or more")
    if not index.exists():
        raise InspoError(
            f"--index {index} does not exist; build one with `inspo index --corpus CORPUS.jsonl --out DIR`"
        )

    sock = bind_socket(host, port)  # before loading: a busy port fails in a second, not after the index loads
    try:
        with err_console.status(f"loading {index}"):
            retriever = open_retriever(str(index))
        info = _index_info(retriever, index)
        bound_port = sock.getsockname()[1]
        url_host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)  # curl this machine, not "any address"
        url_host = f"[{url_host}]" if ":" in url_host else url_host
        url = f"http://{url_host}:{bound_port}/retrieve"
        if not is_loopback(host):
            err_console.print(
                f"[bold yellow]warning:[/] listening on {host}: anyone who can reach this machine "
                "can query the index (there is no authentication)"
            )
        console.print(f"serving {info.get('kind', 'index')} {index} at {url}  (Ctrl-C to stop)", markup=False)
        sample = json.dumps({"queries": ["who founded Hokin Works?"], "topk": topk, "return_scores": True})
        console.print(
            f"try: curl -s {url} -H 'Content-Type: application/json' -d '{sample}'", soft_wrap=True, markup=False
        )
        _raise_descriptor_limit(max_connections)
        serve(
            retriever,
            host,
            bound_port,
            sock=sock,
            default_topk=topk,
            max_queries=max_queries,
            max_query_chars=max_query_chars,
            max_topk=max_topk,
            max_results=max_results,
            max_body_bytes=int(max_body_mib * (1 << 20)),
            read_timeout_s=read_timeout_s,
            max_batch=max_batch,
            batch_window_ms=batch_window_ms,
            workers=workers,
            max_header_bytes=int(max_header_kib * 1024),
            header_timeout_s=header_timeout_s,
            idle_timeout_s=idle_timeout_s,
            max_connections=max_connections,
            index_info=info,
        )
    finally:
        sock.close()
