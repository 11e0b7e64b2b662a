"""The retrieval server under abuse, with its default limits: what the largest allowed answer costs, how long small
requests wait behind it, what an oversized upload does to the server's memory, how a stalled upload ends, and how
much log aborted uploads write.

    python bench/server_limits.py

`inspo serve-retriever` (BM25 over the bundled world, default limits) runs in its own process on loopback. Writes
bench/results/server_limits.json and the "Retrieval server limits" section of bench/README.md.
"""

from __future__ import annotations

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
    return {"queries": n, "topk": topk, "status": answer.status_code, "answer_mb": round(len(answer.content) / 1e6, 1),
            "seconds_alone": round(alone_s, 2), "seconds_with_small_requests": round(together_s, 2),
            "small_ms_idle": {"p50": round(statistics.median(idle), 1), "max": round(max(idle), 1), "n": len(idle)},
            "small_ms_during": {"p50": round(statistics.median(during), 1), "max": round(max(during), 1),
                                "n": len(during)},
            "one_more_query": {"status": over.status_code, "error": over.json().get("error")}}


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
    return {"sent_mib_before_refusal": sent, "answer": answer, "rss_mib_before": round(before),
            "rss_mib_peak": round(max(peak, rss_mib(pid))), "declared_answer": declared}


def stalled_upload(port: int) -> dict:
    sock = socket.create_connection(("127.0.0.1", port), timeout=120)
    sock.sendall(b"POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n{\"queries\": [")
    started = time.perf_counter()
    answer = sock.recv(4096).split(b"\r\n", 1)[0].decode()
    sock.close()
    return {"answer": answer, "seconds": round(time.perf_counter() - started, 1)}


def aborted_uploads(port: int, log_path: Path, n: int = 300) -> dict:
    before = log_path.stat().st_size
    for _ in range(n):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        sock.sendall(b"POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{\"queries\": [\"a")
        sock.close()
    time.sleep(2.0)
    text = log_path.read_text(errors="replace")[before:]
    return {"aborted": n, "log_bytes": len(text.encode()), "log_lines": len(text.splitlines()),
            "tracebacks": text.count("Traceback")}


def main() -> None:
    questions = load_questions()
    port = free_port()
    log_path = ROOT / "bench" / "results" / ".server_limits.log"
    server = start(port, log_path)
    url = f"http://127.0.0.1:{port}/retrieve"
    try:
        limits = httpx.get(f"http://127.0.0.1:{port}/health").json()["limits"]
        results = {"benchmark": "server_limits", "machine": machine(("fastapi", "uvicorn", "orjson", "bm25s")),
                   "limits": limits}
        results["largest_answer"] = largest_answer(url, questions, limits)
        print("largest answer:", results["largest_answer"])
        results["oversized_upload"] = oversized_upload(port, server.pid)
        print("oversized upload:", results["oversized_upload"])
        results["stalled_upload"] = stalled_upload(port)
        print("stalled upload:", results["stalled_upload"])
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
    m = r["machine"]
    lim = r["limits"]
    section = f"""## Retrieval server limits (`python bench/server_limits.py`)

`inspo serve-retriever` with its default limits (`--max-queries {lim['max_queries']}`, `--max-results {lim['max_results']}`
passages per answer, `--max-body-mib {lim['max_body_bytes'] / (1 << 20):g}`, `--read-timeout-s {lim['read_timeout_s']:g}`,
`--max-batch {lim['max_batch']}`), BM25 over the world, in its own process on loopback; {m['cpu_cores']} CPU cores
({m['cpu']}). Results: `bench/results/server_limits.json`.

| case | what happened |
|---|---|
| the largest allowed answer ({big['queries']} queries x topk {big['topk']}) | HTTP {big['status']}, {big['answer_mb']} MB, {big['seconds_alone']} s alone |
| the same with topk {big['topk'] + 1} | HTTP {big['one_more_query']['status']}: "{big['one_more_query']['error']}" |
| 1-query requests while it is served | p50 {big['small_ms_during']['p50']} ms, max {big['small_ms_during']['max']} ms ({big['small_ms_during']['n']} requests; idle: p50 {big['small_ms_idle']['p50']} ms, max {big['small_ms_idle']['max']} ms) |
| a 400 MiB upload, chunked (no Content-Length) | `{up['answer']}` once {lim['max_body_bytes'] >> 20} MiB had arrived (the client had pushed {up['sent_mib_before_refusal']} MiB into the socket); server RSS {up['rss_mib_before']} → {up['rss_mib_peak']} MiB |
| the same, declared in Content-Length | `{up['declared_answer']}` before reading a byte of it |
| an upload that stalls | `{stall['answer']}` after {stall['seconds']} s |
| {ab['aborted']} uploads aborted mid-body | {ab['log_lines']} log lines, {ab['log_bytes']:,} bytes, {ab['tracebacks']} tracebacks |

Before these limits (issue 17's measurements on the same kind of machine): a 400 MB body took the server to 0.9 GB,
the largest request the defaults allowed (4,096 queries x topk 100) returned 163 MB while small queries waited 14 s
behind it, a stalled upload was never timed out, and 300 aborted uploads wrote 2.1 MB of tracebacks."""
    update_readme_section("server_limits", section)


if __name__ == "__main__":
    main()
