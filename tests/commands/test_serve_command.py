"""`inspo serve-retriever` as users run it: options reach the server, a busy port is a one-line error, and the
real command serves a corpus over HTTP."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import httpx
import pytest
import typer
from helpers.cli_helpers import assert_one_line_error
from typer.testing import CliRunner

import retriever.server
from inspo_cli.commands.serve import serve_retriever
from retriever.client import HTTPRetriever

app = typer.Typer()
app.command("serve-retriever")(serve_retriever)


@app.callback()
def _group() -> None:  # keeps `serve-retriever` a subcommand, as in the real CLI
    pass


runner = CliRunner()
CORPUS = "data/world/corpus.jsonl"


def invoke(*args):
    return runner.invoke(app, ["serve-retriever", *map(str, args)])


@pytest.fixture
def captured(monkeypatch):
    """Replace uvicorn's serve with a recorder; yields what the command passed to it."""
    calls = {}

    def fake_serve(retriever, host, port, **kwargs):
        calls.update(retriever=retriever, host=host, port=port, **kwargs)

    monkeypatch.setattr(retriever.server, "serve", fake_serve)
    return calls


def test_options_reach_the_server_and_the_url_is_printed(repo_root, captured, monkeypatch):
    monkeypatch.chdir(repo_root)
    result = invoke(
        "--index", CORPUS, "--port", 0, "--topk", 5, "--max-batch", 64, "--batch-window-ms", 1.5, "--workers", 2
    )
    assert result.exit_code == 0, result.output
    port = captured["port"]
    assert captured["host"] == "127.0.0.1" and port > 0
    assert (captured["default_topk"], captured["max_batch"], captured["batch_window_ms"], captured["workers"]) == (
        5,
        64,
        1.5,
        2,
    )
    assert captured["index_info"]["passages"] == 3810
    assert f"http://127.0.0.1:{port}/retrieve" in result.stdout
    assert "curl -s" in result.stdout and '"topk": 5' in result.stdout
    assert "warning" not in result.stderr


def test_connection_limits_reach_the_server(repo_root, captured, monkeypatch):
    monkeypatch.chdir(repo_root)
    result = invoke(
        "--index",
        CORPUS,
        "--port",
        0,
        "--max-header-kib",
        8,
        "--header-timeout-s",
        2.5,
        "--idle-timeout-s",
        0.5,
        "--max-connections",
        50,
    )
    assert result.exit_code == 0, result.output
    assert (
        captured["max_header_bytes"],
        captured["header_timeout_s"],
        captured["idle_timeout_s"],
        captured["max_connections"],
    ) == (8192, 2.5, 0.5, 50)
    defaults = invoke("--index", CORPUS, "--port", 0)
    assert defaults.exit_code == 0 and (captured["max_header_bytes"], captured["max_connections"]) == (65536, 1024)


def test_a_low_descriptor_limit_is_raised_or_warned_about(repo_root, captured, monkeypatch):
    """A soft `ulimit -n` below --max-connections is raised up to the hard limit; short of it, one warning."""
    import resource

    monkeypatch.chdir(repo_root)
    set_to = []
    monkeypatch.setattr(resource, "getrlimit", lambda which: (256, 4096))
    monkeypatch.setattr(resource, "setrlimit", lambda which, limits: set_to.append(limits))
    result = invoke("--index", CORPUS, "--port", 0, "--max-connections", 1000)
    assert result.exit_code == 0 and set_to == [(1064, 4096)] and "warning" not in result.stderr
    set_to.clear()
    result = invoke("--index", CORPUS, "--port", 0, "--max-connections", 5000)
    assert result.exit_code == 0 and set_to == [(4096, 4096)]
    assert "warning:" in result.stderr and "may open 4096 files" in result.stderr


