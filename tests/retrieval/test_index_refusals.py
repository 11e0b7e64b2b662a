"""Index building refuses what it cannot do, in one line: a corpus that moved or changed, bad corpora, unknown
kinds, a memory estimate over the limit, output directory rules, and an interrupted build."""

from __future__ import annotations

import json
import re

import pytest
from helpers.encoders import HashingEncoder

from retriever import build_index, open_retriever, read_index_meta
from retriever.errors import RetrieverError

# -- the corpus moving or changing ---------------------------------------------------------------------------


def test_moved_corpus_is_a_clear_error_and_can_be_pointed_at(tmp_path, corpus300):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_bytes(corpus300.read_bytes())
    build_index(corpus, tmp_path / "idx")
    moved = corpus.rename(tmp_path / "elsewhere.jsonl")
    with pytest.raises(RetrieverError, match=re.escape(str(corpus.resolve()))):
        open_retriever(tmp_path / "idx")
    (hits,) = open_retriever(tmp_path / "idx", corpus=moved).search(["Hokin Works"], k=1)
    assert hits[0].title == "Hokin Works"


def test_changed_corpus_is_a_clear_error(tmp_path, corpus300):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_bytes(corpus300.read_bytes())
    build_index(corpus, tmp_path / "idx")
    with corpus.open("a") as f:
        f.write(json.dumps({"id": "new", "contents": '"New"\nadded later'}) + "\n")
    with pytest.raises(RetrieverError, match="changed since"):
        open_retriever(tmp_path / "idx")


# -- refusals ------------------------------------------------------------------------------------------------


def test_bad_corpora_are_one_line_errors(tmp_path):
    with pytest.raises(RetrieverError, match="does not exist"):
        build_index(tmp_path / "nope.jsonl", tmp_path / "out")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "contents": "\\"A\\"\\ntext"}\n\n{"id": "b", "contents": \n')
    with pytest.raises(RetrieverError, match=re.escape(f"{bad}:3")):
        build_index(bad, tmp_path / "out")
    no_contents = tmp_path / "fields.jsonl"
    no_contents.write_text('{"id": "a", "text": "x"}\n')
    with pytest.raises(RetrieverError, match=r"fields.jsonl:1: missing field contents"):
        build_index(no_contents, tmp_path / "out")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(RetrieverError, match="no passages"):
        build_index(empty, tmp_path / "out")
    deep = tmp_path / "deep.jsonl"  # nested past Python's recursion limit: was a RecursionError traceback
    deep.write_text('{"id": "a", "contents": "\\"A\\"\\ntext"}\n' + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(RetrieverError, match=re.escape(f"{deep}:2: not valid JSON (nested too deeply)")):
        build_index(deep, tmp_path / "out")
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out.*"))


def test_a_deeply_nested_index_json_says_so(tmp_path):
    (tmp_path / "index.json").write_text('{"format": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(RetrieverError, match=r"index.json: not valid JSON \(nested too deeply\); rebuild it"):
        read_index_meta(tmp_path)


def test_unknown_kind_and_faiss_type(tmp_path, corpus300):
    with pytest.raises(RetrieverError, match="--kind 'sparse'"):
        build_index(corpus300, tmp_path / "out", kind="sparse")
    with pytest.raises(RetrieverError, match="--faiss 'ivf'"):
        build_index(corpus300, tmp_path / "out", kind="dense", faiss_type="ivf", encoder=HashingEncoder())
    with pytest.raises(RetrieverError, match="drop --fp16"):
        build_index(corpus300, tmp_path / "out", kind="dense", faiss_type="ivfpq", fp16=True, encoder=HashingEncoder())


def test_memory_estimate_over_the_limit_is_refused(tmp_path, corpus300):
    with pytest.raises(RetrieverError, match=r"needs about \d+ MB \(.*pairs.*\), over --max-memory-gb 1e-06"):
        build_index(corpus300, tmp_path / "out", max_memory_gb=1e-6)
    with pytest.raises(RetrieverError, match=r"--fp16 .* or --faiss ivfpq"):
        build_index(corpus300, tmp_path / "out", kind="dense", encoder=HashingEncoder(), max_memory_gb=1e-6)
    assert not (tmp_path / "out").exists()


def test_output_directory_rules(tmp_path, corpus300):
    other = tmp_path / "notes"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    for force in (False, True):  # never deletes a directory that is not an index, even with --force
        with pytest.raises(RetrieverError, match="not an inspo index"):
            build_index(corpus300, other, force=force)
    assert (other / "keep.txt").read_text() == "mine"

    out = tmp_path / "idx"
    first = build_index(corpus300, out)
    with pytest.raises(RetrieverError, match="pass --force"):
        build_index(corpus300, out)
    second = build_index(corpus300, out, force=True)
    assert second["created"] >= first["created"] and read_index_meta(out)["kind"] == "bm25"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx", "notes"]  # no temporary directories left

    empty = tmp_path / "empty"
    empty.mkdir()
    build_index(corpus300, empty)
    assert (empty / "index.json").is_file()


def test_interrupted_build_leaves_nothing_that_looks_like_an_index(tmp_path, corpus300):
    def interrupt(phase, done, total):
        if phase == "scoring":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        build_index(corpus300, tmp_path / "idx", progress=interrupt)
    assert list(tmp_path.iterdir()) == []
