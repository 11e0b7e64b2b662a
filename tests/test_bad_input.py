"""Bad input across the commands: every file problem, a mistyped --instruction path and a --device that cannot
work end as one `error:` line with exit 2 and nothing created; output that is not a terminal still shows progress."""

from __future__ import annotations

import errno
import io
import os

import pytest
import typer
from helpers.cli_helpers import assert_one_line_error, invoke
from rich.console import Console
from typer.testing import CliRunner

from inspo_cli.console import STREAM, user_errors
from inspo_cli.errors import InspoError
from inspo_cli.progress import PlainProgress, plain_line

LATIN1 = "r\xe9ponse: caf\xe9\n".encode("latin-1")  # what an editor on an old Windows machine saves


@pytest.fixture
def files(tmp_path):
    """A directory, a non-UTF-8 file of each kind, and a path whose parent is a file."""
    (tmp_path / "adir").mkdir()
    for name in ("recipe.yaml", "instruction.txt", "train.jsonl", "sweep.yaml"):
        (tmp_path / name).write_bytes(LATIN1)
    (tmp_path / "plain").write_text("not a directory")
    return tmp_path


# -- class 1: unreadable or wrong-kind files ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, fragments",
    [
        (
            ["recipe", "check", "{t}/recipe.yaml"],
            ["recipe {t}/recipe.yaml", "not UTF-8 text (byte 0xe9", "save it as UTF-8"],
        ),
        (["recipe", "check", "{t}/adir"], ["recipe {t}/adir", "is a directory; pass a file"]),
        (["train", "--recipe", "{t}/recipe.yaml", "--output-dir", "{t}/runs"], ["not UTF-8 text"]),
        (["evolve", "--recipe", "{t}/adir", "--output-dir", "{t}/runs"], ["is a directory"]),
        (
            ["recipe", "check", "recipes/demo.yaml", "--set", "population.instruction_file={t}/instruction.txt"],
            ["--set population.instruction_file", "not UTF-8 text"],
        ),
        (
            ["recipe", "check", "recipes/demo.yaml", "--set", "population.instruction_file={t}/adir"],
            ["population.instruction_file", "is a directory"],
        ),
        (["recipe", "check", "recipes/demo.yaml", "--set", "data.train={t}/adir"], ["data.train", "is a directory"]),
        (
            ["recipe", "check", "recipes/demo.yaml", "--set", "retriever.index={t}/plain"],
            ["retriever.index", "is a file"],
        ),
        (["ablate", "--sweep", "{t}/sweep.yaml", "--dry-run"], ["--sweep {t}/sweep.yaml", "not UTF-8 text"]),
        (["ablate", "--sweep", "{t}/adir", "--dry-run"], ["--sweep {t}/adir", "is a directory"]),
        (["data", "world", "--out", "{t}/plain/world"], ["--out {t}/plain/world", "a part of the path is a file"]),
        (["report", "{t}/adir"], ["{t}/adir"]),
        (["evaluate", "--model", "smollm2-135m-instruct", "--out", "{t}/plain", "--limit", "1"], ["--out {t}/plain"]),
        (
            ["evaluate", "--model", "smollm2-135m-instruct", "--benchmarks", "{t}/train.jsonl"],
            ["QA file {t}/train.jsonl", "not UTF-8"],
        ),
        (["evaluate", "--model", "smollm2-135m-instruct", "--benchmarks", "{t}/adir/x.jsonl"], ["no such file"]),
        (["index", "--corpus", "{t}/train.jsonl", "--out", "{t}/idx"], ["{t}/train.jsonl", "not UTF-8"]),
        (["index", "--corpus", "{t}/adir", "--out", "{t}/idx"], ["{t}/adir"]),
        (
            ["index", "--corpus", "data/world/corpus.jsonl", "--out", "{t}/plain/idx"],
            ["--out {t}/plain/idx", "a part of the path is a file"],
        ),
        (["serve-retriever", "--index", "{t}/train.jsonl", "--port", "0"], ["{t}/train.jsonl", "not UTF-8"]),
        (["serve-retriever", "--index", "{t}/adir", "--port", "0"], ["{t}/adir", "not an inspo index"]),
        (["serve-retriever", "--index", "{t}/adir", "--port", "0", "--max-body-mib", "0"], ["--max-body-mib"]),
    ],
)
def test_file_problems_are_one_line_and_create_nothing(args, fragments, files, repo_root, monkeypatch):
    monkeypatch.chdir(repo_root)
    result = invoke(*[a.replace("{t}", str(files)) for a in args])
    assert_one_line_error(result, *[f.replace("{t}", str(files)) for f in fragments])
    assert not (files / "runs").exists()


