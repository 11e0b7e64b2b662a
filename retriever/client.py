"""`HTTPRetriever`: the `Retriever` seam over HTTP, for a retriever served by `inspo serve-retriever`
or by Search-R1's own `retrieval_server.py` (same API).

    with HTTPRetriever("http://10.0.0.5:8000") as retriever:
        hits = retriever.search(["who founded Hokin Works?"], k=3)

One pool of keep-alive connections is shared by all threads. Connection errors, timeouts, 5xx and 429
are retried with exponential backoff (a server's Retry-After wins); a 4xx is the caller's mistake and
raises at once with the server's message, except a query the server refuses for its length (`--max-query-chars`,
known from `/health` before sending, or its 422 naming the query), which raises `QueryRefused` naming that query:
the search tool answers it with an error observation, as it is the policy's to fix. A lone surrogate (which no
UTF-8 body can carry) is sent as U+FFFD. Long query lists are split to fit the server's limit.

HTTP goes through the standard library's `http.client` rather than httpx, which spent ~0.4 ms more CPU per
request and ~1.4 ms more on a 600 KB answer (512 queries x 3 passages, read in 64 KB steps) on the 2-core
machine of bench/retriever_http.py; bodies are (de)serialised with orjson. Requests go straight to the
server: proxy environment variables (HTTP_PROXY ...) are not consulted.
"""

from __future__ import annotations

import base64
import email.utils
import http.client
import re
import select
import threading
import time
from collections.abc import Sequence
from urllib.parse import unquote, urlsplit

import orjson

from retriever.corpus import Passage, make_passage, parse_contents
from retriever.errors import QueryRefused, RetrieverError

MAX_RETRY_AFTER_S = 60.0  # never sleep longer than this on a server's say-so
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_TOO_LONG = re.compile(r"queries\.(\d+) has (\d+) characters; the limit is (\d+)")  # retriever/server.py's 422


def _too_long(chars: int, limit: int) -> str:
    return f"the query has {chars:,} characters; the search engine takes at most {limit:,}, so shorten it"


def normalize_url(url: str) -> tuple[str, str]:
    """(base URL, /retrieve URL) from a URL given with or without the `/retrieve` suffix."""
    url = url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise RetrieverError(f"retriever URL {url!r} must start with http:// or https://, e.g. http://127.0.0.1:8000")
    base = url[: -len("/retrieve")] if url.endswith("/retrieve") else url
    parts = urlsplit(base)
    try:
        parts.port  # noqa: B018 - reading it checks it
    except ValueError as error:  # a port that is not a number, or out of range
        raise RetrieverError(f"retriever URL {url!r} is not valid ({error}); e.g. http://127.0.0.1:8000") from None
    if not parts.hostname:
        raise RetrieverError(f"retriever URL {url!r} has no host; e.g. http://127.0.0.1:8000")
    return base, base + "/retrieve"


def _retry_after_s(response) -> float | None:
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:  # the other form: an HTTP date
        return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _server_message(response: _Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:300] or response.reason_phrase
    if isinstance(body, dict):
        for key in ("error", "detail", "message"):
            if key in body:
                return str(body[key])[:300]
    return str(body)[:300]


def _transport_reason(error: Exception, timeout_s: float) -> str:
    if isinstance(error, TimeoutError):  # socket.timeout too
        return f"timed out after {timeout_s:g}s"
    if isinstance(error, ConnectionRefusedError):
        return "connection refused"
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


_TRANSPORT_ERRORS = (OSError, http.client.HTTPException)  # what a request can raise short of an HTTP answer


class _Response:
    """What the client keeps of an HTTP answer: status, headers (case-insensitive) and the whole body."""

    def __init__(self, status_code: int, reason_phrase: str, headers, content: bytes):
        self.status_code = status_code
        self.reason_phrase = reason_phrase
        self.headers = headers
        self.content = content

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    def json(self):
        return orjson.loads(self.content)


def _readable(sock) -> bool:
    if hasattr(select, "poll"):  # unlike select(), not limited to descriptors below 1024
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        return bool(poller.poll(0))
    return bool(select.select([sock], [], [], 0)[0])


