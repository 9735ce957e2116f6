"""Which groups a review shows: the largest, and a seeded random sample of the others, so that a page about a
store of any size stays the size of what it shows and still lets a reader judge the typical group."""

from __future__ import annotations

import numpy as np


def shown_groups(sizes: np.ndarray, largest: int, sample: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The groups to show: the ``largest`` largest (ties by group order), then ``sample`` of the others drawn
    uniformly without replacement with ``seed`` (all of them when there are fewer).

    Args:
        sizes: int64[g], each group's size, in group order.
        largest, sample: how many of each to show.
        seed: the sample's seed.

    Returns:
        (int64[s] group positions, the largest by size descending then the sample in group order; bool[s], True
        for a sampled one). Deterministic: the same sizes, counts and seed give the same groups.
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    order = np.lexsort((np.arange(sizes.size), -sizes))  # size descending, then group order
    top = order[:largest]
    others = np.sort(order[largest:])
    count = min(sample, others.size)
    drawn = np.sort(np.random.default_rng(seed).choice(others.size, size=count, replace=False)) if count else \
        np.empty(0, np.int64)
    chosen = np.concatenate([top, others[drawn]]).astype(np.int64)
    return chosen, np.concatenate([np.zeros(top.size, bool), np.ones(drawn.size, bool)])
