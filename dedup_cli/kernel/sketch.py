"""Compiled steps from token hashes to a packed signature: w-shingles, the distinct-shingle set, the minwise sketch.

The same definitions as the numpy path, so the bytes are the same:

* w-shingle hash (:mod:`dedup_cli.text.shingles`): mix64(Σ_j t_{i+j}·P^(w−1−j)), kept as a rolling sum
  (t_{i+w} enters, t_i·P^w leaves);
* f, the number of distinct shingles, from an open-addressing hash set (each distinct shingle is also the only
  one the sketch sees);
* oph (Li, Owen & Zhang, NIPS 2012; :mod:`dedup_cli.minhash.oph`): h = mix64(x XOR key), bin ⌊k·(h >> 32)/2^32⌋,
  each bin's minimum; empty bins filled by optimal densification (Shrivastava, ICML 2017) along the seeded bin
  orders; value mix64(minimum XOR salt_j);
* kperm (Li & König, WWW 2010, Sec. 2; :mod:`dedup_cli.minhash.kperm`): z_j = min_x (a_j·x + c_j) mod 2^64,
  value mix64(z_j);
* the lowest b bits of each value, packed least significant bit first (:mod:`dedup_cli.minhash.packing`).

Compiled into the callers of :mod:`dedup_cli.kernel.compiled` (whose ``KERNEL_SOURCES`` records this file).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from dedup_cli.kernel.primitives import MAX_UINT64, feistel, mix64


@njit
def add_shingles(tokens, position, count, ring, width, power, position_multiplier, hash_set, combined, seen,
                 distinct, has_zero, minima, filled, oph, oph_key, multipliers, increments, mix):
    """Shingle ``tokens[position:count]`` (token hashes, uint64) into a document's set and sketch.

    The ring (uint64[2^m ≥ w], zeroed per document) holds the last w tokens, so the first w − 1 tokens need no
    special case: S ← S·P + t_new − t_old·P^w keeps S = Σ_j t_{i+j}·P^(w−1−j) mod 2^64 (``power`` = P^w).
    ``hash_set`` (uint64[2^s], 0 a free slot) holds the distinct shingle hashes but 0, which ``has_zero`` marks;
    ``minima`` and ``filled`` are the sketch's k values (the bins' minima and which bins hold one, for oph).

    Stops early once the set is more than half full, for the caller to grow it. Returns (the next position,
    S, tokens seen, distinct shingles, has_zero).
    """
    ring_mask = ring.size - 1
    num_perm = minima.size
    mask = np.uint64(hash_set.size - 1)
    shift = np.uint64(64)
    while (np.uint64(1) << (np.uint64(64) - shift)) < np.uint64(hash_set.size):
        shift -= np.uint64(1)
    half = hash_set.size // 2
    while position < count:
        token = tokens[position]
        position += 1
        combined = combined * position_multiplier + token - ring[(seen - width) & ring_mask] * power
        ring[seen & ring_mask] = token
        seen += 1
        if seen < width:
            continue
        shingle = mix64(combined, mix)
        if shingle == 0:
            if has_zero:
                continue
            has_zero = True
        else:  # open addressing, linear probing
            slot = shingle >> shift
            current = hash_set[slot]
            while current != 0 and current != shingle:
                slot = (slot + np.uint64(1)) & mask
                current = hash_set[slot]
            if current == shingle:
                continue
            hash_set[slot] = shingle
        distinct += 1
        if oph:
            hashed = mix64(shingle ^ oph_key, mix)
            bin_index = ((hashed >> np.uint64(32)) * np.uint64(num_perm)) >> np.uint64(32)
            # min() rather than a branch: whether a bin's minimum falls is a coin toss the predictor loses.
            minima[bin_index] = min(minima[bin_index], hashed)
            filled[bin_index] = True
        else:
            for j in range(num_perm):
                minima[j] = min(minima[j], multipliers[j] * shingle + increments[j])
        if distinct > half:
            break
    return position, combined, seen, distinct, has_zero


@njit
def add_whole_document(combined, minima, filled, oph, oph_key, multipliers, increments, mix):
    """The one shingle of a document of fewer tokens than w (but some), under the rule ``whole``: its whole token
    sequence, S = Σ_j t_j·P^(n−1−j) as :func:`add_shingles` left it (the ring's zeros took no part), mixed as any
    shingle; the set and sketch are empty before it. Returns the distinct shingles: 1."""
    shingle = mix64(combined, mix)
    if oph:
        hashed = mix64(shingle ^ oph_key, mix)
        bin_index = ((hashed >> np.uint64(32)) * np.uint64(minima.size)) >> np.uint64(32)
        minima[bin_index] = hashed
        filled[bin_index] = True
    else:
        for j in range(minima.size):
            minima[j] = multipliers[j] * shingle + increments[j]
    return 1


@njit
def densify(minima, filled, bins, best_rank, source, bin_order, bin_rank, round_keys, half_bits, rank_below, mix):
    """Give each empty bin the minimum of the filled bin that comes first in its seeded order.

    Optimal densification (Shrivastava, ICML 2017) as :func:`dedup_cli.minhash.oph._densify` does it: bin j's
    order is σ_j(0), σ_j(1), … (values ≥ k skipped), tabulated as ``bin_order[j]`` and ``bin_rank[i, j]`` (the step
    at which j's order reaches i) up to the k the numpy path tabulates, else computed. With m of k bins filled,
    drawing costs about k/m steps per empty bin and ranking m, so documents with m < ``rank_below`` (√k) rank;
    either way gives the same bin. Whether a bin is filled is a coin toss for the branch predictor, so the
    loops over bins count and compact without branches, and the first four draws are taken with conditional
    moves (measured: +17 % for the whole kernel at k = 256).
    """
    num_perm = minima.size
    count = 0
    for j in range(num_perm):
        count += filled[j]
    if count == num_perm:
        return
    tabulated = bin_order.shape[0] > 0
    if count < rank_below:
        listed = 0  # bins[:count]: the filled bins
        for j in range(num_perm):
            bins[listed] = j
            listed += filled[j]
        best_rank[:] = MAX_UINT64
        for position in range(count):
            candidate = bins[position]
            for j in range(num_perm):
                if tabulated:
                    rank = np.uint64(bin_rank[candidate, j])
                else:
                    rank = feistel(np.uint64(candidate), j, round_keys, half_bits, True, mix)
                if rank < best_rank[j]:
                    best_rank[j] = rank
                    source[j] = candidate
        for j in range(num_perm):
            if not filled[j]:
                minima[j] = minima[source[j]]
        return
    empty = 0  # bins[:empty]: the empty bins
    for j in range(num_perm):
        bins[empty] = j
        empty += 1 - filled[j]
    quick = tabulated and num_perm >= 4
    for position in range(empty):
        j = bins[position]
        step = 0
        if quick:
            first, second, third, fourth = bin_order[j, 0], bin_order[j, 1], bin_order[j, 2], bin_order[j, 3]
            chosen = fourth
            chosen = third if filled[third] else chosen
            chosen = second if filled[second] else chosen
            chosen = first if filled[first] else chosen
            if filled[chosen]:
                minima[j] = minima[chosen]
                continue
            step = 4
        if tabulated:
            while not filled[bin_order[j, step]]:
                step += 1
            minima[j] = minima[bin_order[j, step]]
        else:
            while True:
                drawn = feistel(np.uint64(step), j, round_keys, half_bits, False, mix)
                if drawn < np.uint64(num_perm) and filled[drawn]:
                    break
                step += 1
            minima[j] = minima[drawn]


@njit
def pack(values, bits, row):
    """Write the lowest ``bits`` bits of each value into the zeroed ``row``, least significant bit first: bit t
    of value j is bit j·b + t of the row (what :func:`dedup_cli.minhash.packing.pack_values` writes)."""
    if bits % 8 == 0:  # whole bytes: the value's lowest bits/8 bytes, little-endian
        width = bits // 8
        for j in range(values.size):
            value = values[j]
            for byte in range(width):
                row[j * width + byte] = np.uint8((value >> np.uint64(8 * byte)) & np.uint64(0xFF))
        return
    if bits <= 56:  # an accumulator of at most 7 + 56 bits, flushed a byte at a time
        mask = (np.uint64(1) << np.uint64(bits)) - np.uint64(1)
        accumulator = np.uint64(0)
        held = 0
        position = 0
        for j in range(values.size):
            accumulator |= (values[j] & mask) << np.uint64(held)
            held += bits
            while held >= 8:
                row[position] = np.uint8(accumulator & np.uint64(0xFF))
                accumulator >>= np.uint64(8)
                held -= 8
                position += 1
        if held:
            row[position] = np.uint8(accumulator)
        return
    position = 0
    for j in range(values.size):
        value = values[j]
        remaining = bits
        while remaining > 0:
            offset = position & 7
            take = min(8 - offset, remaining)
            piece = value & ((np.uint64(1) << np.uint64(take)) - np.uint64(1))
            row[position >> 3] |= np.uint8(piece << np.uint64(offset))
            value >>= np.uint64(take)
            position += take
            remaining -= take


@njit
def finish_document(distinct, minima, filled, oph, salts, bin_order, bin_rank, round_keys, half_bits, bits, mix,
                    values, bins, best_rank, source, signature):
    """Densify (oph), mix and pack one document's sketch into its zeroed ``signature`` row; a document without
    shingles keeps the zero row."""
    if distinct == 0:
        return
    num_perm = minima.size
    if oph:
        rank_below = 1  # max(1, ⌊√k⌋), the numpy path's switch between ranking and drawing
        while (rank_below + 1) * (rank_below + 1) <= num_perm:
            rank_below += 1
        densify(minima, filled, bins, best_rank, source, bin_order, bin_rank, round_keys, half_bits, rank_below, mix)
        for j in range(num_perm):
            values[j] = mix64(minima[j] ^ salts[j], mix)
    else:
        for j in range(num_perm):
            values[j] = mix64(minima[j], mix)
    pack(values, bits, signature)
