"""Documents to w-shingle sets: normalisation, tokens, and 64-bit shingle hashes, a whole batch at a time.

A document becomes the set of its w-shingles (w contiguous word or character tokens; Mining of Massive
Datasets, ch. 3.2). Nothing in the hot path runs Python per token: each document is NFKC-normalised by
``unicodedata`` (C), the batch is encoded to UTF-8 once and case-folded there (``bytes.lower`` for ASCII;
``str.casefold`` only for the documents holding a non-ASCII letter that folding changes, like É, ß or Σ),
tokens are found and hashed in numpy, and w consecutive token hashes are combined into one 64-bit shingle
hash, so no token or shingle string is ever built. Shingle hashes live in the universe D = 2^64, where
r = f/D is negligible and the sparse-limit estimators are exact. (Character shingles are folded with
``str.casefold`` per document.)

Words are the runs of ``\\w`` of the normalised text, exactly as ``re.findall(r"\\w+", text)`` finds them
(``WORD_PATTERN``, the tokeniser before batching). They are found in the UTF-8 bytes: ASCII bytes are
classified by arithmetic, and bytes ≥ 0x80 are provisionally word bytes; then the few non-ASCII characters
that are not ``\\w`` (curly quotes, dashes, non-Latin punctuation; one table lookup per non-ASCII character)
are marked back, so "“go!”" still yields the word "go".

Word token hash (``SignatureParams.token_hash`` = ``"utf8-chunk-poly64-mix64"``): the token's UTF-8 bytes are
read as little-endian 8-byte chunks c_0 … c_{n−1}, the last one zero-padded (a word never contains a zero
byte, so the padding is unambiguous), combined by Horner's rule h = K·Q^n + Σ c_i·Q^(n−1−i) mod 2^64 with a
fixed odd Q, and finished with the splitmix64 mixer. A word of up to 8 bytes (most words) is therefore hashed
without any collision at all. Longer words can collide only through the polynomial, with probability about
2^−64 per pair for natural text; like xxh3 before it, this is not a keyed or adversary-proof hash.

Character tokens are code points hashed as mix64(code point + C), unchanged from the per-document version,
so character shingles are the same as before.

Batching never changes a result: the same text gives the same shingles whatever else is in its batch, and a
document longer than ``_SLICE_CHARS`` is cut into pieces just before a space or newline (a cut that neither
NFKC nor case folding can see across, and no word spans), with the last w − 1 token hashes of one piece
carried into the next.
"""

from __future__ import annotations

import functools
import re
import sys
import unicodedata
from collections.abc import Iterator, Sequence

import numpy as np

from dedup_cli.arrays import sorted_unique
from dedup_cli.hashing import mix64_inplace

WORD_PATTERN = re.compile(r"\w+")
SHINGLE_UNITS = ("word", "char")

_MASK64 = (1 << 64) - 1
# An odd 64-bit multiplier (the golden ratio) so each position in the window weighs its token differently:
# "a b c" and "b a c" must hash apart.
_POSITION_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)
# Word tokens: Horner's rule over 8-byte chunks, h ← h·Q + chunk from h = K (odd Q; arbitrary fixed K).
_CHUNK_MULTIPLIER = 0xD6E8FEB86659FD93
_CHUNK_START = 0x8CB92BA72F3D8DD7
_FIRST_CHUNK_OFFSET = np.uint64((_CHUNK_START * _CHUNK_MULTIPLIER) & _MASK64)
# Character tokens: mix64(code point + this), as before batching.
_CHAR_OFFSET = np.uint64(0x632BE59BD9B4E019)
# _BYTE_MASKS[r] keeps the lowest r bytes of a chunk (r = 8: all of it).
_BYTE_MASKS = np.array([(1 << (8 * r)) - 1 for r in range(9)], dtype=np.uint64)
# Words of more chunks than this (256 bytes) are hashed one at a time, so a freak 1 MB "word" (base64, a
# minified blob) costs one short numpy expression instead of 131072 passes over the batch.
_LONG_WORD_CHUNKS = 32
# Text handled by one vectorised pass: bounds the temporaries (about 20 bytes per input byte for word
# shingles) whatever the batch or document size.
_SLICE_CHARS = 1 << 21
# Documents per pass; only bounds the per-document bookkeeping.
_SLICE_DOCUMENTS = 1 << 14
_PADDING = bytes(8)  # lets an 8-byte read start at any byte of the text
# Where the non-ASCII characters of a UTF-8 buffer start, their widths in bytes and their code points.
Leads = tuple[np.ndarray, np.ndarray, np.ndarray]