def test_a_non_loopback_host_prints_a_warning(repo_root, captured, monkeypatch):
    monkeypatch.chdir(repo_root)
    # bind loopback whatever the flag says: the test must not open a port to the network
    monkeypatch.setattr(
        retriever.server, "bind_socket", lambda host, port: retriever.server.socket.create_server(("127.0.0.1", 0))
    )
    result = invoke("--index", CORPUS, "--host", "0.0.0.0")
    assert result.exit_code == 0, result.output
    assert "warning:" in result.stderr and "no authentication" in result.stderr


def test_a_busy_port_is_a_one_line_error(repo_root, monkeypatch):
    monkeypatch.chdir(repo_root)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = invoke("--index", CORPUS, "--port", port)
    assert_one_line_error(result, f"port {port} on 127.0.0.1 is already in use", "--port")


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--index", "no/such/index"], "--index no/such/index does not exist"),
        (["--index", CORPUS, "--topk", 0], "--topk is 0"),
        (["--index", CORPUS, "--topk", 20, "--max-topk", 10], "--topk 20 is above --max-topk 10"),
        (["--index", CORPUS, "--port", 70000], "--port is 70000"),
        (["--index", CORPUS, "--batch-window-ms", -1], "--batch-window-ms is -1"),
        (["--index", CORPUS, "--batch-window-ms", "nan"], "--batch-window-ms is nan"),
        (["--index", CORPUS, "--max-body-mib", "inf"], "--max-body-mib is inf"),
        (["--index", CORPUS, "--max-body-mib", "1e-9"], "--max-body-mib is 1e-09"),
        (["--index", CORPUS, "--max-header-kib", 0], "--max-header-kib is 0.0; use a finite number from 1 to 1024"),
        (["--index", CORPUS, "--max-header-kib", -4], "--max-header-kib is -4.0"),
        (["--index", CORPUS, "--max-header-kib", 1e6], "--max-header-kib is 1000000.0"),
        (["--index", CORPUS, "--max-header-kib", "nan"], "--max-header-kib is nan"),
        (["--index", CORPUS, "--header-timeout-s", 0], "--header-timeout-s is 0.0"),
        (["--index", CORPUS, "--header-timeout-s", "inf"], "--header-timeout-s is inf"),
        (["--index", CORPUS, "--header-timeout-s", -1], "--header-timeout-s is -1.0"),
        (["--index", CORPUS, "--idle-timeout-s", "nan"], "--idle-timeout-s is nan"),
        (
            ["--index", CORPUS, "--idle-timeout-s", 1e12],
            "--idle-timeout-s is 1000000000000.0; use a finite number from",
        ),
        (["--index", CORPUS, "--idle-timeout-s", 0], "--idle-timeout-s is 0.0"),
        (["--index", CORPUS, "--max-connections", 0], "--max-connections is 0; use 1 or more"),
        (["--index", CORPUS, "--max-connections", -3], "--max-connections is -3"),
        (["--index", CORPUS, "--max-connections", 10**12], "--max-connections is 1000000000000; use at most"),
        (["--index", CORPUS, "--workers", 10**20], "--workers is 100000000000000000000; use at most 1024"),  # hung
    ],
)
def test_bad_options_are_one_line_errors(repo_root, monkeypatch, args, fragment):
    monkeypatch.chdir(repo_root)
    assert_one_line_error(invoke(*args), fragment)


def test_the_real_command_serves_a_corpus(repo_root):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code = (
        "from pathlib import Path; from inspo_cli.commands.serve import serve_retriever; "
        f"serve_retriever(index=Path({CORPUS!r}), port={port})"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], cwd=repo_root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).json()
                break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
                time.sleep(0.05)
        assert health["index"]["passages"] == 3810 and health["index"]["kind"].startswith("bm25")
        with HTTPRetriever(f"http://127.0.0.1:{port}") as client:
            hits = client.search(["Who led Sontania when Brakune Kedahl was born?"], 3)
        assert len(hits[0]) == 3 and all(p.id.startswith("w") and p.score > 0 for p in hits[0])
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=10)
    assert f"http://127.0.0.1:{port}/retrieve" in out
