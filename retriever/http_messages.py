"""The messages of the retriever's HTTP API: Search-R1's `/retrieve` request, read and checked, and its answer,
encoded; a bad request as a 4xx with a one-line `{"error": ...}`. `server.create_app` serves them.

    raw = await read_body(request, max_bytes, timeout_s)          # 413 past max_bytes, 408 after timeout_s
    query = RetrieveRequest.model_validate_json(raw)              # strict types, as Search-R1's QueryRequest
    return result_response(hits, query.return_scores)             # {"result": [[hit, ...], ...]}, by orjson
"""

from __future__ import annotations

import asyncio

import orjson
from fastapi import Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, StrictBool, StrictInt, StrictStr

from retriever.corpus import Passage

EXAMPLE = '{"queries": ["..."], "topk": 3, "return_scores": true}'


class RetrieveRequest(BaseModel):
    """Search-R1's `QueryRequest`, with strict types: "3" is not a topk and 1 is not a boolean."""

    model_config = ConfigDict(extra="ignore")

    queries: list[StrictStr]
    topk: StrictInt | None = None
    return_scores: StrictBool = False


class BadRequest(Exception):
    def __init__(self, status: int, message: str, close: bool = False):
        super().__init__(message)
        self.status = status
        self.close = close  # the body was not read to its end: the connection cannot carry another request


def error_response(status: int, message: str, close: bool = False) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers={"Connection": "close"} if close else None)


async def read_body(request: Request, max_bytes: int, timeout_s: float) -> bytes:
    """The request body, refused with 413 past `max_bytes` (before reading, when Content-Length says so) and with
    408 when it has not arrived whole after `timeout_s`; `ClientDisconnect` when the client goes away."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise BadRequest(
            413,
            f"request body of {int(declared)} bytes is over the limit of {max_bytes}; split the "
            "request (or restart the server with a larger --max-body-mib)",
            close=True,
        )
    chunks: list[bytes] = []
    size = 0

    async def read() -> None:
        nonlocal size
        async for chunk in request.stream():
            size += len(chunk)
            if size > max_bytes:
                raise BadRequest(
                    413,
                    f"request body is over the limit of {max_bytes} bytes; split the request "
                    "(or restart the server with a larger --max-body-mib)",
                    close=True,
                )
            chunks.append(chunk)

    try:
        await asyncio.wait_for(read(), timeout_s)
    except asyncio.TimeoutError:  # the builtin TimeoutError from 3.11 on
        raise BadRequest(
            408,
            f"the request body did not arrive within {timeout_s:g} s ({size} bytes came); "
            "send it whole (or restart the server with a larger --read-timeout-s)",
            close=True,
        ) from None
    return b"".join(chunks)


def describe_validation_errors(errors: list[dict]) -> tuple[int, str]:
    """Turn pydantic's error list into (status, one line) without echoing the (possibly huge) input."""
    parts = []
    for error in errors:
        if error.get("type") == "json_invalid":
            reason = (error.get("ctx") or {}).get("error", "")
            return 400, f"request body is not valid JSON ({reason}); send {EXAMPLE}".replace(" ()", "")
        where = ".".join(str(p) for p in error.get("loc", ()) if p != "body") or "body"
        if error.get("type") == "missing":
            parts.append(f"{where} is required")
        else:
            parts.append(f"{where}: {error.get('msg', 'invalid')}")
    shown = "; ".join(parts[:3]) + (f"; and {len(parts) - 3} more" if len(parts) > 3 else "")
    return 422, f"invalid request: {shown}; send {EXAMPLE}"


def format_hits(hits: list[Passage], return_scores: bool) -> list[dict]:
    """One query's hits in Search-R1's response shape (the corpus row, wrapped with its score or not).
    Rows are built inline rather than with `Passage.to_row`: this runs for every hit of every request."""
    if return_scores:
        return [{"document": {"id": p.id, "contents": f'"{p.title}"\n{p.text}'}, "score": p.score} for p in hits]
    return [{"id": p.id, "contents": f'"{p.title}"\n{p.text}'} for p in hits]


def _json_default(value):
    """orjson's fallback for what it does not serialise itself: numpy scalars in `Passage.score`
    (np.float64 is a float to the json module, not to orjson)."""
    if hasattr(value, "__float__"):
        return float(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def result_response(hits: list[list[Passage]], return_scores: bool) -> Response:
    """The `/retrieve` answer for `hits` (one list per query), encoded once, with orjson.

    Not FastAPI's response path (jsonable_encoder walks every dict) nor `json.dumps`: at 512 queries x 3
    passages the stdlib encoder alone takes ~6 ms, orjson about 0.5 ms. Its output is plain compact JSON
    (non-ASCII text as UTF-8 rather than \\u escapes), which every Search-R1 client reads."""
    rows = [format_hits(h, return_scores) for h in hits]
    body = orjson.dumps({"result": rows}, default=_json_default)
    return Response(body, media_type="application/json")