def normalise(text: str) -> str:
    """Unicode NFKC, case-folded, with every run of white space collapsed to one space."""
    return " ".join(_fold(text).split())


def _fold(text: str) -> str:
    """NFKC then case folding; white space is left alone (word tokens do not see it).

    Word tokens get the same folding more cheaply (:func:`_word_token_streams`)."""
    return unicodedata.normalize("NFKC", text).casefold()


def _check_unit(unit: str) -> None:
    if unit not in SHINGLE_UNITS:
        raise ValueError(f"unknown shingle unit {unit!r}; choose one of {', '.join(SHINGLE_UNITS)}")


def _every_code_point() -> str:
    """All of Unicode, U+0000 … U+10FFFF (lone surrogates included), as one string."""
    return np.arange(sys.maxunicode + 1, dtype="<u4").tobytes().decode("utf-32-le", "surrogatepass")


def _code_point_table(pattern: str) -> np.ndarray:
    """bool[0x110000]: the code points a one-character regex class matches (``\\w``, ``\\s``), found by
    the ``re`` module itself, so the table is exactly its definition."""
    table = np.zeros(sys.maxunicode + 1, dtype=bool)
    for run in re.finditer(pattern + "+", _every_code_point()):
        table[run.start() : run.end()] = True
    return table


@functools.cache
def _word_code_points() -> np.ndarray:
    """bool[0x110000]: the code points ``\\w`` matches (what ``WORD_PATTERN`` finds runs of)."""
    return _code_point_table(r"\w")


@functools.cache
def _space_code_points() -> np.ndarray:
    """bool[0x110000]: the code points ``str.split()`` splits on (``\\s`` and ``str.isspace`` agree)."""
    return _code_point_table(r"\s")


@functools.cache
def _case_folded_code_points() -> np.ndarray:
    """bool[0x110000]: the non-ASCII code points that ``str.casefold()`` changes (É, ß, Σ, ſ, …)."""
    every = _every_code_point()
    table = np.zeros(len(every), dtype=bool)
    for start in range(0, len(every), 256):  # most blocks of 256 have no cased letter: one test each
        block = every[start : start + 256]
        if block.casefold() != block:
            table[start : start + 256] = [char != char.casefold() for char in block]
    return table


def _decode_leads(data: np.ndarray) -> Leads:
    """Where the non-ASCII characters of UTF-8 ``data`` start, their byte widths and code points."""
    leads = np.flatnonzero(data >= 0xC0)
    first = data[leads].astype(np.uint32)
    second = (data[leads + 1] & 0x3F).astype(np.uint32)
    third = (data[leads + 2] & 0x3F).astype(np.uint32)  # in bounds: the data ends with _PADDING
    fourth = (data[leads + 3] & 0x3F).astype(np.uint32)
    widths = 2 + (first >= 0xE0).astype(np.int64) + (first >= 0xF0)
    code_points = np.where(
        widths == 2,
        ((first & 0x1F) << 6) | second,
        np.where(widths == 3, ((first & 0x0F) << 12) | (second << 6) | third,
                 ((first & 0x07) << 18) | (second << 12) | (third << 6) | fourth),
    )
    return leads, widths, code_points


def _word_bytes(data: np.ndarray, leads: Leads | None) -> np.ndarray:
    """bool[n]: which bytes of UTF-8 ``data`` belong to a ``\\w`` character (``leads``: None if ASCII)."""
    scratch = np.empty(data.size, dtype=np.uint8)
    word = np.less(np.subtract(data, 48, out=scratch), 10)  # 0-9 (uint8 wraps below "0")
    np.bitwise_or(data, 0x20, out=scratch)  # A-Z → a-z
    scratch -= 97
    word |= scratch < 26
    word |= data == 95  # _
    if leads is None:
        return word
    word |= data >= 0x80
    # Mark back the non-ASCII characters that are not \w.
    starts, widths, code_points = leads
    not_word = ~_word_code_points()[code_points]
    starts, widths = starts[not_word], widths[not_word]
    word[starts] = False
    word[starts + 1] = False
    word[starts[widths >= 3] + 2] = False
    word[starts[widths == 4] + 3] = False
    return word


