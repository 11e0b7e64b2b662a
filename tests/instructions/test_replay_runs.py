"""Replaying never mixes runs (issue 51): from an ablation's directory each run (variant x seed) is answered from its
own record only, a prompt recorded twice gets its answers in the order they were asked, a resumed replay goes on
where it stopped, and a record line that is not what its hash says is refused, naming the file and the line."""

from __future__ import annotations

import json

import pytest

from inspo_cli.errors import InspoError
from inspo_cli.instructions.providers.call_record import CallRecord, ReplayClient, ReplayMissing, replay_record
from inspo_cli.instructions.providers.lm_errors import Completion
from inspo_cli.instructions.providers.optimizer_lm import OptimizerLM

PARAMETERS = {"temperature": 1.0, "max_output_tokens": 8192, "thinking_budget": None}
REWRITE = "Rewrite this instruction 3 times."  # every seed's first call: the same prompt


class Client:
    """Answers the calls it is given, in turn."""

    provider, model, endpoint = "openai", "scripted", "http://127.0.0.1:9/v1"

    def __init__(self, *answers: str):
        self.answers = list(answers)

    def attempt(self, prompt: str) -> Completion:
        return Completion(self.answers.pop(0), 100, 20)


def write_run(directory, calls: list[tuple[str, str]]):
    """A run directory (run.json) whose optimizer record holds `calls`, (prompt, answer) in the order asked."""
    directory.mkdir(parents=True)
    (directory / "run.json").write_text(json.dumps({"name": directory.name, "seed": 0}))
    if calls:
        lm = OptimizerLM(
            Client(*(answer for _, answer in calls)),
            record=CallRecord(directory / "optimizer_calls.jsonl"),
            parameters=PARAMETERS,
        )
        for prompt, _ in calls:
            lm.complete(prompt)
    return directory


def replay(source, record=None) -> OptimizerLM:
    return OptimizerLM(ReplayClient(source, "openai", "scripted", PARAMETERS, record=record), parameters=PARAMETERS)


@pytest.fixture
def ablation(tmp_path):
    """An ablation of an evolving variant and a static one over seeds 0 and 1: each seed was asked the same first
    prompt and answered differently; the static runs never called the optimizer."""
    out = tmp_path / "recorded"
    write_run(out / "runs/inspo-s0", [(REWRITE, "seed 0's rewrites"), ("evolve from seed 0", "seed 0's children")])
    write_run(out / "runs/inspo-s1", [(REWRITE, "seed 1's rewrites"), ("evolve from seed 1", "seed 1's children")])
    for seed in (0, 1):
        write_run(out / f"runs/static-s{seed}", [])
    (out / "plan.json").write_text("{}")
    return out


def test_each_run_of_an_ablation_replays_its_own_record_only(ablation, tmp_path):
    replayed = tmp_path / "replayed/runs"
    for seed in (0, 1):
        lm = replay(ablation, replayed / f"inspo-s{seed}/optimizer_calls.jsonl")
        assert lm.complete(REWRITE) == f"seed {seed}'s rewrites"
        assert lm.complete(f"evolve from seed {seed}") == f"seed {seed}'s children"
        with pytest.raises(ReplayMissing, match=rf"runs/inspo-s{seed}/optimizer_calls.jsonl holds no answer"):
            lm.complete(f"evolve from seed {1 - seed}")  # the other seed's call is not this run's
    # the ablation's runs/ folder, or the ablation one level up, places each run the same way
    assert (
        replay(ablation / "runs", replayed / "inspo-s1/optimizer_calls.jsonl").complete(REWRITE) == "seed 1's rewrites"
    )
    # a run that never called the optimizer is there: any call it now makes is not as recorded
    static = replay(ablation, replayed / "static-s0/optimizer_calls.jsonl")
    with pytest.raises(ReplayMissing, match=r"^the recorded run .*/runs/static-s0 made no optimizer calls: it holds "):
        static.complete(REWRITE)


def test_a_recipes_optimizer_replay_answers_each_run_from_its_own_record(ablation, tmp_path):
    from inspo_cli.config import OptimizerConfig
    from inspo_cli.instructions.providers.opening import open_optimizer

    config = OptimizerConfig(
        provider="openai", model="scripted", temperature=1.0, max_output_tokens=8192, replay=str(ablation)
    )
    for seed in (1, 0):
        record = tmp_path / f"replayed/runs/inspo-s{seed}/optimizer_calls.jsonl"
        record.parent.mkdir(parents=True)
        assert open_optimizer(config, record=record).complete(REWRITE) == f"seed {seed}'s rewrites"


def test_a_run_the_source_has_no_record_of_is_refused_naming_the_run_and_the_directory(ablation, tmp_path):
    for record in (tmp_path / "replayed/runs/inspo-s2/optimizer_calls.jsonl", None):
        with pytest.raises(InspoError) as info:
            ReplayClient(ablation, "openai", "scripted", PARAMETERS, record=record)
        message = str(info.value)
        assert message.startswith(f"optimizer.replay: {ablation} holds no record of ") and "\n" not in message
        assert "runs/inspo-s0/optimizer_calls.jsonl" in message
        assert ("the run inspo-s2" in message) == (record is not None)


