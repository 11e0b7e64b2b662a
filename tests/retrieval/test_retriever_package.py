"""`retriever` as a package of its own: it imports nothing from `inspo_cli`, importing it is cheap, and its index
kinds come from one registry (`retriever.kinds`) that building, opening, the recipe check and the CLI all use."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from inspo_cli.config import RecipeError, load_recipe
from retriever import build_index, open_retriever, read_index_meta
from retriever.errors import RetrieverError
from retriever.kinds import KINDS, Kind, kind_module

REPO_ROOT = Path(__file__).resolve().parents[2]
KIND_FUNCTIONS = ("check_options", "prepare", "estimate", "build", "load")


def _imported(code: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO_ROOT)
    return json.loads(out.stdout)


# -- layering ---------------------------------------------------------------------------------------------------


def test_retriever_imports_no_inspo_cli_module():
    modules = [
        "retriever",
        "retriever.index",
        "retriever.client",
        "retriever.server",
        "retriever.kinds",
        *(kind.module for kind in KINDS.values()),
    ]
    code = (
        f"import importlib, json, sys\nfor m in {modules!r}: importlib.import_module(m)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'inspo_cli')))"
    )
    assert _imported(code) == []


def test_no_retriever_source_mentions_inspo_cli_in_an_import():
    """Also imports inside functions, which the subprocess check above never runs."""
    offenders = []
    for path in sorted((REPO_ROOT / "retriever").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            offenders += [f"{path.name}:{node.lineno} {n}" for n in names if n.split(".")[0] == "inspo_cli"]
    assert offenders == []


def test_importing_retriever_and_its_registry_is_cheap():
    heavy = ("numpy", "bm25s", "faiss", "torch", "pyserini", "fastapi")
    code = (
        "import json, sys, retriever, retriever.kinds, retriever.errors\n"
        f"print(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)))"
    )
    assert _imported(code) == []


def test_importing_the_index_module_leaves_the_umask_alone():
    code = "import json, os\nos.umask(0o077)\nimport retriever.index\nprint(json.dumps([os.umask(0o022)]))"
    assert _imported(code) == [0o077]


def test_an_index_gets_the_usual_permissions_and_no_temporary_files(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        "".join(json.dumps({"id": str(i), "contents": f'"T{i}"\nword{i} text'}) + "\n" for i in range(20))
    )
    old = os.umask(0o027)
    try:
        build_index(corpus, tmp_path / "idx")
    finally:
        os.umask(old)
    assert (tmp_path / "idx").stat().st_mode & 0o777 == 0o750
    assert (tmp_path / "idx" / "index.json").stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.jsonl", "idx"]
    assert not [p for p in (tmp_path / "idx").iterdir() if p.name.startswith(".")]
    meta = read_index_meta(tmp_path / "idx")
    assert meta["inspo_version"] and meta["inspo_version"] != "unknown"


# -- the kind registry ------------------------------------------------------------------------------------------


def test_every_registered_kind_module_has_the_kind_functions():
    for name in KINDS:
        module = kind_module(name)
        assert [f for f in KIND_FUNCTIONS if not callable(getattr(module, f, None))] == [], name


def test_an_unknown_kind_is_refused_with_the_registered_ones(tmp_path):
    with pytest.raises(RetrieverError) as info:
        kind_module("sparse")
    assert all(name in str(info.value) for name in KINDS)


def test_the_recipe_validates_kind_against_the_registry(tmp_path, monkeypatch):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"id": "0", "contents": "\\"T\\"\\ntext"}\n')
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(f"data:\n  train: nq_hotpotqa\nretriever:\n  corpus: {corpus}\nevaluation:\n  benchmarks: [nq]\n")
    with pytest.raises(RecipeError) as info:
        load_recipe(recipe, ["retriever.kind=sparse"])
    assert f"must be one of {', '.join([*KINDS, 'http'])} (got 'sparse')" in str(info.value)
    monkeypatch.setitem(KINDS, "sparse", Kind("my_project.sparse", "a registered kind"))
    assert load_recipe(recipe, ["retriever.kind=sparse"]).retriever.kind == "sparse"


def test_inspo_index_help_lists_the_registered_kinds():
    import typer

    from inspo_cli.commands.index import index

    app = typer.Typer()
    app.command()(index)
    result = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert result.exit_code == 0
    assert all(name in result.output for name in KINDS)


TOY_KIND = '''
"""A kind for the test: an exact-word index, its rows in words.json."""
import json
from retriever.corpus import Passage
from retriever.store import iter_corpus_chunks, open_passage_store, save_offsets


def check_options(options):
    if options.fp16:
        from retriever.errors import RetrieverError
        raise RetrieverError("--fp16 does not apply to --kind toy")


def prepare(options, progress):
    return "prepared"


def estimate(corpus, passages, prepared, options):
    assert prepared == "prepared"
    return passages * 10, f"{passages} x 10 B"


def build(corpus, out_dir, prepared, options, passages, progress):
    words, parts, n = {}, [], 0
    for chunk in iter_corpus_chunks(corpus):
        parts.append(chunk.offsets)
        for text in chunk.contents:
            for word in set(text.lower().split()):
                words.setdefault(word, []).append(n)
            n += 1
    save_offsets(out_dir, parts, corpus.stat().st_size)
    (out_dir / "words.json").write_text(json.dumps(words))
    return n, {"toy": {"words": len(words)}}


class ToyRetriever:
    def __init__(self, words, store):
        self.words, self.store = words, store

    def search(self, queries, k):
        return [self.store.get(sorted({r for w in q.lower().split() for r in self.words.get(w, [])})[:k],
                               None) for q in queries]


def load(index_dir, meta, options):
    store = open_passage_store(index_dir, meta["corpus"], options.corpus)
    return ToyRetriever(json.loads((index_dir / "words.json").read_text()), store)
'''


def test_a_new_kind_is_one_module_plus_one_registry_line(tmp_path, monkeypatch):
    (tmp_path / "toy_kind.py").write_text(textwrap.dedent(TOY_KIND))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(KINDS, "toy", Kind("toy_kind", "exact words"))
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        '{"id": "a", "contents": "\\"Alpha\\"\\nred fox"}\n{"id": "b", "contents": "\\"Beta\\"\\nblue owl"}\n'
    )

    with pytest.raises(RetrieverError, match="--fp16 does not apply"):
        build_index(corpus, tmp_path / "idx", kind="toy", fp16=True)
    estimates = []
    meta = build_index(corpus, tmp_path / "idx", kind="toy", on_estimate=estimates.append)
    assert meta["kind"] == "toy" and meta["toy"] == {"words": 6} and meta["corpus"]["passages"] == 2
    assert estimates[0].detail == "2 x 10 B"
    (hits,) = open_retriever(tmp_path / "idx").search(["owl"], k=3)
    assert [(h.id, h.title) for h in hits] == [("b", "Beta")]
