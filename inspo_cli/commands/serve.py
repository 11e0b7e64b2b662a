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


def _index_info(retriever, index: Path) -> dict:
    """What /health reports about what is served: from index.json for an index directory."""
    from retriever import read_index_meta

    if index.is_dir():
        meta = read_index_meta(index)
        info = {"kind": meta["kind"], "passages": meta.get("corpus", {}).get("passages"), "path": str(index.resolve()),
                "corpus": meta.get("corpus", {}).get("path"), "created": meta.get("created")}
        info.update({key: value for key, value in meta.items() if key not in _GENERIC_META})  # the kind's own
        return info
    return {"kind": "bm25 (in memory)", "passages": getattr(retriever, "num_docs", None),
            "corpus": str(index.resolve())}


@user_errors
def serve_retriever(
    index: Annotated[Path, typer.Option("--index", help="An index directory from `inspo index` (or a corpus "
                                                        ".jsonl, searched with in-memory BM25).")],
    host: Annotated[str, typer.Option(help="Address to listen on; 0.0.0.0 exposes it to the network.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    topk: Annotated[int, typer.Option(help="Passages per query when a request gives no topk.")] = 3,
    max_batch: Annotated[int, typer.Option(help="Most queries searched in one batched call.")] = 512,
    batch_window_ms: Annotated[float, typer.Option(help="How long a batch waits for more requests to join.")] = 2.0,
    workers: Annotated[int, typer.Option(help="Batches searched at the same time, each in its own thread.")] = 1,
    max_queries: Annotated[int, typer.Option(help="Most queries one request may carry.")] = 4096,
    max_query_chars: Annotated[int, typer.Option(help="Longest query accepted, in characters.")] = 2048,
    max_topk: Annotated[int, typer.Option(help="Largest topk a request may ask for.")] = 100,
    max_results: Annotated[int, typer.Option(help="Most passages one answer may hold (queries x topk); the "
                                                  "client splits its requests to fit.")] = 32768,
    max_body_mib: Annotated[float, typer.Option(help="Largest request body, in MiB (413 above).")] = 16.0,
    read_timeout_s: Annotated[float, typer.Option(help="Seconds a request body may take to arrive (408 after).")]
    = 30.0,
) -> None:
    """Serve a retrieval index over HTTP at POST /retrieve, compatible with Search-R1's retrieval server."""
    from retriever import open_retriever
    from retriever.server import bind_socket, is_loopback, serve

    for name, value, low in (("--port", port, 0), ("--topk", topk, 1), ("--max-batch", max_batch, 1),
                             ("--workers", workers, 1), ("--max-queries", max_queries, 1),
                             ("--max-query-chars", max_query_chars, 1), ("--max-topk", max_topk, 1),
                             ("--max-results", max_results, 1)):
        if value < low:
            raise InspoError(f"{name} is {value}; use {low} or more")
    for name, value, least in (("--max-body-mib", max_body_mib, 1 / 1024),
                               ("--read-timeout-s", read_timeout_s, 0.001)):
        if not (math.isfinite(value) and value >= least):  # inf/nan pass "> 0"; 1e-9 MiB refuses every request
            raise InspoError(f"{name} is {value}; use a finite number of at least {least:g}")
    if port > 65535:
        raise InspoError(f"--port is {port}; use 1..65535")
    if topk > max_topk:
        raise InspoError(f"--topk {topk} is above --max-topk {max_topk}; lower --topk or raise --max-topk")
    if not (math.isfinite(batch_window_ms) and batch_window_ms >= 0):
        raise InspoError(f"--batch-window-ms is {batch_window_ms}; use a finite 0 (no waiting) or more")
    if not index.exists():
        raise InspoError(f"--index {index} does not exist; build one with "
                         "`inspo index --corpus CORPUS.jsonl --out DIR`")

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
            err_console.print(f"[bold yellow]warning:[/] listening on {host}: anyone who can reach this machine "
                              "can query the index (there is no authentication)")
        console.print(f"serving {info.get('kind', 'index')} {index} at {url}  (Ctrl-C to stop)", markup=False)
        sample = json.dumps({"queries": ["who founded Hokin Works?"], "topk": topk, "return_scores": True})
        console.print(f"try: curl -s {url} -H 'Content-Type: application/json' -d '{sample}'",
                      soft_wrap=True, markup=False)
        serve(retriever, host, bound_port, sock=sock, default_topk=topk, max_queries=max_queries,
              max_query_chars=max_query_chars, max_topk=max_topk, max_results=max_results,
              max_body_bytes=int(max_body_mib * (1 << 20)), read_timeout_s=read_timeout_s, max_batch=max_batch,
              batch_window_ms=batch_window_ms, workers=workers, index_info=info)
    finally:
        sock.close()
