"""`run.save_rollouts` (issue 55): a real training step's rollouts kept whole, the first N groups of each step, with
the policy's tokens and the inserted ones told apart exactly as the loss mask has them; a resumed run keeps each
step once; several processes' rows gathered into one file; damaged files are one-line errors."""

from __future__ import annotations

import gzip
from types import SimpleNamespace

import pytest

from inspo_cli.agent.segments import mask_runs
from inspo_cli.config import RewardConfig, load_recipe
from inspo_cli.errors import InspoError
from inspo_cli.jsonio import iter_rows
from inspo_cli.runs import RunDir
from inspo_cli.training.rollout_log import RolloutLog, step_file_name, step_files


def rows_of(run: RunDir, step: int) -> list[dict]:
    return list(iter_rows(run.rollouts_dir / step_file_name(step), dict, "fix"))


def test_a_real_step_keeps_its_first_groups_whole(make_trainer, tmp_path):
    from helpers.scripted_trainer import GROUP, RecordingSource, generation_batch

    trainer = make_trainer(RecordingSource("Use the search engine wisely."))
    assert trainer.save_rollouts == 2  # the default: two groups a step
    trainer.save_rollouts = 1
    batch = generation_batch()
    trainer._generate_and_score_completions(batch)
    trainer._end_step(1)
    run = RunDir(tmp_path)
    rows = rows_of(run, 1)
    assert len(rows) == GROUP and {r["group"] for r in rows} == {0}  # one group: the first question's rollouts
    assert {r["qid"] for r in rows} == {batch[0]["qid"]} and {r["question"] for r in rows} == {batch[0]["prompt"]}
    tokenizer = trainer.processing_class
    for row in rows:
        assert row["step"] == 1 and row["instruction_id"] == "rec" and row["type"] == batch[0]["category"] != ""
        assert row["golden_answers"] == batch[0]["golden_answers"]
        assert "Use the search engine wisely." in row["prompt"]
        assert tokenizer.decode(row["prompt_ids"]) == row["prompt"]
        # the mask's runs cover the completion; each segment is its run's tokens, decoded
        assert sum(n for _, n in row["mask"]) == len(row["completion_ids"])
        start = 0
        for (value, n), segment in zip(row["mask"], row["segments"], strict=True):
            assert segment["by"] == ("policy" if value else "inserted")
            assert segment["text"] == tokenizer.decode(row["completion_ids"][start : start + n])
            start += n
        inserted = "".join(s["text"] for s in row["segments"] if s["by"] == "inserted")
        assert "<information>" in inserted and "<search>" not in inserted  # the scripted policy searched once
        assert row["searches"] and len(row["retrieved"]) == len(row["searches"])
        assert row["stop_reason"] == "answer" and row["reward"] == row["em"] == row["score"]
    assert sorted(r["em"] for r in rows) == [0.0, 1.0]  # one right and one wrong answer per question
    trainer.model.eval()  # an evaluation's rollouts are not training's
    trainer._generate_and_score_completions(batch)
    trainer.model.train()
    trainer._end_step(2)
    assert [s for s, _ in step_files(run)] == [1]
    trainer.save_rollouts = 0
    trainer._generate_and_score_completions(batch)
    trainer._end_step(3)
    assert [s for s, _ in step_files(run)] == [1]  # 0 keeps nothing


def test_mask_runs():
    assert mask_runs([]) == []
    assert mask_runs([1, 1, 0, 0, 0, 1]) == [[1, 2], [0, 3], [1, 1]]


class Trajectory(SimpleNamespace):
    truncated = False


def trajectory(tokens=3):
    return Trajectory(
        prompt_ids=[1, 2],
        completion_ids=list(range(tokens)),
        completion_mask=[1] * tokens,
        queries=[],
        retrieved=[],
        tool_calls={},
        tool_errors={},
        invalid_actions=0,
        turns=1,
        answer="x",
        stop_reason="answer",
        response="",
        num_searches=0,
    )


