"""Issue 37, items 11 and 12 and the offline hub: what inspo reads from its environment and where its output goes.

- `INSPO_*` variables are checked like options (finite, in range, one line naming the variable), at start.
- A closed stdout (`>&-`) or one on a full disk (/dev/full) is one line and exit code 1, for every command and
  `--help`; a full disk under a file names that file; `inspo index` onto a full disk is one line and leaves nothing.
  A full disk is made with RLIMIT_FSIZE (a write past the limit fails with EFBIG, as one past a full disk fails with
  ENOSPC), which needs no privileges.
- An unreachable hub (a closed port as HF_ENDPOINT) fails at once with the usual one line, not after 25 s of retries.
"""

from __future__ import annotations

import errno
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from inspo_cli import envvars, hub
from inspo_cli.console import user_errors
from inspo_cli.errors import InspoError

REPO = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "inspo_cli"]


def run_cli(*args, env=None, stdout=None, preexec_fn=None, cwd=REPO, timeout=120):
    environment = {**os.environ, **(env or {})}
    environment = {k: v for k, v in environment.items() if v is not None}
    environment["PYTHONPATH"] = os.pathsep.join([str(REPO), environment.get("PYTHONPATH", "")])
    return subprocess.run(
        [*CLI, *map(str, args)],
        cwd=cwd,
        env=environment,
        stdout=stdout or subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=preexec_fn,
        timeout=timeout,
    )


def one_error_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in stderr, stderr
    return lines[0]


# -- item 11: environment variables --------------------------------------------------------------------------------

BAD_SECONDS = ["0", "-5", "0.5", "nan", "inf", "-inf", "1e9", "thirty", "30s", "1\n2", "9" * 5000]


