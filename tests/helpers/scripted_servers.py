"""A retrieval server on loopback that answers from a script, for the HTTPRetriever tests."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from helpers.fake_retrievers import OverlapRetriever


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
