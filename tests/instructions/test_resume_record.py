"""A resumed run reads the optimizer record instead of calling again (issue 39): each checkpoint (and `inspo evolve`'s
coevolution.json) saves how many lines optimizer_calls.jsonl had; resumed, the calls recorded after those lines
(made before the interruption) are answered from the record when asked again, in order, neither paid nor written
twice, while anything else goes to the optimizer; the run ends as an uninterrupted one, with the same accounting."""

from __future__ import annotations

import json
import shutil

import pytest
from helpers.coevolution import BAD, GOOD, evolve_recipe, fake_accelerator, make_loop

from inspo_cli.errors import InspoError
from inspo_cli.instructions.providers.call_record import CallRecord, summarize_record
from inspo_cli.instructions.providers.lm_errors import AttemptFailed, Completion
from inspo_cli.instructions.providers.optimizer_lm import OptimizerLM
from inspo_cli.instructions.providers.prices import Price

PARAMETERS = {"temperature": 1.0, "max_output_tokens": 8192, "thinking_budget": None}
PRICE = Price(1.25, 10.0)


class Client:
    """Answers "answer to <prompt>" (or `answer`), counting its calls; `unreachable` fails every call."""

    provider, model, endpoint = "openai", "scripted", "http://127.0.0.1:9/v1"

    def __init__(self, answer: str | None = None, unreachable: bool = False):
        self.answer, self.unreachable, self.prompts = answer, unreachable, []

    def attempt(self, prompt: str) -> Completion:
        self.prompts.append(prompt)
        if self.unreachable:
            raise AttemptFailed("could not be reached", retryable=False)
        return Completion(self.answer or f"answer to {prompt} #{len(self.prompts)}", 100, 20)


def lm_for(path, client, **kwargs) -> OptimizerLM:
    return OptimizerLM(client, max_retries=0, record=CallRecord(path), parameters=PARAMETERS, price=PRICE, **kwargs)


def lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_calls_recorded_after_the_checkpoint_are_answered_from_the_record_in_order(tmp_path):
    path = tmp_path / "optimizer_calls.jsonl"
    first = lm_for(path, Client())
    answers = [first.complete(p) for p in ("before", "after", "again", "again")]  # the checkpoint saw 1 line
    resumed, said = lm_for(path, Client(unreachable=True)), []
    assert resumed.resume_from_record(1, said.append) == 3
    assert [resumed.complete(p) for p in ("after", "again", "again")] == answers[1:]  # the same prompt: in turn
    assert len(lines(path)) == 4 and len(said) == 1  # nothing written twice; said once, when all were used
    assert said[0].startswith("resumed: 3 optimizer calls answered from ") and "instead of asked again" in said[0]
    accounting = resumed.accounting()
    assert (accounting["calls"], accounting["input_tokens"], accounting["output_tokens"]) == (3, 300, 60)
    assert accounting["cost_usd"] == pytest.approx(3 * (100 * 1.25 + 20 * 10) / 1e6)
    # what the record holds before the checkpoint, or not at all, goes to the optimizer (here: unreachable)
    with pytest.raises(InspoError, match="could not be reached"):
        resumed.complete("before")
    assert len(lines(path)) == 5 and lines(path)[-1]["error"]


def test_a_call_the_record_lacks_goes_to_the_optimizer_and_is_written(tmp_path):
    path = tmp_path / "optimizer_calls.jsonl"
    lm_for(path, Client()).complete("recorded")
    client, said = Client(answer="live"), []
    resumed = lm_for(path, client)
    resumed.resume_from_record(0, said.append)
    assert resumed.complete("new") == "live" and len(client.prompts) == 1
    assert "0 optimizer calls answered" in said[0]
    assert "the next has no recorded answer (1 recorded call left" in said[0]
    assert resumed.complete("recorded").startswith("answer to recorded")  # still answered from the record after
    assert len(client.prompts) == 1 and [r["prompt"] for r in lines(path)] == ["recorded", "new"] and len(said) == 1


def test_a_call_that_failed_when_recorded_is_asked_again(tmp_path):
    path = tmp_path / "optimizer_calls.jsonl"
    with pytest.raises(InspoError):
        lm_for(path, Client(unreachable=True)).complete("p")
    client = Client(answer="now it answers")
    resumed = lm_for(path, client)
    assert resumed.resume_from_record(0) == 1
    assert resumed.complete("p") == "now it answers" and len(client.prompts) == 1
    assert [r["answer"] for r in lines(path)] == [None, "now it answers"]


