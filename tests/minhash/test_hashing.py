"""The minwise hash family: exactness of the batched kernel and the statistics the estimators assume."""

from __future__ import annotations

import numpy as np
import pytest

from dedup_cli.array_primitives import mix64
from dedup_cli.minhash import kperm
from dedup_cli.minhash.kperm import HashFamily, min_hash_values


def _brute_force(shingles: np.ndarray, family: HashFamily) -> np.ndarray:
    if shingles.size == 0:
        return np.zeros(family.num_perm, dtype=np.uint64)
    hashed = np.multiply.outer(shingles, family.multipliers) + family.increments
    return mix64(hashed.min(axis=0))


@pytest.mark.parametrize("elements_per_chunk", [7, 64, 1 << 21])
def test_batched_kernel_equals_brute_force(monkeypatch: pytest.MonkeyPatch, elements_per_chunk: int) -> None:
    # Tiny chunks force documents to straddle chunk boundaries.
    monkeypatch.setattr(kperm, "_ELEMENTS_PER_CHUNK", elements_per_chunk)
    rng = np.random.default_rng(7)
    sizes = np.array([0, 5, 0, 0, 1, 37, 3, 0])
    offsets = np.r_[0, np.cumsum(sizes)].astype(np.int64)
    shingles = rng.integers(0, 2**64, size=int(offsets[-1]), dtype=np.uint64)
    family = HashFamily.from_seed(3, 4)
    values = min_hash_values(shingles, offsets, family)
    for doc in range(sizes.size):
        assert np.array_equal(values[doc], _brute_force(shingles[offsets[doc] : offsets[doc + 1]], family))


def test_family_is_seeded_and_odd() -> None:
    first, again, other = HashFamily.from_seed(1, 64), HashFamily.from_seed(1, 64), HashFamily.from_seed(2, 64)
    assert np.array_equal(first.multipliers, again.multipliers)
    assert not np.array_equal(first.multipliers, other.multipliers)
    assert np.all(first.multipliers & np.uint64(1) == 1)


def test_mix64_is_a_bijection_on_a_sample() -> None:
    sample = np.arange(1 << 16, dtype=np.uint64)
    assert np.unique(mix64(sample)).size == sample.size


@pytest.mark.parametrize("bits", [1, 2, 4, 64])
def test_match_rate_and_variance_follow_li_konig(bits: int) -> None:
    """Positions behave as independent permutations: E_b (eq. 4) and Var (eq. 11) at R = 0.5, r → 0."""
    rng = np.random.default_rng(11)
    universe = mix64(rng.integers(0, 2**64, size=400, dtype=np.uint64))
    set_a, set_b = universe[:300], universe[100:]  # |A ∩ B| = 200, |A ∪ B| = 400: R = 0.5
    resemblance = 0.5
    num_perm = 1 << 17
    family = HashFamily.from_seed(5, num_perm)
    offsets = np.array([0, 300, 600], dtype=np.int64)
    values = min_hash_values(np.concatenate([set_a, set_b]), offsets, family)
    mask = np.uint64((1 << bits) - 1) if bits < 64 else np.uint64(2**64 - 1)
    equal = (values[0] & mask) == (values[1] & mask)
    chance = 2.0**-bits
    expected = chance + (1 - chance) * resemblance
    block = 16  # 8192 independent estimates with k = 16 each
    block_estimates = (equal.reshape(-1, block).mean(axis=1) - chance) / (1 - chance)
    predicted_variance = expected * (1 - expected) / (block * (1 - chance) ** 2)
    standard_error = np.sqrt(predicted_variance / block_estimates.size)
    assert abs(block_estimates.mean() - resemblance) < 3 * standard_error
    assert block_estimates.var(ddof=1) == pytest.approx(predicted_variance, rel=0.1)