class _ConnectionPool:
    """Keep-alive HTTP/1.1 connections to one server, shared by threads: a request takes an idle connection
    (or opens one), reads the whole answer, and gives it back; at most `size` idle ones are kept."""

    def __init__(self, base_url: str, timeout_s: float, connect_timeout_s: float, size: int):
        parts = urlsplit(base_url)
        if not parts.hostname:  # `normalize_url` refuses such a URL before it gets here
            raise RetrieverError(f"retriever URL {base_url!r} has no host; e.g. http://127.0.0.1:8000")
        self._connection_class = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        self._host, self._port = parts.hostname, parts.port
        self._prefix = parts.path  # a server mounted below a path, e.g. http://host/retriever
        self._headers = {"Content-Type": "application/json"}
        if parts.username is not None:  # http://user:password@host, as httpx honoured it
            token = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
            self._headers["Authorization"] = "Basic " + base64.b64encode(token).decode()
        self._timeout_s, self._connect_timeout_s, self._size = timeout_s, connect_timeout_s, size
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._closed = False

    def request(self, method: str, path: str, body: bytes | None = None, timeout_s: float | None = None) -> _Response:
        """One request and its whole answer; raises what `_TRANSPORT_ERRORS` names when there is no answer."""
        timeout_s = timeout_s or self._timeout_s
        while True:
            conn = self._take_idle()
            reused = conn is not None
            if conn is None:
                conn = self._connection_class(self._host, self._port, timeout=min(timeout_s, self._connect_timeout_s))
                conn.connect()
            try:
                conn.sock.settimeout(timeout_s)
                conn.request(method, self._prefix + path, body=body, headers=self._headers)
                answer = conn.getresponse()
                content = answer.read()
            except ConnectionError:
                conn.close()
                if reused:  # the server closed this kept-alive connection meanwhile: go again on a fresh one
                    continue  # (safe to resend: a search changes nothing on the server)
                raise
            except BaseException:
                conn.close()
                raise
            if answer.will_close:
                conn.close()
            else:
                self._give_back(conn)
            return _Response(answer.status, answer.reason, answer.headers, content)

    def _take_idle(self) -> http.client.HTTPConnection | None:
        while True:
            with self._lock:
                if not self._idle:
                    return None
                conn = self._idle.pop()
            # An idle keep-alive connection is readable only when the server has closed it (or broke protocol)
            if conn.sock is not None and not _readable(conn.sock):
                return conn
            conn.close()

    def _give_back(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < self._size:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


def _passage(doc: dict, score) -> Passage:
    """A Passage from one hit; tolerates Search-R1's BM25 rows, which carry title/text and may lack an id.
    Runs for every hit of every request (~1.5k per 512-query call), hence `make_passage`."""
    ident = doc.get("id", "")
    ident = ident if type(ident) is str else str(ident)
    score = None if score is None else float(score)
    contents = doc.get("contents")
    if contents is None:
        return make_passage(ident, str(doc.get("title", "")), str(doc.get("text", "")), score)
    title, text = parse_contents(contents)
    return make_passage(ident, title, text, score)


def _passages(hits: list) -> list[Passage]:
    """One query's hits as Passages: Search-R1's `{"document", "score"}` rows, or bare documents."""
    return [_passage(hit["document"], hit.get("score")) if "document" in hit else _passage(hit, None) for hit in hits]


class HTTPRetriever:
    """A `Retriever` that asks a Search-R1 compatible server (see module docstring).

    `max_retries` counts every attempt, the first included (3: one try and two retries); waits are
    `backoff_s`, 2x, 4x ... `max_queries_per_request` caps one request; the server's own limits (from its
    `/health`, when it has one: queries, and queries x topk) lower it further. `pool_size` is how many idle
    connections are kept; more threads at once each open their own.
    """

    def __init__(
        self,
        url: str,
        timeout_s: float = 30.0,
        max_retries: int = 3,
        backoff_s: float = 0.5,
        pool_size: int = 32,
        max_queries_per_request: int = 1024,
    ):
        if max_retries < 1:
            raise RetrieverError(f"max_retries is {max_retries}; use 1 (no retry) or more")
        if timeout_s <= 0:
            raise RetrieverError(f"timeout_s is {timeout_s}; use a positive number of seconds")
        self.base_url, self.url = normalize_url(url)
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_queries_per_request = max_queries_per_request
        self._server_max_queries: int | None = None
        self._server_max_results: int | None = None
        self._server_max_query_chars: int | None = None
        self._limits_known = False
        self._pool = _ConnectionPool(self.base_url, timeout_s, connect_timeout_s=10.0, size=pool_size)

    # --- Retriever protocol -------------------------------------------------------------------------

    def search(self, queries: Sequence[str], k: int) -> list[list[Passage]]:
        if isinstance(queries, str):
            raise TypeError("search() takes a list of queries, not one string")
        queries = list(queries)
        if not queries:
            return []
        chunk = self._chunk_size(k)
        limit = self._server_max_query_chars
        too_long = {i: _too_long(len(q), limit) for i, q in enumerate(queries) if limit and len(q) > limit}
        if too_long:  # not sent: the server would refuse the request they are in
            raise QueryRefused(too_long)
        results: list[list[Passage]] = []
        for start in range(0, len(queries), chunk):
            part = queries[start : start + chunk]
            body = self._post({"queries": part, "topk": k, "return_scores": True}, start)
            results.extend(self._parse(body, len(part)))
        return results

    # --- plumbing -----------------------------------------------------------------------------------

    def _chunk_size(self, k: int) -> int:
        if not self._limits_known:
            self._learn_limits()
        chunk = self.max_queries_per_request
        if self._server_max_queries:
            chunk = min(chunk, self._server_max_queries)
        if self._server_max_results:
            chunk = min(chunk, self._server_max_results // max(k, 1))
        return max(1, chunk)

    def _learn_limits(self) -> None:
        """Ask /health once for the server's max queries (and queries x topk) per request; a server without
        /health (Search-R1's) is fine."""
        try:
            response = self._pool.request("GET", "/health", timeout_s=min(self.timeout_s, 5.0))
        except _TRANSPORT_ERRORS:
            return  # unreachable: the request itself will retry and explain
        self._limits_known = True
        if response.status_code == 200:
            try:
                limits = response.json()["limits"]
                self._server_max_queries = int(limits["max_queries"])
                self._server_max_results = int(limits.get("max_results") or 0) or None
                chars = limits.get("max_query_chars")  # refuses queries unsent: only a limit a server can have
                self._server_max_query_chars = chars if type(chars) is int and chars > 0 else None
            except (ValueError, KeyError, TypeError, AttributeError):
                pass

    def _post(self, payload: dict, first: int = 0) -> dict:
        """The server's answer to `payload`, whose queries are those from index `first` of the caller's list."""
        try:
            body = orjson.dumps(payload)
        except orjson.JSONEncodeError:  # a lone surrogate: what decoding its bytes with errors="replace" would give
            payload = {**payload, "queries": [_LONE_SURROGATE.sub("\ufffd", q) for q in payload["queries"]]}
            body = orjson.dumps(payload)
        reason = "no attempt"
        for attempt in range(self.max_retries):
            wait = self.backoff_s * (2**attempt)
            try:
                response = self._pool.request("POST", "/retrieve", body)
            except _TRANSPORT_ERRORS as error:
                reason = _transport_reason(error, self.timeout_s)
            else:
                if response.status_code == 200:
                    try:
                        return orjson.loads(response.content)  # ~3x faster than json.loads on big answers
                    except orjson.JSONDecodeError:
                        raise RetrieverError(
                            f"retriever at {self.url} answered with a body that is not JSON; is it "
                            "a Search-R1 compatible /retrieve endpoint?"
                        ) from None
                message = _server_message(response)
                too_long = _TOO_LONG.match(message) if response.status_code == 422 else None
                if too_long:  # its limit is not known here (no /health when first asked), or it changed
                    index, chars, limit = map(int, too_long.groups())
                    raise QueryRefused({first + index: _too_long(chars, limit)})
                if response.status_code != 429 and response.status_code < 500:
                    raise RetrieverError(
                        f"retriever at {self.url} rejected the request (HTTP {response.status_code}): {message}"
                    )
                reason = f"HTTP {response.status_code}: {message}"
                retry_after = _retry_after_s(response)
                if retry_after is not None:
                    wait = min(retry_after, MAX_RETRY_AFTER_S)
            if attempt + 1 < self.max_retries:
                time.sleep(wait)
        tries = f"{self.max_retries} {'try' if self.max_retries == 1 else 'tries'}"
        if reason.startswith("HTTP "):
            raise RetrieverError(
                f"retriever at {self.url} kept failing ({reason}) after {tries}; check the server's log"
            )
        hint = (
            "start it with `inspo serve-retriever --index DIR`"
            if "refused" in reason
            else "check that the server is up and the URL is right, or raise the timeout"
        )
        raise RetrieverError(f"retriever at {self.url} is not reachable ({reason}) after {tries}; {hint}")

    def _parse(self, body: dict, expected: int) -> list[list[Passage]]:
        result = body.get("result") if isinstance(body, dict) else None
        if not isinstance(result, list) or len(result) != expected:
            got = f"{len(result)} result lists" if isinstance(result, list) else "no 'result' list"
            raise RetrieverError(
                f"retriever at {self.url} answered {got} for {expected} queries; "
                "is it a Search-R1 compatible /retrieve endpoint?"
            )
        try:
            return [_passages(hits) for hits in result]
        except (TypeError, AttributeError, KeyError, ValueError) as error:
            raise RetrieverError(
                f"retriever at {self.url} answered hits of an unexpected shape ({error}); "
                "expected Search-R1's {'document': {'id', 'contents'}, 'score'}"
            ) from None

    def close(self) -> None:
        self._pool.close()

    def __enter__(self) -> HTTPRetriever:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"HTTPRetriever({self.url!r})"
