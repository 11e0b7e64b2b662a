"""BM25 with bm25s: a streamed, memory-lean index build and a batch searcher that returns `Passage`s.

Why not `bm25s.BM25().index(tokens)`: it wants the whole corpus as a Python list of token lists, which for
wiki-18 (21M passages) is tens of GB of Python ints. Here each chunk of passages is tokenised by bm25s's own
`Tokenizer` and reduced at once to compact (doc, token, term frequency) numpy arrays; the final scores are
the same Lucene-variant BM25 that bm25s computes (idf = ln(1 + (N - df + 0.5) / (df + 0.5)),
tf part = tf / (tf + k1 (1 - b + b |d| / avgdl))), tested equal to bm25s's own `index()`. The result is a
regular `bm25s.BM25` object saved and loaded with bm25s's own `save`/`load`, so the files are plain `.npy`
and JSON and bm25s can open them directly.

Tokenisation (documented choice): lowercase, bm25s's `(?u)\\b\\w\\w+\\b` word pattern, bm25s's English
stopword list, and the Snowball English stemmer only if PyStemmer happens to be installed (no new
dependency); the choice is recorded in index.json and enforced when the index is opened.

    builder = BM25Builder(make_tokenizer(stemmer_name()))
    for chunk in iter_corpus_chunks(corpus): builder.add(chunk.contents)
    builder.finish().save(out_dir / "bm25s")  # then: BM25Retriever.load(out_dir, meta, store)

The index kind "bm25" (see `retriever.kinds`): `check_options`, `prepare`, `estimate`, `build` and `load` at the
end of this module; `bm25_in_memory` builds the same index in memory, without writing anything.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import chain
from pathlib import Path

import numpy as np

from retriever.checked import engine_error, engine_files
from retriever.corpus import Passage
from retriever.errors import RetrieverError
from retriever.kinds import BuildOptions, OpenOptions, Progress
from retriever.search import checked_queries
from retriever.store import (
    PassageStore,
    check_corpus_file,
    iter_corpus_chunks,
    open_passage_store,
    sample_lines,
    save_offsets,
)

K1, B, METHOD = 1.5, 0.75, "lucene"  # bm25s's defaults; Lucene/pyserini use k1=0.9, b=0.4 (Search-R1's BM25)
FILES = ("bm25s",)  # what `build` writes into an index directory besides index.json and offsets.npy
META_SHAPE = {"bm25": {"tokenizer": {"stemmer": (str, None)}}}  # what opening reads of index.json (`index`)
STOPWORDS = "en"


def stemmer_name() -> str | None:
    """ "english" when PyStemmer is installed (then tokens are stemmed), else None."""
    try:
        import Stemmer  # noqa: F401  (PyStemmer)
    except ImportError:
        return None
    return "english"


def import_bm25s():
    """bm25s, imported with JAX hidden unless the process already loaded JAX itself.

    When JAX is installed, `import bm25s` runs a JAX computation (bm25s.selection probes `jax.lax.top_k`), which on
    a GPU node makes JAX take 75% of the GPU's memory in whatever process imports it: the trainer's, with BM25
    in-process. Our search selects its top k with numpy and never uses bm25s's JAX backend.
    """
    import sys

    if "bm25s" in sys.modules:
        return sys.modules["bm25s"]
    hide = "jax" not in sys.modules
    if hide:
        # `import jax` now raises ImportError: bm25s falls back to numpy. (typeshed types sys.modules without the
        # None entry that the import system documents for blocking an import.)
        sys.modules["jax"] = None  # type: ignore[assignment]
    try:
        import bm25s
        import bm25s.tokenization  # noqa: F401
    finally:
        if hide and sys.modules.get("jax", 0) is None:
            del sys.modules["jax"]
    return bm25s


def make_tokenizer(stemmer: str | None):
    bm25s = import_bm25s()

    stem_fn = None
    if stemmer is not None:
        try:
            import Stemmer
        except ImportError:
            raise RetrieverError(
                f"this BM25 index was built with the {stemmer} stemmer from PyStemmer, which is not "
                "installed here; pip install PyStemmer, or rebuild the index without it"
            ) from None
        stem_fn = Stemmer.Stemmer(stemmer).stemWord
    return bm25s.tokenization.Tokenizer(lower=True, stopwords=STOPWORDS, stemmer=stem_fn)


def tokenizer_description(stemmer: str | None) -> dict:
    return {"lower": True, "pattern": r"(?u)\b\w\w+\b", "stopwords": "bm25s english", "stemmer": stemmer}


class BM25Builder:
    """Accumulates tokenised chunks as (doc, token, tf) arrays; `finish` turns them into a bm25s index.

    Memory: 12 bytes per distinct (passage, token) pair while adding; `finish` scatters chunk by chunk into
    the final CSC arrays (8 bytes per pair), freeing each chunk as it goes, so the peak stays ~20 bytes/pair.
    """

    BYTES_PER_PAIR = 20

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.n_docs = 0
        self.n_tokens = 0
        self.n_pairs = 0
        self._chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (doc, token, tf) per chunk
        self._lengths: list[np.ndarray] = []
        self._df: np.ndarray = np.zeros(0, dtype=np.int64)

    def add(self, texts: Sequence[str]) -> None:
        docs = list(self.tokenizer.streaming_tokenize(texts, update_vocab=True, allow_empty=True))
        lengths = np.fromiter(map(len, docs), dtype=np.int64, count=len(docs))
        tokens = np.fromiter(chain.from_iterable(docs), dtype=np.int64, count=int(lengths.sum()))
        local_doc: np.ndarray = np.repeat(np.arange(len(docs), dtype=np.int64), lengths)
        # One (doc, token) pair per distinct token of a passage, sorted by doc then token, with its count.
        keys, counts = np.unique((local_doc << 32) | tokens, return_counts=True)
        toks = (keys & 0xFFFFFFFF).astype(np.int32)
        self._chunks.append((((keys >> 32) + self.n_docs).astype(np.int32), toks, counts.astype(np.float32)))
        self._lengths.append(lengths.astype(np.int32))
        df = np.bincount(toks)
        if len(df) > len(self._df):
            self._df = np.pad(self._df, (0, len(df) - len(self._df)))
        self._df[: len(df)] += df
        self.n_docs += len(docs)
        self.n_tokens += int(lengths.sum())
        self.n_pairs += len(keys)

    def finish(self, k1: float = K1, b: float = B):
        """The bm25s.BM25 index over everything added (Lucene idf and tf variant, as bm25s's default)."""
        bm25s = import_bm25s()

        vocab = dict(self.tokenizer.get_vocab_dict())
        n, n_vocab = self.n_docs, len(vocab)
        df = np.pad(self._df, (0, n_vocab - len(self._df)))
        lengths = np.concatenate(self._lengths)
        avgdl = lengths.mean()
        idf = np.log(1.0 + (n - df + 0.5) / (df + 0.5))
        idf[df == 0] = 0.0  # as bm25s: a vocabulary entry no passage contains scores nothing
        indptr: np.ndarray = np.zeros(n_vocab + 1, dtype=np.int64)
        np.cumsum(df, out=indptr[1:])
        data: np.ndarray = np.empty(self.n_pairs, dtype=np.float32)
        indices: np.ndarray = np.empty(self.n_pairs, dtype=np.int32)
        heads = indptr[:-1].copy()  # next free slot of each token's column
        # Counting sort into CSC (grouped by token, passages ascending), one chunk at a time.
        while self._chunks:
            docs, toks, tfs = self._chunks.pop(0)
            scores = idf[toks] * tfs / (tfs + k1 * (1 - b + b * lengths[docs] / avgdl))
            order = np.argsort(toks, kind="stable")
            sorted_toks = toks[order]
            starts = np.flatnonzero(np.r_[True, sorted_toks[1:] != sorted_toks[:-1]])
            rank = np.arange(len(order)) - np.repeat(starts, np.diff(np.r_[starts, len(order)]))
            slots = heads[sorted_toks] + rank
            data[slots] = scores[order]
            indices[slots] = docs[order]
            heads += np.bincount(toks, minlength=n_vocab)
        self._lengths, self._df = [], np.zeros(0, dtype=np.int64)

        bm25 = bm25s.BM25(k1=k1, b=b, method=METHOD)
        bm25.scores = {"data": data, "indices": indices, "indptr": indptr, "num_docs": n}
        bm25.vocab_dict = vocab
        bm25.unique_token_ids_set = set(vocab.values())
        bm25.nonoccurrence_array = None
        return bm25


def estimate_bm25_bytes(sample: Sequence[str], n_passages: int, stemmer: str | None) -> tuple[int, str]:
    """Peak build memory, extrapolated from a sample: pairs (passage, distinct token) plus the vocabulary."""
    builder = BM25Builder(make_tokenizer(stemmer))
    builder.add(sample)
    scale = n_passages / max(1, len(sample))
    pairs = builder.n_pairs * scale
    vocab = len(builder.tokenizer.word_to_id) * scale**0.6  # Heaps' law: vocabulary grows sub-linearly
    total = int(pairs * BM25Builder.BYTES_PER_PAIR + vocab * 250 + n_passages * 12)  # 250 B: dict entries
    return total, f"~{pairs:,.0f} (passage, term) pairs x {BM25Builder.BYTES_PER_PAIR} B + ~{vocab:,.0f} terms"


def save_bm25(bm25, tokenizer, out_dir: Path) -> None:
    bm25.save(out_dir / "bm25s", show_progress=False)
    tokenizer.save_vocab(out_dir / "bm25s")
    tokenizer.save_stopwords(out_dir / "bm25s")


def default_threads(batch: int, num_docs: int) -> int:
    """Score queries in a thread pool only when each query scans a large corpus (numpy then releases the GIL
    for long stretches) and there are several queries and cores; on small corpora threads cost ~20%."""
    cores = os.cpu_count() or 1
    return min(cores, batch) if cores > 1 and batch > 1 and num_docs >= 1_000_000 else 0


def top_k(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows and scores of the k best *matching* passages (score > 0), best first, ties by row.

    bm25s's `retrieve` runs `argpartition` over all N scores; with BM25 almost all of them are 0, a worst
    case for introselect (about 7x slower than on random data, measured at N=3,810). Selecting among the
    non-zero scores first is faster and leaves out passages that share no term with the query.

    Ties by row at the k-th place too: which of several passages tied there `argpartition` keeps depends on
    numpy's SIMD code for the CPU (AVX-512 and AVX2 machines kept different ones), so every passage scoring the
    k-th best score is kept before the sort and the cut.
    """
    rows = np.flatnonzero(scores > 0)
    if len(rows) > k:
        kth = np.partition(scores[rows], -k)[-k]  # the k-th best score: a value, the same on every CPU
        rows = rows[scores[rows] >= kth]
    rows = rows[np.lexsort((rows, -scores[rows]))][:k]
    return rows, scores[rows]


class BM25Retriever:
    """`Retriever` over a bm25s index: tokenise the batch with bm25s's tokenizer, score each query with bm25s's
    `get_scores_from_ids`, select the top k among matching passages, read those passages from the corpus."""

    def __init__(self, bm25, tokenizer, store: PassageStore, n_threads: int | None = None):
        self.bm25 = bm25
        self.tokenizer = tokenizer
        self.store = store
        self.n_threads = n_threads
        self.num_docs = int(bm25.scores["num_docs"])
        self._empty_token = bm25.vocab_dict.get("")  # stands for "no known word"; matches only empty passages

    @classmethod
    def load(
        cls, index_dir: Path, meta: dict, store: PassageStore, mmap: bool = False, n_threads: int | None = None
    ) -> BM25Retriever:
        bm25s = import_bm25s()

        rebuild = f"rebuild it with `inspo index --corpus {meta['corpus']['path']} --out {index_dir} --force`"
        engine_files([index_dir / "bm25s"], rebuild)
        try:
            bm25 = bm25s.BM25.load(index_dir / "bm25s", mmap=mmap, show_progress=False)
            tokenizer = make_tokenizer(meta["bm25"]["tokenizer"]["stemmer"])
            tokenizer.load_vocab(index_dir / "bm25s")
            tokenizer.load_stopwords(index_dir / "bm25s")
            return cls(bm25, tokenizer, store, n_threads)
        except (OSError, ValueError, EOFError, KeyError, TypeError, AttributeError) as error:  # bm25s: unchecked
            raise engine_error(error, index_dir / "bm25s", rebuild) from None

    def _rank(self, token_ids: list[int], k: int) -> tuple[list[int], list[float]]:
        token_ids = [t for t in token_ids if t != self._empty_token]
        if not token_ids:
            return [], []
        rows, scores = top_k(self.bm25.get_scores_from_ids(token_ids), k)
        return rows.tolist(), scores.tolist()

    def search(self, queries: Sequence[str], k: int) -> list[list[Passage]]:
        """Top-k passages per query, best first. Passages sharing no term with the query are left out (as in
        Lucene), so a query may get fewer than k; k above the corpus size gives every matching passage."""
        queries = checked_queries(queries, k)
        if not queries:
            return []
        token_ids = self.tokenizer.tokenize(queries, update_vocab=False, show_progress=False, return_as="ids")
        threads = default_threads(len(queries), self.num_docs) if self.n_threads is None else self.n_threads
        if threads > 1:
            with ThreadPoolExecutor(max_workers=threads) as pool:
                ranked = list(pool.map(lambda ids: self._rank(ids, k), token_ids))
        else:
            ranked = [self._rank(ids, k) for ids in token_ids]
        return [self.store.get(rows, scores) for rows, scores in ranked]


# -- the index kind "bm25" (retriever.kinds) ------------------------------------------------------------------


def check_options(options: BuildOptions) -> None:
    """Nothing to check: BM25 has no build options."""


def prepare(options: BuildOptions, progress: Progress) -> str | None:
    """The stemmer the index will be built with (recorded in index.json)."""
    return stemmer_name()


def estimate(corpus: Path, passages: int, stemmer: str | None, options: BuildOptions) -> tuple[int, str]:
    return estimate_bm25_bytes(sample_lines(corpus), passages, stemmer)


def build(
    corpus: Path, out_dir: Path, stemmer: str | None, options: BuildOptions, passages: int, progress: Progress
) -> tuple[int, dict]:
    builder = BM25Builder(make_tokenizer(stemmer))
    parts = []
    for chunk in iter_corpus_chunks(corpus, chunk_size=10_000):
        builder.add(chunk.contents)
        parts.append(chunk.offsets)
        progress("tokenising", builder.n_docs, max(passages, builder.n_docs))
    save_offsets(out_dir, parts, corpus.stat().st_size)
    progress("scoring", builder.n_docs, builder.n_docs)
    n, tokens = builder.n_docs, builder.n_tokens
    bm25 = builder.finish()
    save_bm25(bm25, builder.tokenizer, out_dir)
    return n, {
        "bm25": {
            "engine": "bm25s",
            "method": METHOD,
            "k1": K1,
            "b": B,
            "tokenizer": tokenizer_description(stemmer),
            "tokens": tokens,
            "vocabulary": len(bm25.vocab_dict),
        }
    }


def load(index_dir: Path, meta: dict, options: OpenOptions) -> BM25Retriever:
    store = open_passage_store(index_dir, meta["corpus"], options.corpus)
    return BM25Retriever.load(index_dir, meta, store, mmap=options.mmap, n_threads=options.n_threads)


def bm25_in_memory(corpus: str | os.PathLike, n_threads: int | None = None) -> BM25Retriever:
    """A BM25 retriever over `corpus` built in memory (nothing written): the demo's zero-setup path."""
    corpus = check_corpus_file(corpus).resolve()
    builder = BM25Builder(make_tokenizer(stemmer_name()))
    parts = []
    for chunk in iter_corpus_chunks(corpus, chunk_size=10_000):
        builder.add(chunk.contents)
        parts.append(chunk.offsets)
    offsets = np.concatenate([*parts, np.array([corpus.stat().st_size], dtype=np.int64)])
    tokenizer = builder.tokenizer
    return BM25Retriever(builder.finish(), tokenizer, PassageStore(corpus, offsets), n_threads=n_threads)
