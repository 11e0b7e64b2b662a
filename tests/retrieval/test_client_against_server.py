"""HTTPRetriever against the real server on loopback: the protocol, the same results as in-process, lists split
by the server's limits, 4xx not retried, threads sharing one client, and lone surrogates searched as U+FFFD."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from helpers.fake_retrievers import OverlapRetriever

from retriever.client import HTTPRetriever
from retriever.corpus import Passage
from retriever.errors import RetrieverError
from retriever.search import Retriever
from retriever.server import create_app, serve_in_background

QUERIES = ["castle of Vell", "comet", "what is near the violin?", "", "Lighthouse 1756"]


@pytest.fixture(scope="module")
def served():
    retriever = OverlapRetriever()
    with serve_in_background(create_app(retriever, max_queries=4)) as url:
        yield url, retriever


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


def test_threads_share_one_client(served):
    url, retriever = served
    queries = [[f"{word} {i}" for word in ("comet", "castle", "violin")[: 1 + i % 3]] for i in range(40)]
    with HTTPRetriever(url, pool_size=2) as client:  # more threads than kept connections
        with ThreadPoolExecutor(max_workers=8) as pool:
            got = list(pool.map(lambda q: client.search(q, 3), queries))
        assert len(client._pool._idle) <= 2
    assert got == [retriever.search(q, 3) for q in queries]


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
