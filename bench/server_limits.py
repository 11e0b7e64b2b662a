"""The retrieval server under abuse, with its default limits: what the largest allowed answer costs, how long small
requests wait behind it, what an oversized upload or header does to the server's memory, how a stalled upload or a
header sent a byte at a time ends, how idle connections are closed and connections past the limit turned away,
and how much log aborted uploads write.

    python bench/server_limits.py

`inspo serve-retriever` (BM25 over the bundled world, default limits) runs in its own process on loopback. Writes
bench/results/server_limits.json and the "Retrieval server limits" section of bench/README.md.
"""

from __future__ import annotations

import os
import selectors
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, machine, update_readme_section  # noqa: E402
from retriever_http import free_port, load_questions, start_server  # noqa: E402

from inspo_cli.jsonio import atomic_write_json  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "server_limits.json"
CORPUS = ROOT / "data" / "world" / "corpus.jsonl"


def start(port: int, log_path: Path) -> subprocess.Popen:
    return start_server(str(CORPUS), port, stderr=open(log_path, "wb"))


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024


def small_latencies(url: str, questions: list[str], stop: threading.Event, out: list[float]) -> None:
    with httpx.Client(timeout=120) as client:
        i = 0
        while not stop.is_set():
            started = time.perf_counter()
            client.post(url, json={"queries": [questions[i % len(questions)]], "topk": 3})
            out.append((time.perf_counter() - started) * 1000)
            i += 1


def largest_answer(url: str, questions: list[str], limits: dict) -> dict:
    """The largest request the defaults allow (max_results passages), alone, then with a small-request client."""
    topk = 8
    n = limits["max_results"] // topk
    body = {"queries": [questions[i % len(questions)] for i in range(n)], "topk": topk, "return_scores": True}
    with httpx.Client(timeout=300) as client:
        idle: list[float] = []
        stop = threading.Event()
        small = threading.Thread(target=small_latencies, args=(url, questions, stop, idle))
        small.start()
        time.sleep(2.0)
        stop.set()
        small.join()
        started = time.perf_counter()
        answer = client.post(url, json=body)
        alone_s = time.perf_counter() - started
        during: list[float] = []
        stop = threading.Event()
        small = threading.Thread(target=small_latencies, args=(url, questions, stop, during))
        small.start()
        time.sleep(0.2)
        started = time.perf_counter()
        client.post(url, json=body)
        together_s = time.perf_counter() - started
        stop.set()
        small.join()
    over = httpx.post(url, json={**body, "topk": topk + 1}, timeout=60)  # one passage more per query
    return {
        "queries": n,
        "topk": topk,
        "status": answer.status_code,
        "answer_mb": round(len(answer.content) / 1e6, 1),
        "seconds_alone": round(alone_s, 2),
        "seconds_with_small_requests": round(together_s, 2),
        "small_ms_idle": {"p50": round(statistics.median(idle), 1), "max": round(max(idle), 1), "n": len(idle)},
        "small_ms_during": {"p50": round(statistics.median(during), 1), "max": round(max(during), 1), "n": len(during)},
        "one_more_query": {"status": over.status_code, "error": over.json().get("error")},
    }


