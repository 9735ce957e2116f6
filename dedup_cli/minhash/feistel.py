"""Balanced Feistel networks: keyed bijections of {0 … 2^(2h) − 1}, the permutations minhash needs.

One round maps (L, R) → (R, L XOR F(R XOR key) mod 2^h), F the splitmix64 finaliser (full 64-bit avalanche,
so its low h bits depend on every input bit); the inverse round undoes it. Used for the seeded bin orders of
one-permutation hashing (:mod:`dedup_cli.minhash.oph`, 4 rounds) and for the permutations of a stated universe
(:mod:`dedup_cli.minhash.universe`, 6 rounds, restricted to the universe by cycle walking).
"""

from __future__ import annotations

import numpy as np

from dedup_cli.array_primitives import mix64_inplace


def feistel(values: np.ndarray, round_keys: np.ndarray, half_bits: int, rows: np.ndarray | None = None,
            inverse: bool = False) -> np.ndarray:
    """The network (or its inverse) applied to ``values``.

    Args:
        values: uint64[...] < 2^(2·half_bits).
        round_keys: uint64[..., rounds], broadcast against ``values`` on the leading axes; or, with ``rows``,
            uint64[n_networks, rounds], one network per row.
        half_bits: h ≥ 1.
        rows: int[...] like ``values``: which network of ``round_keys`` each value goes through.
        inverse: apply the inverse network.

    Returns:
        uint64[broadcast shape], a new array.
    """
    shift = np.uint64(half_bits)
    mask = np.uint64((1 << half_bits) - 1)
    left, right = values >> shift, values & mask
    rounds = range(round_keys.shape[-1])
    for round_index in reversed(rounds) if inverse else rounds:
        key = round_keys[..., round_index] if rows is None else round_keys[:, round_index][rows]
        if inverse:
            mixed = mix64_inplace(left ^ key)
            mixed &= mask
            left, right = right ^ mixed, left
        else:
            mixed = mix64_inplace(right ^ key)
            mixed &= mask
            left, right = right, left ^ mixed
    return (left << shift) | right
