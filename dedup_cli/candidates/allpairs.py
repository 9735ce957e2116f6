"""Every pair of documents compared without LSH: a blocked, bit-parallel b-bit match counter.

The papers' own experiments compare all pairs; `dedup find --candidates all` does the same, and it is the
reference for the recall of LSH banding. The kernel follows Li & König 2010, Sec. 5.1.2: the k b-bit values
of a document are packed into 64-bit words, ``floor(64 / b)`` values (blocks) per word; two documents'
words are XORed, and a block of the XOR is all zero exactly where the two b-bit values agree. Each block is
reduced to one bit that says "differs" (by folding its bits together with shifts, or with one carrying
addition, and a mask), and ``np.bitwise_count`` counts those bits: the number of disagreeing positions, so
matches = k − mismatches. The last word's unused blocks are zero for every document, so they always agree;
counting mismatches subtracts them without a correction term.

All pairs are visited as tiles of row documents × column documents over the upper triangle. A tile is kept
small (a few hundred KiB per temporary, so it stays in cache, and never above ``memory_bytes``), words are
processed one at a time across the whole tile, and a tile whose pairs have already mismatched too often to
reach the required count is thinned to its surviving pairs part-way through (most pairs of a corpus are
unrelated and fall behind after a fraction of the k positions).

The minimum match count that a threshold on the estimate R̂_b (Li & König 2010, eq. 9) requires comes from
:func:`dedup_cli.candidates.match_bounds.min_matches_for_threshold`; it is conservative, and pairs found here
are meant to be re-scored exactly (``dedup_cli.estimates.pairs.score_pairs``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from dedup_cli.estimates.guards import whole_bits

WORD_BITS = 64

# A tile of this many pairs keeps each uint64 temporary at 512 KiB, inside a core's L2 cache; larger tiles
# measured slower (memory bound), smaller ones pay numpy's per-call overhead.
_TILE_PAIRS = 1 << 16
# Wide tiles give numpy long inner loops (the row word is broadcast along the columns).
_TILE_COLUMNS = 4096
# Scratch bytes per tile pair: XOR word and reduction scratch (8 + 8), popcount (1), mismatch count (≤ 4),
# per-pair allowance (≤ 4) and pass mask (1) make 26; a thinned tile adds, for at most a quarter of its
# pairs, ~44 bytes each (two indices, a count, a gathered word and its scratch), 11 more per tile pair.
_BYTES_PER_TILE_PAIR = 40
# Thin a tile to its surviving pairs once at most this fraction survives: gathering a pair's words costs
# about as much as three dense passes.
_THIN_FRACTION = 0.25
# Bounds count_matches_packed's [pairs, words] temporaries to about 32 MB.
_COMPARISON_BYTES = 1 << 25


def _block_masks(bits: int) -> tuple[np.uint64, np.uint64, np.uint64]:
    """(low, high, rest) masks over the ``floor(64/b)`` blocks of a word.

    ``low`` has the lowest bit of each block set, ``high`` the highest, ``rest`` every block bit except the
    highest. Bits above the last whole block are in none of them.
    """
    capacity = WORD_BITS // bits
    low = sum(1 << (slot * bits) for slot in range(capacity))
    high = low << (bits - 1)
    rest = sum(((1 << (bits - 1)) - 1) << (slot * bits) for slot in range(capacity))
    return np.uint64(low), np.uint64(high), np.uint64(rest)


def _fold_shifts(bits: int) -> list[int]:
    """Right shifts that OR every bit of a b-bit block into its lowest bit, and no bit of the next block.

    After shifting by s and ORing, bit p holds the OR of ``cover + s`` bits starting at p; doubling the
    cover (but never past b) needs ceil(log2 b) shifts, e.g. 1, 1 for b = 3 and 1, 2, 4 for b = 8.
    """
    shifts, cover = [], 1
    while cover < bits:
        shift = min(cover, bits - cover)
        shifts.append(shift)
        cover += shift
    return shifts


class _MismatchBits:
    """Turns XORed words into words with exactly one set bit per differing b-bit block, in place.

    Two equivalent reductions of a block to one bit; the cheaper one (fewer numpy passes) is the default:
    - ``"fold"`` (Li & König 2010, Sec. 5.1.2): x |= x >> s for the shifts of :func:`_fold_shifts`, then
      keep each block's lowest bit: 2·ceil(log2 b) + 1 passes, the cheaper for b = 2.
    - ``"carry"``: ((x & rest) + rest) carries into a block's highest bit exactly when one of its lower bits
      is set (the sum is at most 2^b − 2, so no carry leaves the block); OR it with x and keep each block's
      highest bit: 4 passes whatever b, the cheaper for b ≥ 3.
    b = 1 needs nothing: a block is one bit.
    """

    def __init__(self, bits: int, method: str | None = None) -> None:
        self.bits = whole_bits(bits)
        if method is None:
            method = "none" if bits == 1 else "fold" if 2 * len(_fold_shifts(bits)) + 1 <= 4 else "carry"
        if method not in ("none", "fold", "carry") or (method == "none" and bits != 1):
            raise ValueError(f"unknown mismatch reduction {method!r} for {bits} bits")
        self.method = method
        self.low, self.high, self.rest = _block_masks(self.bits)
        self.shifts = [np.uint64(shift) for shift in _fold_shifts(self.bits)]

    def __call__(self, xor: np.ndarray, scratch: np.ndarray) -> None:
        """Reduce ``xor`` (uint64[...], modified) using ``scratch`` (uint64, same shape, overwritten)."""
        if self.method == "fold":
            for shift in self.shifts:
                np.right_shift(xor, shift, out=scratch)
                np.bitwise_or(xor, scratch, out=xor)
            np.bitwise_and(xor, self.low, out=xor)
        elif self.method == "carry":
            np.bitwise_and(xor, self.rest, out=scratch)
            np.add(scratch, self.rest, out=scratch)
            np.bitwise_or(xor, scratch, out=xor)
            np.bitwise_and(xor, self.high, out=xor)


def pack_blocks(values: np.ndarray, bits: int) -> np.ndarray:
    """Pack each document's k b-bit values into uint64 words (Li & König 2010, Sec. 5.1.2).

    Position p goes to word p // c, bits (p % c)·b … (p % c)·b + b − 1, with c = floor(64/b). The
    c·n_words − k unused blocks of the last word, and the 64 − c·b bits above the last block of every word,
    are zero for every document, so they never differ.

    Args:
        values: uint[n_docs, k] b-bit values (``StoredSignatures.values(bits)``); only the lowest ``bits``
            bits of each value are used, as ``minhash.packing.lowest_bits`` would keep.
        bits: b, 1..64.

    Returns:
        uint64[n_docs, n_words], n_words = ceil(k / c), C-contiguous.
    """
    bits = whole_bits(bits)
    values = np.asarray(values)
    if values.ndim != 2 or values.dtype.kind not in "iu":
        raise ValueError(f"values must be an integer array [n_docs, k], got {values.dtype}{list(values.shape)}")
    n_docs, k = values.shape
    capacity = WORD_BITS // bits
    n_words = -(-k // capacity)
    packed = np.zeros((n_docs, n_words), dtype=np.uint64)
    value_mask = np.uint64((1 << bits) - 1)
    # One pass per slot (≤ 64) over [n_docs, n_words]: no uint64 copy of the whole [n_docs, k] input.
    for slot in range(min(capacity, k)):
        column = values[:, slot::capacity].astype(np.uint64)  # positions slot, slot + c, …: one per word
        column &= value_mask
        column <<= np.uint64(slot * bits)
        packed[:, : column.shape[1]] |= column
    return packed


def count_matches_packed(
    packed: np.ndarray, bits: int, num_perm: int, first: np.ndarray, second: np.ndarray
) -> np.ndarray:
    """Number of positions where documents ``first[p]`` and ``second[p]`` agree, from packed words.

    Equal to ``estimates.pairs.count_matches`` on the unpacked b-bit values: matches = k − popcount(differing blocks
    of first XOR second) (Li & König 2010, Sec. 5.1.2), with Ê_b = matches / k the fraction of eq. 10.

    Args:
        packed: uint64[n_docs, n_words] from :func:`pack_blocks` with the same ``bits``.
        bits: b, 1..64.
        num_perm: k, the number of positions packed (n_words = ceil(k / floor(64/b))).
        first, second: int[n_pairs] document indices.

    Returns:
        int64[n_pairs] match counts in 0..k.
    """
    reduce = _MismatchBits(bits)
    packed = np.asarray(packed, dtype=np.uint64)
    n_words = packed.shape[1]
    if n_words != -(-num_perm // (WORD_BITS // reduce.bits)):
        raise ValueError(f"{n_words} words per document do not hold {num_perm} values of {bits} bits")
    first = np.asarray(first, dtype=np.int64).ravel()
    second = np.asarray(second, dtype=np.int64).ravel()
    if first.shape != second.shape:
        raise ValueError(f"first and second differ in length: {first.size} and {second.size}")
    counts = np.empty(first.size, dtype=np.int64)
    chunk = max(1, _COMPARISON_BYTES // (3 * 8 * max(1, n_words)))
    for start in range(0, first.size, chunk):
        stop = min(start + chunk, first.size)
        xor = packed[first[start:stop]]
        xor ^= packed[second[start:stop]]
        reduce(xor, np.empty_like(xor))
        counts[start:stop] = num_perm - np.bitwise_count(xor).sum(axis=1, dtype=np.int64)
    return counts


def _tile_shape(n_docs: int, memory_bytes: int) -> tuple[int, int]:
    """(rows, columns) of a tile: cache-sized, within ``memory_bytes``, at least 1 × 1."""
    pairs = max(1, min(_TILE_PAIRS, memory_bytes // _BYTES_PER_TILE_PAIR))
    columns = max(1, min(_TILE_COLUMNS, pairs, n_docs))
    rows = max(1, min(pairs // columns, n_docs))
    return rows, columns


def all_pairs(
    values: np.ndarray,
    bits: int,
    min_matches: int | np.ndarray,
    eligible: np.ndarray | None = None,
    memory_bytes: int = 256 << 20,
    progress: Callable[[int], None] | None = None,
    mapper: Callable[[Callable[[int], Any], Sequence[int]], Iterable[Any]] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every pair of eligible documents whose b-bit values agree in at least ``min_matches`` positions.

    No LSH: all n(n − 1)/2 pairs are compared, as in the papers' experiments (Li & König 2010, Sec. 5.1.2,
    packed XOR + popcount). The count is Ê_b·k of eq. 10; ``min_matches_for_threshold`` turns a threshold
    on R̂_b (eq. 9) into the count.

    Args:
        values: uint[n_docs, k] b-bit values (``StoredSignatures.values(bits)``; lowest ``bits`` bits used).
        bits: b, 1..64.
        min_matches: int, or int64[n_docs] per-document minimum, a pair (i, j) then needing
            max(min_matches[i], min_matches[j]) (conservative per-document counts for dense sets).
        eligible: bool[n_docs]; a pair is compared only if both documents are eligible (None: all).
        memory_bytes: bound on the tile temporaries (the packed signatures, 2 · 8 · n_words bytes per
            document, and the returned pairs come on top); tiles stay cache-sized below it.
        progress: called with the number of documents whose row of the upper triangle is done since the
            last call; the calls add up to n_docs.
        mapper: ``mapper(block, row_starts)`` gives the pairs of each block of rows in order, however it
            computes them (``map``, the default, or worker processes); the result is the same.

    Returns:
        (first, second, matches): int64[n_pairs] each, first < second, sorted by (first, second).
    """
    bits = whole_bits(bits)
    values = np.asarray(values)
    if values.ndim != 2 or values.shape[1] < 1:
        raise ValueError(f"values must be [n_docs, k] with k ≥ 1, got shape {values.shape}")
    n_docs, k = values.shape
    if memory_bytes < 1:
        raise ValueError(f"memory_bytes must be positive, got {memory_bytes}")
    keep = np.ones(n_docs, dtype=bool) if eligible is None else np.asarray(eligible, dtype=bool).copy()
    if keep.shape != (n_docs,):
        raise ValueError(f"eligible must be bool[{n_docs}], got shape {keep.shape}")
    allowance_by_document, per_document = _mismatch_allowances(min_matches, keep, k)

    docs = np.flatnonzero(keep)
    packed = pack_blocks(values if docs.size == n_docs else values[docs], bits)
    tile_rows, tile_columns = _tile_shape(docs.size, memory_bytes)
    kernel = _TileKernel(packed, bits, allowance_by_document[docs], per_document, tile_rows * tile_columns,
                         allowance_by_document.dtype)
    block = functools.partial(_row_block_pairs, kernel, docs, k, tile_rows, tile_columns)
    starts = range(0, docs.size, tile_rows)
    return _gather_row_blocks(starts, (mapper or map)(block, starts), docs, n_docs, tile_rows, progress)