def oversized_upload(port: int, pid: int, mib: int = 400) -> dict:
    """`mib` MiB sent chunked (no Content-Length, so the server must count), then declared up front."""
    before = rss_mib(pid)
    peak = before
    chunk = b"x" * (1 << 20)
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(b"POST /retrieve HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
    sent = 0
    try:
        for _ in range(mib):
            sock.sendall(b"100000\r\n" + chunk + b"\r\n")
            sent += 1
            peak = max(peak, rss_mib(pid))
    except OSError:
        pass  # the server answered 413 and closed
    answer = sock.recv(4096).split(b"\r\n", 1)[0].decode()
    sock.close()
    time.sleep(0.5)
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(f"POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Length: {mib << 20}\r\n\r\n".encode())
    declared = sock.recv(4096).split(b"\r\n", 1)[0].decode()
    sock.close()
    return {
        "sent_mib_before_refusal": sent,
        "answer": answer,
        "rss_mib_before": round(before),
        "rss_mib_peak": round(max(peak, rss_mib(pid))),
        "declared_answer": declared,
    }


def stalled_upload(port: int) -> dict:
    sock = socket.create_connection(("127.0.0.1", port), timeout=120)
    sock.sendall(b'POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n{"queries": [')
    started = time.perf_counter()
    answer = sock.recv(4096).split(b"\r\n", 1)[0].decode()
    sock.close()
    return {"answer": answer, "seconds": round(time.perf_counter() - started, 1)}


def huge_header(port: int, pid: int, limits: dict, mib: int = 200) -> dict:
    """A `mib` MiB header pushed as fast as the socket takes it, then a head just over the limit sent and left
    waiting (a client that waits for the answer gets it; one still pushing is reset when the server closes)."""
    before = rss_mib(pid)
    peak = before
    chunk = b"a" * (1 << 20)
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    started = time.perf_counter()
    sent = 0
    try:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ")
        for _ in range(mib):
            sock.sendall(chunk)
            sent += 1
            peak = max(peak, rss_mib(pid))
        sock.sendall(b"\r\n\r\n")
        outcome = sock.recv(4096).split(b"\r\n", 1)[0].decode() or "closed"
    except OSError as e:
        outcome = f"connection closed by the server ({type(e).__name__})"
    seconds = time.perf_counter() - started
    sock.close()
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * limits["max_header_bytes"])
    waiting = sock.recv(4096).split(b"\r\n", 1)[0].decode()
    sock.close()
    return {
        "header_mib": mib,
        "pushed_mib_before_refusal": sent,
        "outcome": outcome,
        "seconds": round(seconds, 3),
        "rss_mib_before": round(before),
        "rss_mib_peak": round(max(peak, rss_mib(pid))),
        "just_over_the_limit_answer": waiting,
    }


