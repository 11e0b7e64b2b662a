"""`inspo view` as users run it: served over real HTTP on loopback (read-only, GET only, security headers, no way out
of the runs it was given), `--export` writing the same pages, and bad input as one line."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from helpers.cli_helpers import assert_one_line_error, invoke
from helpers.view_runs import make_view_run

from inspo_cli.viewer.server import make_app
from inspo_cli.viewer.site import Site
from inspo_cli.viewer.sources import discover
from retriever.serving import serve_in_background


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return make_view_run(tmp_path / "runs")


def raw_get(base: str, target: str) -> bytes:
    """A request line sent as written (an HTTP client would normalise `..` away)."""
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return data


def test_served_pages_carry_the_security_headers_and_only_get_is_allowed(run: Path, tmp_path: Path):
    (tmp_path / "secret.png").write_bytes(b"\x89PNG secret")
    with serve_in_background(make_app(Site(discover([run])))) as base:
        page = httpx.get(f"{base}/run/demo/trajectories/step-1-1.html")
        assert page.status_code == 200 and "world:q0" in page.text
        assert "script-src 'self'" in page.headers["content-security-policy"]
        assert page.headers["x-content-type-options"] == "nosniff"
        assert httpx.get(f"{base}/").status_code == 200
        assert httpx.get(f"{base}/static/view.js").headers["content-type"].startswith("text/javascript")
        assert httpx.head(f"{base}/run/demo/index.html").status_code == 200
        assert httpx.post(f"{base}/run/demo/index.html").status_code == 405
        for target in (
            "/run/demo/files/plots/../../../../secret.png",
            "/run/demo/files/plots/%2e%2e/%2e%2e/x.png",
            "/../../etc/passwd",
            "/run/demo/files/plots/..%2f..%2frun.json",
            "/run/demo/run.json",
        ):
            answer = raw_get(base, target)
            assert answer.split(b"\r\n")[0].split(b" ")[1] in (b"404", b"400"), (target, answer[:80])
            assert b"secret" not in answer and b'"seed"' not in answer


def test_a_page_that_fails_is_one_line_and_the_server_goes_on(run: Path, monkeypatch):
    site = Site(discover([run]))
    original = site.get

    def failing(path: str):
        if "instructions" in path:
            raise ValueError("boom")
        return original(path)

    monkeypatch.setattr(site, "get", failing)
    with serve_in_background(make_app(site)) as base:
        answer = httpx.get(f"{base}/run/demo/instructions.html")
        assert answer.status_code == 500 and answer.text == "this page failed: ValueError: boom"
        assert httpx.get(f"{base}/run/demo/index.html").status_code == 200


def test_export_writes_every_page_and_replaces_only_an_earlier_export(run: Path, tmp_path: Path):
    out = tmp_path / "site"
    result = invoke("view", run, "--export", out)
    assert result.exit_code == 0, result.output
    assert (out / "run/demo/trajectories/step-3-1.html").is_file() and (out / "static/view.js").is_file()
    assert (out / "compare/demo~2~demo~4.html").is_file()
    page = (out / "run/demo/trajectories/step-3-1.html").read_text()
    assert 'href="../../../static/view.css"' in page
    before = sorted(p.relative_to(run) for p in run.rglob("*"))
    assert invoke("view", run, "--export", out).exit_code == 0  # an earlier export is replaced
    assert sorted(p.relative_to(run) for p in run.rglob("*")) == before  # nothing written into the run
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    assert_one_line_error(invoke("view", run, "--export", mine), "not an earlier export")
    assert (mine / "notes.txt").read_text() == "keep me"
    assert_one_line_error(invoke("view", run, "--export", run / "site"), "inspo view only reads")
    assert not (run / "site").exists()


def test_an_export_cut_short_leaves_the_earlier_one_whole(run: Path, tmp_path: Path, monkeypatch):
    out = tmp_path / "site"
    assert invoke("view", run, "--export", out).exit_code == 0
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    original, served = Site.get, []

    def interrupted(self, path):
        if len(served) == 5:
            raise KeyboardInterrupt
        served.append(path)
        return original(self, path)

    monkeypatch.setattr(Site, "get", interrupted)
    with pytest.raises(KeyboardInterrupt):
        from inspo_cli.viewer.export import export_site

        export_site(Site(discover([run])), out)
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs", "site"]  # no half-written sibling left


def test_bad_input_is_one_line(tmp_path: Path, run: Path):
    assert_one_line_error(invoke("view", tmp_path / "nowhere"), "does not exist")
    assert_one_line_error(invoke("view", run, "--port", 70000), "--port is 70000")
    (tmp_path / "file").write_text("x")
    assert_one_line_error(invoke("view", run, "--export", tmp_path / "file/site"), "--export", "file/site")
    (tmp_path / "empty").mkdir()
    assert_one_line_error(invoke("view", tmp_path / "empty"), "neither a run")


def _start(args: list[str]) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "inspo_cli", "view", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    line = process.stdout.readline()
    return process, line


def test_it_binds_loopback_by_default_and_warns_when_told_otherwise(run: Path):
    process, line = _start([str(run), "--port", "0"])
    try:
        assert " at http://127.0.0.1:" in line, line
        url = line.split(" at ")[1].split()[0]
        deadline = time.monotonic() + 20
        while True:
            try:
                assert httpx.get(f"{url}run/demo/index.html").status_code == 200
                break
            except httpx.ConnectError:
                assert time.monotonic() < deadline
                time.sleep(0.1)
    finally:
        process.terminate()
        process.wait(timeout=20)
    process, line = _start([str(run), "--port", "0", "--host", "0.0.0.0"])
    try:
        assert " at http://127.0.0.1:" in line
    finally:
        process.terminate()
        _, err = process.communicate(timeout=20)
    assert "warning: listening on 0.0.0.0: anyone who can reach this machine can read these runs" in " ".join(
        err.split()
    )
