"""A failing optimizer is said and never echoes the key, and a run, evaluation or output directory that fails to
start leaves nothing behind but what it created before."""

from __future__ import annotations

import json

import pytest
from helpers.cli_helpers import assert_one_line_error, invoke

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


def test_ctrl_c_before_a_run_wrote_anything_removes_it_and_after_keeps_it_to_resume(tmp_path, monkeypatch):
    """Ctrl-C while the models load: before, the run directory stayed and the message said `--resume`, which then
    refused it (no checkpoint); now it goes, as a failed start's does. Ctrl-C after a metrics row keeps it."""
    from inspo_cli import experiment

    monkeypatch.chdir(tmp_path)
    wrote = []

    def interrupted(recipe, run, resume, device):
        if wrote:
            run.append_metrics({"step": 1, "update": 1, "reward": 0.5})
        raise KeyboardInterrupt

    monkeypatch.setattr(experiment, "run_training", interrupted)
    train = ("train", "--recipe", "demo", "--output-dir", tmp_path / "runs", "--name", "r", "--device", "cpu")
    result = invoke(*train)
    assert result.exit_code == 130 and "Traceback" not in result.output
    assert "it had written nothing to continue from" in result.stderr and "--resume" not in result.stderr
    assert list(tmp_path.iterdir()) == []  # neither the run directory nor runs/ made for it
    wrote.append(True)
    result = invoke(*train)
    assert result.exit_code == 130 and f"inspo train --resume {tmp_path / 'runs' / 'r'}" in result.stderr
    assert (tmp_path / "runs/r/metrics.jsonl").read_text().startswith('{"step": 1')
    wrote.clear()  # a resume interrupted at once never removes what it resumes, even with no metrics row yet
    (tmp_path / "runs/r/metrics.jsonl").write_text("")
    result = invoke("train", "--resume", tmp_path / "runs" / "r")
    assert result.exit_code == 130 and "--resume" in result.stderr and (tmp_path / "runs/r/recipe.yaml").is_file()


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
