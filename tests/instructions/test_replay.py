"""Optimizer record and replay (issue 39): a run records every optimizer call, and a run with the same recipe and
seed replayed from that record (`--replay-optimizer`, `optimizer.replay`) evolves exactly as recorded with the
optimizer unreachable and no key; a call the record lacks stops the run in one line naming the step and the hash."""

from __future__ import annotations

import json
import random

import pytest
from helpers.cli_helpers import invoke
from helpers.evolution import SCORES, DictVerifier, make_buffer, make_config, make_population
from helpers.fake_providers import ScriptedOptimizer
from helpers.runs import SCRIPTED_ANSWERS, TIMING_KEYS, metrics, write_inspo_recipe

from inspo_cli.instructions.evolution import evolve
from inspo_cli.instructions.providers.call_record import CallRecord, ReplayClient, ReplayMissing, summarize_record
from inspo_cli.instructions.providers.lm_errors import Completion
from inspo_cli.instructions.providers.optimizer_lm import OptimizerLM

PARAMETERS = {"temperature": 1.0, "max_output_tokens": None, "thinking_budget": None}
ROUND = "<ins_1>Alpha: search twice.</ins_1><ins_2>Beta: plan first.</ins_2><ins_3>Gamma: verify facts.</ins_3>"


class Client:
    provider, model, endpoint = "openai", "scripted", "http://127.0.0.1:9/v1"

    def __init__(self, answer: str):
        self.answer, self.calls = answer, 0

    def attempt(self, prompt: str) -> Completion:
        self.calls += 1
        return Completion(self.answer, 100, 20)


def test_an_evolution_replays_from_its_record_and_a_missing_call_names_step_and_hash(tmp_path):
    path = tmp_path / "optimizer_calls.jsonl"
    config = make_config(max_verify_rounds=2)
    recorded = evolve(
        make_population(config),
        make_buffer(),
        OptimizerLM(Client(ROUND), record=CallRecord(path), parameters=PARAMETERS),
        DictVerifier(SCORES),
        config,
        15,
        random.Random(0),
    )
    replay = OptimizerLM(ReplayClient(path, "openai", "scripted", PARAMETERS), parameters=PARAMETERS)
    replayed = evolve(
        make_population(config), make_buffer(), replay, DictVerifier(SCORES), config, 15, random.Random(0)
    )
    strip = lambda report: {k: v for k, v in report.as_dict().items() if k != "wall_s"}  # noqa: E731
    assert strip(replayed) == strip(recorded) and replay.accounting()["total_tokens"] == 120 * recorded.optimizer_calls
    # asking for 2 candidates instead of 3 is a prompt the record never saw
    other = make_config(max_verify_rounds=2, candidates_per_call=2)
    with pytest.raises(
        ReplayMissing,
        match=r"^step 15: the optimizer record .* holds no answer to this prompt "
        r"\(sha256:[0-9a-f]{64}, openai scripted\)",
    ):
        evolve(
            make_population(other),
            make_buffer(),
            OptimizerLM(ReplayClient(path, "openai", "scripted", PARAMETERS)),
            DictVerifier(SCORES),
            other,
            15,
            random.Random(0),
        )


def test_a_record_of_other_parameters_answers_nothing(tmp_path):
    path = tmp_path / "optimizer_calls.jsonl"
    OptimizerLM(Client(ROUND), record=CallRecord(path), parameters=PARAMETERS).complete("p")
    other = OptimizerLM(ReplayClient(path, "openai", "scripted", {**PARAMETERS, "temperature": 0.5}))
    with pytest.raises(ReplayMissing):
        other.complete("p")
    assert OptimizerLM(ReplayClient(path, "openai", "scripted", PARAMETERS)).complete("p") == ROUND


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "is neither a record file (optimizer_calls.jsonl) nor a directory"),
        ('{"hash": 3}\n', "optimizer_calls.jsonl:1:"),
        ("not json\n", "not valid JSON"),
    ],
)
def test_a_bad_record_is_one_line(tmp_path, content, message):
    from inspo_cli.errors import InspoError

    path = tmp_path / "optimizer_calls.jsonl"
    if content is not None:
        path.write_text(content)
    with pytest.raises(InspoError) as info:
        ReplayClient(path if content is not None else tmp_path / "missing", "openai", "m", PARAMETERS)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_directory_without_records_is_refused(tmp_path):
    from inspo_cli.errors import InspoError

    with pytest.raises(InspoError, match="holds no optimizer_calls.jsonl"):
        ReplayClient(tmp_path, "openai", "m", PARAMETERS)


