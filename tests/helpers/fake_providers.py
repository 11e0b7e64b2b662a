"""Fake optimizer-LM providers on loopback for the tests: each API (Gemini, Claude, OpenAI-compatible) as a
`ThreadingHTTPServer` that records what the real SDKs sent and answers what a test scripts, with helpers to build
an `OptimizerLM` against one and to read what it sent.

    server = serve("gemini", Reply(429, headers={"Retry-After": "3"}), Reply())   # the `serve` fixture
    lm = optimizer("gemini", server.base_url)                                     # OptimizerLM, sleeps recorded

`ScriptedOptimizer` is a plainer OpenAI-compatible server for whole training runs: it answers from a list, in turn.
"""

from __future__ import annotations

import json
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from inspo_cli.config import OptimizerConfig
from inspo_cli.instructions.providers.opening import open_optimizer

KEY = "sk-FAKE-inspo-7c1e9b42d0-KEY"  # distinctive, so any leak is found by a substring search
KEY_ENV = "INSPO_TEST_OPTIMIZER_KEY"
ANSWER = "<ins_1> Think, then search. </ins_1>"
PROVIDERS = ["gemini", "anthropic", "openai"]
MODELS = {"gemini": "gemini-test", "anthropic": "claude-test", "openai": "served-model"}
PATHS = {
    "gemini": "/v1beta/models/gemini-test:generateContent",
    "anthropic": "/v1/messages",
    "openai": "/v1/chat/completions",
}
STOPPED_BY_LIMIT = {"gemini": "MAX_TOKENS", "anthropic": "max_tokens", "openai": "length"}  # each API's words


def success_body(
    provider: str, text: str = ANSWER, input_tokens: int = 11, output_tokens: int = 7, truncated: bool = False
) -> dict:
    """A provider's answer; `truncated`: it stopped at the output limit, as each API says so."""
    if provider == "gemini":
        finish = STOPPED_BY_LIMIT[provider] if truncated else "STOP"
        return {
            "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": finish}],
            "usageMetadata": {"promptTokenCount": input_tokens, "candidatesTokenCount": output_tokens},
        }
    if provider == "anthropic":
        return {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": MODELS[provider],
            "content": [{"type": "text", "text": text}],
            "stop_reason": STOPPED_BY_LIMIT[provider] if truncated else "end_turn",
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
        }
    finish = STOPPED_BY_LIMIT[provider] if truncated else "stop"
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": MODELS[provider],
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
        "usage": {"prompt_tokens": input_tokens, "completion_tokens": output_tokens},
    }


EMPTY_BODIES = {
    "gemini": {"candidates": []},
    "openai": {"choices": []},
    "anthropic": {**success_body("anthropic"), "content": []},
}


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # None: the provider's success body; a dict is sent as JSON, a str as text/html
    headers: dict = field(default_factory=dict)
    delay_s: float = 0.0


@dataclass
class SeenRequest:
    path: str
    headers: dict  # lower-cased names
    body: dict


class FakeProvider:
    """One provider's API on 127.0.0.1: answers the scripted replies in order, the last one repeating."""

    def __init__(self, provider: str, replies: list[Reply]):
        self.provider, self.replies, self.requests = provider, list(replies), []
        self.released = threading.Event()  # set on close, so handlers that "hang" return at once
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep pytest output clean
                pass

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                fake.requests.append(
                    SeenRequest(self.path, {k.lower(): v for k, v in self.headers.items()}, json.loads(raw or b"{}"))
                )
                reply = fake.replies[min(len(fake.requests), len(fake.replies)) - 1]
                if reply.delay_s and fake.released.wait(reply.delay_s):
                    return
                body = success_body(fake.provider) if reply.body is None else reply.body
                data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                self.send_response(reply.status)
                self.send_header("content-type", "text/html" if isinstance(body, str) else "application/json")
                self.send_header("content-length", str(len(data)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.handle_error = lambda request, address: None  # clients that timed out close their socket
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.01,), daemon=True)
        self.thread.start()

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}"

    @property
    def base_url(self) -> str:
        return self.root + "/v1" if self.provider == "openai" else self.root  # OpenAI's base URL includes /v1

    def close(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()


def serving():
    """What the `serve` fixture (tests/conftest.py) yields, then closes: start(provider, *replies) -> FakeProvider."""
    servers = []

    def start(provider: str, *replies: Reply) -> FakeProvider:
        servers.append(FakeProvider(provider, list(replies) or [Reply()]))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def optimizer(provider: str, base_url: str, sleeps: list | None = None, **overrides):
    settings = dict(
        provider=provider,
        model=MODELS[provider],
        base_url=base_url,
        api_key_env=KEY_ENV,
        temperature=0.3,
        max_output_tokens=64,
        timeout_s=5.0,
        max_retries=2,
    )
    settings.update(overrides)
    return open_optimizer(OptimizerConfig(**settings), sleep=(sleeps if sleeps is not None else []).append)


def prompt_sent(provider: str, body: dict) -> str:
    if provider == "gemini":
        return body["contents"][0]["parts"][0]["text"]
    return body["messages"][0]["content"]


def gemini_thinking_budget(thinking_config: dict) -> int:
    """google-genai 3.x sends the nested field as `thinking_budget`; the API takes that or `thinkingBudget` (proto3
    JSON accepts both spellings)."""
    [(name, budget)] = thinking_config.items()
    assert name in ("thinking_budget", "thinkingBudget")
    return budget


def key_header_ok(provider: str, headers: dict) -> bool:
    if provider == "gemini":
        return headers.get("x-goog-api-key") == KEY and "authorization" not in headers
    return headers.get("authorization") == f"Bearer {KEY}"  # anthropic >= 2 sends a Bearer token, not x-api-key


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class ScriptedOptimizer:
    """An OpenAI-compatible chat server on loopback that answers request i with answers[i % len(answers)]."""

    def __init__(self, answers: list[str]):
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.answers, self.prompts = list(answers), []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.prompts.append(body["messages"][-1]["content"])
                text = outer.answers[(len(outer.prompts) - 1) % len(outer.answers)]
                reply = json.dumps(
                    {
                        "choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 100, "completion_tokens": 20},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"


def judge_settings(server, tmp_path) -> list[str]:
    """`--set` values for a judge on the OpenAI-compatible fake `server`, with its own cache under `tmp_path`."""
    return [
        "judge.provider=openai",
        "judge.model=served-model",
        f"judge.base_url={server.base_url}",
        f"judge.api_key_env={KEY_ENV}",
        f"judge.cache={tmp_path / 'verdicts.sqlite'}",
        "judge.concurrency=1",
    ]