def _hash_word_spans(buffer: bytes, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """uint64[n_words]: the word token hash (module docstring) of each byte span ``buffer[start:end]``."""
    # Every 8-byte little-endian word of the buffer, at every byte offset (an overlapping, unaligned view).
    chunks_at = np.ndarray(shape=(len(buffer) - 7,), dtype="<u8", buffer=buffer, strides=(1,))
    lengths = ends - starts
    num_chunks = (lengths + 7) >> 3
    hashes = chunks_at[starts] & _BYTE_MASKS[np.minimum(lengths, 8)]
    hashes += _FIRST_CHUNK_OFFSET
    multiplier = np.uint64(_CHUNK_MULTIPLIER)
    # Chunk i of every word that has one; the set shrinks fast (few words exceed 8 or 16 bytes).
    active = np.flatnonzero((num_chunks > 1) & (num_chunks <= _LONG_WORD_CHUNKS))
    chunk = 1
    while active.size:
        remaining = lengths[active] - 8 * chunk
        values = chunks_at[starts[active] + 8 * chunk] & _BYTE_MASKS[np.minimum(remaining, 8)]
        hashes[active] = hashes[active] * multiplier + values
        chunk += 1
        active = active[num_chunks[active] > chunk]
    for word in np.flatnonzero(num_chunks > _LONG_WORD_CHUNKS).tolist():
        hashes[word] = _hash_long_word(chunks_at, int(starts[word]), int(lengths[word]))
    return mix64_inplace(hashes)


def _hash_long_word(chunks_at: np.ndarray, start: int, length: int) -> int:
    """The Horner polynomial of one long word, as one dot product with the powers of Q (same value)."""
    count = (length + 7) >> 3
    remaining = length - 8 * np.arange(count)
    chunks = chunks_at[start + 8 * np.arange(count)] & _BYTE_MASKS[np.minimum(remaining, 8)]
    powers = np.full(count + 1, _CHUNK_MULTIPLIER, dtype=np.uint64)
    powers[0] = 1
    np.multiply.accumulate(powers, out=powers)  # Q^0 … Q^count, wrapping mod 2^64
    polynomial = int(np.sum(chunks * powers[count - 1 :: -1][:count], dtype=np.uint64))
    return (_CHUNK_START * int(powers[count]) + polynomial) & _MASK64


def _word_token_streams(texts: Sequence[str], fold: bool) -> tuple[np.ndarray, np.ndarray]:
    """Word token hashes of texts, NFKC-normalised and case-folded first if ``fold``.

    Returns (uint64[n_tokens], int64[n_texts + 1] token offsets).
    """
    if fold:
        texts = [unicodedata.normalize("NFKC", text) for text in texts]
    encoded = [text.encode("utf-8", "surrogatepass") for text in texts]
    buffer, data, text_starts, leads = _word_buffer(encoded, fold)
    if fold and leads is not None:
        # Case folding: bytes.lower() did ASCII; texts holding a non-ASCII character that casefold() changes
        # (É, ß, Σ; not “ or —) are folded by str.casefold() and the buffer is built again.
        changed = leads[0][_case_folded_code_points()[leads[2]]]
        if changed.size:
            for index in np.unique(np.searchsorted(text_starts, changed, side="right") - 1).tolist():
                encoded[index] = texts[index].casefold().encode("utf-8", "surrogatepass")
            buffer, data, text_starts, leads = _word_buffer(encoded, fold)
    word = _word_bytes(data, leads)
    edges = np.flatnonzero(word[1:] != word[:-1]) + 1  # alternately a word's start and its end
    starts, ends = edges[0::2], edges[1::2]
    hashes = _hash_word_spans(buffer, starts, ends)
    return hashes, np.searchsorted(starts, text_starts)



def _word_buffer(encoded: list[bytes], lower: bool) -> tuple[bytes, np.ndarray, np.ndarray, Leads | None]:
    """The texts as one buffer: \" text0 text1 … \" then zero padding (every text is bounded by non-word
    bytes, so no word spans two), ASCII-lower-cased if ``lower``.

    Returns the buffer, its bytes (uint8[n]), where each text starts (int64[n_texts + 1], the last entry n)
    and its non-ASCII characters (:func:`_decode_leads`; None if there are none).
    """
    buffer = b" ".join([b"", *encoded, _PADDING])
    if lower:
        buffer = buffer.lower()  # ASCII only, as casefold() does for ASCII
    data = np.frombuffer(buffer, dtype=np.uint8)
    lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    # Text i starts after the leading space and i texts each followed by one space.
    text_starts = 1 + np.arange(len(encoded) + 1) + np.concatenate([[0], np.cumsum(lengths)])
    text_starts[-1] = data.size
    return buffer, data, text_starts, None if buffer.isascii() else _decode_leads(data)


def _code_points(text: str) -> np.ndarray:
    """uint8 or uint32[len(text)]: the code points of ``text``."""
    if text.isascii():
        return np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4")


def _collapse_white_space(codes: np.ndarray, bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``" ".join(text.split())`` for each text ``codes[bounds[i]:bounds[i + 1]]``, on code points.

    Returns the new code points and bounds.
    """
    size = codes.size
    if size == 0:
        return codes, bounds
    # White space other than " ": \t \n \v \f \r and \x1c-\x1f in ASCII, then the non-ASCII ones.
    scratch = np.subtract(codes, 9, dtype=codes.dtype)
    other = scratch < 5
    np.subtract(codes, 28, out=scratch)
    other |= scratch < 4
    if codes.dtype != np.uint8:
        beyond_ascii = np.flatnonzero(codes >= 0x80)
        other[beyond_ascii] = _space_code_points()[codes[beyond_ascii]]
    space = codes == ord(" ")
    space |= other
    at_start = np.zeros(size + 1, dtype=bool)
    at_start[bounds[:-1]] = True
    at_end = np.zeros(size + 1, dtype=bool)
    at_end[bounds[1:]] = True
    # A run is a maximal range of white space inside one text; it becomes one space unless it touches an end.
    previous = np.zeros(size, dtype=bool)
    previous[1:] = space[:-1]
    previous &= ~at_start[:size]
    following = np.zeros(size, dtype=bool)
    following[:-1] = space[1:]
    following &= ~at_end[1:]
    run_starts = np.flatnonzero(space & ~previous)
    run_ends = np.flatnonzero(space & ~following) + 1
    inner = run_starts[~(at_start[run_starts] | at_end[run_ends])]
    # Dropped: every white-space character but the first of an inner run (few, in prose).
    space[inner] = False
    dropped = np.flatnonzero(space)
    rewritten = np.flatnonzero(other)
    if rewritten.size:
        codes = codes.copy()
        codes[rewritten] = ord(" ")
    if dropped.size == 0:
        return codes, bounds
    return np.delete(codes, dropped), bounds - np.searchsorted(dropped, bounds)


def _char_token_streams(folded: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Character token hashes of folded texts, white space collapsed as ``normalise`` does."""
    lengths = np.fromiter(map(len, folded), dtype=np.int64, count=len(folded))
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    codes, bounds = _collapse_white_space(_code_points("".join(folded)), bounds)
    return _char_hashes(codes), bounds


def _char_hashes(codes: np.ndarray) -> np.ndarray:
    hashes = codes.astype(np.uint64)
    hashes += _CHAR_OFFSET
    return mix64_inplace(hashes)


def _token_streams(texts: Sequence[str], unit: str) -> tuple[np.ndarray, np.ndarray]:
    """Token hashes of raw texts (normalised here) and their offsets."""
    if unit == "word":
        return _word_token_streams(texts, fold=True)
    return _char_token_streams([_fold(text) for text in texts])


def token_hashes(text: str, unit: str) -> np.ndarray:
    """Hash the tokens of an already normalised text.

    Returns uint64[n_tokens]: the word token hash (module docstring) of each run of ``\\w``
    (``unit="word"``), or mix64(code point + C) of each character (``unit="char"``, spaces included).
    """
    _check_unit(unit)
    if unit == "word":
        return _word_token_streams([text], fold=False)[0]
    return _char_hashes(_code_points(text))


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


def shingle_hashes(tokens: np.ndarray, size: int) -> np.ndarray:
    """Combine each window of ``size`` consecutive token hashes into one 64-bit shingle hash.

    Args:
        tokens: uint64[n_tokens] token hashes.
        size: w, the shingle size.

    Returns:
        uint64[n_shingles], the distinct shingle hashes in ascending order (a set: repeats removed);
        empty when the document has fewer than ``size`` tokens.
    """
    return sorted_unique(_window_hashes(tokens, size))


def _shingle_sets(tokens: np.ndarray, offsets: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Shingle sets of several token streams stored end to end.

    Args:
        tokens: uint64[n_tokens], stream s owning ``tokens[offsets[s]:offsets[s + 1]]``.
        offsets: int64[n_streams + 1].
        size: w.

    Returns:
        (uint64[n_shingles] sorted-unique within each stream, int64[n_streams] their counts).
    """
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
    distinct = _first_of_runs(windows)
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


def _long_document_shingles(text: str, size: int, unit: str) -> np.ndarray:
    """The shingle set of one long text, a piece at a time with w − 1 token hashes of overlap.

    Memory: one piece's temporaries (about 20 bytes per byte of a piece), then twice 8 bytes per distinct
    shingle of the text (the per-piece sets, merged and sorted in place, and the distinct values).
    """
    parts = []
    carry = np.empty(0, dtype=np.uint64)
    joining_space = _char_hashes(np.array([ord(" ")], dtype=np.uint8))
    any_tokens = False
    for piece in _pieces(text):
        tokens, _ = _token_streams([piece], unit)
        if unit == "char" and tokens.size and any_tokens:
            # normalise joins the pieces' words with one space (the cut was in white space).
            tokens = np.concatenate([joining_space, tokens])
        any_tokens |= tokens.size > 0
        stream = np.concatenate([carry, tokens])
        parts.append(sorted_unique(_window_hashes(stream, size)))
        carry = stream[stream.size - min(stream.size, size - 1) :]
    merged = np.concatenate(parts)
    parts.clear()
    merged.sort()
    return merged[_first_of_runs(merged)]


def _first_of_runs(ordered: np.ndarray) -> np.ndarray:
    """bool[n]: True where a sorted array's value differs from the one before."""
    first = np.ones(ordered.size, dtype=bool)
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    return first


def batch_shingles(texts: Sequence[str], size: int, unit: str) -> tuple[np.ndarray, np.ndarray]:
    """The shingle sets of many raw document texts at once.

    Args:
        texts: n_docs raw texts (normalised here, as :func:`normalise`).
        size: w, the shingle size (≥ 1).
        unit: ``"word"`` or ``"char"``.

    Returns:
        (uint64[n_total], int64[n_docs + 1]): document d's shingle set is ``shingles[offsets[d]:offsets[d + 1]]``,
        sorted and distinct. The result for a text does not depend on the other texts of the batch.
    """
    _check_unit(unit)
    if size < 1:
        raise ValueError(f"shingle size {size} must be at least 1")
    parts: list[np.ndarray] = []
    counts = np.zeros(len(texts), dtype=np.int64)
    group: list[int] = []
    group_chars = 0

    def flush() -> None:
        nonlocal group, group_chars
        if group:
            tokens, offsets = _token_streams([texts[index] for index in group], unit)
            shingles, group_counts = _shingle_sets(tokens, offsets, size)
            parts.append(shingles)
            counts[group] = group_counts
        group, group_chars = [], 0

    for index, text in enumerate(texts):
        if len(text) > _SLICE_CHARS:
            flush()
            shingles = _long_document_shingles(text, size, unit)
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


def document_shingles(text: str, size: int, unit: str) -> np.ndarray:
    """The shingle set of a raw document text: uint64[f], sorted, distinct (as :func:`batch_shingles`)."""
    return batch_shingles([text], size, unit)[0]

