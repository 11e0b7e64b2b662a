"""The retrieval server over real HTTP on loopback: Search-R1's request/response shapes, batching across
concurrent requests, a responsive event loop, and 4xx (never 500) for every kind of bad request."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
import time

import httpx
import pytest
from helpers.fake_retrievers import PASSAGES, BlockingRetriever, FailingRetriever, OverlapRetriever, SlowRetriever

from retriever.batching import MicroBatcher
from retriever.corpus import Passage
from retriever.server import create_app, serve_in_background


@pytest.fixture(scope="module")
def served():
    retriever = OverlapRetriever()
    app = create_app(
        retriever,
        max_queries=8,
        max_query_chars=50,
        max_topk=10,
        index_info={"kind": "overlap", "passages": len(PASSAGES)},
    )
    with serve_in_background(app) as url:
        yield url, retriever, app


@pytest.fixture
def live(served):
    """A served OverlapRetriever with small limits (one server per module); yields (base URL, retriever, app)."""
    served[1].calls.clear()
    return served


def post(url: str, body=None, **kwargs) -> httpx.Response:
    return httpx.post(url + "/retrieve", json=body, timeout=10, **kwargs)


def test_scores_response_has_search_r1_shape(live):
    url, retriever, _ = live
    response = post(url, {"queries": ["castle of Vell", "comet"], "topk": 2, "return_scores": True})
    assert response.status_code == 200
    result = response.json()["result"]
    assert len(result) == 2 and all(len(hits) == 2 for hits in result)
    hit = result[0][0]
    assert set(hit) == {"document", "score"} and set(hit["document"]) == {"id", "contents"}
    expected = retriever.search(["castle of Vell"], 2)[0][0]
    assert hit["document"] == {"id": expected.id, "contents": f'"{expected.title}"\n{expected.text}'}
    assert hit["score"] == pytest.approx(expected.score)


def test_without_scores_documents_only_and_defaults(live):
    url, retriever, _ = live
    explicit = post(url, {"queries": ["violin"], "topk": 3, "return_scores": False}).json()
    default = post(url, {"queries": ["violin"]}).json()  # Search-R1: return_scores defaults to false
    assert explicit == default
    assert default["result"][0] == [p.to_row() for p in retriever.search(["violin"], 3)[0]]  # server default topk 3
    null_topk = post(url, {"queries": ["violin"], "topk": None}).json()
    assert null_topk == default


def test_numpy_scores_and_non_ascii_text_are_served_as_plain_json():
    """Scores a retriever leaves as numpy scalars are numbers, and text outside ASCII comes back unchanged."""
    np = pytest.importorskip("numpy")
    passages = [
        Passage("é1", "Café Ølberg", 'Ünïcödé text \u2014 \U0001f600 and "quotes"\n\\', np.float32(2.5)),
        Passage("2", "", "no title line", np.float64(1.25)),
    ]

    class NumpyScores:
        def search(self, queries, k):
            return [passages[:k] for _ in queries]

    with serve_in_background(create_app(NumpyScores())) as url:
        response = post(url, {"queries": ["q"], "topk": 2, "return_scores": True})
    assert response.status_code == 200 and response.headers["content-type"] == "application/json"
    hits = response.json()["result"][0]
    assert [h["score"] for h in hits] == [2.5, 1.25]
    assert [h["document"] for h in hits] == [p.to_row() for p in passages]


def test_health_reports_index_limits_and_batcher(live):
    url, _, _ = live
    post(url, {"queries": ["river"]})
    health = httpx.get(url + "/health").json()
    assert health["status"] == "ok"
    assert health["index"] == {"kind": "overlap", "passages": 20}
    assert health["limits"]["max_queries"] == 8 and health["limits"]["default_topk"] == 3
    assert health["batcher"]["searches"] >= 1


BAD_REQUESTS = {
    "missing queries": {"topk": 3},
    "queries not a list": {"queries": "castle"},
    "queries of numbers": {"queries": [1, 2]},
    "queries of null": {"queries": [None]},
    "empty queries": {"queries": []},
    "too many queries": {"queries": ["q"] * 9},
    "over-long query": {"queries": ["x" * 51]},
    "topk zero": {"queries": ["q"], "topk": 0},
    "topk negative": {"queries": ["q"], "topk": -1},
    "topk too large": {"queries": ["q"], "topk": 11},
    "topk string": {"queries": ["q"], "topk": "3"},
    "topk float": {"queries": ["q"], "topk": 2.5},
    "return_scores string": {"queries": ["q"], "return_scores": "yes"},
    "body is a list": ["q"],
    "body is a string": "q",
}


@pytest.mark.parametrize("name", BAD_REQUESTS)
def test_bad_requests_get_a_4xx_with_a_message(live, name):
    url, retriever, _ = live
    response = post(url, BAD_REQUESTS[name])
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error and "\n" not in error and len(error) < 400
    assert not retriever.calls  # never reached the retriever
    assert post(url, {"queries": ["ok"]}).status_code == 200  # and the server still serves


@pytest.mark.parametrize("content", [b"{not json", b"", b" ", b'{"queries": ["a"]', b"\xff\xfe"])
def test_malformed_json_is_400(live, content):
    url, _, _ = live
    response = httpx.post(url + "/retrieve", content=content, headers={"content-type": "application/json"})
    assert response.status_code == 400, response.text
    assert response.json()["error"].startswith("request body is")


def test_json_without_a_json_content_type_is_accepted(live):
    """`curl -d '{...}'` sends application/x-www-form-urlencoded; the body is still JSON."""
    url, _, _ = live
    response = httpx.post(
        url + "/retrieve",
        content=b'{"queries": ["comet"], "topk": 1}',
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert response.status_code == 200 and len(response.json()["result"][0]) == 1


def test_unknown_paths_and_methods_answer_with_the_api(live):
    url, _, _ = live
    assert httpx.get(url + "/search").status_code == 404
    response = httpx.get(url + "/retrieve")
    assert response.status_code == 405 and "POST /retrieve" in response.json()["error"]


def test_error_messages_name_the_field_and_the_limit(live):
    url, _, _ = live
    assert "queries is required" in post(url, {"topk": 3}).json()["error"]
    assert "limit is 8" in post(url, {"queries": ["q"] * 9}).json()["error"]
    assert "queries.0 has 51 characters; the limit is 50" in post(url, {"queries": ["x" * 51]}).json()["error"]
    assert "topk 11 is out of range; use 1..10" in post(url, {"queries": ["q"], "topk": 11}).json()["error"]
    assert "queries.1" in post(url, {"queries": ["a", 7]}).json()["error"]
    assert (
        "not valid JSON"
        in httpx.post(url + "/retrieve", content=b"{", headers={"content-type": "application/json"}).json()["error"]
    )


def test_a_failing_retriever_is_a_500_with_a_message_and_the_server_survives():
    with serve_in_background(create_app(FailingRetriever())) as url:
        for _ in range(2):
            response = post(url, {"queries": ["q"]})
            assert response.status_code == 500
            assert response.json() == {"error": "retriever failed: RuntimeError: index file is corrupt"}
        assert httpx.get(url + "/health").json()["batcher"]["failed_searches"] == 2


def test_concurrent_requests_are_coalesced_into_fewer_searches():
    retriever = SlowRetriever(delay_s=0.02)
    app = create_app(retriever, batch_window_ms=5)
    n_requests = 40
    queries = [[f"{PASSAGES[i % 20].title} {i}", PASSAGES[(i + 3) % 20].title] for i in range(n_requests)]
    topks = [1 + i % 4 for i in range(n_requests)]  # mixed topk in one batch: searched at the max, truncated

    async def fire(url):
        async with httpx.AsyncClient(base_url=url, timeout=10, limits=httpx.Limits(max_connections=64)) as client:
            responses = await asyncio.gather(
                *[client.post("/retrieve", json={"queries": q, "topk": k}) for q, k in zip(queries, topks)]
            )
            return [r.json()["result"] for r in responses]

    with serve_in_background(app) as url:
        results = asyncio.run(fire(url))
    assert len(retriever.calls) < n_requests / 2, retriever.calls
    assert sum(retriever.calls) == 2 * n_requests
    reference = OverlapRetriever()
    for q, k, got in zip(queries, topks, results):
        assert got == [[p.to_row() for p in hits] for hits in reference.search(q, k)]


def test_a_slow_search_does_not_block_health():
    retriever = BlockingRetriever()
    with serve_in_background(create_app(retriever)) as url:
        pending = {}
        thread = threading.Thread(target=lambda: pending.setdefault("r", post(url, {"queries": ["comet"]})))
        thread.start()
        assert retriever.entered.wait(5)
        start = time.perf_counter()
        health = httpx.get(url + "/health", timeout=2)
        assert health.status_code == 200 and time.perf_counter() - start < 1.0
        assert health.json()["batcher"]["searches"] == 1
        retriever.release.set()
        thread.join(5)
        assert pending["r"].status_code == 200


def test_micro_batcher_splits_and_truncates_per_request():
    retriever = OverlapRetriever()

    async def main():
        batcher = MicroBatcher(retriever, max_batch=100, window_s=0.01)
        await batcher.start()
        try:
            return await asyncio.gather(
                batcher.search(["river"], 1), batcher.search(["comet", "canal"], 4), batcher.search(["vineyard"], 2)
            )
        finally:
            await batcher.stop()

    a, b, c = asyncio.run(main())
    assert retriever.calls == [4]
    assert [len(h) for h in a + b + c] == [1, 4, 4, 2]
    assert a == retriever.search(["river"], 1) and b == retriever.search(["comet", "canal"], 4)
    assert c == retriever.search(["vineyard"], 2)


def test_micro_batcher_respects_max_batch():
    retriever = OverlapRetriever()

    async def main():
        batcher = MicroBatcher(retriever, max_batch=3, window_s=0.05)
        await batcher.start()
        try:
            await asyncio.gather(*[batcher.search([f"q{i}"], 2) for i in range(7)])
        finally:
            await batcher.stop()

    asyncio.run(main())
    assert retriever.calls == [3, 3, 1]


def test_micro_batcher_waits_the_window_only_under_concurrency():
    retriever = OverlapRetriever()

    async def main():
        batcher = MicroBatcher(retriever, max_batch=100, window_s=0.1)
        await batcher.start()
        try:
            start = time.perf_counter()
            for query in ("river", "comet", "canal"):  # one caller, one request after another: no waiting
                await batcher.search([query], 1)
            lone = time.perf_counter() - start
            await asyncio.gather(batcher.search(["a"], 1), batcher.search(["b"], 1))  # concurrency seen
            first = asyncio.ensure_future(batcher.search(["c"], 1))
            await asyncio.sleep(0.02)  # arrives inside the window of the first
            await asyncio.gather(first, batcher.search(["d"], 1))
            return lone
        finally:
            await batcher.stop()

    lone = asyncio.run(main())
    assert lone < 0.08
    assert retriever.calls == [1, 1, 1, 2, 2]


# -- limits and fairness: no request can take the server's memory, its time or its log ----------------------------


class RecordingRetriever(OverlapRetriever):
    """Records the queries of every search; the first search waits until `release` is set."""

    def __init__(self):
        super().__init__()
        self.batches: list[list[str]] = []
        self.first_started, self.release = threading.Event(), threading.Event()

    def search(self, queries, k):
        self.batches.append(list(queries))
        if len(self.batches) == 1:
            self.first_started.set()
            self.release.wait(10)
        return super().search(queries, k)


def test_a_huge_request_delays_a_small_one_by_one_batch_not_by_all_of_its_own():
    retriever = RecordingRetriever()
    huge = [f"huge {i}" for i in range(10)]

    async def main():
        batcher = MicroBatcher(retriever, max_batch=4, window_s=0)
        await batcher.start()
        try:
            big = asyncio.ensure_future(batcher.search(huge, 2))
            while not retriever.first_started.is_set():  # its first batch is being searched
                await asyncio.sleep(0.005)
            small = asyncio.ensure_future(batcher.search(["small river"], 3))
            await asyncio.sleep(0.01)
            retriever.release.set()
            return await big, await small
        finally:
            await batcher.stop()

    big, small = asyncio.run(main())
    assert retriever.batches == [huge[:4], ["small river", *huge[4:7]], huge[7:]]  # the small one goes second
    assert big == retriever.search(huge, 2) and small == retriever.search(["small river"], 3)


@pytest.fixture(scope="module")
def limited():
    app = create_app(OverlapRetriever(), max_results=6, max_body_bytes=2000, read_timeout_s=0.5)
    with serve_in_background(app) as url:
        yield url


def test_a_request_over_the_passage_limit_is_a_422_naming_it(limited):
    response = post(limited, {"queries": ["a", "b", "c"], "topk": 3})
    assert response.status_code == 422 and "3 queries x topk 3 = 9 passages" in response.json()["error"]
    assert "--max-results" in response.json()["error"]
    assert post(limited, {"queries": ["a", "b"], "topk": 3}).status_code == 200


def test_a_body_over_the_limit_is_a_413_whether_its_length_is_declared_or_not(limited):
    body = json.dumps({"queries": ["x" * 40] * 60}).encode()  # ~2.6 KB
    declared = httpx.post(limited + "/retrieve", content=body, timeout=10)
    assert declared.status_code == 413 and "over the limit of 2000" in declared.json()["error"]
    assert f"request body of {len(body)} bytes" in declared.json()["error"]  # refused by its length, before reading
    assert declared.headers["connection"] == "close"
    chunked = httpx.post(limited + "/retrieve", content=iter([body[:1000], body[1000:]]), timeout=10)
    assert chunked.status_code == 413 and "--max-body-mib" in chunked.json()["error"]
    assert post(limited, {"queries": ["river"]}).status_code == 200  # the server is fine


def raw_request(url: str, head: bytes, body: bytes) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=5)
    sock.sendall(head + body)
    return sock


HEAD = b"POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n"


def test_a_stalled_upload_is_answered_408_and_closed(limited):
    sock = raw_request(limited, HEAD, b'{"queries": ["riv')  # 500 bytes announced, 17 sent, then nothing
    try:
        answer = sock.recv(65536)
        assert answer.startswith(b"HTTP/1.1 408") and b"did not arrive within 0.5 s" in answer
    finally:
        sock.close()


def test_a_client_that_disconnects_mid_upload_is_one_quiet_log_line(limited, caplog):
    caplog.set_level(logging.INFO)
    for _ in range(3):
        raw_request(limited, HEAD, b'{"queries": ["riv').close()
    deadline = time.monotonic() + 5
    lines = []
    while time.monotonic() < deadline and len(lines) < 3:
        lines = [r for r in caplog.records if "disconnected before its request arrived whole" in r.getMessage()]
        time.sleep(0.02)
    assert len(lines) == 3 and all(r.exc_info is None for r in lines)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]  # no 500, no traceback
    assert post(limited, {"queries": ["river"]}).status_code == 200
