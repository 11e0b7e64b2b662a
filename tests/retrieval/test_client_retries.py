"""HTTPRetriever against scripted fake servers on loopback: retries with backoff on 5xx/429/connection errors,
Retry-After respected, every Search-R1 hit shape parsed, clear errors, and timeouts."""

from __future__ import annotations

import socket
import threading
import time
from contextlib import contextmanager

import orjson
import pytest
from fastapi import FastAPI
from helpers.fake_retrievers import OverlapRetriever
from helpers.scripted_servers import scripted_server

from retriever import client as client_module
from retriever.client import HTTPRetriever, _retry_after_s, normalize_url
from retriever.corpus import Passage
from retriever.errors import RetrieverError
from retriever.server import serve_in_background


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def raw_server(answer: bool = True):
    """A bare HTTP/1.1 server on loopback that answers one request per connection and then closes it,
    without saying so (no `Connection: close`), as a server does to a keep-alive connection it times out;
    or, with `answer=False`, never answers. Yields (base URL, list of (request head, body) received)."""
    listener = socket.create_server(("127.0.0.1", 0))
    seen: list[tuple[bytes, bytes]] = []
    body = b'{"result": [[{"document": {"id": "p1", "contents": "\\"T\\"\\ntext"}, "score": 1.5}]]}'

    def serve():
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head, _, rest = data.partition(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ),
                    0,
                )
                while len(rest) < length:
                    rest += conn.recv(65536)
                seen.append((head, rest))
                if not answer:
                    time.sleep(2)
                    continue
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
                    + body
                )

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", seen
    finally:
        listener.close()


def test_retries_on_503_then_succeeds():
    app = scripted_server([(503, {"error": "warming up"}, {})] * 2)
    with serve_in_background(app) as url, HTTPRetriever(url, backoff_s=0.01) as client:
        hits = client.search(["comet"], 2)
    assert app.state.posts == 3
    assert [p.id for p in hits[0]] == ["", ""]  # Search-R1 BM25 rows carry no id
    assert hits == [[Passage(id="", title=p.title, text=p.text) for p in OverlapRetriever().search(["comet"], 2)[0]]]
    assert hits[0][0].score == OverlapRetriever().search(["comet"], 2)[0][0].score


def test_hits_of_every_search_r1_shape_are_parsed():
    """The fast path (id, contents with a title line, float score) and every fallback give the same Passages
    as `Passage.from_row` would."""
    rows = [
        ({"document": {"id": "a", "contents": '"Title"\ntext'}, "score": 1.5}, Passage("a", "Title", "text", 1.5)),
        ({"document": {"id": "b", "contents": "no title line"}, "score": 2.0}, Passage("b", "", "no title line", 2.0)),
        ({"document": {"id": "c", "contents": '"T"'}, "score": 1}, Passage("c", "", '"T"', 1.0)),  # int score
        ({"document": {"id": 7, "contents": '"T"\nx'}, "score": 0.5}, Passage("7", "T", "x", 0.5)),  # int id
        ({"document": {"contents": '"T"\nx'}, "score": None}, Passage("", "T", "x", None)),  # no id, no score
        ({"document": {"title": "T", "text": "x"}, "score": 3.0}, Passage("", "T", "x", 3.0)),  # title/text rows
        ({"id": "d", "contents": '"T"\nx'}, Passage("d", "T", "x", None)),
    ]  # return_scores=false rows
    app = FastAPI()
    app.post("/retrieve")(lambda: {"result": [[hit for hit, _ in rows]]})
    with serve_in_background(app) as url, HTTPRetriever(url) as client:
        got = client.search(["q"], len(rows))[0]
    assert got == [want for _, want in rows]
    assert [p.score for p in got] == [want.score for _, want in rows]
    assert [type(p.score) for p in got] == [type(want.score) for _, want in rows]


@pytest.mark.parametrize("hit", [5, "x", {"document": "x", "score": 1.0}, {"document": None}])
def test_hits_of_an_unknown_shape_are_explained(hit):
    app = FastAPI()
    app.post("/retrieve")(lambda: {"result": [[hit]]})
    with serve_in_background(app) as url, HTTPRetriever(url) as client:
        with pytest.raises(RetrieverError, match="answered hits of an unexpected shape"):
            client.search(["q"], 1)


def test_retry_after_is_respected_on_429():
    app = scripted_server([(429, {"error": "slow down"}, {"Retry-After": "0.3"})])
    with serve_in_background(app) as url, HTTPRetriever(url, backoff_s=0.0) as client:
        start = time.perf_counter()
        client.search(["comet"], 1)
        assert time.perf_counter() - start >= 0.3
    assert app.state.posts == 2