def test_a_missing_or_shorter_record_means_calling_again(tmp_path):
    path = tmp_path / "optimizer_calls.jsonl"
    said: list[str] = []
    resumed = lm_for(path, Client(answer="live"))
    assert resumed.resume_from_record(2, said.append) == 0 and "is missing" in said[0]
    assert resumed.complete("p") == "live"
    said.clear()
    again = lm_for(path, Client(answer="live"))
    assert again.resume_from_record(3, said.append) == 0 and "has 1 lines, fewer than the 3" in said[0]
    assert lm_for(tmp_path / "none.jsonl", Client()).resume_from_record(0) == 0


def test_a_cut_off_last_line_is_removed_before_the_next_is_appended(tmp_path, caplog):
    path = tmp_path / "optimizer_calls.jsonl"
    first = lm_for(path, Client())
    first.complete("a")
    first.complete("b")
    whole = path.read_text()
    path.write_text(whole[: len(whole) - 30])  # killed while writing "b"'s line
    resumed = lm_for(path, Client(answer="live"))
    assert "removed its last line, which is cut short" in caplog.text and "optimizer_calls.jsonl:2" in caplog.text
    assert resumed.resume_from_record(0) == 1 and resumed.complete("b") == "live"
    assert [r["prompt"] for r in lines(path)] == ["a", "b"]  # every line whole again
    # a last line whole but for its newline keeps its place, and the next starts on a line of its own
    path.write_text(path.read_text().rstrip("\n"))
    assert lm_for(path, Client()).record_lines() == 2
    lm_for(path, Client()).complete("c")
    assert [r["prompt"] for r in lines(path)] == ["a", "b", "c"]


def test_a_damaged_line_after_the_checkpoint_is_one_line_naming_it(tmp_path):
    path = tmp_path / "optimizer_calls.jsonl"
    first = lm_for(path, Client())
    for prompt in ("a", "b", "c"):
        first.complete(prompt)
    rows = path.read_text().splitlines()
    path.write_text("\n".join([rows[0], "{not json", rows[2]]) + "\n")
    with pytest.raises(InspoError) as info:
        lm_for(path, Client()).resume_from_record(1)
    message = str(info.value)
    assert "optimizer_calls.jsonl:2: not valid JSON" in message and "delete this line" in message
    assert "\n" not in message
    assert lm_for(path, Client()).resume_from_record(2) == 1  # damage before the checkpoint is not read


def test_a_resumed_evolve_takes_the_interrupted_evolution_from_the_record(tmp_path, monkeypatch):
    """`inspo evolve` cut off after step 4's evolution, before its state was saved, resumes from step 3: step 4's
    optimizer call comes from the record (the optimizer is not asked), step 6's is asked; instructions, evolutions,
    record and accounting are those of an uninterrupted run."""
    from inspo_cli.instructions.providers import opening as lm_module
    from inspo_cli.training import coevolution as coevolution_module
    from inspo_cli.training.coevolution import PolicyVerifier, instruction_source
    from inspo_cli.training.evolve import FrozenPolicyEvolution

    settings = dict(
        evolve_every=2,
        evolve_until=7,
        failures_per_call=3,
        size=4,
        instructions=f"[{json.dumps(BAD)}, {json.dumps('Answer briefly. {question}')}, {json.dumps(GOOD)}]",
    )
    answer = "<ins_1>Search the web, then answer. {question}</ins_1>"
    (tmp_path / "straight").mkdir()
    (tmp_path / "resumed").mkdir()
    straight_client = Client(answer)
    straight, straight_run = make_loop(
        tmp_path / "straight",
        evolve_recipe(**settings),
        lm_for(tmp_path / "straight/optimizer_calls.jsonl", straight_client),
    )
    straight.run_steps(1, 6)
    assert len(straight_client.prompts) == 3

    first, run = make_loop(
        tmp_path / "resumed",
        evolve_recipe(**settings),
        lm_for(run_record := tmp_path / "resumed/optimizer_calls.jsonl", Client(answer)),
    )
    first.run_steps(1, 3)
    saved = run.coevolution_file.read_text()
    assert json.loads(saved)["optimizer_record_lines"] == 1
    first.run_steps(4, 4)
    run.coevolution_file.write_text(saved)  # killed after step 4's evolution, before its state was written

    resumed_client, said = Client(answer), []
    monkeypatch.setattr(lm_module, "open_optimizer", lambda config, record=None: lm_for(record, resumed_client))
    monkeypatch.setattr(coevolution_module, "_console_warning", said.append)
    recipe = evolve_recipe(**settings)
    population, make_coevolution = instruction_source(
        recipe, run.coevolution_file, fake_accelerator(), record=run_record
    )
    coevolution = make_coevolution(PolicyVerifier(first.engine, recipe.reward))
    FrozenPolicyEvolution(recipe, first.questions, first.engine, coevolution, first.log, run).run_steps(4, 6)

    assert resumed_client.prompts == straight_client.prompts[2:]  # step 6 only
    assert [line for line in said if line.startswith("resumed:")] == [
        f"resumed: 1 optimizer call answered from {run_record} (recorded after the checkpoint, before the "
        "interruption) instead of asked again"
    ]
    assert population.records() == straight.coevolution.population.records()
    assert [r["candidates"] for r in coevolution.reports] == [r["candidates"] for r in straight.coevolution.reports]
    timing = ("wall_s", "latency_s")
    strip = lambda row: {k: v for k, v in row.items() if k not in timing}  # noqa: E731
    assert strip(coevolution.optimizer_accounting()) == strip(straight.coevolution.optimizer_accounting())
    assert [strip(r) for r in lines(run_record)] == [strip(r) for r in lines(straight_run.optimizer_calls_file)]
    assert summarize_record(run_record) == summarize_record(straight_run.optimizer_calls_file)
    assert json.loads(run.coevolution_file.read_text())["optimizer_record_lines"] == 3


