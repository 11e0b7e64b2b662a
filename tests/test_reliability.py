"""Bad input across the commands: every file problem, a mistyped --instruction path and a --device that cannot
work end as one `error:` line with exit 2 and nothing created; output that is not a terminal still shows progress."""

from __future__ import annotations

import errno
import io
import json
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


# -- class 7 and 8: secrets never echoed, a failing optimizer is said -----------------------------------------------


@pytest.mark.parametrize(
    "provider",
    [pytest.param("gemini", marks=pytest.mark.slow), pytest.param("anthropic", marks=pytest.mark.slow), "openai"],
)
def test_an_optimizer_that_echoes_the_key_leaves_it_nowhere_and_its_failure_is_said(
    provider, tmp_path, repo_root, tiny_model_dir, serve, monkeypatch
):
    """`inspo evolve` against a provider that rejects the key (401) quoting it encoded, then answers with a candidate
    that quotes it too (an answer is never rewritten: it is refused): the console says each failed evolution on one
    line, and no form of the key is in any file of the run directory or on the console."""
    from helpers.api_keys import ODD_KEY, key_forms, leaks
    from helpers.fake_providers import KEY_ENV, MODELS, Reply, success_body
    from helpers.runs import write_recipe

    monkeypatch.setenv(KEY_ENV, ODD_KEY)
    echo = " ".join(key_forms(ODD_KEY))
    answer = f"<ins_1>Search first ({echo}), then answer. Question: {{question}}\n</ins_1>"
    server = serve(
        provider,
        Reply(401, {"error": {"message": f"invalid api key {echo}"}}),
        Reply(200, success_body(provider, answer)),
    )
    population = {
        "enabled": True,
        "instructions": ["Search, then answer. Question: {question}\n"],
        "size": 2,
        "n_parent": 1,
        "prune_every": 100,
        "evolve_every": 1,
        "evolve_until": 3,
        "candidates_per_call": 1,
        "failures_per_call": 1,
        "verify_size": 2,
        "accept": "top_n",
        "accept_top_n": 1,
        "max_verify_rounds": 1,
    }
    recipe = write_recipe(
        tmp_path, repo_root, str(tiny_model_dir), population=population, training={"steps": 2}, evaluation={"limit": 1}
    )
    recipe.write_text(
        recipe.read_text() + f"optimizer:\n  provider: {provider}\n  model: {MODELS[provider]}\n"
        f"  base_url: {server.base_url}\n  api_key_env: {KEY_ENV}\n  max_retries: 0\n"
    )
    result = invoke("evolve", "--recipe", recipe, "--output-dir", tmp_path / "runs", "--name", "run", "--device", "cpu")
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.output.splitlines() if line.startswith("warning: evolution")]
    assert len(warnings) == 2 and "at step 1 stopped" in warnings[0] and "HTTP 401" in warnings[0]
    assert "at step 2 stopped" in warnings[1] and "quotes the API key" in warnings[1]
    run = tmp_path / "runs" / "run"
    evolutions = json.loads((run / "evolutions.json").read_text())
    assert "[redacted]" in evolutions[0]["optimizer_error"]  # the server did quote the key
    assert evolutions[1]["candidates"] == [] and "quotes the API key" in evolutions[1]["optimizer_error"]
    assert leaks(result.output, ODD_KEY) == []
    files = [path for path in run.rglob("*") if path.is_file()]
    assert len(files) > 5 and all(leaks(path.read_bytes().decode("latin-1"), ODD_KEY) == [] for path in files)