@pytest.mark.parametrize("name", sorted(envvars.SECONDS))
@pytest.mark.parametrize("value", BAD_SECONDS)
def test_a_bad_seconds_variable_is_one_line_naming_it(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(InspoError) as error:
        envvars.env_seconds(name)
    message = str(error.value)
    assert "\n" not in message and len(message) < 300 and name in message
    assert "from 1 to 86400" in message and "default 30" in message


@pytest.mark.parametrize("name", sorted(envvars.SECONDS))
def test_a_seconds_variable_unset_empty_or_in_range(monkeypatch, name):
    monkeypatch.delenv(name, raising=False)
    assert envvars.env_seconds(name) == 30.0
    monkeypatch.setenv(name, "  ")
    assert envvars.env_seconds(name) == 30.0
    monkeypatch.setenv(name, " 2.5 ")
    assert envvars.env_seconds(name) == 2.5


def test_progress_lines_use_the_checked_interval(monkeypatch):
    from rich.console import Console

    from inspo_cli.progress import PlainProgress

    monkeypatch.setenv("INSPO_PROGRESS_SECONDS", "7")
    assert PlainProgress(console=Console()).interval == 7.0
    monkeypatch.setenv("INSPO_PROGRESS_SECONDS", "0")  # a line at every advance: a flood, not progress
    with pytest.raises(InspoError, match="INSPO_PROGRESS_SECONDS is '0'"):
        PlainProgress(console=Console())


def test_the_cache_variable_must_be_a_directory(monkeypatch, tmp_path):
    monkeypatch.setenv("INSPO_CACHE", str(tmp_path / "cache"))
    assert envvars.env_path("INSPO_CACHE") == tmp_path / "cache"  # created when first used
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("INSPO_CACHE", "rel")
    assert envvars.env_path("INSPO_CACHE") == tmp_path / "rel"  # one cache, whatever directory a command starts in
    (tmp_path / "file").write_text("x")
    for value, fragment in (
        (str(tmp_path / "file"), "not a directory"),
        ("~nosuchuser-inspo/x", "cannot be used"),
        # no mkdir can make a directory under a file: refused now, not at the first conversion
        (str(tmp_path / "file" / "cache" / "x"), f"(it is under '{tmp_path / 'file'}', a file)"),
        ("/dev/null", "not a directory"),
        ("a" * 5000, "cannot be used"),
    ):
        monkeypatch.setenv("INSPO_CACHE", value)
        with pytest.raises(InspoError) as error:
            envvars.env_path("INSPO_CACHE")
        assert fragment in str(error.value) and "INSPO_CACHE" in str(error.value) and len(str(error.value)) < 420


@pytest.mark.parametrize(
    "name, value",
    [
        ("INSPO_PROGRESS_SECONDS", "0"),
        ("INSPO_POLL_SECONDS", "nan"),
        ("INSPO_CACHE", "/dev/null"),
        ("INSPO_CACHE", "/dev/null/inspo/cache"),
    ],
)
def test_the_cli_checks_the_variables_before_any_command(name, value):
    result = run_cli("recipe", "list", env={name: value})
    assert result.returncode == 2 and result.stdout == ""
    assert f"{name} is {value!r}" in one_error_line(result.stderr)


def test_help_version_and_env_still_run_and_env_says_which_variable_is_refused():
    """They are how a bad variable is diagnosed, so a bad value must not stop them."""
    for args in (("--help",), ("--version",), ("recipe", "--help")):
        assert run_cli(*args, env={"INSPO_POLL_SECONDS": "0"}).returncode == 0, args
    result = run_cli("env", "--json", env={"INSPO_POLL_SECONDS": "0", "INSPO_PROGRESS_SECONDS": "5"})
    assert result.returncode == 0, result.stderr
    settings = json.loads(result.stdout)["inspo settings"]
    assert settings["INSPO_POLL_SECONDS"].startswith("refused: the environment variable INSPO_POLL_SECONDS is '0'")
    assert settings["INSPO_PROGRESS_SECONDS"] == "'5'" and settings["INSPO_CACHE"].startswith("unset (default ")


# -- item 12: stdout closed or full --------------------------------------------------------------------------------

COMMANDS = [
    ("recipe", "list"),
    ("--help",),
    ("--version",),
    ("recipe", "check", "recipes/demo.yaml"),
    ("recipe", "explain", "--list"),
]


def _close_stdout():
    os.close(1)


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_a_closed_stdout_is_one_line_and_exit_1(args):
    result = run_cli(*args, preexec_fn=_close_stdout, stdout=subprocess.DEVNULL)
    assert result.returncode == 1
    assert "could not write the output (stdout is closed)" in one_error_line(result.stderr)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_stdout_on_a_full_disk_is_one_line_and_exit_1(args):
    with open("/dev/full", "w") as full:
        result = run_cli(*args, stdout=full)
    assert result.returncode == 1
    assert "could not write the output (No space left on device)" in one_error_line(result.stderr)


@pytest.mark.slow  # `inspo env` imports torch
def test_inspo_env_with_a_closed_stdout():
    result = run_cli("env", preexec_fn=_close_stdout, stdout=subprocess.DEVNULL)
    assert result.returncode == 1 and "could not write the output" in one_error_line(result.stderr)


def test_a_file_opened_while_stdout_is_closed_does_not_take_its_descriptor(tmp_path):
    """Else whatever a library prints to descriptor 1 (C code, a child process) lands in that file."""
    script = (
        "import os, sys; os.close(1); sys.stdout = None\n"
        "from inspo_cli.console import _occupy_closed_descriptors\n"
        "_occupy_closed_descriptors()\n"
        f"f = open({str(tmp_path / 'out.txt')!r}, 'w'); sys.stderr.write(str(f.fileno()))"
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and int(result.stderr) > 2, result.stderr


@pytest.mark.parametrize("args, code", [(("recipe", "list"), 0), (("recipe", "check", "no-such.yaml"), 2)])
def test_a_closed_stderr_keeps_the_exit_code(args, code):
    result = run_cli(*args, preexec_fn=lambda: os.close(2), stdout=subprocess.DEVNULL)
    assert result.returncode == code


class _FailingStdout:
    def __init__(self, code):
        self.code = code

    def write(self, text):
        raise OSError(self.code, os.strerror(self.code))

    def flush(self):
        pass


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EPIPE, errno.EIO])
def test_a_write_error_of_stdout_is_blamed_on_stdout(monkeypatch, capsys, code):
    @user_errors
    def command():
        print("the result")

    monkeypatch.setattr(sys, "stdout", _FailingStdout(code))
    with pytest.raises(typer.Exit) as exit_:
        command()
    assert exit_.value.exit_code == 1
    assert f"could not write the output ({os.strerror(code)})" in one_error_line(capsys.readouterr().err)


