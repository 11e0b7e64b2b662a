"""Serve any `Retriever` over HTTP with Search-R1's API, so a retrieval node can feed many trainers.

    inspo serve-retriever --index indexes/wiki18-e5 --port 8000
    curl -s http://127.0.0.1:8000/retrieve -H 'Content-Type: application/json' \\
         -d '{"queries": ["who wrote hamlet?"], "topk": 3, "return_scores": true}'

`POST /retrieve` takes and answers what Search-R1's `search_r1/search/retrieval_server.py` does, so
Search-R1, verl and FlashRAG clients work unchanged (checked against that file as published in
PeterGriffinJin/Search-R1's forks, e.g. Corleno/Search-R1@0cd8073: `QueryRequest(queries: List[str],
topk: Optional[int] = None, return_scores: bool = False)`, `{"document": doc, "score": score}` per hit):
    request   {"queries": [str, ...], "topk": int | null, "return_scores": bool}   (topk null or absent: the
              server's default; return_scores defaults to false)
    response  {"result": [[{"document": {"id": ..., "contents": "\"Title\"\ntext"}, "score": float}, ...], ...]}
              with return_scores, else {"result": [[{"id": ..., "contents": ...}, ...], ...]}
A document is the corpus row, as Search-R1's dense server returns it. Differences, all on bad input:
`"topk": 0` is a 422 here (Search-R1 falls back to its default), and types are strict.
Unlike Search-R1's server, requests are batched across connections (see `retriever/batching.py`), searches
never block the event loop, and bad requests get a 4xx with a one-line `{"error": ...}` instead of a 500.
Connections are limited too: header size and time, idle time and how many are open (`retriever/connections.py`).
`GET /health` says what is served, the request limits and the batcher's and connections' counters. The request and
answer themselves (reading, checking, encoding) are in `retriever/http_messages.py`.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from retriever.batching import MicroBatcher
from retriever.connections import (
    DEFAULT_HEADER_TIMEOUT_S,
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_HEADER_BYTES,
    ConnectionLimits,
    ConnectionStats,
)
from retriever.http_messages import (
    EXAMPLE,
    BadRequest,
    RetrieveRequest,
    describe_validation_errors,
    error_response,
    read_body,
    result_response,
)
from retriever.search import Retriever
from retriever.serving import bind_socket, is_loopback, run_app, serve_in_background  # noqa: F401 (the server's API)
from retriever.serving import uvicorn_server as _uvicorn_server

DEFAULT_TOPK = 3  # Search-R1's --topk default
DEFAULT_MAX_QUERIES = 4096
DEFAULT_MAX_QUERY_CHARS = 2048
DEFAULT_MAX_TOPK = 100
DEFAULT_MAX_RESULTS = 32768  # queries x topk per request: ~13 MB of passages at ~400 bytes each
DEFAULT_MAX_BODY_BYTES = 16 << 20  # 4096 queries of 2048 characters, as JSON, is ~8.5 MB
DEFAULT_READ_TIMEOUT_S = 30.0  # for the whole request body to arrive
LARGE_ANSWER = 4096  # passages; an answer this large is encoded in a thread (~1.5 MB, a few ms)

log = logging.getLogger("inspo.retriever.server")


def create_app(
    retriever: Retriever,
    *,
    default_topk: int = DEFAULT_TOPK,
    max_queries: int = DEFAULT_MAX_QUERIES,
    max_query_chars: int = DEFAULT_MAX_QUERY_CHARS,
    max_topk: int = DEFAULT_MAX_TOPK,
    max_results: int = DEFAULT_MAX_RESULTS,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    read_timeout_s: float = DEFAULT_READ_TIMEOUT_S,
    max_batch: int = 512,
    batch_window_ms: float = 2.0,
    workers: int = 1,
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES,
    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S,
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    index_info: dict | None = None,
) -> FastAPI:
    """A FastAPI app serving `retriever` at `POST /retrieve` (Search-R1's API) and `GET /health`. The connection
    limits (`max_header_bytes` ... `max_connections`) take effect when it is served by `serve`/`serve_in_background`."""
    if not 1 <= default_topk <= max_topk:
        raise ValueError(f"default_topk must be in 1..max_topk ({max_topk}), got {default_topk}")
    connection_limits = ConnectionLimits(max_header_bytes, header_timeout_s, idle_timeout_s, max_connections)
    connection_stats = ConnectionStats()
    batcher = MicroBatcher(retriever, max_batch=max_batch, window_s=batch_window_ms / 1000, workers=workers)
    info = dict(index_info) if index_info else {"kind": type(retriever).__name__}
    limits = {
        "default_topk": default_topk,
        "max_topk": max_topk,
        "max_queries": max_queries,
        "max_query_chars": max_query_chars,
        "max_results": max_results,
        "max_body_bytes": max_body_bytes,
        "read_timeout_s": read_timeout_s,
        "max_batch": max_batch,
        "batch_window_ms": batch_window_ms,
        "workers": workers,
        "max_header_bytes": max_header_bytes,
        "header_timeout_s": header_timeout_s,
        "idle_timeout_s": idle_timeout_s,
        "max_connections": max_connections,
    }

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        await batcher.start()
        try:
            yield
        finally:
            await batcher.stop()

    app = FastAPI(title="inspo retriever", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.batcher = batcher
    app.state.connection_limits, app.state.connection_stats = connection_limits, connection_stats

    @app.exception_handler(StarletteHTTPException)
    async def on_http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return error_response(
            exc.status_code,
            f"{exc.detail}: {request.method} {request.url.path}; this server answers POST /retrieve and GET /health",
        )

    @app.exception_handler(BadRequest)
    async def on_bad_request(_: Request, exc: BadRequest) -> JSONResponse:
        return error_response(exc.status, str(exc), exc.close)

    @app.exception_handler(Exception)
    async def on_internal_error(_: Request, exc: Exception) -> JSONResponse:
        log.exception("internal error")
        return error_response(500, f"internal error: {type(exc).__name__}: {exc}")

    def check_limits(request: RetrieveRequest) -> int:
        if not request.queries:
            raise BadRequest(422, f"queries is empty; send at least one query: {EXAMPLE}")
        if len(request.queries) > max_queries:
            raise BadRequest(
                422,
                f"{len(request.queries)} queries in one request; the limit is {max_queries} "
                "(split the request, or restart the server with a larger --max-queries)",
            )
        for i, query in enumerate(request.queries):
            if len(query) > max_query_chars:
                raise BadRequest(
                    422,
                    f"queries.{i} has {len(query)} characters; the limit is {max_query_chars} "
                    "(shorten it, or restart the server with a larger --max-query-chars)",
                )
        topk = default_topk if request.topk is None else request.topk
        if not 1 <= topk <= max_topk:
            raise BadRequest(
                422, f"topk {topk} is out of range; use 1..{max_topk} or leave it out for the default ({default_topk})"
            )
        if len(request.queries) * topk > max_results:
            raise BadRequest(
                422,
                f"{len(request.queries)} queries x topk {topk} = {len(request.queries) * topk} "
                f"passages in one answer; the limit is {max_results} (split the request, or "
                "restart the server with a larger --max-results)",
            )
        return topk

    @app.post("/retrieve")
    async def retrieve(http_request: Request) -> Response:
        # The body is parsed here rather than by FastAPI so that JSON sent without a JSON content type (curl -d)
        # is accepted too, and every parse error gets the same one-line answer.
        try:
            raw = await read_body(http_request, max_body_bytes, read_timeout_s)
        except ClientDisconnect:  # nobody to answer: one line, no traceback
            client = http_request.client
            log.warning(
                "client %s disconnected before its request arrived whole",
                f"{client.host}:{client.port}" if client else "?",
            )
            return Response(status_code=400)
        if not raw.strip():
            raise BadRequest(400, f"request body is empty; send {EXAMPLE}")
        try:
            request = RetrieveRequest.model_validate_json(raw)
        except ValidationError as exc:
            raise BadRequest(*describe_validation_errors(exc.errors(include_input=False))) from None
        topk = check_limits(request)
        try:
            hits = await batcher.search(request.queries, topk)
        except Exception as exc:  # noqa: BLE001 - the retriever failed: a genuine internal error
            log.exception("retriever.search failed")
            return error_response(500, f"retriever failed: {type(exc).__name__}: {exc}")
        if len(request.queries) * topk > LARGE_ANSWER:  # encoding megabytes: off the loop, small requests go on
            return await asyncio.to_thread(result_response, hits, request.return_scores)
        return result_response(hits, request.return_scores)

    @app.get("/health")
    async def health() -> dict:
        return {
            "status": "ok",
            "index": info,
            "limits": limits,
            "batcher": batcher.stats.to_dict(),
            "connections": connection_stats.to_dict(),
        }

    return app


def serve(
    retriever: Retriever,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    sock: socket.socket | None = None,
    log_level: str = "warning",
    **app_options,
) -> None:
    """Serve `retriever` until Ctrl-C. Pass `sock` from `bind_socket` to fail on a busy port before loading."""
    sock = sock or bind_socket(host, port)
    _uvicorn_server(create_app(retriever, **app_options), log_level).run(sockets=[sock])
