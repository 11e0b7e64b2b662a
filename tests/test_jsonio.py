"""Atomic writes: a crash mid-write never loses or truncates what was already there."""

from __future__ import annotations

import os
import stat

import pytest

from inspo_cli.errors import InspoError
from inspo_cli.jsonio import atomic_write_json, atomic_write_text, read_jsonl


def test_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "metrics.json"
    atomic_write_json(path, {"step": 1})

    def crash(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        atomic_write_json(path, {"step": 2})
    assert path.read_text() == '{\n  "step": 1\n}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.json"]


def test_written_files_are_readable_by_others_like_any_file(tmp_path):
    previous = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "a.txt", "x")
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "a.txt").stat().st_mode) == 0o644


def test_malformed_jsonl_names_file_and_line(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"a": 1}\n\n{"a": \n')
    with pytest.raises(InspoError, match=r"rows.jsonl:3: not valid JSON"):
        read_jsonl(path)
    path.write_text("[1, 2]\n")
    with pytest.raises(InspoError, match=r"rows.jsonl:1: expected an object"):
        read_jsonl(path)


@pytest.mark.parametrize(
    "value, problem",
    [
        (1.5, '"em": expected a finite number in [0, 1], got float 1.5'),
        (float("nan"), '"em": expected a finite number in [0, 1], got float NaN'),
        (-1e-9, "in [0, 1]"),
        (True, "got bool true"),
        ("0.5", 'got str "0.5"'),
    ],
)
def test_a_range_shape_refuses_a_number_of_the_right_type_out_of_range(value, problem):
    from inspo_cli.jsonio import UNIT, shape_problem

    assert problem in shape_problem({"em": value}, {"em": UNIT})
    assert shape_problem({"em": 0}, {"em": UNIT}) is None and shape_problem({"em": 1.0}, {"em": UNIT}) is None


def test_non_empty_and_counts():
    from inspo_cli.jsonio import COUNT, POSITIVE, NonEmpty, shape_problem

    assert shape_problem({}, NonEmpty({str: float})) == "expected a non-empty object, got dict {}"
    assert shape_problem([], NonEmpty([int])) == "expected a non-empty list, got list []"
    assert "item 2: expected an integer >= 0, got int -1" in shape_problem([1, -1], NonEmpty([COUNT]))
    assert shape_problem({"n": 0}, {"n": POSITIVE}) == '"n": expected an integer >= 1, got int 0'
    assert shape_problem({"n": 2.0}, {"n": POSITIVE}) is not None  # a count is an integer
    assert shape_problem({"a": {"b": [3]}}, NonEmpty({str: NonEmpty({"b": [COUNT]})})) is None


def test_a_row_check_sees_every_row_in_order_and_names_the_line(tmp_path):
    from inspo_cli.jsonio import iter_rows

    path = tmp_path / "m.jsonl"
    path.write_text('{"step": 1}\n\n{"step": 2}\n{"step": 2}\n')
    seen = []

    def check(row):
        seen.append(row["step"])
        return "repeated" if seen.count(row["step"]) > 1 else None

    with pytest.raises(InspoError, match=r"m.jsonl:4: repeated; fix it"):
        list(iter_rows(path, {"step": int}, "fix it", check=check))
    assert seen == [1, 2, 2]
