"""Issue 37, classes 9 and 10: the files of an index (index.json, offsets.npy) and of a model (config.json, the
safetensors headers) are read through checked, bounded readers like a run's files. A generated matrix damages each
(cut short, a field removed or of the wrong type or range, offsets that do not tile the data, and a FIFO, /dev/zero,
3 GB of NUL bytes or a file of NUL bytes in its place): opening the index is one `RetrieverError` line naming the
file, and `evaluate` over the model says `error: ...` on one line before anything loads, writing nothing.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers.cli_helpers import invoke
from helpers.damaged_files import (
    CUTS,
    SPECIAL,  # a FIFO, /dev/zero, 3 GB of NUL bytes, a file of NUL bytes
    assert_refused,
    cut,
    edit,
)


def assert_last_line_error(result, *fragments) -> None:
    """Exit 2 and an `error:` line last, after the progress lines a command printed before it met the file."""
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and all(f in last for f in fragments), result.stderr


def special(file: str) -> list:
    return [(f"{file}-{kind}", file, make) for kind, make in SPECIAL.items()]


def cuts(file: str) -> list:
    return [(f"{file}-cut{keep}", file, lambda p, keep=keep: cut(p, keep)) for keep in CUTS]


def offsets(change):
    def damage(path: Path) -> None:
        import numpy as np

        np.save(path, change(np.load(path)), allow_pickle=True)

    return damage


def _swap_first(a):
    a = a.copy()
    a[[1, 2]] = a[[2, 1]]
    return a


BM25S_FILES = (
    "data.csc.index.npy",
    "indices.csc.index.npy",
    "indptr.csc.index.npy",
    "params.index.json",
    "stopwords.tokenizer.json",
    "vocab.index.json",
    "vocab.tokenizer.json",
)  # bm25s's own files
INDEX_FILES = [
    *cuts("index.json"),
    *cuts("offsets.npy"),
    *special("index.json"),
    *special("offsets.npy"),
    ("index.json-not-an-object", "index.json", lambda p: p.write_text("[]")),
    ("index.json-no-corpus", "index.json", lambda p: edit(p, lambda d: d.pop("corpus"))),
    (
        "index.json-corpus-bytes-wrong-type",
        "index.json",
        lambda p: edit(p, lambda d: d["corpus"].__setitem__("bytes", "big")),
    ),
    (
        "index.json-passages-negative",
        "index.json",
        lambda p: edit(p, lambda d: d["corpus"].__setitem__("passages", -1)),
    ),
    ("index.json-no-tokenizer", "index.json", lambda p: edit(p, lambda d: d["bm25"].pop("tokenizer"))),
    ("index.json-dense-without-encoder", "index.json", lambda p: edit(p, lambda d: d.update(kind="dense"))),
    (
        "index.json-hnsw-without-ef-search",
        "index.json",
        lambda p: edit(
            p,
            lambda d: d.update(
                kind="dense",
                faiss={"type": "hnsw", "fp16": False},
                encoder={"name": "e", "dim": 8, "query_prefix": "", "passage_prefix": ""},
            ),
        ),
    ),
    ("offsets.npy-floats", "offsets.npy", offsets(lambda a: a.astype(float))),
    ("offsets.npy-objects", "offsets.npy", offsets(lambda a: a.astype(object))),
    ("offsets.npy-one-short", "offsets.npy", offsets(lambda a: a[:-1])),
    ("offsets.npy-two-dimensional", "offsets.npy", offsets(lambda a: a.reshape(1, -1))),
    ("offsets.npy-out-of-order", "offsets.npy", offsets(_swap_first)),
    ("offsets.npy-past-the-corpus", "offsets.npy", offsets(lambda a: a + 7)),
    ("offsets.npy-negative", "offsets.npy", offsets(lambda a: a - a[1])),
    *[(f"bm25s/{name}-cut", f"bm25s/{name}", lambda p: cut(p, 0.5)) for name in BM25S_FILES],
    ("bm25s/vocab.index.json-fifo", "bm25s/vocab.index.json", SPECIAL["fifo"]),
    *[
        (f"bm25s/{name}-{value}", f"bm25s/{name}", lambda p, value=value: p.write_text(value))
        for name in ("vocab.index.json", "params.index.json")
        for value in ("[1, 2]", "null", '"x"')
    ],
    ("bm25s/params.index.json-missing", "bm25s/params.index.json", lambda p: p.unlink()),
]


@pytest.fixture(scope="module")
def built_index(tmp_path_factory) -> Path:
    from retriever import build_index

    root = tmp_path_factory.mktemp("index")
    (root / "corpus.jsonl").write_text(
        "".join(
            json.dumps({"id": f"p{i}", "contents": f'"Title {i}"\npassage {i} about topic{i % 5}'}) + "\n"
            for i in range(40)
        )
    )
    build_index(root / "corpus.jsonl", root / "idx", kind="bm25")
    return root / "idx"


@pytest.mark.parametrize("file, damage", [pytest.param(f, d, id=i) for i, f, d in INDEX_FILES])
def test_opening_a_damaged_index_is_one_line_naming_the_file(built_index, tmp_path, file, damage):
    from retriever import open_index
    from retriever.errors import RetrieverError

    index = tmp_path / "idx"
    shutil.copytree(built_index, index)
    damage(index / file)
    with pytest.raises(RetrieverError) as refused:
        open_index(index).search(["topic3"], k=3)
    assert Path(file).parts[0] in str(refused.value) and "\n" not in str(refused.value), refused.value


@pytest.mark.parametrize(
    "damage", [lambda p: cut(p, 0.5), SPECIAL["fifo"], SPECIAL["nul-bytes"]], ids=["cut", "fifo", "nul-bytes"]
)
def test_a_damaged_faiss_index_is_one_line(built_index, tmp_path, damage):
    from helpers.encoders import HashingEncoder

    from retriever import build_index, open_index
    from retriever.errors import RetrieverError

    encoder = HashingEncoder()
    build_index(built_index.parent / "corpus.jsonl", tmp_path / "idx", kind="dense", encoder=encoder)
    damage(tmp_path / "idx" / "faiss.index")
    with pytest.raises(RetrieverError, match=r"faiss\.index.*rebuild it with `inspo index --corpus"):
        open_index(tmp_path / "idx", encoder=encoder, gpu=False)


def test_evaluate_over_a_damaged_index_is_one_line(built_index, tmp_path, tiny_model_dir, repo_root, monkeypatch):
    monkeypatch.chdir(repo_root)
    index = tmp_path / "idx"
    shutil.copytree(built_index, index)
    cut(index / "offsets.npy", 0.6)
    assert_last_line_error(
        invoke(
            "evaluate",
            "--retriever",
            index,
            "--model",
            tiny_model_dir,
            "--method",
            "rag",
            "--benchmarks",
            "world",
            "--limit",
            1,
            "--out",
            tmp_path / "e",
        ),
        "offsets.npy",
    )
    assert not (tmp_path / "e").exists()


def header(change):
    """A damage that rewrites a safetensors file's JSON header with `change(header)` (returning the new one, raw
    bytes, or None after changing it in place), keeping the tensor data."""

    def damage(path: Path) -> None:
        import struct

        data = path.read_bytes()
        n = struct.unpack("<Q", data[:8])[0]
        head = json.loads(data[8 : 8 + n])
        new = change(head)
        raw = new if isinstance(new, bytes) else json.dumps(head if new is None else new).encode()
        path.write_bytes(struct.pack("<Q", len(raw)) + raw + data[8 + n :])

    return damage


def _tensors(head: dict) -> list[dict]:
    return sorted((v for k, v in head.items() if k != "__metadata__"), key=lambda t: t["data_offsets"][0])


def _overlap(head: dict) -> None:
    last = _tensors(head)[-1]
    last["data_offsets"] = [0, last["data_offsets"][1] - last["data_offsets"][0]]


WEIGHTS = "checkpoints/final/model.safetensors"
CONFIG = "checkpoints/final/config.json"
MODEL_FILES = [
    *cuts(CONFIG),
    *cuts(WEIGHTS),
    *special(CONFIG),
    *special(WEIGHTS),
    ("config-not-an-object", CONFIG, lambda p: p.write_text("[]")),
    ("config-hidden-size-wrong-type", CONFIG, lambda p: edit(p, lambda d: d.update(hidden_size="x"))),
    ("config-vocab-size-0", CONFIG, lambda p: edit(p, lambda d: d.update(vocab_size=0))),
    ("config-layers-negative", CONFIG, lambda p: edit(p, lambda d: d.update(num_hidden_layers=-2))),
    (
        "weights-header-length-huge",
        WEIGHTS,
        lambda p: p.write_bytes((1 << 40).to_bytes(8, "little") + p.read_bytes()[8:]),
    ),
    ("weights-header-not-json", WEIGHTS, header(lambda h: b"[" * 20_000)),
    ("weights-header-a-list", WEIGHTS, header(lambda h: list(h))),
    ("weights-tensor-without-dtype", WEIGHTS, header(lambda h: _tensors(h)[0].pop("dtype") and None)),
    (
        "weights-shape-disagrees-with-bytes",
        WEIGHTS,
        header(lambda h: _tensors(h)[0]["shape"].__setitem__(0, _tensors(h)[0]["shape"][0] * 2)),
    ),
    ("weights-tensors-overlap", WEIGHTS, header(_overlap)),
    ("weights-metadata-not-strings", WEIGHTS, header(lambda h: h.__setitem__("__metadata__", {"v": 1}))),
    ("weights-bytes-after-the-last-tensor", WEIGHTS, lambda p: p.write_bytes(p.read_bytes() + b"\0" * 16)),
]


@pytest.mark.parametrize("file, damage", [pytest.param(f, d, id=i) for i, f, d in MODEL_FILES])
def test_a_damaged_model_file_is_one_line_before_the_model_loads(trained, tmp_path, file, damage):
    damage(trained / file)
    out = tmp_path / "evals" / "e"
    assert_refused(invoke("evaluate", "--run", trained, "--limit", 1, "--out", out), file)
    assert not (tmp_path / "evals").exists()


@pytest.mark.parametrize(
    "file, damage",
    [
        pytest.param(f, d, id=i)
        for i, f, d in MODEL_FILES
        if i in ("config-vocab-size-0", "weights-tensors-overlap", f"{WEIGHTS}-fifo")
    ],
)
def test_a_users_model_directory_is_checked_the_same_way(trained, tmp_path, file, damage):
    damage(trained / file)
    result = invoke(
        "evaluate",
        "--model",
        trained / "checkpoints/final",
        "--method",
        "direct",
        "--benchmarks",
        "world",
        "--limit",
        1,
        "--out",
        tmp_path / "e",
    )
    assert_last_line_error(result, "model.name_or_path", Path(file).name, "download or save the model again")


TOKENIZER_FILES = [
    *cuts("tokenizer.json"),
    *special("tokenizer.json"),
    *special("tokenizer_config.json"),
    *cuts("tokenizer_config.json"),
    *cuts("chat_template.jinja"),
    *special("chat_template.jinja"),
    ("tokenizer-a-list", "tokenizer.json", lambda p: p.write_text("[1]")),
    ("tokenizer-config-a-list", "tokenizer_config.json", lambda p: p.write_text("[1]")),
    ("tokenizer-nan", "tokenizer.json", lambda p: p.write_text(p.read_text().replace("0", "NaN", 1))),
    ("generation-config-a-list", "generation_config.json", lambda p: p.write_text("[]")),
    (
        "generation-config-eos-nan",
        "generation_config.json",
        lambda p: edit(p, lambda d: d.update(eos_token_id=float("nan"))),
    ),
    ("chat-template-not-utf8", "chat_template.jinja", lambda p: p.write_bytes(b"\xff" + p.read_bytes())),
]


@pytest.mark.parametrize("file, damage", [pytest.param(f, d, id=i) for i, f, d in TOKENIZER_FILES])
def test_a_damaged_tokenizer_file_is_one_line_before_the_model_loads(tiny_model_dir, tmp_path, file, damage):
    """transformers reads these unchecked: each was a traceback (a 3 GB tokenizer.json was read whole first, a
    3 GB chat template never finished)."""
    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    damage(model / file)
    result = invoke(
        "evaluate",
        "--model",
        model,
        "--method",
        "direct",
        "--benchmarks",
        "world",
        "--limit",
        1,
        "--out",
        tmp_path / "e",
    )
    assert_last_line_error(result, str(model), "download or save the model again")
    assert not (tmp_path / "e").exists()


def test_a_checkpoint_whose_weights_are_gone_is_not_taken_for_a_model(tmp_path):
    """Every HF Trainer checkpoint holds training_args.bin; that is no model weight (review of issue 37)."""
    from inspo_cli.policy.model_files import model_files_problem

    checkpoint = tmp_path / "checkpoint-3"
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text(json.dumps({"model_type": "llama", "vocab_size": 10}))
    (checkpoint / "training_args.bin").write_bytes(b"PK\x03\x04 not weights")
    assert model_files_problem(checkpoint) == "no model weights (*.safetensors)"
    (checkpoint / "pytorch_model.bin").write_bytes(b"")  # older checkpoints' weights
    assert model_files_problem(checkpoint) is None