def _mismatch_allowances(min_matches: int | np.ndarray, keep: np.ndarray, k: int) -> tuple[np.ndarray, bool]:
    """Each document's allowance k − min_matches of mismatches, and whether it differs between documents.

    Mismatch counts are compared with the allowance clipped to 0..k, in uint16 (uint32 for k ≥ 2^16) so that it
    fits the counts' dtype; a document needing more than k matches can pair with nobody and is dropped from
    ``keep`` (bool[n_docs], modified). Per-document counts that are equal for every kept document become one.

    Returns:
        (allowance uint16[n_docs] or uint32[n_docs], per_document).
    """
    n_docs = keep.size
    count_dtype = np.dtype(np.uint16 if k <= np.iinfo(np.uint16).max else np.uint32)
    per_document = np.ndim(min_matches) != 0
    if per_document:
        needed = np.asarray(min_matches, dtype=np.int64)
        if needed.shape != (n_docs,):
            raise ValueError(f"min_matches must be an int or int64[{n_docs}], got shape {needed.shape}")
        keep &= needed <= k
        if keep.any() and np.all(needed[keep] == needed[keep][0]):
            per_document, min_matches = False, int(needed[keep][0])
    if not per_document:
        if int(min_matches) > k:
            keep[:] = False
        needed = np.full(n_docs, int(min_matches), dtype=np.int64)
    return np.clip(k - needed, 0, k).astype(count_dtype), per_document


