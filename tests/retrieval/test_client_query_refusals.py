"""Issue 51: what the policy writes into a query is its own to fix (a refused query becomes an error
observation, the rest is searched), while the rest still fails loudly."""

from __future__ import annotations

import orjson
import pytest
from helpers.fake_retrievers import OverlapRetriever
from helpers.scripted_servers import scripted_server

from inspo_cli.agent.tools.base import Observation
from inspo_cli.agent.tools.search import SearchTool
from retriever.client import HTTPRetriever
from retriever.errors import QueryRefused, RetrieverError
from retriever.server import create_app, serve_in_background

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