# -- class 9: a failed start leaves nothing behind --------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["train", "--recipe", "demo", "--set", "model.name_or_path=nobody/absent-model"],  # fails after the directory
        [
            "train",
            "--recipe",
            "demo",
            "--set",
            "population.size=3",  # refused before it
            "--set",
            'population.instructions=["Answer. {question}", " Answer.  {question}"]',
        ],
        ["evolve", "--recipe", "demo", "--set", "population.enabled=false"],
        [
            "train",
            "--recipe",
            "demo",
            "--set",
            "optimizer.provider=openai",
            "--set",
            "optimizer.model=m",
            "--set",
            "optimizer.api_key_env=INSPO_TEST_ABSENT_KEY",
        ],
    ],
)
def test_a_failed_train_or_evolve_leaves_no_run_directory(args, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("INSPO_TEST_ABSENT_KEY", raising=False)
    monkeypatch.chdir(tmp_path)  # recipes are found by name from anywhere
    result = invoke(*args, "--output-dir", tmp_path / "runs")
    assert_one_line_error(result)
    assert list(tmp_path.iterdir()) == []  # neither the run directory nor runs/ that was made for it


def test_a_run_that_started_keeps_what_it_wrote(tmp_path):
    from inspo_cli.experiment import started
    from inspo_cli.runs import RunDir

    run = RunDir(tmp_path)
    assert not started(run)
    (tmp_path / "metrics.jsonl").write_text("")
    assert not started(run)
    (tmp_path / "stages" / "1-evolve").mkdir(parents=True)
    (tmp_path / "stages" / "1-evolve" / "metrics.jsonl").write_text('{"step": 1}\n')
    assert started(run)


def test_a_failed_evaluation_leaves_no_empty_output_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)

    def fails_loading(*args):
        result = invoke("evaluate", "--model", "nobody/absent-model", "--limit", "1", *args)
        assert result.exit_code == 2 and "Traceback" not in result.output
        assert result.stderr.strip().splitlines()[-1].startswith("error: model 'nobody/absent-model'")

    fails_loading()  # after "loading ..."
    assert list(tmp_path.iterdir()) == []  # no evals/<time>/
    kept = tmp_path / "mine"
    kept.mkdir()
    fails_loading("--out", kept)
    assert kept.is_dir()  # the user's own (empty) directory stays


def test_output_dir_removes_only_what_it_created(tmp_path):
    from inspo_cli.files import output_dir

    with pytest.raises(RuntimeError), output_dir(tmp_path / "a" / "b", "--out"):
        raise RuntimeError("failed before writing")
    assert not (tmp_path / "a").exists()
    with pytest.raises(RuntimeError), output_dir(tmp_path / "c" / "d", "--out") as made:
        (made / "predictions.jsonl").write_text("{}\n")
        raise RuntimeError("failed after writing")
    assert (tmp_path / "c" / "d" / "predictions.jsonl").is_file()


# -- class 10: recipes by name from anywhere; recipe check refuses what a run would ----------------------------------


def test_bundled_recipes_are_found_by_path_or_name_from_any_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for value in (
        "recipes/demo.yaml",
        "demo",
        "qwen2.5-3b/inspo",
        "recipes/qwen2.5-3b/inspo.yaml",
        "qwen2.5-7b/search-r1.yaml",
    ):
        result = invoke("recipe", "check", value)
        assert result.exit_code == 0, (value, result.output)
    assert "population:" in invoke("recipe", "check", "qwen2.5-3b/inspo").stdout