class Tokenizer:
    def decode(self, ids, skip_special_tokens=False):
        return " ".join(map(str, ids))


def log(run, groups=2, main=True):
    return RolloutLog(run, groups, Tokenizer(), RewardConfig(), main_process=main)


def collect(writer, qids):
    n = len(qids)
    writer.collect([trajectory() for _ in qids], ["i0"] * n, [f"q {q}" for q in qids], [("x",)] * n, qids)


def test_groups_are_questions_per_round_in_order_and_all_keeps_every_one(tmp_path):
    run = RunDir(tmp_path)
    writer = log(run, groups=2)
    collect(writer, ["a", "a", "b", "b", "c", "c"])
    collect(writer, ["a", "a"])  # a second round (dynamic sampling) asking "a" again: another group
    writer.write_step(1)
    assert [(r["qid"], r["group"]) for r in rows_of(run, 1)] == [("a", 0), ("a", 0), ("b", 1), ("b", 1)]
    writer = log(run, groups=None)
    collect(writer, ["a", "a", "b", "b", "c", "c"])
    collect(writer, ["a", "a"])
    writer.write_step(2)
    assert [r["group"] for r in rows_of(run, 2)] == [0, 0, 1, 1, 2, 2, 3, 3]


def test_several_processes_rows_are_gathered_and_a_group_may_span_two(tmp_path):
    """Two processes, each with half of the generation batch (a group cut between them), gather in process order:
    the first two groups are chosen over all rows, and each process builds only its own chosen rows."""
    run = RunDir(tmp_path)
    writers = [log(run, groups=2, main=index == 0) for index in range(2)]
    for writer, qids in zip(writers, (["a", "a", "b"], ["b", "c", "c"])):
        collect(writer, qids)
    keys = [list(w.pending.keys) for w in writers]  # gather_object of [keys]: one list per process
    sent = []  # what process 1 hands the second gather

    def gather_1(obj):
        return keys if obj == [keys[1]] else sent.extend(obj) or obj

    writers[1].write_step(3, gather_1, process_index=1)
    writers[0].write_step(3, lambda obj: keys if obj == [keys[0]] else obj + sent, process_index=0)
    assert [r["qid"] for r in sent] == ["b"]  # process 1 built only its row of the second group
    rows = rows_of(run, 3)
    assert [(r["qid"], r["group"]) for r in rows] == [("a", 0), ("a", 0), ("b", 1), ("b", 1)]
    # rows of a group stay together in the file whatever order the processes held them in
    writers = [log(run, groups=2, main=index == 0) for index in range(2)]
    for writer in writers:
        collect(writer, ["a", "b"])
    keys, sent = [list(w.pending.keys) for w in writers], []
    writers[1].write_step(4, gather_1, process_index=1)
    writers[0].write_step(4, lambda obj: keys if obj == [keys[0]] else obj + sent, process_index=0)
    assert [r["group"] for r in rows_of(run, 4)] == [0, 0, 1, 1]


def test_a_resumed_run_keeps_each_step_once_and_leaves_other_files_alone(tmp_path):
    run = RunDir(tmp_path)
    first = log(run)
    for step in (1, 2, 3):
        collect(first, ["a", "a"])
        first.write_step(step)
    (run.rollouts_dir / "notes.txt").write_text("mine")
    resumed = log(run)  # from the checkpoint after step 1: steps 2 and 3 run again, and the run stops at 2
    collect(resumed, ["b", "b"])
    resumed.write_step(2)
    assert [s for s, _ in step_files(run)] == [1, 2]  # step 3 of the attempt cut short is gone
    assert {r["qid"] for r in rows_of(run, 2)} == {"b"}
    assert (run.rollouts_dir / "notes.txt").read_text() == "mine"
    (run.rollouts_dir / step_file_name(9)).mkdir()  # named like a step file, but not one the writer made
    again = log(run)  # resumed once more from the checkpoint after step 1: its step 2 keeps nothing this time
    again.write_step(2)
    assert [s for s, _ in step_files(run)] == [1] and (run.rollouts_dir / step_file_name(9)).is_dir()
    log(run, main=False).write_step(4)  # only the main process writes
    assert [s for s, _ in step_files(run)] == [1]