def slow_header(port: int, interval_s: float = 1.0) -> dict:
    """A head sent one byte every `interval_s` (never idle, never whole): how long until the server drops it."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=interval_s)
    started = time.perf_counter()
    sent, answer = 0, b""
    for byte in b"GET /health HTTP/1.1\r\n" + b"X" * 1000:
        try:
            sock.sendall(bytes([byte]))
            sent += 1
            answer = sock.recv(4096)
            break
        except TimeoutError:
            continue
        except OSError:
            break
    seconds = time.perf_counter() - started
    sock.close()
    return {
        "interval_s": interval_s,
        "bytes_sent": sent,
        "seconds_until_dropped": round(seconds, 1),
        "answer": answer.split(b"\r\n", 1)[0].decode() or "closed",
    }


def idle_connections(port: int, n: int) -> dict:
    """`n` connections opened at once that never send: when each is closed, what the ones past the limit are told,
    and how fast /health answers meanwhile."""
    selector = selectors.DefaultSelector()
    started = time.perf_counter()
    socks = []
    for _ in range(n):
        sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ, [b"", time.perf_counter()])  # [received, opened at]
        socks.append(sock)
    open_s = time.perf_counter() - started
    with httpx.Client(timeout=30) as client:
        started = time.perf_counter()
        during = client.get(f"http://127.0.0.1:{port}/health")
        health_ms = (time.perf_counter() - started) * 1000
    ended: list[tuple[float, bytes]] = []  # (seconds after its opening, first line of what the server sent)
    deadline = time.perf_counter() + 120
    while len(ended) < n and time.perf_counter() < deadline:
        for key, _ in selector.select(timeout=1.0):
            try:
                data = key.fileobj.recv(65536)
            except ConnectionResetError:
                data = b""
            if data:
                key.data[0] += data
                continue
            ended.append((time.perf_counter() - key.data[1], key.data[0].split(b"\r\n", 1)[0]))
            selector.unregister(key.fileobj)
    for sock in socks:
        sock.close()
    idle = sorted(t for t, line in ended if not line)
    after = httpx.get(f"http://127.0.0.1:{port}/health", timeout=30).json()["connections"]
    return {
        "opened": n,
        "seconds_to_open": round(open_s, 2),
        "answered_503": sum(1 for _, line in ended if line.startswith(b"HTTP/1.1 503")),
        "closed_idle": len(idle),
        "never_closed": n - len(ended),
        "idle_closed_after_s": {"first": round(idle[0], 2), "last": round(idle[-1], 2)} if idle else None,
        "health_status_while_held": during.status_code,
        "health_ms_while_held": round(health_ms, 1),
        "open_while_held": during.json()["connections"]["open"] if during.status_code == 200 else None,
        "counters_after": after,
    }


def aborted_uploads(port: int, log_path: Path, n: int = 300) -> dict:
    before = log_path.stat().st_size
    for _ in range(n):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        sock.sendall(b'POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{"queries": ["a')
        sock.close()
    time.sleep(2.0)
    text = log_path.read_text(errors="replace")[before:]
    return {
        "aborted": n,
        "log_bytes": len(text.encode()),
        "log_lines": len(text.splitlines()),
        "tracebacks": text.count("Traceback"),
    }


def main() -> None:
    questions = load_questions()
    port = free_port()
    log_path = ROOT / "bench" / "results" / ".server_limits.log"
    server = start(port, log_path)
    url = f"http://127.0.0.1:{port}/retrieve"
    try:
        limits = httpx.get(f"http://127.0.0.1:{port}/health").json()["limits"]
        results = {
            "benchmark": "server_limits",
            "machine": machine(("fastapi", "uvicorn", "httptools", "orjson", "bm25s")),
            "load_average_1m": round(os.getloadavg()[0], 1),
            "limits": limits,
        }
        results["largest_answer"] = largest_answer(url, questions, limits)
        print("largest answer:", results["largest_answer"])
        results["oversized_upload"] = oversized_upload(port, server.pid)
        print("oversized upload:", results["oversized_upload"])
        results["stalled_upload"] = stalled_upload(port)
        print("stalled upload:", results["stalled_upload"])
        results["huge_header"] = huge_header(port, server.pid, limits)
        print("huge header:", results["huge_header"])
        results["slow_header"] = slow_header(port)
        print("slow header:", results["slow_header"])
        results["idle_connections"] = idle_connections(port, limits["max_connections"] - 24)
        print("idle connections:", results["idle_connections"])
        results["over_capacity"] = idle_connections(port, limits["max_connections"] + 76)
        print("past the connection limit:", results["over_capacity"])
        results["aborted_uploads"] = aborted_uploads(port, log_path)
        print("aborted uploads:", results["aborted_uploads"])
        results["alive_after"] = httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200
    finally:
        server.terminate()
        server.wait(timeout=10)
        log_path.unlink(missing_ok=True)
    atomic_write_json(RESULTS, results)
    write_section(results)


def write_section(r: dict) -> None:
    big, up, stall, ab = r["largest_answer"], r["oversized_upload"], r["stalled_upload"], r["aborted_uploads"]
    head, slow, idle, over = r["huge_header"], r["slow_header"], r["idle_connections"], r["over_capacity"]
    m = r["machine"]
    lim = r["limits"]
    section = f"""## Retrieval server limits (`python bench/server_limits.py`)

