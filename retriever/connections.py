"""Connection-level limits for the retrieval server: the request head is capped in size and time, idle connections
are closed, and the number of open connections is bounded, so a few hostile clients cannot take its memory or its
file descriptors.

uvicorn, as the server runs it (its C parser httptools, chosen whenever it is installed), enforces none of this:
`h11_max_incomplete_event_size` applies only to its pure-Python h11 parser, a 200 MiB header was read whole (server
RSS 156 -> 409 MiB, 78 s of quadratic concatenation); `timeout_keep_alive` is armed only after a response, so a
connection that never completes a request, or trickles its header a byte at a time, stays open forever; and
`limit_concurrency` answers 503 to requests but leaves the connections (and their descriptors) open. So the server
runs uvicorn's httptools protocol with these limits added (`guarded_protocol`):

- the request line and headers: refused with 431 once more than `max_header_bytes` of a head have arrived without its
  end, and when the head's fields add up to more. Counted per read, the server holds at most the limit plus one read
  (256 KiB) of a head;
- a head must arrive whole within `header_timeout_s` of its first byte (408 after), however slowly it trickles;
- a connection with no request under way (new, or kept alive after a response) is closed after `idle_timeout_s`;
- a request whose response is complete while its body is still arriving closes the connection (the rest of the body
  cannot be answered, and trickling it would keep the connection open);
- past `max_connections` open connections, a new one is answered 503 and closed at once.

Refusals answer with the server's one-line JSON `{"error": ...}` and `Connection: close`; they are counted in
`/health` (`connections`), never logged one line each (a flood would flood the log).
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass

import orjson

DEFAULT_MAX_HEADER_BYTES = 64 << 10  # 4x nginx's 8 KiB header buffer; Search-R1 clients send ~200 bytes
DEFAULT_HEADER_TIMEOUT_S = 10.0
DEFAULT_IDLE_TIMEOUT_S = 5.0  # uvicorn's own keep-alive timeout
DEFAULT_MAX_CONNECTIONS = 1024

_REASONS = {408: b"Request Timeout", 431: b"Request Header Fields Too Large", 503: b"Service Unavailable"}


@dataclass(frozen=True)
class ConnectionLimits:
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES
    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    max_connections: int = DEFAULT_MAX_CONNECTIONS

    def __post_init__(self):
        # Callers (the CLI) check their options with their own messages; this guards direct use of the library.
        for name in ("max_header_bytes", "max_connections"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        for name in ("header_timeout_s", "idle_timeout_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 86400:
                raise ValueError(f"{name} must be a number of seconds in (0, 86400], got {value!r}")


@dataclass
class ConnectionStats:
    open: int = 0
    refused_over_capacity: int = 0
    refused_large_header: int = 0
    closed_slow_header: int = 0
    closed_idle: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


def _raw_response(status: int, message: str) -> bytes:
    body = orjson.dumps({"error": message})
    return (
        b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n"
        % (status, _REASONS[status], len(body))
    ) + body


class _Refused(Exception):
    """Raised inside a parser callback to stop parsing; the refusal itself is in `_refusal`."""


def guarded_protocol(limits: ConnectionLimits, stats: ConnectionStats) -> type[asyncio.Protocol]:
    """uvicorn's httptools protocol class with `limits` enforced and counted in `stats` (see the module docstring).

    Built on uvicorn internals (`HttpToolsProtocol` and its callbacks); tests/retrieval/test_server.py exercises every
    one of them over real sockets, so a uvicorn release that changes them fails the tests rather than the limits."""
    import httptools
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    max_head, header_timeout = limits.max_header_bytes, limits.header_timeout_s
    too_large = (
        f"the request line and headers are over the limit of {max_head} bytes; send shorter headers "
        "(or restart the server with a larger --max-header-kib)"
    )
    too_slow = (
        f"the request line and headers did not arrive within {header_timeout:g} s; send them whole "
        "(or restart the server with a larger --header-timeout-s)"
    )
    busy = (
        f"the server has {limits.max_connections} connections open, its limit; retry later, reuse "
        "connections (or restart the server with a larger --max-connections)"
    )

    class GuardedHttpToolsProtocol(HttpToolsProtocol):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self._head_open = False  # between a request's first byte and the end of its headers
            self._between = True  # between requests: the next byte starts one
            self._head_bytes = 0
            self._begins = 0
            self._head_timer: asyncio.TimerHandle | None = None
            self._refusal: tuple[int, str] | None = None
            self._counted = False

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            stats.open += 1
            self._counted = True
            if len(self.connections) > limits.max_connections:
                stats.refused_over_capacity += 1
                self._answer_and_close(503, busy)
                return
            # uvicorn arms its keep-alive timer only after a response: a connection that never sends is idle too
            self.timeout_keep_alive_task = self.loop.call_later(
                self.timeout_keep_alive, self.timeout_keep_alive_handler
            )

        def connection_lost(self, exc) -> None:
            if self._counted:
                stats.open -= 1
                self._counted = False
            self._cancel_head_timer()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            # uvicorn's data_received, with the head counted: a head that began at the start of this read counts
            # all of it; one that began inside it counts from the next read (never over-counted, so a pipelined
            # request after a large body is not refused; at most one read under-counted).
            if self.transport.is_closing():
                return
            self._unset_keepalive_if_required()
            open_at_start, between_at_start = self._head_open, self._between
            self._begins = 0
            try:
                self.parser.feed_data(data)
            except httptools.HttpParserUpgrade:
                if self._should_upgrade():
                    self.handle_websocket_upgrade()
                else:
                    self._unsupported_upgrade_warning()
                return
            except httptools.HttpParserError:
                if self._refusal is not None:
                    self._answer_and_close(*self._refusal)
                    return
                msg = "Invalid HTTP request received."
                self.logger.warning(msg)
                self.send_400_response(msg)
                return
            if self._head_open:
                if (open_at_start and self._begins == 0) or (between_at_start and self._begins == 1):
                    self._head_bytes += len(data)
                if self._head_bytes > max_head:
                    stats.refused_large_header += 1
                    self._answer_and_close(431, too_large)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._begins += 1
            self._head_open, self._between, self._head_bytes = True, False, 0
            self._cancel_head_timer()
            self._head_timer = self.loop.call_later(header_timeout, self._head_timed_out)

        def on_headers_complete(self) -> None:
            self._head_open = False
            self._cancel_head_timer()
            # The fields of a head that arrived in one read were not counted above: a lower bound of its size
            if len(self.url) + sum(len(name) + len(value) for name, value in self.headers) > max_head:
                stats.refused_large_header += 1
                self._refusal = (431, too_large)
                raise _Refused
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            self._between = True
            super().on_message_complete()

        def on_response_complete(self) -> None:
            if self.cycle is not None and self.cycle.more_body and not self.transport.is_closing():
                self.transport.close()  # answered before its body arrived: the rest cannot be answered
            super().on_response_complete()

        def timeout_keep_alive_handler(self) -> None:
            if not self.transport.is_closing():
                stats.closed_idle += 1
            super().timeout_keep_alive_handler()

        def _head_timed_out(self) -> None:
            self._head_timer = None
            if self._head_open and not self.transport.is_closing():
                stats.closed_slow_header += 1
                self._answer_and_close(408, too_slow)

        def _cancel_head_timer(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _answer_and_close(self, status: int, message: str) -> None:
            """Answer `status` unless another response is under way on this connection (then only close)."""
            self._cancel_head_timer()
            self._unset_keepalive_if_required()
            if self.transport.is_closing():
                return
            if self.cycle is None or self.cycle.response_complete:
                self.transport.write(_raw_response(status, message))
            self.transport.close()

    return GuardedHttpToolsProtocol