def test_persistent_5xx_gives_up_with_the_last_reason():
    app = scripted_server([(500, {"error": "retriever failed: MemoryError"}, {})] * 5)
    with serve_in_background(app) as url, HTTPRetriever(url, max_retries=2, backoff_s=0.01) as client:
        with pytest.raises(
            RetrieverError, match=r"kept failing \(HTTP 500: retriever failed: MemoryError\) after 2 tries"
        ):
            client.search(["comet"], 1)
    assert app.state.posts == 2


def test_nothing_listening_gives_a_clear_error():
    url = f"http://127.0.0.1:{free_port()}"
    with HTTPRetriever(url, max_retries=3, backoff_s=0.01, timeout_s=2) as client:
        with pytest.raises(RetrieverError) as error:
            client.search(["comet"], 3)
    assert str(error.value) == (
        f"retriever at {url}/retrieve is not reachable (connection refused) after 3 tries; "
        "start it with `inspo serve-retriever --index DIR`"
    )


def test_a_non_search_r1_answer_is_explained():
    app = FastAPI()
    app.post("/retrieve")(lambda: {"results": []})
    with serve_in_background(app) as url, HTTPRetriever(url) as client:
        with pytest.raises(RetrieverError, match="no 'result' list for 1 queries; is it a Search-R1 compatible"):
            client.search(["comet"], 1)


def test_a_kept_alive_connection_the_server_closed_is_replaced_without_a_retry():
    with raw_server() as (url, seen), HTTPRetriever(url, max_retries=1, backoff_s=5) as client:
        start = time.perf_counter()
        for _ in range(3):
            assert client.search(["q"], 1) == [[Passage("p1", "T", "text")]]
        assert time.perf_counter() - start < 2  # no backoff wait, and no error with max_retries=1
    assert len(seen) == 4  # GET /health, then 3 searches, each on a fresh connection


def test_a_connection_closed_while_reused_is_retried_once_on_a_fresh_one(monkeypatch):
    """The race: the server closes the idle connection just after the client found it open."""
    monkeypatch.setattr(client_module, "_readable", lambda sock: False)
    with raw_server() as (url, seen), HTTPRetriever(url, max_retries=1, backoff_s=5) as client:
        for _ in range(3):
            assert client.search(["q"], 1)[0][0].id == "p1"
    assert len(seen) == 4


def test_requests_carry_the_url_path_and_credentials():
    with raw_server() as (url, seen):
        base = url.replace("http://", "http://user:p%40ss@") + "/under/a/prefix"
        with HTTPRetriever(base + "/retrieve") as client:
            client.search(["q1"], 2)
    head, body = seen[-1]
    head += b"\r\n"
    assert head.startswith(b"POST /under/a/prefix/retrieve HTTP/1.1\r\n")
    assert b"\r\nAuthorization: Basic dXNlcjpwQHNz\r\n" in head  # user:p@ss
    assert b"\r\nContent-Type: application/json\r\n" in head
    assert orjson.loads(body) == {"queries": ["q1"], "topk": 2, "return_scores": True}
    assert seen[0][0].startswith(b"GET /under/a/prefix/health HTTP/1.1\r\n")


def test_a_server_that_never_answers_times_out():
    with raw_server(answer=False) as (url, _), HTTPRetriever(url, timeout_s=0.3, max_retries=1) as client:
        with pytest.raises(RetrieverError, match=r"is not reachable \(timed out after 0.3s\) after 1 try"):
            client.search(["q"], 1)


def test_url_and_retry_after_parsing():
    assert normalize_url("http://h:8000") == ("http://h:8000", "http://h:8000/retrieve")
    assert normalize_url(" http://h:8000/retrieve/ ") == ("http://h:8000", "http://h:8000/retrieve")
    with pytest.raises(RetrieverError, match="must start with http://"):
        normalize_url("127.0.0.1:8000")
    with pytest.raises(RetrieverError, match="is not valid"):
        normalize_url("http://h:port")
    assert normalize_url("http://[::1]:8000/retrieve") == ("http://[::1]:8000", "http://[::1]:8000/retrieve")
    with pytest.raises(RetrieverError, match="max_retries"):
        HTTPRetriever("http://h", max_retries=0)

    class FakeResponse:
        def __init__(self, value):
            self.headers = {"retry-after": value} if value is not None else {}

    assert _retry_after_s(FakeResponse("2")) == 2.0
    assert _retry_after_s(FakeResponse(None)) is None
    assert _retry_after_s(FakeResponse("Wed, 21 Oct 2015 07:28:00 GMT")) == 0.0  # a date in the past
    assert _retry_after_s(FakeResponse("soon")) is None