@pytest.mark.slow
def test_a_recorded_training_run_replays_identically_with_the_optimizer_unreachable(
    tmp_path, repo_root, tiny_model_dir, monkeypatch
):
    monkeypatch.setenv("SCRIPTED_KEY", "sk-test-not-a-secret")
    optimizer = ScriptedOptimizer(SCRIPTED_ANSWERS)
    recipe = write_inspo_recipe(tmp_path, repo_root, str(tiny_model_dir), optimizer.url)
    runs = tmp_path / "runs"
    assert invoke("train", "--recipe", recipe, "--output-dir", runs, "--name", "recorded").exit_code == 0
    recorded = runs / "recorded"
    calls = len(optimizer.prompts)
    assert calls >= 1 and len((recorded / "optimizer_calls.jsonl").read_text().splitlines()) == calls

    optimizer.server.shutdown()  # unreachable now, and no key either
    optimizer.server.server_close()
    monkeypatch.delenv("SCRIPTED_KEY")
    result = invoke(
        "train", "--recipe", recipe, "--output-dir", runs, "--name", "replayed", "--replay-optimizer", recorded
    )
    assert result.exit_code == 0, result.output
    replayed = runs / "replayed"
    for name in ("instructions.jsonl", "evolutions.json", "best_instruction.txt"):
        have, want = (replayed / name).read_text(), (recorded / name).read_text()
        if name == "evolutions.json":
            have, want = (
                [{k: v for k, v in e.items() if k != "wall_s"} for e in json.loads(text)] for text in (have, want)
            )
        assert have == want, name
    strip = lambda rows: [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in rows]  # noqa: E731
    for have, want in zip(strip(metrics(replayed)), strip(metrics(recorded)), strict=True):
        assert have == pytest.approx(want)
    assert len(optimizer.prompts) == calls  # nothing reached the server
    # the replayed run records the calls it answered too, so it can itself be replayed; its lines say they were
    # replayed, and total what the recorded run's calls cost
    lines = [json.loads(line) for line in (replayed / "optimizer_calls.jsonl").read_text().splitlines()]
    assert len(lines) == calls and all(line["replayed"] for line in lines)
    totals = {
        name: summarize_record(run / "optimizer_calls.jsonl") for name, run in (("have", replayed), ("want", recorded))
    }
    assert totals["have"].pop("replayed_calls") == calls and totals["want"].pop("replayed_calls") == 0
    assert totals["have"] == totals["want"] and totals["want"]["cost_usd"] == 0.0


@pytest.mark.parametrize(
    "value, message",
    [
        ("''", "optimizer.replay: must be a path"),
        ("'   '", "optimizer.replay: must be a path"),
    ],
)
def test_optimizer_replay_is_checked(repo_root, value, message):
    from inspo_cli.config import load_recipe
    from inspo_cli.errors import InspoError

    with pytest.raises(InspoError, match=message):
        load_recipe(repo_root / "recipes/demo.yaml", [f"optimizer.replay={value}"])


def test_a_replayed_recipe_needs_no_key_but_its_record_must_exist(repo_root, tmp_path, monkeypatch):
    from inspo_cli.config import load_recipe
    from inspo_cli.errors import InspoError
    from inspo_cli.training.preflight import check_run

    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    recipe = load_recipe(
        repo_root / "recipes/demo.yaml",
        ["optimizer.provider=gemini", "optimizer.model=gemini-x", f"optimizer.replay={tmp_path / 'nowhere'}"],
    )
    with pytest.raises(InspoError, match="optimizer.replay: .*nowhere does not exist"):
        check_run("train", recipe, 1, "cpu")
    (tmp_path / "nowhere").mkdir()
    with pytest.raises(InspoError, match="optimizer.replay: .*nowhere holds no optimizer_calls.jsonl"):
        check_run("train", recipe, 1, "cpu")
    (tmp_path / "nowhere" / "optimizer_calls.jsonl").write_text("")
    check_run("train", recipe, 1, "cpu")  # no GEMINI_API_KEY needed