def test_a_qa_file_that_is_not_utf8_or_a_directory_names_itself(files):
    from inspo_cli.benchmarks import load_questions

    with pytest.raises(InspoError, match=r"QA file .*train.jsonl: not UTF-8 text"):
        load_questions(files / "train.jsonl")
    with pytest.raises(InspoError, match=r"QA file .*adir: is a directory"):
        load_questions(files / "adir")


def test_qa_files_as_benchmarks_are_never_silently_merged_doubled_or_empty(tmp_path, repo_root):
    """Issue 29, class 7: two files whose folder/stem agree get names that tell them apart; the same file twice, or
    an empty one, is refused; a column without questions never enters the average."""
    from inspo_cli.config import DataConfig
    from inspo_cli.evaluation.runner import averages, evaluation_questions

    rows = (repo_root / "data/world/test.jsonl").read_text().splitlines()
    for folder, count in (("x", 1), ("y", 2)):
        (tmp_path / f"qa/{folder}/a").mkdir(parents=True)
        (tmp_path / f"qa/{folder}/a/q.jsonl").write_text("\n".join(rows[:count]) + "\n")
    first, second = tmp_path / "qa/x/a/q.jsonl", tmp_path / "qa/y/a/q.jsonl"
    found = evaluation_questions(f"{first},{second}", DataConfig(), None, None)
    assert {name: len(q) for name, q in found.items()} == {"x/a/q": 1, "y/a/q": 2}
    assert list(evaluation_questions([str(first), "world"], DataConfig(), None, 3)) == ["q", "world"]
    with pytest.raises(InspoError, match="names the QA file .* twice"):
        evaluation_questions(f"{first},{tmp_path}/qa/x/../x/a/q.jsonl", DataConfig(), None, None)
    (tmp_path / "blank.jsonl").write_text("\n  \n")
    with pytest.raises(InspoError, match="blank.jsonl: holds no questions"):
        evaluation_questions(str(tmp_path / "blank.jsonl"), DataConfig(), None, None)
    scores = {
        "agent": {
            "a": {"em": 0.5, "f1": 0.5, "subem": 0.5, "searches": 1.0, "n": 4},
            "b": {"em": 0.0, "f1": 0.0, "subem": 0.0, "searches": 0.0, "n": 0},
        }
    }
    assert averages(scores)["agent"]["em"] == 0.5


def test_an_unforeseen_os_error_about_a_file_is_still_one_line():
    @user_errors
    def command():
        raise OSError(errno.ENOSPC, "No space left on device", "/runs/x/metrics.jsonl")

    app = typer.Typer()
    app.command()(command)
    result = CliRunner().invoke(app, [])
    assert_one_line_error(result, "/runs/x/metrics.jsonl", "no space left on the device")


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EPIPE])
def test_output_that_cannot_be_written_is_one_line_and_a_non_zero_exit(code):
    """Issue 29, class 8: `inspo recipe check demo > /dev/full`, or stdout's pipe closed."""

    @user_errors
    def command():
        error = OSError(code, os.strerror(code))  # what writing to stdout raises: no file name, and the CLI's
        setattr(error, STREAM, "stdout")  # stdout marks it as its own (tests/test_outputs.py writes to real ones)
        raise error

    app = typer.Typer()
    app.command()(command)
    result = CliRunner().invoke(app, [])
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 1 and len(lines) == 1 and "Traceback" not in result.output
    assert lines[0].startswith("error: could not write the output") and os.strerror(code) in lines[0]


def test_an_os_error_without_a_file_keeps_its_traceback():
    @user_errors
    def command():
        raise ConnectionResetError(errno.ECONNRESET, "reset")

    app = typer.Typer()
    app.command()(command)
    assert isinstance(CliRunner().invoke(app, []).exception, ConnectionResetError)


# -- class 2: --instruction that looks like a path ---------------------------------------------------------------


@pytest.mark.parametrize(
    "value, fragments",
    [
        ("prompts/instrucion.txt", ["--instruction file prompts/instrucion.txt", "does not exist"]),
        ("instruction.md", ["instruction.md", "does not exist"]),
        ("{t}/adir", ["{t}/adir", "is a directory"]),
        ("{t}/instruction.txt", ["not UTF-8 text"]),
    ],
)
def test_an_instruction_path_that_is_no_readable_file_is_refused(value, fragments, files, tmp_path):
    result = invoke(
        "evaluate",
        "--model",
        "smollm2-135m-instruct",
        "--out",
        tmp_path / "o",
        "--limit",
        1,
        "--instruction",
        value.replace("{t}", str(files)),
    )
    assert_one_line_error(result, *[f.replace("{t}", str(files)) for f in fragments])