def test_one_run_directory_or_record_answers_a_run_of_any_name(tmp_path):
    run = write_run(tmp_path / "recorded", [(REWRITE, "its rewrites")])
    other = tmp_path / "runs/another-name/optimizer_calls.jsonl"
    assert replay(run, other).complete(REWRITE) == "its rewrites"
    assert replay(run / "optimizer_calls.jsonl", other).complete(REWRITE) == "its rewrites"
    assert replay(run).complete(REWRITE) == "its rewrites"


def test_a_chained_run_replays_each_stage_from_that_stage(tmp_path):
    run = write_run(tmp_path / "recorded", [])
    write_run(run / "stages/1-evolve", [(REWRITE, "the evolve stage's")])
    write_run(run / "stages/2-train", [])
    replayed = tmp_path / "replayed"
    assert (
        replay_record(run, replayed / "stages/1-evolve/optimizer_calls.jsonl")
        == run / "stages/1-evolve/optimizer_calls.jsonl"
    )
    assert (
        replay_record(run, replayed / "stages/2-train/optimizer_calls.jsonl")
        == run / "stages/2-train/optimizer_calls.jsonl"
    )  # not there: that stage made no calls


def test_a_prompt_recorded_twice_is_answered_in_the_order_it_was_asked(tmp_path):
    run = write_run(tmp_path / "recorded", [(REWRITE, "first"), ("other", "between"), (REWRITE, "second")])
    lm = replay(run)
    assert [lm.complete(REWRITE), lm.complete(REWRITE), lm.complete("other")] == ["first", "second", "between"]
    with pytest.raises(ReplayMissing):
        lm.complete(REWRITE)  # asked a third time: the recorded run never did


def test_a_resumed_replay_goes_on_with_the_answers_after_its_checkpoint(tmp_path):
    source = write_run(tmp_path / "recorded", [(REWRITE, "first"), (REWRITE, "second"), (REWRITE, "third")])
    own = tmp_path / "replayed/optimizer_calls.jsonl"
    own.parent.mkdir()
    interrupted = OptimizerLM(
        ReplayClient(source, "openai", "scripted", PARAMETERS, record=own),
        record=CallRecord(own),
        parameters=PARAMETERS,
    )
    assert [interrupted.complete(REWRITE), interrupted.complete(REWRITE)] == ["first", "second"]
    # resumed from a checkpoint that saw 1 line: the second call is taken back from its own record, the third is
    # the source's third answer, never its first again
    resumed = OptimizerLM(
        ReplayClient(source, "openai", "scripted", PARAMETERS, record=own),
        record=CallRecord(own),
        parameters=PARAMETERS,
    )
    assert resumed.resume_from_record(1) == 1
    assert [resumed.complete(REWRITE), resumed.complete(REWRITE)] == ["second", "third"]
    assert [json.loads(line)["answer"] for line in own.read_text().splitlines()] == ["first", "second", "third"]


@pytest.mark.parametrize(
    "change, problem",
    [
        (lambda row: row.update(prompt="a prompt pasted in"), "its hash sha256:"),
        (lambda row: row.update(parameters={**row["parameters"], "temperature": 0.0}), "its hash sha256:"),
        (lambda row: row.update(model="another"), "its hash sha256:"),
        (lambda row: row.update(hash="sha256:" + "0" * 64), "its hash sha256:0000"),
        (lambda row: row.pop("provider"), 'no "provider"'),
    ],
)
def test_a_line_that_is_not_what_its_hash_says_is_refused_naming_file_and_line(tmp_path, change, problem):
    from inspo_cli.instructions.providers.call_record import recorded_after

    run = write_run(tmp_path / "recorded", [(REWRITE, "first"), ("other", "second")])
    path = run / "optimizer_calls.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    change(rows[1])
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    for read in (lambda: ReplayClient(run, "openai", "scripted", PARAMETERS), lambda: recorded_after(path, 1)):
        with pytest.raises(InspoError) as info:
            read()
        assert str(info.value).startswith(f"{path}:2: {problem}") and "\n" not in str(info.value)


def test_a_run_made_inside_the_source_is_never_its_own_source(ablation):
    """The run's directory is made before it asks: replaying into a directory under the source (an ablation's
    --out inside the recorded one, `train --replay-optimizer runs/` with runs/ as the output directory) answers from
    the recorded run of its place, or is refused; never from the empty record it is about to write."""
    again = ablation / "again/runs/inspo-s1"
    again.mkdir(parents=True)
    assert replay_record(ablation, again / "optimizer_calls.jsonl") == ablation / "runs/inspo-s1/optimizer_calls.jsonl"
    beside = ablation / "runs/fresh"
    beside.mkdir()
    with pytest.raises(InspoError, match="holds no record of the run fresh"):
        replay_record(ablation / "runs", beside / "optimizer_calls.jsonl")