def _row_block_pairs(kernel: _TileKernel, docs: np.ndarray, k: int, tile_rows: int, tile_columns: int,
                     row_start: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The pairs (first, second, matches) of rows [row_start, row_start + tile_rows) of the upper triangle of the
    kept documents ``docs`` (int64[n_kept], their numbers), sorted; None when there are none."""
    row_stop = min(row_start + tile_rows, docs.size)
    block_rows: list[np.ndarray] = []
    block_columns: list[np.ndarray] = []
    block_mismatches: list[np.ndarray] = []
    # Columns from the block's first row on: the first tile straddles the diagonal, and its pairs with
    # column ≤ row are dropped below (at most tile_rows² / 2 of them). Tiles of equal width, so that
    # none is a sliver.
    span = docs.size - row_start
    width = math.ceil(span / math.ceil(span / tile_columns))
    for column_start in range(row_start, docs.size, width):
        column_stop = min(column_start + width, docs.size)
        rows, columns, mismatches = kernel.tile(row_start, row_stop, column_start, column_stop)
        upper = columns > rows
        block_rows.append(rows[upper])
        block_columns.append(columns[upper])
        block_mismatches.append(mismatches[upper])
    rows, columns = np.concatenate(block_rows), np.concatenate(block_columns)
    if not rows.size:  # (empty arrays would cost ~100 bytes each, for every row block)
        return None
    order = np.lexsort((columns, rows))  # tiles come column block by column block
    return (docs[rows[order]], docs[columns[order]],
            k - np.concatenate(block_mismatches)[order].astype(np.int64))


def _gather_row_blocks(starts: range, found_by_block: Iterable[tuple[np.ndarray, np.ndarray, np.ndarray] | None],
                       docs: np.ndarray, n_docs: int, tile_rows: int, progress: Callable[[int], None] | None,
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The row blocks' pairs joined in order, reporting to ``progress`` the documents whose rows are done."""
    firsts: list[np.ndarray] = []
    seconds: list[np.ndarray] = []
    matches: list[np.ndarray] = []
    reported = 0
    for row_start, found in zip(starts, found_by_block, strict=True):
        row_stop = min(row_start + tile_rows, docs.size)
        if found is not None:
            firsts.append(found[0])
            seconds.append(found[1])
            matches.append(found[2])
        if progress is not None:
            done = n_docs if row_stop == docs.size else int(docs[row_stop])
            progress(done - reported)
            reported = done
    if progress is not None and reported < n_docs:
        progress(n_docs - reported)  # no eligible document at all
    if not firsts:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty.copy(), empty.copy()
    return (
        np.concatenate(firsts).astype(np.int64, copy=False),
        np.concatenate(seconds).astype(np.int64, copy=False),
        np.concatenate(matches),
    )


class _TileKernel:
    """Mismatch counts of one tile of rows × columns of the packed signatures, with early thinning.

    Scratch buffers are allocated once for the largest tile and viewed per tile, so the temporaries are
    bounded by ``tile_pairs`` whatever the number of documents.
    """

    def __init__(
        self,
        packed: np.ndarray,
        bits: int,
        allowance: np.ndarray,
        per_document: bool,
        tile_pairs: int,
        count_dtype: np.dtype,
    ) -> None:
        self.packed = packed  # uint64[n_kept, n_words]: a document's words, for gathering survivors
        self.packed_t = np.ascontiguousarray(packed.T)  # uint64[n_words, n_kept]: a word across documents
        self.n_words = packed.shape[1]
        self.reduce = _MismatchBits(bits)
        self.allowance = allowance  # count_dtype[n_kept], k − min_matches clipped to 0..k
        self.per_document = per_document
        self.xor = np.empty(tile_pairs, dtype=np.uint64)
        self.scratch = np.empty(tile_pairs, dtype=np.uint64)
        self.popcount = np.empty(tile_pairs, dtype=np.uint8)
        self.counts = np.empty(tile_pairs, dtype=count_dtype)
        self.allowed = np.empty(tile_pairs if per_document else 0, dtype=count_dtype)
        self.passing = np.empty(tile_pairs, dtype=bool)
        # Checking which pairs can still pass costs two passes over the tile, so check only where most
        # unrelated pairs should already be out: their b-bit values differ with probability 1 − 2^-b at each
        # position (sparse limit, Li & König 2010, eq. 8), so after p positions they have about
        # p (1 − 2^-b) mismatches. Check at the first word where that exceeds the smallest allowance by three
        # standard deviations, and once more an eighth of the words later in case too many pairs were
        # related. Which pairs are returned does not depend on the checkpoints, only the speed.
        capacity = WORD_BITS // bits
        differ = 1.0 - 2.0**-bits
        smallest = int(allowance.min()) if allowance.size else 0
        first = next(
            (
                words
                for words in range(1, self.n_words)
                if (positions := words * capacity) * differ
                > smallest + 3.0 * math.sqrt(positions * differ * (1.0 - differ))
            ),
            self.n_words,
        )
        self.checkpoints = {words for words in (first, first + max(1, self.n_words // 8)) if words < self.n_words}

    def tile(
        self, row_start: int, row_stop: int, column_start: int, column_stop: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Pairs of the tile whose mismatches stay within their allowance.

        Returns:
            (rows, columns, mismatches): indices into the kept documents (int64[n_hits]) in row-major
            order, and the mismatch counts (count dtype[n_hits]).
        """
        n_rows, n_columns = row_stop - row_start, column_stop - column_start
        size = n_rows * n_columns
        shape = (n_rows, n_columns)
        xor = self.xor[:size].reshape(shape)
        scratch = self.scratch[:size].reshape(shape)
        popcount = self.popcount[:size].reshape(shape)
        counts = self.counts[:size].reshape(shape)
        passing = self.passing[:size].reshape(shape)
        allowed: np.ndarray | int
        if self.per_document:
            allowed = self.allowed[:size].reshape(shape)
            np.minimum(
                self.allowance[row_start:row_stop, None], self.allowance[None, column_start:column_stop], out=allowed
            )
        else:
            allowed = self.allowance[0]
        counts.fill(0)
        for word in range(self.n_words):
            # One word across the whole tile: the row's word broadcast against the columns' words.
            np.bitwise_xor(
                self.packed_t[word, row_start:row_stop, None], self.packed_t[word, None, column_start:column_stop],
                out=xor,
            )
            self.reduce(xor, scratch)
            np.bitwise_count(xor, out=popcount)
            np.add(counts, popcount, out=counts)
            if word + 1 in self.checkpoints:
                np.less_equal(counts, allowed, out=passing)
                survivors = int(np.count_nonzero(passing))
                if survivors <= _THIN_FRACTION * size:
                    rows, columns = np.nonzero(passing)
                    survivors_counts = counts[rows, columns]
                    return self._finish_sparse(word + 1, row_start + rows, column_start + columns, survivors_counts)
        np.less_equal(counts, allowed, out=passing)
        rows, columns = np.nonzero(passing)
        return row_start + rows, column_start + columns, counts[rows, columns]

    def _finish_sparse(
        self, first_word: int, rows: np.ndarray, columns: np.ndarray, counts: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Finish the surviving pairs only, gathering their remaining words (int64 indices, counts)."""
        rows = rows.astype(np.int64, copy=False)
        columns = columns.astype(np.int64, copy=False)
        counts = counts.astype(np.int64)
        remaining = self.n_words - first_word
        # Whole rows of remaining words per pair (few numpy calls for few survivors), in chunks whose three
        # [chunk, remaining] uint64 temporaries stay within the tile's budget.
        chunk = max(1, self.xor.size // (3 * max(1, remaining)))
        for start in range(0, rows.size, chunk):
            stop = start + chunk
            xor = self.packed[rows[start:stop], first_word:]
            xor ^= self.packed[columns[start:stop], first_word:]
            self.reduce(xor, np.empty_like(xor))
            counts[start:stop] += np.bitwise_count(xor).sum(axis=1, dtype=np.int64)
        allowed = (
            np.minimum(self.allowance[rows], self.allowance[columns]) if self.per_document else self.allowance[0]
        )
        keep = counts <= allowed
        return rows[keep], columns[keep], counts[keep]
