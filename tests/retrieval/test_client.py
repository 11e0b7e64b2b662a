"""HTTPRetriever against the real server and against scripted fake servers on loopback: same results as
in-process, retries with backoff on 5xx/429/connection errors, none on 4xx, and clear errors."""

from __future__ import annotations

import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import orjson
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from helpers.fake_retrievers import OverlapRetriever

from inspo_cli.agent.tools.base import Observation
from inspo_cli.agent.tools.search import SearchTool
from retriever import client as client_module
from retriever.client import HTTPRetriever, _retry_after_s, normalize_url
from retriever.corpus import Passage
from retriever.errors import QueryRefused, RetrieverError
from retriever.search import Retriever
from retriever.server import create_app, serve_in_background

QUERIES = ["castle of Vell", "comet", "what is near the violin?", "", "Lighthouse 1756"]


@pytest.fixture(scope="module")
def served():
    retriever = OverlapRetriever()
    with serve_in_background(create_app(retriever, max_queries=4)) as url:
        yield url, retriever


def scripted_server(responses: list[tuple[int, dict, dict]]):
    """An app whose /retrieve answers the scripted (status, body, headers) in turn, then real results;
    it has no /health, like Search-R1's own server. `app.state.posts` counts requests."""
    app = FastAPI()
    app.state.posts = 0
    backend = OverlapRetriever()

    @app.post("/retrieve")
    async def retrieve(request: Request):
        app.state.posts += 1
        if app.state.posts <= len(responses):
            status, body, headers = responses[app.state.posts - 1]
            return JSONResponse(body, status_code=status, headers=headers)
        payload = await request.json()
        hits = backend.search(payload["queries"], payload["topk"])
        # Search-R1's BM25 rows: title/text/contents and no id
        return {
            "result": [
                [{"document": {"title": p.title, "text": p.text, "contents": p.contents}, "score": p.score} for p in h]
                for h in hits
            ]
        }

    return app


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


def test_client_implements_the_protocol():
    with HTTPRetriever("http://127.0.0.1:1") as client:
        assert isinstance(client, Retriever)


@pytest.mark.parametrize("suffix", ["", "/", "/retrieve", "/retrieve/"])
def test_client_equals_in_process_results(served, suffix):
    url, retriever = served
    with HTTPRetriever(url + suffix) as client:
        for k in (1, 3, 7):
            got = client.search(QUERIES, k)
            want = retriever.search(QUERIES, k)
            assert got == want  # ids, titles and texts
            assert [[p.score for p in h] for h in got] == [[p.score for p in h] for h in want]  # floats survive JSON
        assert client.search([], 3) == []


def test_client_splits_lists_longer_than_the_server_limit(served):
    url, retriever = served
    queries = [f"q {i} river" for i in range(10)]
    with HTTPRetriever(url) as client:
        assert client.search(queries, 2) == retriever.search(queries, 2)
        assert client._chunk_size(2) == 4  # learnt from the server's /health


def test_client_splits_by_the_servers_passage_limit_too():
    """A server that answers at most 6 passages a request (queries x topk): topk 3 means 2 queries a request."""
    retriever = OverlapRetriever()
    queries = [f"q {i} river" for i in range(5)]
    with serve_in_background(create_app(retriever, max_results=6)) as url, HTTPRetriever(url) as client:
        assert client.search(queries, 3) == retriever.search(queries, 3)
        assert client._chunk_size(3) == 2 and client._chunk_size(1) == 6


def test_client_rejects_a_single_string(served):
    with HTTPRetriever(served[0]) as client, pytest.raises(TypeError):
        client.search("comet", 3)


def test_4xx_is_not_retried_and_carries_the_server_message(served):
    url, _ = served
    with HTTPRetriever(url, backoff_s=5) as client:  # a retry would make this test take 5 s
        start = time.perf_counter()
        with pytest.raises(RetrieverError, match=r"rejected the request \(HTTP 422\): topk 0 is out of range"):
            client.search(["comet"], 0)
        assert time.perf_counter() - start < 2


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


