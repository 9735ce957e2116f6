"""Which groups a review shows: the largest by size (ties by group order), then a seeded uniform sample of the
others, each group at most once."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from dedup_cli.groups.selection import shown_groups


def test_the_largest_first_then_a_sample_of_the_others_in_group_order() -> None:
    sizes = np.array([2, 5, 3, 5, 2, 9, 2, 2])
    chosen, sampled = shown_groups(sizes, largest=3, sample=2, seed=1)
    assert chosen[:3].tolist() == [5, 1, 3]  # 9, then the two of size 5 in group order
    assert sampled.tolist() == [False, False, False, True, True]
    rest = chosen[3:].tolist()
    assert rest == sorted(rest) and set(rest) <= {0, 2, 4, 6, 7}
    assert np.array_equal(shown_groups(sizes, 3, 2, 1)[0], chosen)  # the same seed, the same groups


def test_fewer_groups_than_asked_shows_them_all() -> None:
    chosen, sampled = shown_groups(np.array([3, 2, 4]), largest=100, sample=100, seed=1)
    assert chosen.tolist() == [2, 0, 1] and not sampled.any()
    chosen, sampled = shown_groups(np.array([3, 2, 4]), largest=1, sample=100, seed=1)
    assert chosen.tolist() == [2, 0, 1] and sampled.tolist() == [False, True, True]
    assert shown_groups(np.empty(0, np.int64), 10, 10, 1)[0].size == 0
    assert shown_groups(np.array([2, 2]), 0, 0, 1)[0].size == 0


def test_the_sample_is_uniform_over_the_other_groups() -> None:
    sizes = np.full(50, 2)
    sizes[:5] = 10  # the five largest are never in the sample
    counts = np.zeros(50)
    for seed in range(2000):
        chosen, sampled = shown_groups(sizes, largest=5, sample=9, seed=seed)
        counts[chosen[sampled]] += 1
    assert counts[:5].sum() == 0
    expected = 2000 * 9 / 45  # 400 each; a binomial's sd is about 18
    assert np.all(np.abs(counts[5:] - expected) < 5 * np.sqrt(expected * (1 - 9 / 45)))


@given(sizes=st.lists(st.integers(2, 20), max_size=60), largest=st.integers(0, 70), sample=st.integers(0, 70),
       seed=st.integers(0, 2**32))
def test_each_group_at_most_once_and_the_counts_asked(sizes: list[int], largest: int, sample: int,
                                                      seed: int) -> None:
    chosen, sampled = shown_groups(np.array(sizes, np.int64), largest, sample, seed)
    assert len(set(chosen.tolist())) == chosen.size == sampled.size
    assert (~sampled).sum() == min(largest, len(sizes))
    assert sampled.sum() == min(sample, max(len(sizes) - largest, 0))
    top = chosen[~sampled]
    if top.size and len(sizes) > top.size:  # no group left out is larger than one of the largest shown
        assert max(sizes[i] for i in range(len(sizes)) if i not in set(top.tolist())) <= min(sizes[i] for i in top)
