"""Tokens: the words (or characters) of many normalised texts and their 64-bit hashes, a batch at a time.

Nothing here runs Python per token: the batch is encoded to UTF-8 once and case-folded there
(``bytes.lower`` for ASCII; ``str.casefold`` only for the documents holding a non-ASCII letter that folding
changes, like É, ß or Σ), and tokens are found and hashed in numpy. (Character tokens are folded with
``str.casefold`` per document.)

Words are found in the UTF-8 bytes: ASCII bytes are classified by arithmetic, and bytes ≥ 0x80 are
provisionally word bytes; then the few non-ASCII characters that are not ``\\w`` (curly quotes, dashes,
non-Latin punctuation; one table lookup per non-ASCII character) are marked back, so "“go!”" still yields the
word "go". That is all the "w-runs" tokenisation does. With "unicode-words" (:mod:`dedup_cli.text.scripts`), a
batch holding ideographs, kana, letters of the scripts written without spaces or combining marks also gets each
byte a kind (word, katakana, single, mark), marks take the kind of the character before them, and a token starts
wherever the kind changes or a single-character token begins: a few passes over the bytes, paid only by such
batches, so text in the scripts written with spaces costs what it did.

Word token hash (``SignatureParams.token_hash`` = ``"utf8-chunk-poly64-mix64"``): the token's UTF-8 bytes are
read as little-endian 8-byte chunks c_0 … c_{n−1}, the last one zero-padded (a word never contains a zero
byte, so the padding is unambiguous), combined by Horner's rule h = K·Q^n + Σ c_i·Q^(n−1−i) mod 2^64 with a
fixed odd Q, and finished with the splitmix64 mixer. A word of up to 8 bytes (most words) is therefore hashed
without any collision at all. Longer words can collide only through the polynomial, with probability about
2^−64 per pair for natural text; like xxh3 before it, this is not a keyed or adversary-proof hash.

Character tokens are code points hashed as mix64(code point + C), unchanged from the per-document version,
so character shingles are the same as before.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

import numpy as np

from dedup_cli.array_primitives import mix64_inplace
from dedup_cli.options.vocabulary import CHAR_TOKENISATION, DEFAULT_TOKENISATION
from dedup_cli.text import scripts
from dedup_cli.text.normalise import case_folded_code_points, fold, space_code_points, word_code_points

_MASK64 = (1 << 64) - 1
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
_PADDING = bytes(8)  # lets an 8-byte read start at any byte of the text
# Where the non-ASCII characters of a UTF-8 buffer start, their widths in bytes and their code points.
Leads = tuple[np.ndarray, np.ndarray, np.ndarray]
# The kind of a byte for "unicode-words": outside words, in a run of word characters, of katakana, a character
# that is a token alone, a combining mark (which takes the kind of the character before it).
_OUTSIDE, _RUN, _KATAKANA_RUN, _SINGLE, _MARK = range(5)


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
    not_word = ~word_code_points()[code_points]
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


def _word_token_streams(texts: Sequence[str], fold: bool,
                        tokenisation: str = DEFAULT_TOKENISATION) -> tuple[np.ndarray, np.ndarray]:
    """Word token hashes of texts, NFKC-normalised and case-folded first if ``fold``, found as ``tokenisation``
    says (``"unicode-words"`` or ``"w-runs"``).

    Returns (uint64[n_tokens], int64[n_texts + 1] token offsets).
    """
    if fold:
        texts = [unicodedata.normalize("NFKC", text) for text in texts]
    encoded = [text.encode("utf-8", "surrogatepass") for text in texts]
    buffer, data, text_starts, leads = _word_buffer(encoded, fold)
    if fold and leads is not None:
        # Case folding: bytes.lower() did ASCII; texts holding a non-ASCII character that casefold() changes
        # (É, ß, Σ; not “ or —) are folded by str.casefold() and the buffer is built again.
        changed = leads[0][case_folded_code_points()[leads[2]]]
        if changed.size:
            for index in np.unique(np.searchsorted(text_starts, changed, side="right") - 1).tolist():
                encoded[index] = texts[index].casefold().encode("utf-8", "surrogatepass")
            buffer, data, text_starts, leads = _word_buffer(encoded, fold)
    classes = None
    if leads is not None and tokenisation != "w-runs":
        classes = scripts.token_classes(tokenisation)[leads[2]]
        if not scripts.special_classes(classes):
            classes = None  # runs of \w are the Unicode words of this batch
    if classes is None:
        word = _word_bytes(data, leads)
        edges = np.flatnonzero(word[1:] != word[:-1]) + 1  # alternately a word's start and its end
        starts, ends = edges[0::2], edges[1::2]
    else:
        assert leads is not None
        starts, ends = _unicode_word_spans(data, leads, classes)
    hashes = _hash_word_spans(buffer, starts, ends)
    return hashes, np.searchsorted(starts, text_starts)


def _unicode_word_spans(data: np.ndarray, leads: Leads, classes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where the "unicode-words" tokens of UTF-8 ``data`` start and end (int64[n_tokens] each, byte offsets).

    ``classes`` (uint8[n_leads]) are the class bits of the non-ASCII characters ``leads``. A token is a character
    that is a token alone, a run of katakana or a run of other word characters, each with the combining marks
    that follow it; a mark after anything else belongs to no token.
    """
    starts, widths, _ = leads
    kind = _word_bytes(data, None).view(np.uint8)  # ASCII: _RUN for [0-9A-Za-z_], else _OUTSIDE
    char_kinds = np.where(classes & scripts.SINGLE, _SINGLE, np.where(
        classes & scripts.KATAKANA, _KATAKANA_RUN, np.where(
            classes & scripts.EXTEND, _MARK, np.where(classes & scripts.WORD, _RUN, _OUTSIDE)))).astype(np.uint8)
    kind[starts] = char_kinds
    kind[starts + 1] = char_kinds
    wide = widths >= 3
    kind[starts[wide] + 2] = char_kinds[wide]
    widest = widths == 4
    kind[starts[widest] + 3] = char_kinds[widest]
    marks = kind == _MARK
    if marks.any():
        # A mark takes the kind of the last byte before it that is not a mark (the buffer starts with a space).
        before = np.where(marks, 0, np.arange(kind.size, dtype=np.int32))
        np.maximum.accumulate(before, out=before)
        effective = kind[before]
    else:
        effective = kind
    inside = effective != _OUTSIDE
    character_start = (data < 0x80) | (data >= 0xC0)
    begins = np.zeros(kind.size, dtype=bool)
    begins[1:] = (effective[1:] != effective[:-1]) | (kind[1:] == _SINGLE)
    begins &= character_start & inside & ~marks
    token_starts = np.flatnonzero(begins)
    ends = np.zeros(kind.size, dtype=bool)
    ends[1:] = inside[:-1] & (~inside[1:] | begins[1:])
    return token_starts, np.flatnonzero(ends)


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
        other[beyond_ascii] = space_code_points()[codes[beyond_ascii]]
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
    return char_hashes(codes), bounds