def test_a_recipe_that_is_not_found_lists_the_closest_bundled_names(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = invoke("train", "--recipe", "qwen-3b.yaml")  # the product card's qwen3b.yaml, misspelt (it is found)
    assert_one_line_error(result, "recipe qwen-3b.yaml not found", "qwen2.5-3b/", "inspo recipe list")
    assert_one_line_error(
        invoke("recipe", "check", "qwen-3b/serch-r1"), "closest bundled recipes: qwen2.5-3b/search-r1"
    )
    assert list(tmp_path.iterdir()) == []


def test_one_unreadable_file_under_recipes_does_not_hide_the_others(tmp_path, monkeypatch):
    """Issue 29, class 8: a recipe file that is not UTF-8 is skipped with a warning naming it."""
    from inspo_cli.config import recipe_files

    (tmp_path / "good.yaml").write_text("# A good recipe: it reads.\ndata: {train: world}\n")
    (tmp_path / "bad.yaml").write_bytes("# caf\xe9\n".encode("latin-1"))
    monkeypatch.setattr(recipe_files, "RECIPES_DIR", tmp_path)
    result = invoke("recipe", "list", "--json")
    assert result.exit_code == 0, result.output
    assert [row["name"] for row in json.loads(result.stdout)] == ["good"]
    assert "warning: skipped" in result.stderr and "bad.yaml" in result.stderr


def test_recipe_list_names_every_bundled_recipe_and_what_it_is():
    import json as json_module

    rows = json_module.loads(invoke("recipe", "list", "--json").stdout)
    names = [row["name"] for row in rows]
    assert {"demo", "qwen2.5-3b/inspo", "qwen2.5-7b/search-r1", "world-table1/sft"} <= set(names)
    assert not any(name.startswith("accelerate/") for name in names)  # launch configs are not recipes
    assert all(row["description"] and len(row["description"]) <= 101 for row in rows)
    for row in rows:  # every name listed is one --recipe takes
        assert invoke("recipe", "check", row["name"]).exit_code == 0, row["name"]
    table = invoke("recipe", "list").stdout
    assert "qwen2.5-3b/inspo" in table and "INSPO on Qwen2.5-3B base" in table


@pytest.mark.parametrize(
    "sets, fragments",
    [
        (
            ["population.size=3", 'population.instructions=["A. {question}", "A.   {question}"]'],
            ["initial instruction 1 repeats an earlier one"],
        ),
        (
            ["population.size=1", "population.instruction_file={t}/two.jsonl"],
            ["2 initial instructions but population.size is 1"],
        ),
        (["model.name_or_path={t}"], ["has no config.json", "model.name_or_path"]),
        (["population.stage=pre-rl"], ["runs in one process"]),  # with --processes 2, below
        (["training.micro_batch_size=3"], ["training.micro_batch_size=3", "must divide"]),
    ],
)
def test_recipe_check_refuses_what_a_run_would_refuse_later(sets, fragments, tmp_path):
    (tmp_path / "two.jsonl").write_text('{"text": "A. {question}"}\n{"text": "B. {question}"}\n')
    processes = ["--processes", "2"] if "population.stage=pre-rl" in sets else []
    args = [a for s in sets for a in ("--set", s.replace("{t}", str(tmp_path)))]
    assert_one_line_error(invoke("recipe", "check", "demo", *args, *processes), *fragments)


# -- class 4 and 5: resume takes the newest checkpoint that is whole; totals cover the whole run ----------------------


def fake_checkpoint(run_dir, update: int):
    """A checkpoint with the files HF and inspo write: weights, optimizer, RNG state, trainer state, INSPO's state."""
    import torch
    from safetensors.torch import save_file

    path = run_dir / "checkpoints" / f"checkpoint-{update}"
    path.mkdir(parents=True)
    save_file({"w": torch.arange(256, dtype=torch.float32)}, str(path / "model.safetensors"))
    torch.save({"state": {0: torch.zeros(64)}}, path / "optimizer.pt")
    torch.save({"python": 1}, path / "rng_state.pth")
    population = {"version": 1, "seed": 0, "next_id": 0, "last_step_ended": None, "pending": {}, "candidates": []}
    (path / "coevolution.json").write_text(
        json.dumps({"population": population, "replay": {"capacity": 8, "entries": []}, "step": update})
    )
    (path / "trainer_state.json").write_text(json.dumps({"global_step": update, "log_history": []}))
    return path


def cut(path, keep: float = 0.5):
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


@pytest.mark.parametrize(
    "damage, reason",
    [
        (lambda p: cut(p / "trainer_state.json"), "trainer_state.json is cut short"),
        (lambda p: (p / "trainer_state.json").unlink(), "no trainer_state.json"),
        (lambda p: cut(p / "coevolution.json"), "coevolution.json is cut short"),
        (lambda p: cut(p / "model.safetensors", 0.9), "model.safetensors is cut short"),
        (lambda p: cut(p / "model.safetensors", 0.001), "model.safetensors is cut short or corrupt"),
        (lambda p: (p / "model.safetensors").unlink(), "no model weights"),
        (lambda p: cut(p / "optimizer.pt", 0.8), "optimizer.pt is cut short"),
        (lambda p: cut(p / "rng_state.pth", 0.8), "rng_state.pth is cut short"),
    ],
)
def test_resume_takes_the_newest_whole_checkpoint_and_says_why_newer_ones_are_not(damage, reason, tmp_path):
    from inspo_cli.runs import RunDir, checkpoint_problem

    run = RunDir(tmp_path)
    older, newest = fake_checkpoint(tmp_path, 2), fake_checkpoint(tmp_path, 4)
    assert checkpoint_problem(newest) is None and run.latest_checkpoint() == newest
    damage(newest)
    assert reason in checkpoint_problem(newest)
    assert run.latest_checkpoint() == older and list(run.checkpoints()) == [2]
    checkpoint, skipped = run.resume_point()
    assert checkpoint == older and [(p.name, r) for p, r in skipped] == [("checkpoint-4", checkpoint_problem(newest))]


def test_a_run_whose_only_checkpoint_is_cut_short_is_refused_with_the_reason(tmp_path, repo_root):
    from helpers.runs import write_recipe

    from inspo_cli.config import load_recipe
    from inspo_cli.runs import RunDir

    run = RunDir.create(load_recipe(write_recipe(tmp_path, repo_root, "x")), output_dir=tmp_path / "runs")
    cut(fake_checkpoint(run.path, 2) / "trainer_state.json")
    assert_one_line_error(
        invoke("train", "--resume", run.path),
        "no complete checkpoint to resume from",
        "checkpoint-2: trainer_state.json is cut short",
        "start a new run",
    )


def test_logged_seconds_add_up_the_steps_a_resumed_run_keeps(tmp_path):
    from inspo_cli.runs import RunDir

    run = RunDir(tmp_path)
    assert run.logged_seconds() == 0.0
    for step, seconds in ((1, 60.0), (2, 30.5), (3, 40.0)):
        run.append_metrics({"step": step, "update": step, "step_seconds": seconds})
    run.truncate_metrics(2)  # resumed from update 2: step 3 is done again and counted by the new session
    assert run.logged_seconds() == 90.5


class HeldOptimizer:
    """An OpenAI-compatible server on loopback that answers `answer`, holding the first request until released, so
    that a test can kill the run in the middle of an evolution."""

    def __init__(self, answer: str):
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.requested, self.released, self.calls = threading.Event(), threading.Event(), 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                outer.calls += 1
                if outer.calls == 1:
                    outer.requested.set()
                    outer.released.wait(60)
                body = json.dumps(
                    {
                        "choices": [{"message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
                    }
                ).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass  # the run was killed while it waited

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"


@pytest.mark.slow
def test_chaos_kills_and_a_corrupt_checkpoint_resume_to_the_same_metrics(
    tmp_path, repo_root, tiny_model_dir, monkeypatch
):
    """INSPO on the tiny model (evolution at step 2, a checkpoint every step), run straight through, then again
    killed with SIGKILL during generation and during the evolution, and once with its newest checkpoint cut short
    as a kill during its write leaves it: every `--resume` ends with the straight run's metrics rows, and says which
    checkpoint it used."""
    import shutil
    import signal
    import time

    from helpers.runs import TIMING_KEYS, metrics, train_process, write_recipe

    monkeypatch.setenv("SCRIPTED_KEY", "sk-test-not-a-secret")
    optimizer = HeldOptimizer("<ins_1>Look it up first. Question: {question}\n</ins_1>")
    population = {
        "enabled": True,
        "instructions": ["Search, then answer. Question: {question}\n"],
        "size": 2,
        "n_parent": 1,
        "prune_every": 100,
        "evolve_every": 2,
        "evolve_until": 3,
        "candidates_per_call": 1,
        "failures_per_call": 1,
        "verify_size": 2,
        "accept": "top_n",
        "accept_top_n": 1,
        "max_verify_rounds": 1,
    }
    recipe = write_recipe(
        tmp_path,
        repo_root,
        str(tiny_model_dir),
        population=population,
        training={"steps": 3, "save_every": 1, "eval_every": 0},
    )
    recipe.write_text(
        recipe.read_text() + f"optimizer:\n  provider: openai\n  model: scripted\n  base_url: "
        f"{optimizer.url}\n  api_key_env: SCRIPTED_KEY\n  max_retries: 0\n"
    )
    runs = tmp_path / "runs"

    def start(name):
        return train_process("--recipe", str(recipe), "--output-dir", str(runs), "--name", name, cwd=repo_root)

    def kill(process):
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=60)
        assert process.returncode == -signal.SIGKILL

    def resume_and_compare(name, expected_checkpoint):
        resumed = train_process("--resume", str(runs / name), cwd=repo_root)
        output, _ = resumed.communicate(timeout=600)
        assert resumed.returncode == 0, output
        assert f"resuming from {expected_checkpoint}" in output
        strip = lambda rows: [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in rows]  # noqa: E731
        assert [r["step"] for r in metrics(runs / name)] == [1, 2, 3]
        for have, want in zip(strip(metrics(runs / name)), strip(metrics(runs / "straight")), strict=True):
            assert have == pytest.approx(want, rel=1e-5, abs=1e-7), (name, want["step"])
        summary = json.loads((runs / name / "summary.json").read_text())
        assert summary["wall_seconds"] >= sum(r["step_seconds"] for r in metrics(runs / name))  # across resumes
        return output

    # killed during the evolution at the end of step 2 (the optimizer holds its answer), then the straight run
    held = start("during-evolution")
    assert optimizer.requested.wait(600), held.communicate(timeout=5)[0]
    kill(held)
    optimizer.released.set()
    straight = start("straight")
    output, _ = straight.communicate(timeout=600)
    assert straight.returncode == 0, output
    resume_and_compare("during-evolution", "checkpoint-1")  # step 2 (and its evolution) are done again

    # killed during generation: as soon as step 1's checkpoint is whole, step 2's rollouts begin
    generating = start("during-generation")
    first = runs / "during-generation/checkpoints/checkpoint-1/trainer_state.json"
    deadline = time.time() + 600
    while not first.is_file() and generating.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    kill(generating)
    resume_and_compare("during-generation", "checkpoint-1")

    # a kill while checkpoint-3 was being written: its trainer state and weights cut short, no summary
    shutil.copytree(runs / "straight", runs / "cut-checkpoint")
    newest = runs / "cut-checkpoint/checkpoints/checkpoint-3"
    for name in ("trainer_state.json", "model.safetensors"):
        data = (newest / name).read_bytes()
        (newest / name).write_bytes(data[: len(data) // 2])
    shutil.rmtree(runs / "cut-checkpoint/checkpoints/final")
    (runs / "cut-checkpoint/summary.json").unlink()
    output = resume_and_compare("cut-checkpoint", "checkpoint-2")
    assert "checkpoint-3: trainer_state.json is cut short" in output


# -- Weights & Biases (run.report_to), offline: no key, no network ---------------------------------------------------


def wandb_records(path) -> list[bytes]:
    """The records of a .wandb file: W&B's LevelDB-style log (a 7-byte header, 32 KiB blocks, records with a
    7-byte header of CRC, length and FULL/FIRST/MIDDLE/LAST), read here since wandb ships no Python reader."""
    import struct

    data, block = path.read_bytes(), 32768
    assert data[:4] == b":W&B"
    records, pending, pos = [], b"", 7
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        chunk, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        if kind == 0:
            continue
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):
            records.append(pending)
    return records


def wandb_history(run_dir) -> list[dict]:
    """The rows an offline W&B run logged, read back from the .wandb file in the run directory."""
    from wandb.proto import wandb_internal_pb2

    (offline,) = (run_dir / "wandb").glob("offline-run-*")
    (path,) = offline.glob("*.wandb")
    rows = []
    for data in wandb_records(path):
        record = wandb_internal_pb2.Record()
        record.ParseFromString(data)
        if record.WhichOneof("record_type") == "history":
            rows.append(
                {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
            )
    return rows


@pytest.mark.parametrize("command", ["train", "evolve"])
def test_wandb_offline_logs_every_step_into_the_run_directory(
    command, tmp_path, repo_root, tiny_model_dir, monkeypatch
):
    pytest.importorskip("wandb")
    from helpers.runs import metrics, write_recipe

    for name in ("WANDB_API_KEY", "WANDB_DIR", "WANDB_RUN_ID", "WANDB_PROJECT", "WANDB_RESUME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "wandb-config"))
    population = {
        "enabled": True,
        "instructions": ["Search, then answer. Question: {question}\n"],
        "size": 2,
        "evolve_until": 0,
    }
    recipe = write_recipe(
        tmp_path,
        repo_root,
        str(tiny_model_dir),
        population=population,
        training={"steps": 2, "save_every": 2},
        run={"report_to": ["wandb"]},
    )
    result = invoke(
        command,
        "--recipe",
        recipe,
        "--output-dir",
        tmp_path / "runs",
        "--name",
        "tracked",
        *(["--device", "cpu"] if command == "evolve" else []),
    )
    assert result.exit_code == 0, result.output
    run = tmp_path / "runs" / "tracked"
    reward_key = "train/reward" if command == "train" else "reward"
    rows = [row for row in wandb_history(run) if reward_key in row]
    assert len(rows) == 2  # one per step, as metrics.jsonl
    assert [row[reward_key] for row in rows] == pytest.approx([r["reward"] for r in metrics(run)])
    assert any(key.endswith("population/size") for key in rows[0])


def test_wandb_online_without_a_key_is_refused_before_the_run_starts(tmp_path, repo_root, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    monkeypatch.setenv("HOME", str(tmp_path))
    result = invoke("train", "--recipe", "demo", "--set", "run.report_to=[wandb]", "--output-dir", tmp_path / "runs")
    assert_one_line_error(result, "run.report_to lists wandb but no W&B key", "WANDB_MODE=offline")
    assert not (tmp_path / "runs").exists()


def test_the_next_index_build_removes_what_killed_builds_left_and_nothing_else(tmp_path, repo_root):
    import os
    import socket
    import subprocess
    import sys

    from retriever.index import BUILDER, build_index

    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(finished.stdout)  # a process that has exited
    out = tmp_path / "idx"
    left = {name: tmp_path / f".idx.partial-{name}" for name in ("killed", "running", "old", "new")}
    for path in left.values():
        path.mkdir()
        (path / "part.bin").write_bytes(b"\0" * 1024)
    (left["killed"] / BUILDER).write_text(f"{socket.gethostname()} {dead_pid}\n")
    (left["running"] / BUILDER).write_text(f"{socket.gethostname()} {os.getpid()}\n")  # a build in progress
    os.utime(left["old"], (0, 0))  # killed before it named its builder, long ago
    build_index(repo_root / "data/world/corpus.jsonl", out, "bm25")
    assert (out / "index.json").is_file() and not (out / BUILDER).exists()
    assert {name for name, path in left.items() if path.exists()} == {"running", "new"}
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([".idx.partial-running", ".idx.partial-new", "idx"])
