"""`inspo evaluate --judge DIR`: the judge's verdicts added to an evaluation made without them, from its predictions
(no model), through the real OpenAI SDK against a fake server on loopback."""

from __future__ import annotations

import json

import pytest
from helpers.cli_helpers import assert_one_line_error, invoke
from helpers.fake_providers import KEY, KEY_ENV, Reply, judge_settings, success_body

from inspo_cli.ablation.results import read_scores
from inspo_cli.config import dump_recipe, load_recipe
from inspo_cli.evaluation import judging
from inspo_cli.evaluation.judge import open_judge
from inspo_cli.evaluation.rejudge import add_verdicts
from inspo_cli.evaluation.report import write_results

QUESTION = "Who founded Hokin Works?"
PREDICTIONS = [  # (prediction, EM): an exact match, a right answer EM fails, a list of candidates, a wrong answer
    ("Ada Vell", 1.0),
    ("Ada Vell, its founder", 0.0),
    ("Ada Vell, Bo Ryn or Cy Tam", 0.0),
    ("Bo Ryn", 0.0),
]


def said(text: str) -> Reply:
    return Reply(body=success_body("openai", text))


def write_evaluation(directory):
    """An evaluation as `inspo evaluate` leaves it without the judge."""
    directory.mkdir(parents=True)
    rows = [
        {
            "method": "agent",
            "benchmark": "world",
            "id": f"q{i}",
            "question": QUESTION,
            "golden_answers": ["Ada Vell"],
            "prediction": prediction,
            "em": em,
            "f1": em,
            "subem": em,
            "searches": 1,
        }
        for i, (prediction, em) in enumerate(PREDICTIONS)
    ]
    (directory / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cell = {"em": 0.25, "f1": 0.25, "subem": 0.25, "searches": 1.0, "n": 4, "seconds": 1.0, "retrieval_seconds": 0.1}
    write_results(directory, {"agent": {"world": cell}}, {"model": "tiny", "instruction": "Answer it."})
    return directory


def sets(settings):
    return [a for s in settings for a in ("--set", s)]


def snapshot(directory):
    return {p.name: p.read_bytes() for p in directory.iterdir()}


def test_verdicts_are_added_to_an_evaluation_made_without_them(serve, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    server = serve("openai", said("Verdict: correct"), said("Verdict: correct"), said("Hmm."))
    evaluation = write_evaluation(tmp_path / "eval")
    result = invoke("evaluate", "--judge", evaluation, *sets(judge_settings(server, tmp_path)))
    assert result.exit_code == 0, result.output
    assert "LLM judge beside EM" in result.output
    results = json.loads((evaluation / "results.json").read_text())
    cell = results["scores"]["agent"]["world"]
    # judged: the exact match and the right answer (correct), the candidates (guard: 0); the last unparsed
    assert (cell["em"], cell["n"], cell["seconds"]) == (0.25, 4, 1.0)
    assert cell["judge"] == pytest.approx(2 / 3) and cell["judge_n"] == 3 and cell["judge_unparsed"] == 1
    assert results["model"] == "tiny" and results["instruction"] == "Answer it."  # what it recorded is kept
    assert results["judge"]["added_by"] == "inspo evaluate --judge" and results["judge"]["accounting"]["calls"] == 3
    rows = [json.loads(line) for line in (evaluation / "predictions.jsonl").open()]
    assert [r["judge"] for r in rows] == [1.0, 1.0, 0.0, None]
    assert [r["prediction"] for r in rows] == [p for p, _ in PREDICTIONS] and all(r["searches"] == 1 for r in rows)
    assert "## LLM judge beside EM (%)" in (evaluation / "results.md").read_text()
    assert [json.loads(line)["id"] for line in (evaluation / "judge_disagreements.jsonl").open()] == ["q1"]
    for path in evaluation.iterdir():
        assert KEY not in path.read_text(), path
    # what a table reads: the judged predictions only, averaging to the cell
    judge, n, questions = read_scores(evaluation / "results.json", "fix", "judge")
    assert judge == {"world": pytest.approx(2 / 3)} and n == {"world": 3}
    assert questions == {"world": {"q0": 1.0, "q1": 1.0, "q2": 0.0}}

    again = invoke("evaluate", "--judge", evaluation, *sets(judge_settings(server, tmp_path)))
    assert again.exit_code == 0, again.output
    assert len(server.requests) == 3  # every verdict from the cache (the unparsed one is asked again: no reply left)
    rows = [json.loads(line) for line in (evaluation / "predictions.jsonl").open()]
    assert [r["judge_source"] for r in rows][:3] == ["cache", "cache", "guard: lists candidates"]


def test_the_judge_of_the_run_the_evaluation_belongs_to(serve, tmp_path, monkeypatch, repo_root):
    monkeypatch.chdir(repo_root)
    monkeypatch.setenv(KEY_ENV, KEY)
    server = serve("openai", *(said("Verdict: incorrect") for _ in range(3)))
    run = tmp_path / "run"
    evaluation = write_evaluation(run / "evaluations" / "step-4")
    (run / "run.json").write_text("{}")
    (run / "recipe.yaml").write_text(dump_recipe(load_recipe("recipes/demo.yaml", judge_settings(server, tmp_path))))
    result = invoke("evaluate", "--judge", evaluation)  # no --set: the run's recipe names the served judge
    assert result.exit_code == 0, result.output
    assert len(server.requests) == 3
    cell = json.loads((evaluation / "results.json").read_text())["scores"]["agent"]["world"]
    assert cell["judge"] == 0.0 and cell["judge_n"] == 4


def test_bad_input_is_one_line_and_leaves_the_evaluation_as_it_was(serve, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    server = serve("openai")
    evaluation = write_evaluation(tmp_path / "eval")
    before = snapshot(evaluation)
    settings = judge_settings(server, tmp_path)
    assert_one_line_error(invoke("evaluate", "--judge", evaluation, "--model", "x"), "drop --model")
    assert_one_line_error(invoke("evaluate", "--judge", tmp_path / "nowhere"), "--judge")
    assert_one_line_error(invoke("evaluate", "--judge", evaluation / "results.json"), "--judge")
    monkeypatch.delenv(KEY_ENV)
    assert_one_line_error(invoke("evaluate", "--judge", evaluation, *sets(settings)), KEY_ENV)
    assert snapshot(evaluation) == before and not server.requests

    damaged = write_evaluation(tmp_path / "damaged")
    lines = (damaged / "predictions.jsonl").read_text().splitlines()
    row = json.loads(lines[2])
    del row["question"]
    (damaged / "predictions.jsonl").write_text("\n".join([*lines[:2], json.dumps(row), lines[3]]) + "\n")
    kept = snapshot(damaged)
    assert_one_line_error(invoke("evaluate", "--judge", damaged, *sets(settings)), "line 3 has no question")
    row = json.loads(lines[2])
    row["benchmark"] = "nq"
    (damaged / "predictions.jsonl").write_text("\n".join([*lines[:2], json.dumps(row), lines[3]]) + "\n")
    assert_one_line_error(invoke("evaluate", "--judge", damaged, *sets(settings)), "line 3", "no score for")
    (damaged / "predictions.jsonl").unlink()
    assert_one_line_error(invoke("evaluate", "--judge", damaged, *sets(settings)), "no predictions.jsonl")
    assert {k: v for k, v in kept.items() if k != "predictions.jsonl"} == snapshot(damaged)


def test_a_stop_while_judging_writes_nothing(serve, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    server = serve("openai")
    evaluation = write_evaluation(tmp_path / "eval")
    before = snapshot(evaluation)

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(judging, "judge_evaluation", stopped)
    config = load_recipe(None, judge_settings(server, tmp_path))
    with pytest.raises(KeyboardInterrupt):
        add_verdicts(evaluation, open_judge(config.judge))
    assert snapshot(evaluation) == before


def test_two_judgings_of_one_directory_at_once_are_refused(serve, tmp_path, monkeypatch):
    from inspo_cli.evaluation.rejudge import judging

    monkeypatch.setenv(KEY_ENV, KEY)
    server = serve("openai")
    evaluation = write_evaluation(tmp_path / "eval")
    before = snapshot(evaluation)
    with judging(evaluation):  # another process's judging, as far as flock is concerned (another open file)
        result = invoke("evaluate", "--judge", evaluation, *sets(judge_settings(server, tmp_path)))
    assert_one_line_error(result, "another `inspo evaluate --judge` is judging it now")
    assert snapshot(evaluation) == before and not server.requests


def test_judging_again_leaves_no_word_of_the_earlier_judge(serve, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    server = serve("openai")
    config = load_recipe(None, judge_settings(server, tmp_path))
    rows = [  # judged before with its own words; now a guard decides, which has none
        {"method": "agent", "benchmark": "world", "id": "q0", "question": QUESTION, "golden_answers": ["Ada Vell"],
         "prediction": "Ada Vell, Bo Ryn or Cy Tam", "em": 0.0, "judge": 1.0, "judge_text": "Verdict: correct"},
    ]  # fmt: skip
    scores = {"agent": {"world": {"em": 0.0, "n": 1}}}
    judging.judge_evaluation(open_judge(config.judge), rows, scores)
    assert rows[0]["judge"] == 0.0 and "judge_text" not in rows[0] and not server.requests


def test_a_judging_that_leaves_predictions_without_a_verdict_writes_nothing(serve, tmp_path, monkeypatch):
    """Judged once; judged again where every call is refused (a wrong key): the earlier verdicts stay, and the
    command fails, where it used to write the failures over them and score the cell on the guard's verdict alone."""
    monkeypatch.setenv(KEY_ENV, KEY)
    good = serve("openai", *(said("Verdict: correct") for _ in range(3)))
    evaluation = write_evaluation(tmp_path / "eval")
    assert invoke("evaluate", "--judge", evaluation, *sets(judge_settings(good, tmp_path))).exit_code == 0
    judged = snapshot(evaluation)
    refused = serve("openai", *(Reply(status=401, body={"error": {"message": "Incorrect API key"}}) for _ in range(9)))
    result = invoke("evaluate", "--judge", evaluation, *sets(judge_settings(refused, tmp_path / "other")))
    assert result.exit_code == 2 and "Traceback" not in result.output
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and "3 of 4 predictions got no verdict" in last and "nothing was written" in last
    assert KEY not in result.output
    assert snapshot(evaluation) == judged
    spent = [*judge_settings(good, tmp_path / "third"), "judge.max_calls=1"]  # one call for three predictions
    result = invoke("evaluate", "--judge", evaluation, *sets(spent))
    assert result.exit_code == 2 and "2 of 4 predictions got no verdict" in result.stderr.strip().splitlines()[-1]
    assert snapshot(evaluation) == judged


def test_what_cannot_be_written_back_is_refused_before_the_judge_is_asked(serve, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    server = serve("openai")
    settings = sets(judge_settings(server, tmp_path))

    def changed(name, change):
        directory = write_evaluation(tmp_path / name)
        change(directory)
        return directory, snapshot(directory)

    def without_f1(directory):  # an older results.json: its reader takes it, its writer needs f1
        results = json.loads((directory / "results.json").read_text())
        del results["scores"]["agent"]["world"]["f1"]
        (directory / "results.json").write_text(json.dumps(results))

    def fewer_rows(directory):
        lines = (directory / "predictions.jsonl").read_text().splitlines(keepends=True)
        (directory / "predictions.jsonl").write_text("".join(lines[:2]))

    def lone_surrogate(directory):  # valid JSON, but not text predictions.jsonl can be written back as
        text = (directory / "predictions.jsonl").read_text()
        (directory / "predictions.jsonl").write_text(text.replace('Bo Ryn"', 'Bo \\ud800Ryn"', 1))

    for name, change, fragments in (
        ("f1", without_f1, ("results.json: agent on world has no f1",)),
        ("rows", fewer_rows, ("2 predictions of agent on world", "scored 4")),
        ("surrogate", lone_surrogate, ("line 4 holds text that is not valid Unicode",)),
    ):
        directory, before = changed(name, change)
        assert_one_line_error(invoke("evaluate", "--judge", directory, *settings), *fragments)
        assert snapshot(directory) == before
    assert not server.requests
