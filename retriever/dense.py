"""Dense retrieval: a sentence encoder plus a faiss inner-product index over normalised embeddings.

Search-R1's retriever is E5 (`intfloat/e5-base-v2`: "query: "/"passage: " prefixes, mean pooling,
normalised, inner product) over wiki-18 in a flat index. The same recipe works with any sentence-transformers
model; encoders (loading, batching, the packaged offline default) are in `retriever.encoder`.

faiss types (`--faiss`): `flat` (exact, `IndexFlatIP`), `hnsw` (`IndexHNSWFlat`, inner product, M=32), `ivfpq`
(`IndexIVFPQ`, trained on a random sample; nlist and m chosen from corpus size and dimension).
fp16 storage (documented choice): faiss's own `QT_fp16` scalar quantizer (`IndexScalarQuantizer` for flat,
`IndexHNSWSQ` for hnsw), which halves both the file and the RAM at search time with no training and a
negligible accuracy change; ivfpq already stores m-byte codes, so fp16 does not apply to it.
GPU: encoding uses CUDA when torch sees it. Search moves the index to all GPUs, sharded: with
`faiss.index_cpu_to_all_gpus` when faiss was built with GPUs (faiss-gpu-cu12, `[faiss-gpu]`); otherwise, for flat
indexes, with `TorchFlatIndex` (exact inner product by torch matrix products on each GPU), because the pip faiss-gpu
wheels need CUDA 12 and a GPU node often has only faiss-cpu. hnsw (and ivfpq without faiss-gpu) stays on the CPU.

The index kind "dense" (see `retriever.kinds`): `check_options`, `prepare`, `estimate`, `build`, `load` and
`memory_advice` at the end of this module.
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from retriever.checked import Positive, engine_error, engine_files
from retriever.corpus import Passage
from retriever.encoder import Encoder, load_encoder
from retriever.errors import RetrieverError
from retriever.kinds import BuildOptions, OpenOptions, Progress
from retriever.search import checked_queries
from retriever.store import PassageStore, iter_corpus_chunks, open_passage_store, save_offsets

FAISS_TYPES = ("flat", "hnsw", "ivfpq")
HNSW_M, HNSW_EF_CONSTRUCTION, HNSW_EF_SEARCH = 32, 200, 128
FILES = ("faiss.index",)  # what `build` writes into an index directory besides index.json and offsets.npy
META_SHAPE = {
    "encoder": {"name": str, "dim": Positive, "query_prefix": str, "passage_prefix": str},  # what opening
    "faiss": {"type": str, "fp16": bool, "ef_search?": Positive, "nprobe?": Positive},
}  # reads (`index`)
SEARCH_BREADTH = {"hnsw": "ef_search", "ivfpq": "nprobe"}  # the index.json entry each faiss type searches with


def ivfpq_params(n: int, dim: int) -> dict:
    """nlist ~ 4 sqrt(n) (at least 39 training points per list), m = largest divisor of dim <= dim/8, 8 bits."""
    if n < 256:
        raise RetrieverError(
            f"--faiss ivfpq needs at least 256 passages to train its 256-centroid PQ codebooks; "
            f"the corpus has {n}; use --faiss flat (exact, and fast at this size)"
        )
    train = min(n, 1_000_000, max(256 * 39, 64 * 2 ** round(math.log2(4 * math.sqrt(n)))))
    nlist = max(1, min(2 ** round(math.log2(4 * math.sqrt(n))), train // 39))
    m = max(d for d in range(1, max(1, dim // 8) + 1) if dim % d == 0)
    return {"nlist": nlist, "m": m, "nbits": 8, "train_size": train, "nprobe": min(nlist, 32)}


def estimate_dense_bytes(n: int, dim: int, faiss_type: str, fp16: bool) -> tuple[int, str]:
    """Bytes of the faiss index while building (vectors, graph links, training sample) plus offsets."""
    per_vector = dim * (2 if fp16 else 4)
    if faiss_type == "flat":
        total, detail = n * per_vector, f"{n:,} x {dim} x {2 if fp16 else 4} B"
    elif faiss_type == "hnsw":
        links = int(2 * HNSW_M * 4 * 1.1)  # level 0 has 2M int32 neighbours; upper levels add ~1/M
        total, detail = n * (per_vector + links), f"{n:,} x ({dim} x {2 if fp16 else 4} B + {links} B links)"
    else:
        params = ivfpq_params(n, dim)
        total = n * (params["m"] + 8) + params["train_size"] * dim * 4 + params["nlist"] * dim * 4
        detail = f"{n:,} x ({params['m']} B codes + 8 B ids) + {params['train_size']:,} training vectors"
    return total + n * 8, detail


def new_faiss_index(faiss_type: str, dim: int, fp16: bool, n: int):
    """An empty inner-product index and the parameters to record in index.json."""
    import faiss

    ip = faiss.METRIC_INNER_PRODUCT
    if faiss_type == "flat":
        flat: faiss.Index = (
            faiss.IndexScalarQuantizer(dim, faiss.ScalarQuantizer.QT_fp16, ip) if fp16 else faiss.IndexFlatIP(dim)
        )
        return flat, {"type": "flat", "fp16": fp16}
    if faiss_type == "hnsw":
        hnsw: faiss.IndexHNSW
        if fp16:  # faiss 1.15's stub types argument 2 as a ScalarQuantizer; the C++ constructor takes its QuantizerType
            hnsw = faiss.IndexHNSWSQ(dim, faiss.ScalarQuantizer.QT_fp16, HNSW_M, ip)  # type: ignore[arg-type]
        else:
            hnsw = faiss.IndexHNSWFlat(dim, HNSW_M, ip)
        hnsw.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
        return hnsw, {
            "type": "hnsw",
            "fp16": fp16,
            "M": HNSW_M,
            "ef_construction": HNSW_EF_CONSTRUCTION,
            "ef_search": HNSW_EF_SEARCH,
        }
    if faiss_type == "ivfpq":
        if fp16:
            raise RetrieverError(
                "--fp16 applies to --faiss flat and hnsw; ivfpq already stores compressed m-byte codes; drop --fp16"
            )
        params = ivfpq_params(n, dim)
        quantizer = faiss.IndexFlatIP(dim)
        ivfpq = faiss.IndexIVFPQ(quantizer, dim, params["nlist"], params["m"], params["nbits"], ip)  # keeps a ref
        return ivfpq, {"type": "ivfpq", "fp16": False, **params}
    raise RetrieverError(f"--faiss {faiss_type!r} is not one of {', '.join(FAISS_TYPES)}")


def stored_vectors(index) -> np.ndarray:
    """The (n, d) vectors a flat index holds, as stored (float32, or float16 for the fp16 scalar quantizer)."""
    import faiss

    n, d = index.ntotal, index.d
    if isinstance(index, faiss.IndexScalarQuantizer):
        if index.sq.qtype != faiss.ScalarQuantizer.QT_fp16:
            raise RetrieverError("only float16 scalar-quantised flat indexes can be moved to GPUs")
        return faiss.vector_to_array(index.codes).view(np.float16).reshape(n, d)
    return faiss.rev_swig_ptr(index.get_xb(), n * d).reshape(n, d)  # a view, no copy


class TorchFlatIndex:
    """Exact inner-product search over vectors sharded across torch devices (the GPUs), faiss's `search` API.

    Each shard is scored against the query batch with one matrix product per block of rows (blocks bounded so
    the score matrix stays near 1 GiB), top-k per block, then a merge of every block's and shard's candidates.
    float16 storage is scored with float16 products (tensor cores); its `k + 32` best rows per block are then
    rescored in float32 from the stored vectors, so rounding of the fp16 scores cannot reorder the results.
    """

    RESCORE_MARGIN = 32

    def __init__(self, vectors: np.ndarray, devices: Sequence[str], block_bytes: int = 1 << 30):
        import torch

        if not devices:
            raise ValueError("TorchFlatIndex needs at least one device")
        self.ntotal, self.d = int(vectors.shape[0]), int(vectors.shape[1])
        self.dtype = torch.float16 if vectors.dtype == np.float16 else torch.float32
        self.block_bytes = block_bytes
        self.shards = []  # (first row, tensor on its device)
        bounds = np.linspace(0, self.ntotal, len(devices) + 1).astype(np.int64)
        step = max(1, (256 << 20) // max(1, self.d * vectors.itemsize))  # copy 256 MB at a time: no host-side copy
        for device, lo, hi in zip(devices, bounds[:-1], bounds[1:]):
            shard = torch.empty((int(hi - lo), self.d), dtype=self.dtype, device=device)
            for start in range(int(lo), int(hi), step):
                stop = min(int(hi), start + step)
                shard[start - lo : stop - lo].copy_(torch.from_numpy(np.ascontiguousarray(vectors[start:stop])))
            self.shards.append((int(lo), shard))

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        import torch

        queries = np.ascontiguousarray(queries, dtype=np.float32)
        k = min(k, self.ntotal)
        scores, rows = [], []
        with torch.inference_mode():
            for lo, shard in self.shards:
                if len(shard) == 0:
                    continue
                q32 = torch.from_numpy(queries).to(shard.device)
                q = q32.to(self.dtype)
                block = max(k, self.block_bytes // max(1, len(queries) * 4))
                for start in range(0, len(shard), block):
                    part = shard[start : start + block]
                    s = q @ part.T
                    if self.dtype == torch.float16:
                        _, cand = s.topk(min(len(part), k + self.RESCORE_MARGIN), dim=1)
                        exact = torch.einsum("qd,qmd->qm", q32, part[cand].float())
                        top, pos = exact.topk(min(len(part), k), dim=1)
                        idx = cand.gather(1, pos)
                    else:
                        top, idx = s.topk(min(len(part), k), dim=1)
                    scores.append(top.float().cpu())
                    rows.append((idx + lo + start).cpu())
        all_scores, all_rows = torch.cat(scores, dim=1), torch.cat(rows, dim=1)
        best, pos = all_scores.topk(k, dim=1)
        return best.numpy(), all_rows.gather(1, pos).numpy().astype(np.int64)


def to_gpus(index, fp16: bool):
    """Shard `index` over all GPUs: faiss's own GPU index when faiss has GPUs (flat and ivfpq), else
    `TorchFlatIndex` for flat indexes when torch sees CUDA GPUs; otherwise return it unchanged (CPU)."""
    import faiss

    if isinstance(index, faiss.IndexHNSW):
        return index
    if hasattr(faiss, "get_num_gpus") and faiss.get_num_gpus() > 0:
        # GPUs have no flat-SQ index: decode to a float16 GpuIndexFlat
        if isinstance(index, faiss.IndexScalarQuantizer):
            flat = faiss.IndexFlatIP(index.d)
            flat.add(index.reconstruct_n(0, index.ntotal))
            index = flat
        options = faiss.GpuMultipleClonerOptions()
        options.shard = True
        options.useFloat16 = fp16
        return faiss.index_cpu_to_all_gpus(index, co=options)
    import torch

    if (
        torch.cuda.is_available()
        and isinstance(index, (faiss.IndexFlat, faiss.IndexScalarQuantizer))
        and index.metric_type == faiss.METRIC_INNER_PRODUCT
    ):
        return TorchFlatIndex(stored_vectors(index), [f"cuda:{i}" for i in range(torch.cuda.device_count())])
    return index


class DenseRetriever:
    """`Retriever` over a faiss index: encode the query batch, one faiss search, read the hit passages."""

    def __init__(self, encoder: Encoder, index, store: PassageStore):
        self.encoder = encoder
        self.index = index
        self.store = store

    @classmethod
    def load(
        cls,
        index_dir: Path,
        meta: dict,
        store: PassageStore,
        device: str = "auto",
        gpu: bool = True,
        nprobe: int | None = None,
        ef_search: int | None = None,
        mmap: bool = False,
        encoder: Encoder | None = None,
    ) -> DenseRetriever:
        import faiss

        enc = meta["encoder"]
        if encoder is None:
            encoder = load_encoder(
                enc["name"], device=device, query_prefix=enc["query_prefix"], passage_prefix=enc["passage_prefix"]
            )
        if encoder.dim != enc["dim"]:
            raise RetrieverError(
                f"encoder {enc['name']} now gives {encoder.dim}-dim vectors but index {index_dir} "
                f"holds {enc['dim']}-dim ones; rebuild the index"
            )
        flags = faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY if mmap else 0
        rebuild = (
            f"rebuild it with `inspo index --corpus {meta['corpus']['path']} --kind dense --out {index_dir} --force`"
        )
        engine_files([index_dir / "faiss.index"], rebuild)
        try:
            index = faiss.read_index(str(index_dir / "faiss.index"), flags)
        except RuntimeError as error:  # faiss's reader: "Error in ... read ..."
            raise engine_error(error, index_dir / "faiss.index", rebuild) from None
        params = meta["faiss"]
        if params["type"] == "hnsw":
            hnsw = faiss.downcast_index(index)
            if not isinstance(hnsw, faiss.IndexHNSW):
                raise RetrieverError(
                    f"{index_dir / 'faiss.index'} holds a faiss {type(hnsw).__name__}, not the HNSW index that "
                    f"index.json names; {rebuild}"
                )
            hnsw.hnsw.efSearch = ef_search or params["ef_search"]
        if params["type"] == "ivfpq":
            faiss.extract_index_ivf(index).nprobe = nprobe or params["nprobe"]
        if gpu:
            index = to_gpus(index, params["fp16"])
        return cls(encoder, index, store)

    def search(self, queries: Sequence[str], k: int) -> list[list[Passage]]:
        """Top-k passages per query by inner product of unit vectors (cosine), best first."""
        queries = checked_queries(queries, k)
        if not queries:
            return []
        scores, rows = self.index.search(self.encoder.encode_queries(queries), min(k, self.index.ntotal))
        results = []
        for row_ids, row_scores in zip(rows.tolist(), scores.tolist()):
            keep = [(r, s) for r, s in zip(row_ids, row_scores) if r >= 0]  # -1: fewer hits than k (hnsw, ivf)
            results.append(self.store.get([r for r, _ in keep], [s for _, s in keep]))
        return results


# -- the index kind "dense" (retriever.kinds) -----------------------------------------------------------------


def check_options(options: BuildOptions) -> None:
    if options.faiss_type not in FAISS_TYPES:
        raise RetrieverError(f"--faiss {options.faiss_type!r} is not one of {', '.join(FAISS_TYPES)}")
    if options.fp16 and options.faiss_type == "ivfpq":
        raise RetrieverError(
            "--fp16 applies to --faiss flat and hnsw; ivfpq already stores compressed m-byte codes; drop --fp16"
        )


def prepare(options: BuildOptions, progress: Progress) -> Encoder:
    """The encoder: `options.encoder` loaded (a name, a directory, None for the packaged MiniLM), or as given
    when it is already a loaded `Encoder` (or a test double with the same methods)."""
    encoder = options.encoder
    if encoder is not None and not isinstance(encoder, (str, os.PathLike)):
        return encoder
    progress("loading encoder", 0, None)
    return load_encoder(
        None if encoder is None else str(encoder),
        device=options.device,
        batch_size=options.batch_size,
        dtype=options.encoder_dtype,
    )


def estimate(corpus: Path, passages: int, encoder: Encoder, options: BuildOptions) -> tuple[int, str]:
    total, detail = estimate_dense_bytes(passages, encoder.dim, options.faiss_type, options.fp16)
    encoder_bytes = encoder.parameter_bytes()
    return total + encoder_bytes, f"{detail} + encoder {encoder_bytes / 1e9:.2f} GB"


def memory_advice(options: BuildOptions) -> str | None:
    if options.faiss_type == "ivfpq":
        return None
    return ("--fp16 (half the size) or " if not options.fp16 else "") + "--faiss ivfpq (compressed codes)"


def build(
    corpus: Path, out_dir: Path, encoder: Encoder, options: BuildOptions, passages: int, progress: Progress
) -> tuple[int, dict]:
    import faiss

    faiss_type, fp16, n_est = options.faiss_type, options.fp16, passages
    chunk_size = encoder.batch_size * 8
    parts, n = [], 0
    if faiss_type == "ivfpq":  # training needs the exact size and a random sample: one scan pass first
        for chunk in iter_corpus_chunks(corpus, chunk_size=50_000):
            parts.append(chunk.offsets)
            n += len(chunk.contents)
            progress("scanning", n, max(n_est, n))
        offsets = save_offsets(out_dir, parts, corpus.stat().st_size)
        index, params = new_faiss_index(faiss_type, encoder.dim, fp16, n)
        sample = sorted(random.Random(0).sample(range(n), params["train_size"]))
        store, vectors = PassageStore(corpus, offsets), []
        for i in range(0, len(sample), chunk_size):
            vectors.append(encoder.encode_passages([p.contents for p in store.get(sample[i : i + chunk_size])]))
            progress("encoding training sample", min(i + chunk_size, len(sample)), len(sample))
        store.close()
        progress("training ivfpq", 0, None)
        index.train(np.concatenate(vectors))
        del vectors
        n_est = n
    else:
        index, params = new_faiss_index(faiss_type, encoder.dim, fp16, n_est)
    added = 0
    for chunk in iter_corpus_chunks(corpus, chunk_size=chunk_size):
        index.add(encoder.encode_passages(chunk.contents))
        if faiss_type != "ivfpq":
            parts.append(chunk.offsets)
        added += len(chunk.contents)
        progress("encoding", added, max(n_est, added))
    if faiss_type != "ivfpq":
        save_offsets(out_dir, parts, corpus.stat().st_size)
    progress("writing faiss index", added, added)
    faiss.write_index(index, str(out_dir / "faiss.index"))
    return added, {"encoder": encoder.describe(), "faiss": params}


def load(index_dir: Path, meta: dict, options: OpenOptions) -> DenseRetriever:
    params = meta["faiss"]
    if params["type"] not in FAISS_TYPES or SEARCH_BREADTH.get(params["type"], "type") not in params:
        problem = (
            f"faiss type {params['type']!r} is not one of {', '.join(FAISS_TYPES)}"
            if params["type"] not in FAISS_TYPES
            else f"a {params['type']} index without its {SEARCH_BREADTH[params['type']]}"
        )
        raise RetrieverError(
            f"{index_dir / 'index.json'}: {problem}; rebuild it with `inspo index --corpus "
            f"{meta['corpus']['path']} --kind dense --out {index_dir} --force`"
        )
    store = open_passage_store(index_dir, meta["corpus"], options.corpus)
    return DenseRetriever.load(
        index_dir,
        meta,
        store,
        device=options.device,
        gpu=options.gpu,
        nprobe=options.nprobe,
        ef_search=options.ef_search,
        mmap=options.mmap,
        encoder=options.encoder,
    )
