"""Dense indexes: the faiss plumbing with a hashing bag-of-words encoder, and GPU search without faiss-gpu
(TorchFlatIndex, run here on CPU "devices")."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.encoders import HashingEncoder
from helpers.jsonl_rows import rows

from retriever import Passage, build_index, open_index
from retriever.errors import RetrieverError

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