`inspo serve-retriever` with its default limits (`--max-queries {lim["max_queries"]}`, \
`--max-results {lim["max_results"]}`
passages per answer, `--max-body-mib {lim["max_body_bytes"] / (1 << 20):g}`, \
`--read-timeout-s {lim["read_timeout_s"]:g}`,
`--max-batch {lim["max_batch"]}`, `--max-header-kib {lim["max_header_bytes"] / 1024:g}`, \
`--header-timeout-s {lim["header_timeout_s"]:g}`,
`--idle-timeout-s {lim["idle_timeout_s"]:g}`, `--max-connections {lim["max_connections"]}`), BM25 over the world, \
in its own process on loopback; {m["cpu_cores"]} CPU cores
({m["cpu"]}), load average {r["load_average_1m"]:g} when it started (timings, not sizes, grow with it). Results:
`bench/results/server_limits.json`.

| case | what happened |
|---|---|
| the largest allowed answer ({big["queries"]} queries x topk {big["topk"]}) | HTTP {big["status"]}, \
{big["answer_mb"]} MB, {big["seconds_alone"]} s alone |
| the same with topk {big["topk"] + 1} | HTTP {big["one_more_query"]["status"]}: "{big["one_more_query"]["error"]}" |
| 1-query requests while it is served | p50 {big["small_ms_during"]["p50"]} ms, max {big["small_ms_during"]["max"]} ms \
({big["small_ms_during"]["n"]} requests; idle: p50 {big["small_ms_idle"]["p50"]} ms, \
max {big["small_ms_idle"]["max"]} ms) |
| a 400 MiB upload, chunked (no Content-Length) | `{up["answer"]}` once {lim["max_body_bytes"] >> 20} MiB had arrived \
(the client had pushed {up["sent_mib_before_refusal"]} MiB into the socket); server RSS {up["rss_mib_before"]} → \
{up["rss_mib_peak"]} MiB |
| the same, declared in Content-Length | `{up["declared_answer"]}` before reading a byte of it |
| an upload that stalls | `{stall["answer"]}` after {stall["seconds"]} s |
| a {head["header_mib"]} MiB header, pushed as fast as the socket takes it | \
{head["outcome"]} after {head["pushed_mib_before_refusal"]} MiB had been pushed into the socket, \
in {head["seconds"]} s; server RSS {head["rss_mib_before"]} → {head["rss_mib_peak"]} MiB |
| a head just over {lim["max_header_bytes"] // 1024} KiB, the client then waiting | \
`{head["just_over_the_limit_answer"]}` |
| a head sent one byte every {slow["interval_s"]:g} s | `{slow["answer"]}` after {slow["seconds_until_dropped"]} s \
({slow["bytes_sent"]} bytes) |
| {idle["opened"]} connections that never send | \
each closed {idle["idle_closed_after_s"]["first"]}–{idle["idle_closed_after_s"]["last"]} s after it opened \
({idle["never_closed"]} left open); `/health` meanwhile: HTTP {idle["health_status_while_held"]} in \
{idle["health_ms_while_held"]} ms, {idle["open_while_held"]} open |
| {over["opened"]} such connections (past `--max-connections`) | {over["answered_503"]} answered 503 and closed at \
once, {over["closed_idle"]} closed idle {over["idle_closed_after_s"]["first"]}–{over["idle_closed_after_s"]["last"]} s \
after they opened; a new client meanwhile: HTTP {over["health_status_while_held"]} |
| {ab["aborted"]} uploads aborted mid-body | {ab["log_lines"]} log lines, {ab["log_bytes"]:,} bytes, \
{ab["tracebacks"]} tracebacks |

Before these limits (issue 17's measurements on the same kind of machine): a 400 MB body took the server to 0.9 GB,
the largest request the defaults allowed (4,096 queries x topk 100) returned 163 MB while small queries waited 14 s
behind it, a stalled upload was never timed out, and 300 aborted uploads wrote 2.1 MB of tracebacks. Before the
connection limits (issue 37, this machine): a 200 MiB header was read whole (RSS 156 → 409 MiB, 78 s) and answered
200, and connections that sent nothing or a partial header were never closed."""
    update_readme_section("server_limits", section)


if __name__ == "__main__":
    main()