def test_a_write_error_of_a_file_is_not_blamed_on_stdout_and_names_the_file(monkeypatch, tmp_path):
    """An ENOSPC from a file object's write names no file; the writers add it, and stdout is not accused."""
    from inspo_cli.jsonio import atomic_write_json
    from inspo_cli.runs import RunDir

    def fsync(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    app = typer.Typer()

    @app.command()
    @user_errors
    def command(which: str):
        if which == "json":
            atomic_write_json(tmp_path / "results.json", {"em": 0.5})
        elif which == "metrics":
            RunDir(tmp_path).append_metrics({"step": 1})
        else:
            raise OSError(errno.ENOSPC, "No space left on device")  # a writer that names no file

    monkeypatch.setattr(os, "fsync", fsync)
    for which, named in (("json", tmp_path / "results.json"), ("metrics", tmp_path / "metrics.jsonl")):
        result = CliRunner().invoke(app, [which])
        line = one_error_line(result.stderr)
        assert result.exit_code == 2 and str(named) in line and "no space left" in line and "stdout" not in line
    assert not list(tmp_path.glob(".results.json*"))  # the temporary file went
    result = CliRunner().invoke(app, ["other"])
    line = one_error_line(result.stderr)
    assert result.exit_code == 2 and line.startswith("error: could not write a file") and "stdout" not in line


def _small_disk():
    """A 16 KiB "disk": a write past it fails (EFBIG), as one on a full disk (ENOSPC)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (16 << 10, 16 << 10))


@pytest.mark.slow
def test_inspo_index_onto_a_full_disk_is_one_line_and_leaves_nothing(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join((REPO / "data/world/corpus.jsonl").read_text().splitlines(keepends=True)[:600]))
    out = tmp_path / "out" / "idx"
    result = run_cli("index", "--corpus", corpus, "--out", out, preexec_fn=_small_disk)
    line = one_error_line(result.stderr.splitlines()[-1])  # after the progress lines
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"--out {out}: could not write the index" in line and "choose another --out" in line
    assert list((tmp_path / "out").iterdir()) == []  # no partial build left behind


def test_an_index_write_that_runs_out_of_space_is_a_retriever_error(tmp_path, monkeypatch):
    """The three shapes a full disk takes while an index is written: ENOSPC, numpy's short write, faiss's error."""
    from retriever import index as index_module
    from retriever.errors import RetrieverError

    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "0", "contents": "\\"T\\"\\nsome text"}\n')
    for failure in (
        OSError(errno.ENOSPC, "No space left on device"),
        OSError("1000 requested and 12 written"),
        RuntimeError("Error in faiss::write_index: write error in x: 1 != 5 (No space left on device)"),
    ):

        def build(*args, failure=failure):
            raise failure

        monkeypatch.setattr(index_module.kind_module("bm25"), "build", build)
        with pytest.raises(RetrieverError, match="could not write the index"):
            index_module.build_index(corpus, tmp_path / "idx", "bm25")
        assert [p.name for p in tmp_path.iterdir()] == ["c.jsonl"]

    def other(*args):
        raise OSError("other")

    monkeypatch.setattr(index_module.kind_module("bm25"), "build", other)
    with pytest.raises(OSError, match="other"):  # not a full disk: a bug keeps its traceback
        index_module.build_index(corpus, tmp_path / "idx", "bm25")


# -- the hub, offline or unreachable --------------------------------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed when the block ends: nothing listens there


@pytest.fixture
def unreachable_hub(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    port = _closed_port()
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    hub._probe.cache_clear()
    yield port
    hub._probe.cache_clear()


def test_an_unreachable_hub_fails_at_once_with_one_line(unreachable_hub, tmp_path):
    from inspo_cli.benchmarks import load_benchmark

    start = time.monotonic()
    with pytest.raises(InspoError) as error:
        load_benchmark("hotpotqa", data_dir=tmp_path)
    elapsed = time.monotonic() - start  # datasets' own retries take 25 s (and its import several)
    message = str(error.value)
    assert elapsed < 2 and "\n" not in message
    assert f"cannot reach http://127.0.0.1:{unreachable_hub}" in message and "hotpotqa/dev.jsonl" in message


def test_a_hub_that_accepts_but_never_answers_is_given_up_on(monkeypatch):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)  # the kernel completes the handshake; nobody ever answers
        monkeypatch.setattr(hub, "TIMEOUT_S", 0.5)
        hub._probe.cache_clear()
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.getsockname()[1]}")
        start = time.monotonic()
        why = hub.hub_unreachable()
        assert time.monotonic() - start < 2 and why is not None and ("timed out" in why or "no answer" in why)
    hub._probe.cache_clear()


def test_an_unreachable_hub_puts_the_hub_client_offline(unreachable_hub, monkeypatch):
    """So that a cached model loads at once and an uncached one fails at once, not after a minute of retries."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    assert "cannot reach" in hub.offline_if_unreachable()
    assert constants.HF_HUB_OFFLINE is True


def test_evaluate_offline_is_one_line_without_retry_messages(unreachable_hub, tmp_path):
    """The model card's own example, on a node without internet."""
    result = run_cli("evaluate", "--benchmarks", "hotpotqa,nq", cwd=tmp_path)  # no data/benchmarks/ there
    line = one_error_line(result.stderr)
    assert result.returncode == 2 and "Retrying" not in result.stderr
    assert f"cannot reach http://127.0.0.1:{unreachable_hub}" in line
