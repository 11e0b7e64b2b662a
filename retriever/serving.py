"""Serving an app on a socket with this package's connection limits: the retrieval server (`server.py`) and
`inspo view`'s pages use it. Nothing here imports FastAPI (a Starlette app is served the same way), so a command
that serves a small app starts in a fraction of a second.

    sock = bind_socket("127.0.0.1", 8000)    # a busy port or a bad host is a RetrieverError, before anything loads
    run_app(app, sock)                        # until Ctrl-C
    with serve_in_background(app) as url: ... # tests and benchmarks
"""

from __future__ import annotations

import errno
import ipaddress
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from retriever.connections import ConnectionLimits, ConnectionStats, guarded_protocol
from retriever.errors import RetrieverError


def is_loopback(host: str) -> bool:
    """True for addresses only this machine can reach (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve to any interface
        return False


def bind_socket(host: str, port: int) -> socket.socket:
    """Bind (not yet listen on) host:port, or raise a RetrieverError that says why and what to do."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as e:
        raise RetrieverError(
            f"--host {host!r} is not an address of this machine ({e.strerror}); "
            "use 127.0.0.1, or 0.0.0.0 for every interface"
        ) from None
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # restart at once after a stop (TIME_WAIT)
    try:
        sock.bind(address)
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRINUSE:
            raise RetrieverError(
                f"port {port} on {host} is already in use; stop whatever listens there or choose another --port"
            ) from None
        if e.errno == errno.EACCES:
            raise RetrieverError(f"no permission to listen on {host}:{port}; choose a --port above 1023") from None
        raise RetrieverError(f"cannot listen on {host}:{port} ({e.strerror}); check --host and --port") from None
    return sock


def uvicorn_server(app, log_level: str = "warning"):
    import uvicorn

    # No access log: at thousands of requests a second it costs more than the requests themselves.
    # An app not built by create_app (a test's scripted server) is served with the default connection limits
    limits = getattr(app.state, "connection_limits", None) or ConnectionLimits()
    stats = getattr(app.state, "connection_stats", None) or ConnectionStats()
    config = uvicorn.Config(
        app,
        log_level=log_level,
        access_log=False,
        timeout_graceful_shutdown=5,
        http=guarded_protocol(limits, stats),
        timeout_keep_alive=limits.idle_timeout_s,
    )
    return uvicorn.Server(config)


def run_app(app, sock: socket.socket, log_level: str = "warning") -> None:
    """Serve any ASGI app (`inspo view`'s pages) on a socket from `bind_socket` until Ctrl-C, with the limits on
    headers, idle connections and connections this server has."""
    uvicorn_server(app, log_level).run(sockets=[sock])


@contextmanager
def serve_in_background(app, host: str = "127.0.0.1", port: int = 0, startup_timeout_s: float = 10.0) -> Iterator[str]:
    """Run `app` with uvicorn in a daemon thread (tests, benchmarks); yields its base URL, stops on exit."""
    sock = bind_socket(host, port)
    bound_port = sock.getsockname()[1]
    server = uvicorn_server(app)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True, name="uvicorn")
    thread.start()
    deadline = time.monotonic() + startup_timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            sock.close()
            raise RuntimeError(f"the server on {host}:{bound_port} did not start")
        time.sleep(0.005)
    try:
        yield f"http://{host}:{bound_port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