def test_threads_share_one_client(served):
    url, retriever = served
    queries = [[f"{word} {i}" for word in ("comet", "castle", "violin")[: 1 + i % 3]] for i in range(40)]
    with HTTPRetriever(url, pool_size=2) as client:  # more threads than kept connections
        with ThreadPoolExecutor(max_workers=8) as pool:
            got = list(pool.map(lambda q: client.search(q, 3), queries))
        assert len(client._pool._idle) <= 2
    assert got == [retriever.search(q, 3) for q in queries]


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


# -- issue 51: what the policy writes into a query is its own to fix, the rest still fails loudly -----------------


def test_a_query_over_the_servers_length_limit_is_refused_by_index_before_sending():
    retriever = OverlapRetriever()
    with serve_in_background(create_app(retriever, max_query_chars=10)) as url, HTTPRetriever(url) as client:
        assert client.search(["comet"], 2) == retriever.search(["comet"], 2)
        with pytest.raises(QueryRefused) as refused:
            client.search(["comet", "x" * 11, "river", "y" * 4000], 2)
        assert refused.value.reasons == {
            1: "the query has 11 characters; the search engine takes at most 10, so shorten it",
            3: "the query has 4,000 characters; the search engine takes at most 10, so shorten it",
        }
        assert isinstance(refused.value, RetrieverError)  # a caller that does not handle it stops as before
        assert client.search(["x" * 10], 2) == retriever.search(["x" * 10], 2)  # the limit itself is searched


@pytest.mark.parametrize("claimed", [-1, 0, True, "10", 2.5, None])
def test_a_query_length_limit_no_server_can_have_refuses_nothing_unsent(claimed):
    """A /health whose max_query_chars is not a positive int (a damaged or foreign server) is no limit: the queries
    are sent, never all turned into error observations here."""
    app = scripted_server([])

    @app.get("/health")
    async def health():
        return {"limits": {"max_queries": 64, "max_query_chars": claimed}}

    with serve_in_background(app) as url, HTTPRetriever(url) as client:
        assert len(client.search(["comet", "river of Vell"], 1)) == 2
    assert app.state.posts == 1


def test_a_servers_422_for_a_long_query_names_it_within_the_callers_list():
    """A server whose limits were not known here (no /health): its 422 names the query in its request, which is
    the caller's index less the requests before it."""
    message = "queries.1 has 3000 characters; the limit is 2048 (shorten it, or restart the server with ...)"
    app = scripted_server([(200, {"result": [[], []]}, {}), (422, {"error": message}, {})])
    with serve_in_background(app) as url, HTTPRetriever(url, max_queries_per_request=2, backoff_s=5) as client:
        with pytest.raises(QueryRefused) as refused:
            client.search(["a", "b", "c", "d"], 1)
    assert refused.value.reasons == {
        3: "the query has 3,000 characters; the search engine takes at most 2,048, so shorten it"
    }
    assert app.state.posts == 2  # not retried


@pytest.mark.parametrize(
    "status, body",
    [
        (422, {"error": "topk 0 is out of range"}),
        (401, {"error": "no"}),
        (404, {"detail": "Not Found"}),
        (413, {"error": "too big"}),
    ],
)
def test_a_4xx_that_is_not_about_one_query_still_stops_the_caller(status, body):
    app = scripted_server([(status, body, {})])
    with serve_in_background(app) as url, HTTPRetriever(url, backoff_s=5) as client:
        with pytest.raises(RetrieverError, match=rf"rejected the request \(HTTP {status}\)") as error:
            client.search(["comet"], 1)
    assert not isinstance(error.value, QueryRefused)


class _Echo:
    """Answers each query with one passage whose text is the query as the server received it."""

    def search(self, queries, k):
        return [[Passage(id="q", title="", text=query, score=1.0)] for query in queries]