@pytest.mark.parametrize("text", ["Answer briefly. {question}", "Answer.", "Search first, then answer: {question}"])
def test_instruction_text_is_used_as_text(text):
    from inspo_cli.commands.evaluate import read_instruction

    assert read_instruction(text) == text


def test_an_instruction_file_is_read(tmp_path):
    from inspo_cli.commands.evaluate import read_instruction

    (tmp_path / "inst.txt").write_text("From a file. {question}\n")
    assert read_instruction(str(tmp_path / "inst.txt")) == "From a file. {question}"


# -- class 3: --device --------------------------------------------------------------------------------------------

DEVICE_COMMANDS = [
    ["train", "--output-dir", "{t}/runs"],
    ["evolve", "--recipe", "recipes/demo.yaml", "--output-dir", "{t}/runs"],
    ["evaluate", "--model", "smollm2-135m-instruct", "--limit", "1", "--out", "{t}/runs"],
    ["ablate", "--recipe", "recipes/demo.yaml", "--proposer", "paraphrase", "--out", "{t}/runs"],
]


@pytest.mark.parametrize("command", DEVICE_COMMANDS, ids=lambda c: c[0])
def test_an_unknown_device_is_refused_before_anything_is_created(command, tmp_path, repo_root, monkeypatch):
    monkeypatch.chdir(repo_root)
    result = invoke(*[a.replace("{t}", str(tmp_path)) for a in command], "--device", "tpu")
    assert_one_line_error(result, "--device 'tpu'", "use cpu or cuda")
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("command", DEVICE_COMMANDS, ids=lambda c: c[0])
def test_cuda_without_a_gpu_is_refused_not_silently_cpu(command, tmp_path, repo_root, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.chdir(repo_root)
    result = invoke(*[a.replace("{t}", str(tmp_path)) for a in command], "--device", "cuda")
    assert_one_line_error(result, "--device cuda", "no CUDA GPU", "--device cpu")
    assert not (tmp_path / "runs").exists()


def test_recipe_check_trl_may_describe_a_gpu_machine_from_a_cpu_one(repo_root, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    result = invoke(
        "recipe", "check", repo_root / "recipes/qwen2.5-3b/inspo.yaml", "--trl", "--device", "cuda", "--json"
    )
    assert result.exit_code == 0, result.output
    assert_one_line_error(
        invoke("recipe", "check", repo_root / "recipes/demo.yaml", "--trl", "--device", "gpu"), "--device 'gpu'"
    )


# -- progress when the output is not a terminal --------------------------------------------------------------------


def test_plain_progress_prints_bounded_lines_with_counts_rate_and_eta():
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=200)
    with PlainProgress(console=console, interval=3600) as progress:  # no time-based lines in this test
        task = progress.add_task("evaluating world", total=50)
        for _ in range(50):
            progress.advance(task)
        progress.update(task, completed=50)  # a second "finished" says nothing more
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("evaluating world: 50/50 (100%)") and "elapsed" in lines[0]

    out.truncate(0), out.seek(0)
    with PlainProgress(console=console, interval=0) as progress:  # a line at every change
        task = progress.add_task("indexing", total=4)
        for _ in range(4):
            progress.advance(task)
    assert [line.split(":")[1].split("(")[0].strip() for line in out.getvalue().splitlines()] == [
        "1/4",
        "2/4",
        "3/4",
        "4/4",
    ]


def test_plain_line_reads_like_a_progress_bar():
    assert (
        plain_line("evaluating nq", 120, 500, 60.0)
        == "evaluating nq: 120/500 (24%)  2.00/s  elapsed 0:01:00  ETA 0:03:10"
    )
    assert plain_line("writing", 3, None, 0.0) == "writing: 3  elapsed 0:00:00"


def test_the_progress_bar_is_plain_when_stderr_is_not_a_terminal(monkeypatch):
    from inspo_cli import progress

    monkeypatch.setattr(progress, "err_console", Console(file=io.StringIO()))  # a pipe, a CI log
    assert isinstance(progress.progress_bar(), PlainProgress)
    monkeypatch.setattr(progress, "err_console", Console(file=io.StringIO(), force_terminal=True))
    assert not isinstance(progress.progress_bar(), PlainProgress)
