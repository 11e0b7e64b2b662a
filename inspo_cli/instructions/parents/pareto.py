"""GEPA's parents (beyond the paper): every alive instruction that no other dominates on its per-category mean
rewards (at least as good in every category - benchmark, or the world's question type - and better in one), best
weight first, topped up by weight to n_parent."""

from __future__ import annotations

from collections.abc import Sequence


def choose(ranked, config):
    means = {c.id: c.category_means() for c in ranked}
    categories = sorted({category for m in means.values() for category in m})

    def score(c) -> list[float]:  # a category it was not tried on counts as nothing earned there
        return [means[c.id].get(category, 0.0) for category in categories]

    front = [c for c in ranked if not any(dominates(score(o), score(c)) for o in ranked if o is not c)]
    return front + [c for c in ranked if c not in front][: max(config.n_parent - len(front), 0)]


def dominates(a: Sequence[float], b: Sequence[float]) -> bool:
    """a Pareto-dominates b: at least as good everywhere and better somewhere."""
    return all(x >= y for x, y in zip(a, b)) and any(x > y for x, y in zip(a, b))
