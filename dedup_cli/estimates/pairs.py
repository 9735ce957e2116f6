"""Scoring candidate pairs: count b-bit matches and apply the 2-way estimator.

Ê_b is the fraction of the k positions whose b-bit values agree (Li & König 2010, Sec. 2); the estimate,
its standard error and a confidence interval follow from :mod:`dedup_cli.estimates.two_way` and
:mod:`dedup_cli.estimates.intervals`. With b = 1/2 the values are XOR bits, Ê is T̂, the fraction of them that
agree, and the estimator is eq. 25 (:mod:`dedup_cli.estimates.half_bit`). Values made by one permutation hashing
with densification vary more (documents with fewer shingles than k) or less (many more) than k independent
permutations': their standard error and interval use the variances of :mod:`dedup_cli.estimates.densified`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from dedup_cli.estimates.densified import Densification, inflation_2way, inflation_half_bit
from dedup_cli.estimates.half_bit import estimate_half_bit, is_half_bit, standard_error_half_bit
from dedup_cli.estimates.intervals import confidence_interval_2way, confidence_interval_half_bit
from dedup_cli.estimates.two_way import estimate_2way, standard_error_2way
from dedup_cli.minhash.packing import unpack_words
from dedup_cli.params import SignatureParams

# Bounds the [pairs, k] comparison temporaries to about 32 MB (``plan`` models it).
COMPARISON_BYTES = 1 << 25


def densification_of(params: SignatureParams) -> Densification | None:
    """The bins of one permutation hashing a store's values come from (``--scheme oph``): all its permutations,
    twice the XOR bits of a store of them; None for k independent permutations (``kperm``, integer sets)."""
    if params.scheme != "oph" or params.input_kind != "text":
        return None
    return Densification(params.permutations, params.universe)


def count_matches(values: np.ndarray, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Number of positions where documents ``first[p]`` and ``second[p]`` agree: int64[n_pairs].

    ``values`` is uint[n_docs, k], already reduced to the b bits being compared.
    """
    k = values.shape[1]
    counts = np.empty(first.size, dtype=np.int64)
    chunk = max(1, COMPARISON_BYTES // max(1, k * values.dtype.itemsize))
    for start in range(0, first.size, chunk):
        stop = start + chunk
        counts[start:stop] = np.count_nonzero(values[first[start:stop]] == values[second[start:stop]], axis=1)
    return counts


def count_packed_matches(a: np.ndarray, b: np.ndarray, bits: int, num_perm: int) -> np.ndarray:
    """:func:`count_matches` of pairs given as their two documents' b-bit values packed into uint64 words
    (:func:`dedup_cli.minhash.packing.packed_to_words`, one row a pair): int64[n_pairs].

    When b divides 64 no value straddles two words: a value differs exactly when its b-bit field of a XOR b is
    non-zero, so each field's bits are OR-ed into its lowest bit and counted (padding is zero on both sides); a
    chunk of rows at a time bounds the [pairs, words] temporaries.
    """
    counts = np.empty(a.shape[0], dtype=np.int64)
    chunk = max(1, COMPARISON_BYTES // max(1, 8 * a.shape[1]))
    for start in range(0, a.shape[0], chunk):
        counts[start : start + chunk] = _packed_matches(a[start : start + chunk], b[start : start + chunk], bits,
                                                        num_perm)
    return counts


def _packed_matches(a: np.ndarray, b: np.ndarray, bits: int, num_perm: int) -> np.ndarray:
    if 64 % bits == 0 and bits < 64:
        difference = a ^ b
        folded = difference.copy()
        for shift in range(1, bits):
            folded |= difference >> np.uint64(shift)
        lowest = np.uint64(sum(1 << i for i in range(0, 64, bits)))
        return num_perm - np.bitwise_count(folded & lowest).sum(axis=1, dtype=np.int64)
    values_a, values_b = unpack_words(a, bits, num_perm), unpack_words(b, bits, num_perm)
    return np.count_nonzero(values_a == values_b, axis=1).astype(np.int64)


@dataclass
class ScoredPairs:
    """Pairs with their b-bit match counts and resemblance estimates; arrays aligned by pair."""

    first: np.ndarray  # int64[n]
    second: np.ndarray  # int64[n]
    matches: np.ndarray  # int64[n]
    estimate: np.ndarray  # float64[n], Li & König eq. 9
    stderr: np.ndarray  # float64[n], plug-in eq. 11 (eq. D4 on densified bins)
    ci_low: np.ndarray  # float64[n]
    ci_high: np.ndarray  # float64[n]
    r1: np.ndarray  # float64[n], r = f/D of the first document (enters C_1,b and C_2,b, eq. 5–7)
    r2: np.ndarray  # float64[n], of the second: with the match count, what a bound at another level needs

    def select(self, keep: np.ndarray) -> ScoredPairs:
        """The pairs picked by a boolean mask or an index array, in that order."""
        return ScoredPairs(**{name: getattr(self, name)[keep] for name in self.__dataclass_fields__})


def score_pairs(
    values: np.ndarray,
    first: np.ndarray,
    second: np.ndarray,
    resemblance_r: np.ndarray,
    bits: float,
    level: float = 0.95,
    densification: Densification | None = None,
) -> ScoredPairs:
    """Estimate R for each pair from b-bit values.

    Args:
        values: uint[n_docs, k], lowest ``bits`` bits of each minwise value; with b = 1/2 uint8[n_docs, k/2],
            the XOR bits (``StoredSignatures.values``).
        first, second: int64[n_pairs] document indices.
        resemblance_r: float64[n_docs], r = f/D per document (enters C_1,b and C_2,b, eq. 5–7).
        bits: b, or :data:`dedup_cli.estimates.half_bit.HALF_BIT`.
        level: confidence level of the interval.
        densification: the bins of one permutation hashing the values come from (None: k permutations).
    """
    k = values.shape[1]
    matches = count_matches(values, first, second)
    return score_matches(first, second, matches, resemblance_r[first], resemblance_r[second], k, bits, level,
                         densification)


def score_matches(first: np.ndarray, second: np.ndarray, matches: np.ndarray, r1: np.ndarray, r2: np.ndarray,
                  num_perm: int, bits: float, level: float = 0.95,
                  densification: Densification | None = None) -> ScoredPairs:
    """Estimate R for each pair from its b-bit match count (what :func:`score_pairs` does after counting).

    Args:
        first, second: int64[n_pairs] document numbers.
        matches: int64[n_pairs], positions out of ``num_perm`` whose b-bit values agree.
        r1, r2: float64[n_pairs], r = f/D of each pair's documents.
        num_perm: k (with b = 1/2: the number of XOR bits, k/2); bits: b or ``HALF_BIT``; level: confidence level
            of the interval; densification: the bins the values come from, when made by one permutation hashing.
    """
    fraction = matches / num_perm
    r1, r2 = (np.broadcast_to(np.asarray(r, dtype=np.float64), np.shape(matches)) for r in (r1, r2))
    if is_half_bit(bits):
        low, high = confidence_interval_half_bit(matches, num_perm, r1, r2, level=level, densification=densification)
        estimate = np.asarray(estimate_half_bit(fraction, r1, r2), dtype=np.float64)
        stderr = np.asarray(standard_error_half_bit(fraction, r1, r2, num_perm), dtype=np.float64)
        if densification is not None:
            stderr = stderr * np.sqrt(_at_estimate(inflation_half_bit, estimate, r1, r2, densification))
        return ScoredPairs(
            first=first,
            second=second,
            matches=matches,
            estimate=estimate,
            stderr=stderr,
            ci_low=np.asarray(low, dtype=np.float64),
            ci_high=np.asarray(high, dtype=np.float64),
            r1=np.asarray(r1, dtype=np.float64),
            r2=np.asarray(r2, dtype=np.float64),
        )
    low, high = confidence_interval_2way(matches, num_perm, r1, r2, bits, level=level, densification=densification)
    estimate = np.asarray(estimate_2way(fraction, r1, r2, bits), dtype=np.float64)
    stderr = np.asarray(standard_error_2way(fraction, r1, r2, bits, num_perm), dtype=np.float64)
    if densification is not None:
        stderr = stderr * np.sqrt(_at_estimate(lambda R, f1, f2, bins: inflation_2way(R, f1, f2, bits, bins),
                                               estimate, r1, r2, densification))
    return ScoredPairs(
        first=first,
        second=second,
        matches=matches,
        estimate=estimate,
        stderr=stderr,
        ci_low=np.asarray(low, dtype=np.float64),
        ci_high=np.asarray(high, dtype=np.float64),
        r1=np.asarray(r1, dtype=np.float64),
        r2=np.asarray(r2, dtype=np.float64),
    )


def _at_estimate(inflation: Callable[..., ArrayLike], estimate: np.ndarray, r1: np.ndarray, r2: np.ndarray,
                 densification: Densification) -> np.ndarray:
    """The variance factor φ of densified bins at each pair's clipped estimate (the plug-in of eq. D4 or D5)."""
    return np.asarray(inflation(np.clip(estimate, 0.0, 1.0), densification.set_sizes(r1),
                                densification.set_sizes(r2), densification.bins), dtype=np.float64)
