"""`inspo view`'s server: the site's pages over HTTP, GET and HEAD only, on 127.0.0.1 unless told otherwise. A page
that fails to render is a 500 with one line, never a traceback in the browser.

Starlette (FastAPI's core, shipped with it) rather than FastAPI itself: the pages need no request validation, and
FastAPI's import (pydantic's models) costs 0.6 s of the 2 s a run's first page may take to open."""

from __future__ import annotations

import sys

from inspo_cli.viewer.html import CSP
from inspo_cli.viewer.site import Site

HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def make_app(site: Site):
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse, Response
    from starlette.routing import Route

    def serve(request):
        path = request.path_params["path"]
        try:
            found = site.get(path)
        except Exception as error:  # a page's bug or a file that changed under it: one line, the server goes on
            print(f"inspo view: /{path}: {type(error).__name__}: {error}", file=sys.stderr)
            return PlainTextResponse(f"this page failed: {type(error).__name__}: {error}", 500, headers=HEADERS)
        if found is None:
            return PlainTextResponse("not found", 404, headers=HEADERS)
        return Response(found.body, media_type=found.content_type, headers=HEADERS)

    return Starlette(routes=[Route("/{path:path}", serve, methods=["GET", "HEAD"])])


def serve(site: Site, sock) -> None:
    """Serve the site on `sock` (`retriever.server.bind_socket`) until Ctrl-C."""
    from retriever.serving import run_app

    run_app(make_app(site), sock)
