"""The retrieval server's connection limits over real sockets: an oversized or slow request head is refused, idle
connections are closed, and connections past the limit are turned away, while ordinary clients (keep-alive,
pipelined, waiting on a slow search) are served as before."""

from __future__ import annotations

import json
import math
import socket
import threading
import time

import httpx
import pytest
from helpers.fake_retrievers import BlockingRetriever, OverlapRetriever

from retriever.connections import ConnectionLimits
from retriever.server import create_app, serve_in_background

LIMIT = 4096


def connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=5)


def read_until_closed(sock: socket.socket, timeout_s: float = 5.0) -> tuple[bytes, float]:
    """Everything the server sends until it closes the connection, and how long that took."""
    started = time.monotonic()
    sock.settimeout(timeout_s)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except ConnectionResetError:
        pass
    return data, time.monotonic() - started


def status_and_error(answer: bytes) -> tuple[int, str]:
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)["error"]


def health(url: str) -> dict:
    return httpx.get(url + "/health", timeout=5).json()


@pytest.fixture(scope="module")
def guarded():
    app = create_app(OverlapRetriever(), max_header_bytes=LIMIT, header_timeout_s=0.5, idle_timeout_s=0.5)
    with serve_in_background(app) as url:
        yield url


def test_a_head_over_the_limit_that_arrives_in_pieces_is_431_and_closed(guarded):
    """The server refuses it once the limit has arrived, without waiting for (or holding) the rest."""
    sock = connect(guarded)
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ")
    for _ in range(2 * LIMIT // 512):
        try:
            sock.sendall(b"a" * 512)
        except OSError:
            break
        time.sleep(0.01)  # each piece its own read
    answer, _ = read_until_closed(sock)
    status, error = status_and_error(answer)
    assert status == 431 and f"over the limit of {LIMIT} bytes" in error and "--max-header-kib" in error
    assert httpx.get(guarded + "/health").status_code == 200


@pytest.mark.parametrize("name, size", [("one header", 5000), ("many headers", 200)])
def test_a_head_over_the_limit_that_arrives_whole_is_431(guarded, name, size):
    headers = [f"X-H{i}: {'v' * size}" for i in range(max(1, 5000 // size))]
    sock = connect(guarded)
    sock.sendall(("GET /health HTTP/1.1\r\nHost: x\r\n" + "\r\n".join(headers) + "\r\n\r\n").encode())
    status, error = status_and_error(read_until_closed(sock)[0])
    assert status == 431, error


def test_a_head_under_the_limit_is_served(guarded):
    response = httpx.get(guarded + "/health", headers={"X-Fill": "v" * (LIMIT - 300)})
    assert response.status_code == 200


def test_a_pipelined_head_after_a_large_body_is_not_counted_with_the_body(guarded):
    """A body larger than the head limit and the start of the next request in one read: both are served."""
    body = json.dumps({"queries": ["river"], "topk": 1}).encode().ljust(3 * LIMIT)
    first = b"POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    sock = connect(guarded)
    sock.sendall(first + b"GET /health HTTP/1.1\r\n")
    time.sleep(0.05)
    sock.sendall(b"Host: x\r\nConnection: close\r\n\r\n")
    answer, _ = read_until_closed(sock)
    assert answer.count(b"HTTP/1.1 200 OK") == 2, answer[:300]


def test_a_head_that_trickles_is_408_after_the_header_timeout(guarded):
    sock = connect(guarded)
    sock.sendall(b"GET /health HTTP/1.1\r\n")
    started = time.monotonic()
    sock.settimeout(0.1)
    answer = b""
    while time.monotonic() - started < 5:  # one byte every 0.1 s: never idle, never a whole head
        try:
            sock.sendall(b"X")
            answer = sock.recv(65536)
            break
        except TimeoutError:
            continue
        except OSError:
            break
    elapsed = time.monotonic() - started
    sock.settimeout(5)
    status, error = status_and_error(answer + read_until_closed(sock)[0])
    assert status == 408 and "within 0.5 s" in error and "--header-timeout-s" in error
    assert 0.45 < elapsed < 2.0
    assert health(guarded)["connections"]["closed_slow_header"] >= 1


def test_idle_connections_are_closed_new_or_kept_alive(guarded):
    silent = [connect(guarded) for _ in range(3)]  # never send a byte
    kept = connect(guarded)
    kept.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    answer = kept.recv(65536)
    assert answer.startswith(b"HTTP/1.1 200")
    for sock in silent:
        data, seconds = read_until_closed(sock)
        assert data == b"" and seconds < 2.0
    assert read_until_closed(kept)[0] == b""
    assert health(guarded)["connections"]["closed_idle"] >= 4


def test_a_body_still_arriving_after_its_answer_closes_the_connection():
    """Answered (404) before its body came: the rest cannot be answered, and trickling it must not hold the
    connection open (closed at once: the idle and header timeouts here are far longer than the wait)."""
    app = create_app(OverlapRetriever(), header_timeout_s=60, idle_timeout_s=60)
    with serve_in_background(app) as url:
        sock = connect(url)
        sock.sendall(b"POST /elsewhere HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\nabc")
        answer, _ = read_until_closed(sock, timeout_s=10)
        assert answer.startswith(b"HTTP/1.1 404") and health(url)["connections"]["closed_idle"] == 0


def test_health_reports_the_connection_limits(guarded):
    sock = connect(guarded)  # a refusal of its own: under pytest -n the tests above may run on another worker
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (2 * LIMIT) + b"\r\n\r\n")
    assert status_and_error(read_until_closed(sock)[0])[0] == 431
    answer = health(guarded)
    assert answer["limits"]["max_header_bytes"] == LIMIT and answer["limits"]["idle_timeout_s"] == 0.5
    assert answer["connections"]["open"] >= 1 and answer["connections"]["refused_large_header"] >= 1


def test_a_search_longer_than_the_idle_timeout_is_answered():
    retriever = BlockingRetriever()
    with serve_in_background(create_app(retriever, idle_timeout_s=0.2, header_timeout_s=0.2)) as url:
        result = {}
        thread = threading.Thread(
            target=lambda: result.setdefault(
                "r", httpx.post(url + "/retrieve", json={"queries": ["comet"]}, timeout=10)
            )
        )
        thread.start()
        assert retriever.entered.wait(5)
        time.sleep(0.6)
        retriever.release.set()
        thread.join(10)
    assert result["r"].status_code == 200


def test_connections_past_the_limit_are_answered_503_and_closed():
    with serve_in_background(create_app(OverlapRetriever(), max_connections=3, idle_timeout_s=30)) as url:
        held = [connect(url) for _ in range(3)]
        time.sleep(0.1)
        status, error = status_and_error(read_until_closed(connect(url))[0])
        assert status == 503 and "3 connections open" in error and "--max-connections" in error
        held.pop().close()
        time.sleep(0.1)
        answer = health(url)  # a freed place is usable again, and those held are still open
        assert answer["connections"]["refused_over_capacity"] == 1 and answer["connections"]["open"] == 3
        for sock in held:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            assert sock.recv(65536).startswith(b"HTTP/1.1 200")
            sock.close()


@pytest.mark.parametrize(
    "field, value",
    [
        ("max_header_bytes", 0),
        ("max_header_bytes", -1),
        ("max_header_bytes", 1.5),
        ("max_header_bytes", True),
        ("max_connections", 0),
        ("max_connections", "8"),
        ("header_timeout_s", 0),
        ("header_timeout_s", -1),
        ("header_timeout_s", math.nan),
        ("header_timeout_s", math.inf),
        ("idle_timeout_s", 1e9),
        ("idle_timeout_s", None),
    ],
)
def test_connection_limits_refuse_values_no_server_can_use(field, value):
    with pytest.raises(ValueError, match=field):
        ConnectionLimits(**{field: value})
