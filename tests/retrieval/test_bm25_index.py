"""BM25 index directories built by `build_index` and searched through `open_retriever` the way users do, on the
tiny generated world (157 passages) and the first 300 passages of the bundled world."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers.jsonl_rows import rows

from retriever import Passage, Retriever, build_index, open_retriever, read_index_meta
from retriever.bm25 import BM25Builder, make_tokenizer
from retriever.errors import RetrieverError


@pytest.fixture(scope="module")
def bm25_dir(tiny_world, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("idx") / "bm25"
    build_index(tiny_world / "corpus.jsonl", out, kind="bm25")
    return out


# -- BM25 ---------------------------------------------------------------------------------------------------


def test_streamed_bm25_scores_equal_bm25s_own_index(tiny_world):
    import bm25s

    texts = [row["contents"] for row in rows(tiny_world / "corpus.jsonl")]
    builder = BM25Builder(make_tokenizer(None))
    for i in range(0, len(texts), 40):  # several chunks
        builder.add(texts[i : i + 40])
    ours = builder.finish()
    reference = bm25s.BM25()
    reference.index(make_tokenizer(None).tokenize(texts, return_as="tuple", show_progress=False), show_progress=False)
    assert np.array_equal(ours.scores["indptr"], reference.scores["indptr"])
    assert np.array_equal(ours.scores["indices"], reference.scores["indices"])
    np.testing.assert_allclose(ours.scores["data"], reference.scores["data"], rtol=1e-5)
    assert ours.vocab_dict == reference.vocab_dict


def test_bm25_round_trip_finds_the_passage_by_title(bm25_dir, tiny_world):
    corpus = rows(tiny_world / "corpus.jsonl")
    target = Passage.from_row(corpus[17])
    retriever = open_retriever(bm25_dir)
    assert isinstance(retriever, Retriever)
    (hits,) = retriever.search([f"{target.title} {target.text}"], k=5)
    assert hits[0].id == target.id and hits[0].title == target.title and hits[0].text == target.text
    assert len(hits) == 5
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True) and all(s > 0 for s in scores)


def test_bm25_batch_equals_one_by_one_and_k_is_respected(bm25_dir, tiny_world):
    retriever = open_retriever(bm25_dir)
    questions = [row["question"] for row in rows(tiny_world / "test.jsonl")][:8]
    batch = retriever.search(questions, k=3)
    assert [len(hits) for hits in batch] == [3] * len(questions)
    for question, hits in zip(questions, batch):
        (alone,) = retriever.search([question], k=3)
        assert [(h.id, round(h.score, 5)) for h in alone] == [(h.id, round(h.score, 5)) for h in hits]
    assert retriever.search([], k=3) == []
    with pytest.raises(TypeError):
        retriever.search("one string", k=3)


def test_bm25_k_larger_than_corpus_and_no_matching_term(bm25_dir, tiny_world):
    retriever = open_retriever(bm25_dir)
    n = len(rows(tiny_world / "corpus.jsonl"))
    (hits,) = retriever.search(["the"], k=10)  # only a stopword: nothing matches
    assert hits == []
    (hits,) = retriever.search(
        [" ".join(Passage.from_row(r).title for r in rows(tiny_world / "corpus.jsonl"))], k=n + 50
    )
    assert 0 < len(hits) <= n and len({h.id for h in hits}) == len(hits)


def test_bm25_hits_the_world_test_questions_supporting_passages(bm25_dir, tiny_world):
    questions = rows(tiny_world / "test.jsonl")
    n_passages = len(rows(tiny_world / "corpus.jsonl"))
    results = open_retriever(bm25_dir).search([q["question"] for q in questions], k=3)
    hit_at_3 = np.mean([any(h.id in q["supporting_ids"] for h in hits) for q, hits in zip(questions, results)])
    assert hit_at_3 >= 0.6, hit_at_3  # chance is about 3/157
    assert n_passages > 100


def test_top_k_keeps_only_matching_passages_best_first_ties_by_row():
    from retriever.bm25 import top_k

    rows, scores = top_k(np.array([0.0, 2.0, 0.0, 5.0, 2.0, 1.0], dtype=np.float32), k=3)
    assert rows.tolist() == [3, 1, 4] and scores.tolist() == [5.0, 2.0, 2.0]
    rows, _ = top_k(np.array([0.0, 0.5, 0.0], dtype=np.float32), k=10)
    assert rows.tolist() == [1]


def test_top_k_breaks_ties_at_the_kth_place_by_row_whatever_the_cpu():
    """Several passages tied at the k-th place: the first rows among them, not whichever numpy's partition kept
    (it kept another on an AVX2 machine than on the AVX-512 machine where the rollouts before tools were recorded)."""
    from retriever.bm25 import top_k

    scores = np.zeros(3000, dtype=np.float32)
    scores[[2249, 40, 1282, 2999]] = 0.9963171
    scores[1824] = 1.0136983
    for k in (2, 3):
        rows, _ = top_k(scores, k)
        assert rows.tolist() == [1824, 40, 1282][:k]
    rows, _ = top_k(np.ones(100, dtype=np.float32), k=5)
    assert rows.tolist() == [0, 1, 2, 3, 4]


def test_index_json_describes_the_index(bm25_dir, tiny_world):
    meta = read_index_meta(bm25_dir)
    corpus = tiny_world / "corpus.jsonl"
    assert meta["kind"] == "bm25" and meta["format"] == "inspo-index"
    assert meta["corpus"]["path"] == str(corpus.resolve()) and Path(meta["corpus"]["path"]).is_absolute()
    assert meta["corpus"]["passages"] == len(rows(corpus)) and meta["corpus"]["bytes"] == corpus.stat().st_size
    assert meta["bm25"]["tokenizer"]["stopwords"] and meta["inspo_version"] and meta["created"]
    assert np.load(bm25_dir / "offsets.npy").shape == (len(rows(corpus)) + 1,)


def test_in_memory_bm25_from_a_corpus_file_matches_the_index_and_is_cached(bm25_dir, tiny_world):
    corpus = tiny_world / "corpus.jsonl"
    in_memory = open_retriever(str(corpus))
    assert open_retriever(corpus) is in_memory
    questions = [row["question"] for row in rows(tiny_world / "test.jsonl")][:5]
    from_dir = open_retriever(bm25_dir).search(questions, k=3)
    assert [[h.id for h in hits] for hits in in_memory.search(questions, k=3)] == [
        [h.id for h in hits] for hits in from_dir
    ]


def test_bm25_never_starts_jax_which_would_take_the_gpus_memory(tmp_path, corpus300):
    """bm25s runs a JAX computation when it is imported and JAX is installed (on a GPU node JAX then takes 75% of
    the GPU's memory, in the trainer's process). Building and searching BM25 must not import JAX; a process that
    imported JAX itself keeps it."""
    import subprocess
    import sys

    fake = tmp_path / "site" / "jax"
    fake.mkdir(parents=True)
    marker = tmp_path / "jax-was-imported"
    (fake / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    (fake / "lax.py").write_text("def top_k(x, k):\n    raise RuntimeError('jax.lax.top_k ran')\n")
    code = f"""
