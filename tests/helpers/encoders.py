"""Encoders for the dense-index tests that need no model."""

from __future__ import annotations

import re
import zlib

import numpy as np


class HashingEncoder:
    """A test double for `retriever.encoder.Encoder`: normalised hashed bag of words (no model, instant)."""

    name, batch_size, dim = "hashing-test-encoder", 32, 64

    def _encode(self, texts):
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in re.findall(r"\w\w+", text.lower()):
                out[i, zlib.crc32(word.encode()) % self.dim] += 1.0
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)

    encode_queries = encode_passages = _encode

    def describe(self):
        return {
            "name": self.name,
            "dim": self.dim,
            "pooling": "none",
            "normalized": True,
            "query_prefix": "",
            "passage_prefix": "",
            "max_seq_length": 0,
        }

    def parameter_bytes(self):
        return 0
