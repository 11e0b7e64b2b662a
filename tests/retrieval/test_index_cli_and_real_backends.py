"""`inspo index` on the command line, and the real backends: MiniLM and e5 encoders (slow) and Lucene through
pyserini."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import typer
from helpers.jsonl_rows import rows
from typer.testing import CliRunner

from inspo_cli.commands.index import index as index_command
from retriever import Passage, build_index, open_retriever, read_index_meta
from retriever.errors import RetrieverError

WORLD_CORPUS = Path(__file__).resolve().parents[2] / "data" / "world" / "corpus.jsonl"

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
