"""`inspo index` and `open_retriever`: building index directories and searching them the way users do.

Fast tests use a tiny generated world (157 passages), the first 300 passages of the bundled world, and a
hashing bag-of-words encoder for the faiss plumbing; tests with the real MiniLM are marked slow.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import typer
from helpers.encoders import HashingEncoder
from typer.testing import CliRunner

from inspo_cli.commands.index import index as index_command
from inspo_cli.world import generate_world, write_world
from retriever import Passage, Retriever, build_index, open_index, open_retriever, read_index_meta
from retriever.bm25 import BM25Builder, make_tokenizer
from retriever.errors import RetrieverError

WORLD_CORPUS = Path(__file__).resolve().parents[2] / "data" / "world" / "corpus.jsonl"


@pytest.fixture(scope="module")
def tiny_world(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("world")
    write_world(generate_world(seed=0, size="tiny"), out)
    return out


@pytest.fixture(scope="module")
def corpus300(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("c300") / "corpus.jsonl"
    with WORLD_CORPUS.open() as f:
        path.write_text("".join(next(f) for _ in range(300)))
    return path


@pytest.fixture(scope="module")
def bm25_dir(tiny_world, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("idx") / "bm25"
    build_index(tiny_world / "corpus.jsonl", out, kind="bm25")
    return out


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


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


# -- dense: faiss plumbing with a hashing encoder ------------------------------------------------------------


@pytest.mark.parametrize("faiss_type", ["flat", "hnsw", "ivfpq"])
def test_dense_index_types_build_and_search(tmp_path, corpus300, faiss_type):
    encoder = HashingEncoder()
    meta = build_index(corpus300, tmp_path / "idx", kind="dense", faiss_type=faiss_type, encoder=encoder)
    assert meta["faiss"]["type"] == faiss_type and meta["encoder"]["dim"] == encoder.dim
    target = Passage.from_row(rows(corpus300)[42])
    retriever = open_index(tmp_path / "idx", encoder=encoder)
    (hits,) = retriever.search([target.contents], k=4)
    assert hits[0].id == target.id and len(hits) == 4
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert len(retriever.search(["x"], k=1000)[0]) <= 300


def test_ivfpq_refuses_a_corpus_too_small_to_train(tmp_path, tiny_world):
    with pytest.raises(RetrieverError, match="at least 256 passages"):
        build_index(
            tiny_world / "corpus.jsonl", tmp_path / "idx", kind="dense", faiss_type="ivfpq", encoder=HashingEncoder()
        )


def test_fp16_storage_halves_the_embeddings(tmp_path, corpus300):
    sizes = {}
    for fp16 in (False, True):
        out = tmp_path / f"idx-{fp16}"
        meta = build_index(corpus300, out, kind="dense", fp16=fp16, encoder=HashingEncoder())
        assert meta["faiss"]["fp16"] is fp16
        sizes[fp16] = (out / "faiss.index").stat().st_size
    vectors = 300 * HashingEncoder.dim
    assert sizes[False] >= vectors * 4 and sizes[True] < vectors * 2 + 1024
    (hits,) = open_index(tmp_path / "idx-True", encoder=HashingEncoder()).search([rows(corpus300)[5]["contents"]], k=1)
    assert hits[0].id == rows(corpus300)[5]["id"]


# -- GPU search without faiss-gpu: TorchFlatIndex (run here on CPU "devices") --------------------------------


def unit_rows(n: int, dim: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize("fp16", [False, True])
def test_torch_flat_index_returns_faiss_results_across_shards_and_blocks(fp16):
    from retriever.dense import TorchFlatIndex, new_faiss_index, stored_vectors

    vectors, queries = unit_rows(5000, 48, 0), unit_rows(21, 48, 1)
    index, _ = new_faiss_index("flat", 48, fp16, len(vectors))
    index.add(vectors)
    want_scores, want_rows = index.search(queries, 7)
    stored = stored_vectors(index)
    assert stored.dtype == (np.float16 if fp16 else np.float32) and stored.shape == (5000, 48)
    # three shards, and blocks of ~500 rows, so the merge across both is exercised
    torch_index = TorchFlatIndex(stored, ["cpu", "cpu", "cpu"], block_bytes=21 * 4 * 500)
    assert torch_index.ntotal == 5000 and len(torch_index.shards) == 3
    scores, rows_ = torch_index.search(queries, 7)
    assert rows_.dtype == np.int64 and (rows_ == want_rows).all()
    np.testing.assert_allclose(scores, want_scores, atol=1e-5)
    scores, rows_ = torch_index.search(queries[:2], 10_000)  # k larger than the index: everything, best first
    assert rows_.shape == (2, 5000) and (np.diff(scores, axis=1) <= 1e-6).all()


def test_open_index_on_a_cuda_machine_shards_flat_indexes_with_torch(tmp_path, corpus300, monkeypatch):
    """Where torch sees GPUs but faiss has no GPU build (pip's faiss-cpu), flat indexes search with
    TorchFlatIndex over every GPU; hnsw stays on the CPU. (GPUs faked as two CPU "devices" here.)"""
    import torch

    from retriever import dense

    made = []

    class RecordingTorchFlat(dense.TorchFlatIndex):
        def __init__(self, vectors, devices, **kw):
            made.append(list(devices))
            super().__init__(vectors, ["cpu"] * len(devices), **kw)

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(dense, "TorchFlatIndex", RecordingTorchFlat)
    encoder, query = HashingEncoder(), rows(corpus300)[42]["contents"]
    for faiss_type, fp16 in (("flat", False), ("flat", True), ("hnsw", False)):
        out = tmp_path / f"{faiss_type}-{fp16}"
        build_index(corpus300, out, kind="dense", faiss_type=faiss_type, fp16=fp16, encoder=encoder)
        on_gpu = open_index(out, encoder=encoder)
        on_cpu = open_index(out, encoder=encoder, gpu=False)
        assert isinstance(on_gpu.index, RecordingTorchFlat) == (faiss_type == "flat")
        assert [p.id for p in on_gpu.search([query], 5)[0]] == [p.id for p in on_cpu.search([query], 5)[0]]
    assert made == [["cuda:0", "cuda:1"]] * 2


def test_encoder_precision_defaults_to_float16_on_cuda_only():
    from retriever.encoder import resolve_encoder_dtype

    assert resolve_encoder_dtype("auto", "cuda") == "float16" and resolve_encoder_dtype("auto", "cpu") == "float32"
    assert resolve_encoder_dtype("bfloat16", "cpu") == "bfloat16"
    with pytest.raises(RetrieverError, match="--encoder-dtype 'float8' is not one of auto, float32, float16, bfloat16"):
        resolve_encoder_dtype("float8", "cuda")


# -- the command ---------------------------------------------------------------------------------------------


def cli(*args):
    app = typer.Typer()
    app.command("index")(index_command)

    @app.callback()
    def root() -> None:  # keep `index` a subcommand, as under `inspo`
        pass

    return CliRunner().invoke(app, ["index", *map(str, args)])


def test_cli_builds_an_index_and_prints_a_summary(tmp_path, corpus300):
    result = cli("--corpus", corpus300, "--out", tmp_path / "idx")
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert "~300 passages; memory needed to build the bm25 index" in text and "│ passages │ 300 │" in text
    assert read_index_meta(tmp_path / "idx")["corpus"]["passages"] == 300


def test_cli_refusals_exit_2_with_one_line(tmp_path, corpus300):
    for args, fragment in (
        (["--corpus", tmp_path / "missing.jsonl", "--out", tmp_path / "a"], "does not exist"),
        (["--corpus", corpus300, "--out", tmp_path / "a", "--kind", "bogus"], "--kind 'bogus'"),
        (["--corpus", corpus300, "--out", tmp_path / "a", "--max-memory-gb", "0.000001"], "needs about"),
        (["--corpus", corpus300, "--out", tmp_path / "a", "--faiss", "hnsw"], "apply to --kind dense"),
        (["--corpus", corpus300], "--out is required"),
    ):
        result = cli(*args)
        assert result.exit_code == 2, result.output
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], result.stderr


def test_cli_takes_defaults_from_a_recipe(tmp_path, corpus300, repo_root):
    out = tmp_path / "from-recipe"
    result = cli(
        "--recipe",
        repo_root / "recipes" / "demo.yaml",
        "--set",
        f"retriever.corpus={corpus300}",
        "--set",
        f"retriever.index={out}",
    )
    assert result.exit_code == 0, result.output
    meta = read_index_meta(out)
    assert meta["kind"] == "bm25" and meta["corpus"]["path"] == str(corpus300.resolve())


# -- real encoders (slow) ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_dense_minilm_flat_round_trip(tmp_path, tiny_world):
    meta = build_index(tiny_world / "corpus.jsonl", tmp_path / "idx", kind="dense", device="cpu")
    assert meta["encoder"]["name"] == "all-MiniLM-L6-v2" and meta["encoder"]["dim"] == 384
    assert meta["encoder"]["pooling"] == "mean" and meta["faiss"] == {"type": "flat", "fp16": False}
    retriever = open_retriever(tmp_path / "idx", device="cpu")
    target = Passage.from_row(rows(tiny_world / "corpus.jsonl")[30])
    questions = rows(tiny_world / "test.jsonl")
    results = retriever.search([target.contents] + [q["question"] for q in questions], k=3)
    assert results[0][0].id == target.id and results[0][0].score == pytest.approx(1.0, abs=1e-3)
    hit_at_3 = np.mean([any(h.id in q["supporting_ids"] for h in hits) for q, hits in zip(questions, results[1:])])
    assert hit_at_3 >= 0.3, hit_at_3


@pytest.mark.slow
def test_fast_tokenizing_encoder_equals_sentence_transformers_encode():
    """`Encoder` tokenises with the Rust tokenizer on a thread (GPU speed); the vectors must be exactly those of
    sentence-transformers' own encode, long (truncated) and padded texts included."""
    from retriever.encoder import load_encoder

    encoder = load_encoder(None, device="cpu", batch_size=16)
    texts = [row["contents"] for row in rows(WORLD_CORPUS)[:60]] + ["  padded  ", "word " * 700, "é ß 東京"]
    ours = encoder.encode_passages(texts)
    assert encoder._tokenizer() is not None  # the fast path was taken
    theirs = encoder.model.encode(texts, batch_size=16, normalize_embeddings=True, convert_to_numpy=True)
    assert ours.shape == (63, 384) and ours.dtype == np.float32
    np.testing.assert_allclose(ours, theirs, atol=1e-5)
    bf16 = load_encoder(None, device="cpu", dtype="bfloat16")
    assert bf16.dtype == "bfloat16" and bf16.describe()["dtype"] == "bfloat16"
    assert (bf16.encode_queries(texts[:4]) * ours[:4]).sum(axis=1).min() > 0.95


@pytest.mark.slow
def test_e5_offline_is_a_clear_error(tmp_path, corpus300):
    with pytest.raises(RetrieverError, match=r"'intfloat/e5-base-v2' is not available offline.*--encoder DIR"):
        build_index(corpus300, tmp_path / "idx", kind="dense", encoder="intfloat/e5-base-v2", device="cpu")
    assert not (tmp_path / "idx").exists()


def test_lucene_without_pyserini_says_how_to_install(tmp_path, corpus300):
    pytest.importorskip("numpy")
    try:
        import pyserini  # noqa: F401
    except ImportError:
        with pytest.raises(RetrieverError, match=r"pip install -e '\.\[lucene\]'"):
            build_index(corpus300, tmp_path / "idx", kind="lucene")
    else:
        pytest.skip("pyserini is installed; see test_lucene_round_trip")


@pytest.mark.slow
def test_lucene_round_trip(tmp_path, corpus300):
    pytest.importorskip("pyserini")
    build_index(corpus300, tmp_path / "idx", kind="lucene")
    (hits,) = open_retriever(tmp_path / "idx").search(["Hokin Works"], k=2)
    assert hits[0].title == "Hokin Works" and len(hits) == 2


def test_pyserini_key_placeholder_does_not_outlive_the_import(monkeypatch):
    # pyserini needs OPENAI_API_KEY at import; a placeholder left behind would reach an OpenAI optimizer client.
    import os

    from retriever import lucene

    seen = {}
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setattr(
        lucene.importlib, "import_module", lambda name: seen.setdefault(name, os.environ.get("OPENAI_API_KEY"))
    )
    lucene._import_pyserini("pyserini.search.lucene")
    assert seen == {"pyserini.search.lucene": lucene.OPENAI_KEY_PLACEHOLDER}
    assert "OPENAI_API_KEY" not in os.environ
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real")
    lucene._import_pyserini("pyserini")
    assert seen["pyserini"] == "sk-real" and os.environ["OPENAI_API_KEY"] == "sk-real"