def test_a_lone_surrogate_is_searched_as_the_replacement_character(served):
    url, retriever = served
    with HTTPRetriever(url) as client:
        assert client.search(["comet \ud800", "river"], 2) == retriever.search(["comet \ufffd", "river"], 2)
    with serve_in_background(create_app(_Echo())) as url, HTTPRetriever(url) as client:
        hits = client.search(["a\ud800b\udfff", "\U0001f600"], 1)
    assert [h[0].text for h in hits] == ["a\ufffdb\ufffd", "\U0001f600"]


def test_the_search_tool_answers_a_refused_query_with_an_error_and_searches_the_rest():
    retriever = OverlapRetriever()
    with serve_in_background(create_app(retriever, max_query_chars=20)) as url, HTTPRetriever(url) as client:
        tool = SearchTool(client, topk=2)
        calls = [{"query": "comet"}, {"query": "castle " * 10}, {"query": "river"}]
        observations = tool.call(calls)
        healthy = tool.call([calls[0], calls[2]])
        served_requests = _health(url)["batcher"]["requests"]
    assert observations[1] == Observation(
        "error: the query has 70 characters; the search engine takes at most 20, so shorten it", error=True
    )
    assert [observations[0], observations[2]] == healthy
    assert healthy[0].passage_ids == [p.id for p in retriever.search(["comet"], 2)[0]]
    assert served_requests == 2  # one request per call(): the refused query was never sent


def _health(url: str) -> dict:
    import urllib.request

    with urllib.request.urlopen(url + "/health", timeout=5) as answer:
        return orjson.loads(answer.read())


class _Refusing(OverlapRetriever):
    """Refuses the first one-letter query of a batch, as a server's 422 names the first query over its limit."""

    def __init__(self):
        super().__init__()
        self.batches = []

    def search(self, queries, k):
        self.batches.append(list(queries))
        short = [i for i, query in enumerate(queries) if len(query) == 1]
        if short:
            raise QueryRefused({short[0]: f"{queries[short[0]]} is too short"})
        return super().search(queries, k)


def test_a_refusal_that_names_no_query_of_the_batch_stops_the_caller():
    class Confused(OverlapRetriever):
        def search(self, queries, k):
            raise QueryRefused({len(queries): "no"})

    with pytest.raises(QueryRefused):
        SearchTool(Confused(), topk=1).call([{"query": "comet"}, {"query": "river"}])


def test_the_search_tool_searches_again_until_no_query_is_refused():
    retriever = _Refusing()
    observations = SearchTool(retriever, topk=1).call([{"query": q} for q in ("river", "a", "comet", "b")])
    assert retriever.batches == [["river", "a", "comet", "b"], ["river", "comet", "b"], ["river", "comet"]]
    assert [o.text for o in observations if o.error] == ["error: a is too short", "error: b is too short"]
    assert [o.error for o in observations] == [False, True, False, True]
    assert observations[2].passage_ids == [p.id for p in OverlapRetriever().search(["comet"], 1)[0]]


def test_a_retriever_that_answers_the_wrong_number_of_lists_is_a_clear_error():
    class Short(OverlapRetriever):
        def search(self, queries, k):
            return super().search(queries, k)[:-1]

    with pytest.raises(RuntimeError, match="the retriever answered 1 result lists for 2 queries"):
        SearchTool(Short(), topk=1).call([{"query": "comet"}, {"query": "river"}])


def test_a_baseline_methods_refused_query_finds_nothing_and_the_evaluation_goes_on(tiny_tokenizer):
    """IRCoT searches with the model's thought and Search-o1 with its query: one the server refuses (too long)
    finds no passage, the others are searched, nothing is raised out of `inspo evaluate`."""
    from inspo_cli.config import RolloutConfig
    from inspo_cli.evaluation.methods.base import MethodContext

    retriever = _Refusing()
    ctx = MethodContext(None, tiny_tokenizer, retriever, RolloutConfig(), topk=1)
    found = ctx.search(["river", "a", "comet"])
    assert found[1] == [] and found[0] and found[2] and retriever.batches[-1] == ["river", "comet"]
