"""Shingles: w consecutive token hashes combined into one 64-bit shingle hash, and each document's set of them.

A document becomes the set of its w-shingles (w contiguous word or character tokens; Mining of Massive
Datasets, ch. 3.2), with no token or shingle string ever built. Shingle hashes live in the universe D = 2^64,
where r = f/D is negligible and the sparse-limit estimators are exact.

Batching never changes a result: the same text gives the same shingles whatever else is in its batch, and a
document longer than ``_SLICE_CHARS`` is cut into pieces just before a space or newline (a cut that neither
NFKC nor case folding can see across, and no word spans), with the last w − 1 token hashes of one piece
carried into the next.

A document with fewer tokens than w (but at least one) has, under the rule ``whole`` that new stores record, one
shingle: its whole token sequence, hashed as a window of that many tokens (mix64(Σ_j t_j·P^(n−1−j)), n < w), so
identical short documents have resemblance 1 and a short document's shingle is never one of a longer document's
w-token windows (those would need a token hash of 0 in front). Under the rule ``none`` (stores signed before it)
such a document has no shingle and is never compared. A document with no token has no shingle either way.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from dedup_cli.array_primitives import first_of_runs, mix64_inplace, sorted_unique
from dedup_cli.options.vocabulary import CHAR_TOKENISATION, DEFAULT_TOKENISATION, SHORT_DOCUMENTS
from dedup_cli.text.normalise import check_unit
from dedup_cli.text.tokens import char_hashes, check_tokenisation, token_streams

# An odd 64-bit multiplier (the golden ratio) so each position in the window weighs its token differently:
# "a b c" and "b a c" must hash apart.
_POSITION_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)
# Text handled by one vectorised pass: bounds the temporaries (about 20 bytes per input byte for word
# shingles) whatever the batch or document size.
_SLICE_CHARS = 1 << 21
# Documents per pass; only bounds the per-document bookkeeping.
_SLICE_DOCUMENTS = 1 << 14


def _window_hashes(tokens: np.ndarray, size: int) -> np.ndarray:
    """uint64[n_tokens − size + 1]: each window of ``size`` token hashes combined and mixed, unsorted."""
    count = tokens.size - size + 1
    if count <= 0:
        return np.empty(0, dtype=np.uint64)
    combined = tokens[:count].copy()
    for offset in range(1, size):
        combined *= _POSITION_MULTIPLIER
        combined += tokens[offset : offset + count]
    return mix64_inplace(combined)


def _whole_stream_hashes(tokens: np.ndarray, starts: np.ndarray, lengths: np.ndarray, size: int) -> np.ndarray:
    """uint64[n_streams]: each short stream (0 < length < ``size``) hashed whole, as :func:`_window_hashes`
    hashes a window of its length; a column of the streams at a time, never a loop over them."""
    combined = np.zeros(starts.size, dtype=np.uint64)
    for offset in range(min(size - 1, int(lengths.max(initial=0)))):
        active = lengths > offset
        combined[active] = combined[active] * _POSITION_MULTIPLIER + tokens[starts[active] + offset]
    return mix64_inplace(combined)


def _with_short_streams(shingles: np.ndarray, counts: np.ndarray, tokens: np.ndarray, offsets: np.ndarray,
                        size: int) -> tuple[np.ndarray, np.ndarray]:
    """The shingle sets with each short stream's one shingle (its whole token sequence) put in its place."""
    lengths = np.diff(offsets)
    short = np.flatnonzero((lengths > 0) & (lengths < size))
    if short.size == 0:
        return shingles, counts
    whole = _whole_stream_hashes(tokens, offsets[short], lengths[short], size)
    before = np.concatenate([[0], np.cumsum(counts)])[short]  # where each short stream's (empty) set begins
    counts = counts.copy()
    counts[short] = 1
    return np.insert(shingles, before, whole), counts


def _shingle_sets(tokens: np.ndarray, offsets: np.ndarray, size: int,
                  short_documents: str = SHORT_DOCUMENTS) -> tuple[np.ndarray, np.ndarray]:
    """Shingle sets of several token streams stored end to end.

    Args:
        tokens: uint64[n_tokens], stream s owning ``tokens[offsets[s]:offsets[s + 1]]``.
        offsets: int64[n_streams + 1].
        size: w.
        short_documents: ``whole`` (a stream of 0 < n < w tokens has one shingle, itself) or ``none``.

    Returns:
        (uint64[n_shingles] sorted-unique within each stream, int64[n_streams] their counts).
    """
    shingles, counts = _window_sets(tokens, offsets, size)
    if short_documents == "whole" and size > 1:
        return _with_short_streams(shingles, counts, tokens, offsets, size)
    return shingles, counts