import sys
from retriever import build_index, open_index, open_retriever
build_index({str(corpus300)!r}, {str(tmp_path / "idx")!r}, kind="bm25")
assert open_index({str(tmp_path / "idx")!r}).search(["Hokin Works"], 3)[0]
assert open_retriever({str(corpus300)!r}).search(["Hokin Works"], 3)[0]
assert "jax" not in sys.modules, "jax left hidden or imported"
import bm25s.selection
assert bm25s.selection.JAX_IS_AVAILABLE is False
"""
    env = {**__import__("os").environ, "PYTHONPATH": f"{tmp_path / 'site'}:{Path(__file__).resolve().parents[2]}"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert not marker.exists()
    already = subprocess.run(
        [
            sys.executable,
            "-c",
            "import jax\nfrom retriever.bm25 import import_bm25s\n"
            "import_bm25s()\nimport sys\nassert sys.modules['jax'] is jax",
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    assert "jax.lax.top_k ran" in already.stderr  # bm25s used the JAX the process had loaded: left as it was


def test_fast_passage_constructor_makes_ordinary_frozen_passages():
    import dataclasses

    from retriever.corpus import make_passage

    p = make_passage("7", "Title", "text", 0.5)
    assert p == Passage("7", "Title", "text") and hash(p) == hash(Passage("7", "Title", "text", 0.9))
    assert p.score == 0.5 and p.contents == '"Title"\ntext' and p.with_score(1.0).score == 1.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.id = "8"


def test_open_retriever_rejects_what_it_cannot_open(tmp_path):
    with pytest.raises(RetrieverError, match="neither an index directory"):
        open_retriever(tmp_path / "missing")
    with pytest.raises(RetrieverError, match="a directory without index.json"):
        open_retriever(tmp_path)
    with pytest.raises(RetrieverError, match="not an http"):
        open_retriever("HTTP://host/retrieve")  # the client takes lower-case schemes only: refused, not a path


def test_open_retriever_url_gives_the_http_client():
    retriever = open_retriever("http://127.0.0.1:9/retrieve", timeout_s=1)
    assert type(retriever).__name__ == "HTTPRetriever"
