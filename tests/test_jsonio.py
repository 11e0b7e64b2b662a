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
    path.write_text('[1, 2]\n')
    with pytest.raises(InspoError, match=r"rows.jsonl:1: expected an object"):
        read_jsonl(path)