def char_hashes(codes: np.ndarray) -> np.ndarray:
    hashes = codes.astype(np.uint64)
    hashes += _CHAR_OFFSET
    return mix64_inplace(hashes)


def token_streams(texts: Sequence[str], unit: str,
                  tokenisation: str = DEFAULT_TOKENISATION) -> tuple[np.ndarray, np.ndarray]:
    """Token hashes of raw texts (normalised here) and their offsets; words found as ``tokenisation`` says."""
    if unit == "word":
        return _word_token_streams(texts, fold=True, tokenisation=tokenisation)
    return _char_token_streams([fold(text) for text in texts])


def check_tokenisation(unit: str, tokenisation: str) -> None:
    """``tokenisation`` must be one of the word unit's, or ``"code-points"`` for characters.

    The name is checked alone: the class table of a tokenisation (:func:`dedup_cli.text.scripts.token_classes`,
    about 50 ms to build) is built only when a batch holds a character beyond ASCII, so that shingling ASCII text
    (the exact checks of an English corpus, say) never pays for it."""
    if unit == "char":
        if tokenisation != CHAR_TOKENISATION:
            raise ValueError(f"character tokens are {CHAR_TOKENISATION!r}, not {tokenisation!r}")
        return
    scripts.check_word_tokenisation(tokenisation)