@pytest.mark.slow
def test_a_training_run_cut_off_after_an_evolution_resumes_with_the_optimizer_unreachable(
    tmp_path, repo_root, tiny_model_dir, monkeypatch
):
    """`inspo train` cut back to its checkpoint at step 1, after the evolution at step 2 was recorded, resumes with the
    scripted optimizer shut down: the evolution's answers come from the record and the run ends as the uninterrupted
    one did (instructions, evolutions, metrics, the record's calls and the summary's optimizer accounting)."""
    from helpers.cli_helpers import invoke
    from helpers.fake_providers import ScriptedOptimizer
    from helpers.runs import SCRIPTED_ANSWERS, TIMING_KEYS, metrics, write_inspo_recipe

    monkeypatch.setenv("SCRIPTED_KEY", "sk-test-not-a-secret")
    optimizer = ScriptedOptimizer(SCRIPTED_ANSWERS)
    recipe = write_inspo_recipe(tmp_path, repo_root, str(tiny_model_dir), optimizer.url)
    runs = tmp_path / "runs"
    assert invoke("train", "--recipe", recipe, "--output-dir", runs, "--name", "straight").exit_code == 0
    straight, resumed = runs / "straight", runs / "resumed"
    calls = len(optimizer.prompts)
    assert calls >= 1
    shutil.copytree(straight, resumed)
    checkpoint = json.loads((resumed / "checkpoints/checkpoint-1/coevolution.json").read_text())
    assert checkpoint["optimizer_record_lines"] == 0  # the evolution at step 2 came after it
    for later in ("checkpoint-2", "checkpoint-3", "final"):
        shutil.rmtree(resumed / "checkpoints" / later)
    for name in ("summary.json", "evolutions.json", "best_instruction.txt"):
        (resumed / name).unlink()

    optimizer.server.shutdown()  # unreachable now: a call that reached for it would fail the evolution
    optimizer.server.server_close()
    result = invoke("train", "--resume", resumed)
    assert result.exit_code == 0, result.output
    assert f"resumed: {calls} optimizer call" in result.output and "instead of asked again" in result.output
    assert len(optimizer.prompts) == calls
    assert (resumed / "instructions.jsonl").read_text() == (straight / "instructions.jsonl").read_text()
    have, want = (json.loads((run / "evolutions.json").read_text()) for run in (resumed, straight))
    assert [{k: v for k, v in e.items() if k != "wall_s"} for e in have] == [
        {k: v for k, v in e.items() if k != "wall_s"} for e in want
    ]
    assert all(not e.get("optimizer_error") for e in have)
    strip = lambda rows: [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in rows]  # noqa: E731
    for row, expected in zip(strip(metrics(resumed)), strip(metrics(straight)), strict=True):
        assert row == pytest.approx(expected)
    assert summarize_record(resumed / "optimizer_calls.jsonl") == summarize_record(straight / "optimizer_calls.jsonl")
    accounts = [json.loads((run / "summary.json").read_text())["overhead"]["optimizer"] for run in (resumed, straight)]
    keep = ("calls", "failed_calls", "input_tokens", "output_tokens", "total_tokens", "cost_usd")
    assert [{k: a[k] for k in keep} for a in accounts][0] == {k: accounts[1][k] for k in keep}
    assert accounts[0]["cost_usd"] == 0.0  # the scripted optimizer's recipe prices it at 0
