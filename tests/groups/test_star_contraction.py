"""The steps of connected components by large-star and small-star (dedup_cli/groups/star_contraction.py), by hand;
tests/engines/test_dask_components.py runs them on a cluster against a union-find."""

from __future__ import annotations

import numpy as np

from dedup_cli.groups.star_contraction import large_star, orient, small_star, symmetric


def edges(first: list[int], second: list[int]) -> tuple[np.ndarray, np.ndarray]:
    return orient(np.array(first, np.int64), np.array(second, np.int64))


def test_large_star_by_hand() -> None:
    # Path 0–1–2–3 given symmetric: Γ(1) = {0, 2}: m(1) = 0, neighbour 2 > 1 goes to 0; Γ(2) = {1, 3}: 3 → 1.
    (u, v), unsettled = large_star(*symmetric(*edges([0, 1, 2], [1, 2, 3])))
    assert sorted(zip(u.tolist(), v.tolist(), strict=True)) == [(1, 0), (2, 0), (3, 1)]
    assert unsettled == 2  # nodes 1 and 2 have a lower and an upper neighbour
    # A star centred on its minimum is settled and left as it is.
    (u, v), unsettled = large_star(*symmetric(*edges([4, 4, 4], [5, 7, 9])))
    assert unsettled == 0
    assert sorted(zip(u.tolist(), v.tolist(), strict=True)) == [(5, 4), (7, 4), (9, 4)]
    # A leaf with two centres (5 joined to 1 and 3) is unsettled: 1 and 3 are one component.
    assert large_star(*symmetric(*edges([5, 5], [1, 3])))[1] == 1


def test_small_star_by_hand() -> None:
    # Node 5 with lower neighbours {1, 3}: both go to min = 1, i.e. (5, 1) and (3, 1).
    u, v = small_star(np.array([5, 5]), np.array([3, 1]))
    assert sorted(zip(u.tolist(), v.tolist(), strict=True)) == [(3, 1), (5, 1)]


def test_orient_drops_self_loops() -> None:
    u, v = edges([3, 2, 7], [1, 2, 9])
    assert list(zip(u.tolist(), v.tolist(), strict=True)) == [(3, 1), (9, 7)]