def test_the_same_rows_give_the_same_bytes_and_damage_is_one_error(tmp_path):
    run = RunDir(tmp_path)
    for step in (1, 2):
        writer = log(run)
        collect(writer, ["a", "a"])
        writer.write_step(step)
    one, two = (run.rollouts_dir / step_file_name(s) for s in (1, 2))
    assert gzip.decompress(one.read_bytes()).replace(b'"step": 1', b'"step": 2') == gzip.decompress(two.read_bytes())
    writer = log(run)
    writer.collect([trajectory()], ["i0"], ["a lone surrogate \ud800 and \u00e9"], [("x",)], ["s"])
    writer.write_step(5)  # any text a policy or a data file holds is written, and reads back as it was
    assert rows_of(run, 5)[0]["question"] == "a lone surrogate \ud800 and \u00e9"
    one.write_bytes(one.read_bytes()[:-12])  # cut short by a partial copy
    with pytest.raises(InspoError, match="cut short"):
        rows_of(run, 1)
    two.write_bytes(b"not gzip at all\n")
    with pytest.raises(InspoError, match="not gzip data"):
        rows_of(run, 2)


@pytest.mark.parametrize("value, groups", [("2", 2), ("all", None), ("ALL", None), ("0", 0), (" 007 ", 7)])
def test_the_recipe_field(value, groups):
    run = load_recipe(None, [f"run.save_rollouts={value}"], check_paths=False).run
    assert run.rollout_groups == groups and run.save_rollouts == ("all" if groups is None else str(groups))


@pytest.mark.parametrize("value", ["-1", "two", "2.5", "1e3", "²", "1234567890", ""])
def test_the_recipe_field_refuses_what_is_no_count(value):
    with pytest.raises(InspoError, match="run.save_rollouts: must be a number of groups per step"):
        load_recipe(None, [f"run.save_rollouts={value}"], check_paths=False)


def test_keeping_all_rollouts_of_a_paper_run_is_said_with_its_size():
    from inspo_cli.training.preflight import rollouts_size_warning

    paper = load_recipe("qwen2.5-7b/inspo", ["run.save_rollouts=all"], check_paths=False)
    said = rollouts_size_warning(paper)
    t = paper.training
    assert f"{t.batch_size * t.group_size:,} a step of up to {paper.rollout.max_total_tokens:,} tokens" in said
    expected = t.steps * t.batch_size * t.group_size * paper.rollout.max_total_tokens * 12 / 1e9
    assert f"up to {expected:,.0f} GB before compression" in said
    for quiet in (load_recipe("qwen2.5-7b/inspo", check_paths=False), load_recipe("demo", ["run.save_rollouts=all"])):
        assert rollouts_size_warning(quiet) is None  # the default 2 groups; every rollout of the demo's small run


def test_inspo_train_says_it_once_before_the_run(monkeypatch, tmp_path):
    """The warning goes with the recipe's other start-up warnings (main process, a new run), before training."""
    from helpers.cli_helpers import invoke

    trained = []
    monkeypatch.setattr("inspo_cli.training.preflight.rollouts_size_bytes", lambda recipe: 5e9)
    monkeypatch.setattr("inspo_cli.experiment._run", lambda *args, **kwargs: trained.append(True))
    result = invoke("train", "--recipe", "demo", "--set", "run.save_rollouts=all", "--output-dir", tmp_path)
    said = " ".join(result.stderr.split())
    assert said.count("warning: run.save_rollouts=all keeps every trajectory") == 1 and "up to 5 GB" in said
    assert trained == [True]