def _window_sets(tokens: np.ndarray, offsets: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """The w-token windows of each stream (:func:`_shingle_sets`), sorted-unique within each, and their counts."""
    windows = _window_hashes(tokens, size)
    per_stream = np.maximum(np.diff(offsets) - size + 1, 0)
    if windows.size == 0:
        return windows, per_stream
    if size > 1 and offsets.size > 2:
        # Drop the windows that start in one stream and end in the next.
        crossing = (offsets[1:-1, None] - np.arange(1, size)).ravel()
        keep = np.ones(windows.size, dtype=bool)
        keep[crossing[(crossing >= 0) & (crossing < windows.size)]] = False
        windows = windows[keep]
    bounds = np.concatenate([[0], np.cumsum(per_stream)])
    # One in-place sort per stream: far cheaper than any global (stream, hash) sort numpy offers.
    for start, stop in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        if stop - start > 1:
            windows[start:stop].sort()
    distinct = first_of_runs(windows)
    distinct[bounds[:-1][per_stream > 0]] = True
    kept_before = np.concatenate([[0], np.cumsum(distinct)])
    return windows[distinct], kept_before[bounds[1:]] - kept_before[bounds[:-1]]


def _pieces(text: str) -> Iterator[str]:
    """Cut a long text into pieces of at most about ``_SLICE_CHARS``, each cut just before a space or newline.

    A space or newline is a starter that composes with nothing, so NFKC and case folding of the pieces
    concatenate to those of the text; no word spans a cut; and white-space runs only split, never merge.
    Without such a character for a whole slice, the piece grows to the next one.
    """
    start = 0
    while len(text) - start > _SLICE_CHARS:
        limit = start + _SLICE_CHARS
        cut = max(text.rfind(" ", start + 1, limit), text.rfind("\n", start + 1, limit))
        if cut <= start:
            following = [at for at in (text.find(" ", limit), text.find("\n", limit)) if at >= 0]
            if not following:
                break
            cut = min(following)
        yield text[start:cut]
        start = cut
    yield text[start:]


def _long_document_shingles(text: str, size: int, unit: str, tokenisation: str,
                            short_documents: str = SHORT_DOCUMENTS) -> np.ndarray:
    """The shingle set of one long text, a piece at a time with w − 1 token hashes of overlap.

    Memory: one piece's temporaries (about 20 bytes per byte of a piece), then twice 8 bytes per distinct
    shingle of the text (the per-piece sets, merged and sorted in place, and the distinct values).
    """
    parts = []
    carry = np.empty(0, dtype=np.uint64)
    joining_space = char_hashes(np.array([ord(" ")], dtype=np.uint8))
    any_tokens = False
    for piece in _pieces(text):
        tokens, _ = token_streams([piece], unit, tokenisation)
        if unit == "char" and tokens.size and any_tokens:
            # normalise joins the pieces' words with one space (the cut was in white space).
            tokens = np.concatenate([joining_space, tokens])
        any_tokens |= tokens.size > 0
        stream = np.concatenate([carry, tokens])
        parts.append(sorted_unique(_window_hashes(stream, size)))
        carry = stream[stream.size - min(stream.size, size - 1) :]
    merged = np.concatenate(parts)
    parts.clear()
    if merged.size == 0 and 0 < carry.size < size and short_documents == "whole":
        return _window_hashes(carry, carry.size)  # fewer than w tokens in all: the carry holds them all
    merged.sort()
    return merged[first_of_runs(merged)]


def batch_shingles(texts: Sequence[str], size: int, unit: str, tokenisation: str | None = None,
                   short_documents: str = SHORT_DOCUMENTS) -> tuple[np.ndarray, np.ndarray]:
    """The shingle sets of many raw document texts at once.

    Args:
        texts: n_docs raw texts (normalised here, see :mod:`dedup_cli.text.normalise`).
        size: w, the shingle size (≥ 1).
        unit: ``"word"`` or ``"char"``.
        tokenisation: how words are found, ``"unicode-words"`` (the default) or ``"w-runs"``
            (:mod:`dedup_cli.text.scripts`); ``"code-points"`` (the default) for characters.
        short_documents: ``"whole"`` (the default): a text of fewer than w tokens has one shingle, its whole token
            sequence; ``"none"``: it has none (the rule of older stores, :class:`dedup_cli.params.SignatureParams`).

    Returns:
        (uint64[n_total], int64[n_docs + 1]): document d's shingle set is ``shingles[offsets[d]:offsets[d + 1]]``,
        sorted and distinct. The result for a text does not depend on the other texts of the batch.
    """
    check_unit(unit)
    if tokenisation is None:
        tokenisation = CHAR_TOKENISATION if unit == "char" else DEFAULT_TOKENISATION
    check_tokenisation(unit, tokenisation)
    if size < 1:
        raise ValueError(f"shingle size {size} must be at least 1")
    parts: list[np.ndarray] = []
    counts = np.zeros(len(texts), dtype=np.int64)
    group: list[int] = []
    group_chars = 0

    def flush() -> None:
        nonlocal group, group_chars
        if group:
            tokens, offsets = token_streams([texts[index] for index in group], unit, tokenisation)
            shingles, group_counts = _shingle_sets(tokens, offsets, size, short_documents)
            parts.append(shingles)
            counts[group] = group_counts
        group, group_chars = [], 0

    for index, text in enumerate(texts):
        if len(text) > _SLICE_CHARS:
            flush()
            shingles = _long_document_shingles(text, size, unit, tokenisation, short_documents)
            parts.append(shingles)
            counts[index] = shingles.size
            continue
        if group_chars + len(text) > _SLICE_CHARS or len(group) >= _SLICE_DOCUMENTS:
            flush()
        group.append(index)
        group_chars += len(text)
    flush()
    shingles = np.concatenate(parts) if parts else np.empty(0, dtype=np.uint64)
    return shingles, np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
