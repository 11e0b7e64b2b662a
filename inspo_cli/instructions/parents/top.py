"""The paper's parents (Alg. 1 line 16): the top n_parent alive instructions by weight."""

from __future__ import annotations


def choose(ranked, config):
    return list(ranked[: config.n_parent])
