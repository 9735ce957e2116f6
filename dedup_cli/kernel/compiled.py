"""The signing hot path compiled with numba: NFKC-normalised UTF-8 → w-shingles → minwise values → b-bit signatures.

One pass over each document's bytes does what :mod:`dedup_cli.text`, :mod:`dedup_cli.minhash.oph`,
:mod:`dedup_cli.minhash.kperm` and :mod:`dedup_cli.minhash.packing` do in numpy, with the same definitions, so
the shingle counts and signatures are byte-identical (the tests sign the sample corpora and generated text both
ways): tokens a block at a time (:mod:`dedup_cli.kernel.tokenise`), then shingles, the distinct-shingle set and
the sketch (:mod:`dedup_cli.kernel.sketch`). Python only normalises non-ASCII text (NFKC) and encodes it.

Cost: importing this module imports numba (0.15-0.3 s). The kernel is compiled once (about 10 s) into numba's
on-disk cache (``__pycache__`` beside this file, else numba's per-user cache directory; ``NUMBA_CACHE_DIR``
moves it) and later loaded from it (0.15-0.35 s per process); :mod:`dedup_cli.kernel.choice` decides when that
pays. It releases the GIL (``nogil``), so batches can be signed in threads. Memory: the batch's buffer, and a
hash set of 8 bytes per slot, at most half full (16-32 bytes per distinct shingle of the longest document;
2^16 slots are allocated per call).

Numba keys its cache on this file alone: edits to the modules compiled into the kernel go unnoticed unless this
file changes too, so :data:`KERNEL_SOURCES` records their digest (a test recomputes it), and every constant of
other modules arrives as an argument (:mod:`dedup_cli.kernel.tables`).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from typing import Any

import numpy as np
from numba import njit

from dedup_cli.kernel import tables
from dedup_cli.kernel.cache import record_compiled
from dedup_cli.kernel.primitives import MAX_UINT64, grown
from dedup_cli.kernel.sketch import add_shingles, add_whole_document, finish_document
from dedup_cli.kernel.tokenise import WORD, character_tokens, start_document, word_tokens
from dedup_cli.params import SignatureParams

KERNEL_SOURCES = "primitives.py sketch.py tokenise.py sha256:6cd193797cc7fd23"
"""The files compiled into :func:`sign_documents` and the first 16 hex digits of the SHA-256 of their bytes,
joined in this order; change it whenever they change, so that numba drops its cached code."""

TOKENS_PER_BLOCK = 512  # token hashes handed from the tokeniser to the shingle step at a time (4 KB)


@njit(cache=True, nogil=True)
def sign_documents(buffer, offsets, ascii_documents, words, shingle_size, whole_short, bits, classes, fold, expansions,
                   constants, oph, key, salts, bin_order, bin_rank, round_keys, half_bits, multipliers, increments,
                   shingle_counts, signatures):
    """Sign documents d = 0 … n − 1, ``buffer[offsets[d]:offsets[d + 1]]`` (NFKC-normalised UTF-8), by word
    (``words``) or character w-shingles, into ``shingle_counts`` (int64[n], f) and the zeroed ``signatures``
    (uint8[n, ⌈k·b/8⌉]). ``ascii_documents`` (bool[n]) says which documents have no byte ≥ 0x80; ``whole_short``,
    whether a document of fewer tokens than w (but some) has one shingle, its whole token sequence (the rule
    ``whole``). The other arrays are those of :func:`dedup_cli.kernel.tables.code_point_tables`,
    ``hash_constants`` and ``scheme_tables``."""
    mix = (constants[0], constants[1], constants[2], constants[3], constants[4])
    chunk_start, chunk_multiplier = constants[5], constants[6]
    position_multiplier, char_offset = constants[7], constants[8]
    oph_key = key[0]
    num_perm = salts.size if oph else multipliers.size
    power = np.uint64(1)  # P^w
    for _ in range(shingle_size):
        power *= position_multiplier
    ring_size = 1
    while ring_size < shingle_size:
        ring_size *= 2
    ring = np.zeros(ring_size, dtype=np.uint64)  # the last w token hashes
    # ASCII word bytes, to scan a run of them with one lookup per byte (bytes ≥ 0x80 end the scan).
    ascii_word = np.zeros(256, dtype=np.bool_)
    for byte in range(128):
        ascii_word[byte] = classes[byte] & WORD
    # lowest_byte[flags]: the index of the lowest set bit of a byte of flags (one per byte of a chunk).
    lowest_byte = np.zeros(256, dtype=np.int64)
    for flags in range(1, 256):
        while not (flags >> lowest_byte[flags]) & 1:
            lowest_byte[flags] += 1
    tokens = np.empty(TOKENS_PER_BLOCK, dtype=np.uint64)
    state = np.zeros(8, dtype=np.uint64)
    table = np.zeros(1 << 16, dtype=np.uint64)
    minima = np.empty(num_perm, dtype=np.uint64)
    filled = np.zeros(num_perm, dtype=np.bool_)
    values = np.empty(num_perm, dtype=np.uint64)
    bins = np.empty(num_perm, dtype=np.int64)
    best_rank = np.empty(num_perm, dtype=np.uint64)
    source = np.empty(num_perm, dtype=np.int64)
    for document in range(offsets.size - 1):
        at, end = offsets[document], offsets[document + 1]
        # Natural text has a word about every 6 bytes and a character per byte: a slot per 2 bytes (words) or
        # two per byte (characters) leaves the set a third full.
        capacity = 64
        while capacity < ((end - at) // 2 if words else 2 * (end - at)) and capacity < 1 << 16:
            capacity *= 2
        hash_set = table[:capacity]
        hash_set[:] = 0
        ring[:] = 0
        minima[:] = MAX_UINT64
        filled[:] = False
        start_document(state, words, chunk_start)
        combined = np.uint64(0)  # Σ_j t_{i+j}·P^(w−1−j) over the last w tokens
        seen = 0  # tokens so far
        distinct = 0
        has_zero = False  # the shingle hash 0 was seen (0 marks a free slot of the set)
        while True:
            if words:
                count, at = word_tokens(buffer, at, end, ascii_documents[document], tokens, state, classes, fold,
                                        expansions, ascii_word, lowest_byte, chunk_start, chunk_multiplier, mix)
            else:
                count, at = character_tokens(buffer, at, end, tokens, state, classes, fold, expansions, char_offset,
                                             mix)
            position = 0
            while position < count:
                position, combined, seen, distinct, has_zero = add_shingles(
                    tokens, position, count, ring, shingle_size, power, position_multiplier, hash_set, combined, seen,
                    distinct, has_zero, minima, filled, oph, oph_key, multipliers, increments, mix)
                if 2 * distinct > hash_set.size:
                    hash_set = grown(hash_set)
            if count < tokens.size:  # the tokeniser stops short only at the end of the document
                break
        if hash_set.size > table.size:
            table = hash_set  # keep the grown set for the next long document
        if whole_short and 0 < seen < shingle_size:
            distinct = add_whole_document(combined, minima, filled, oph, oph_key, multipliers, increments, mix)
        shingle_counts[document] = distinct
        finish_document(distinct, minima, filled, oph, salts, bin_order, bin_rank, round_keys, half_bits, bits, mix,
                        values, bins, best_rank, source, signatures[document])


# --- entry points --------------------------------------------------------------------------------------------------


def _normalised(text: str) -> bytes:
    """A non-ASCII text NFKC-normalised and UTF-8 encoded (case folding and white space are the kernel's)."""
    return unicodedata.normalize("NFKC", text).encode("utf-8", "surrogatepass")


def encode_texts(texts: Sequence[str]) -> tuple[bytes, np.ndarray, np.ndarray]:
    """The texts NFKC-normalised (ASCII texts already are) and UTF-8 encoded end to end.

    Case folding and white space are left to the kernel. Returns (the buffer, int64[n + 1] byte offsets,
    bool[n] which texts are ASCII: ``str.isascii`` reads a flag CPython keeps, so this costs nothing).
    """
    ascii_documents = np.fromiter(map(str.isascii, texts), dtype=np.bool_, count=len(texts))
    encoded = [
        text.encode("utf-8", "surrogatepass") if is_ascii else _normalised(text)
        for text, is_ascii in zip(texts, ascii_documents.tolist(), strict=True)
    ]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)), out=offsets[1:])
    return b"".join(encoded), offsets, ascii_documents


def normalise_encoded(buffer: bytes | memoryview, offsets: np.ndarray, ascii_documents: np.ndarray
                      ) -> tuple[bytes | memoryview, np.ndarray, np.ndarray]:
    """Documents already UTF-8 encoded end to end (valid UTF-8, as read; ``ascii_documents``: bool[n], which
    have no byte ≥ 0x80), NFKC-normalised as :func:`encode_texts` normalises their texts: only the non-ASCII
    ones are decoded, normalised and encoded again, so a batch of ASCII documents is passed on as it is.

    Returns (the buffer, int64[n + 1] byte offsets, bool[n] which documents are ASCII).
    """
    others = np.flatnonzero(~ascii_documents).tolist()
    if not others:
        return buffer, offsets, ascii_documents
    pieces: list[bytes | memoryview] = []
    lengths = np.diff(offsets)
    view = memoryview(buffer)
    bounds = offsets.tolist()
    start = 0  # the first document not yet in pieces
    for document in others:
        if start < document:
            pieces.append(view[bounds[start] : bounds[document]])
        normalised = _normalised(str(view[bounds[document] : bounds[document + 1]], "utf-8"))
        lengths[document] = len(normalised)
        pieces.append(normalised)
        start = document + 1
    pieces.append(view[bounds[start] :])
    normalised_offsets = np.zeros_like(offsets)
    np.cumsum(lengths, out=normalised_offsets[1:])
    return b"".join(pieces), normalised_offsets, ascii_documents


def ascii_documents_of(data: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """bool[n]: which documents ``data[offsets[d]:offsets[d + 1]]`` have no byte ≥ 0x80."""
    ascii_documents = np.ones(offsets.size - 1, dtype=np.bool_)
    beyond = np.flatnonzero(data >= 0x80)
    ascii_documents[np.searchsorted(offsets, beyond, side="right") - 1] = False
    return ascii_documents


def sign_encoded(buffer: bytes | memoryview, offsets: np.ndarray, params: SignatureParams,
                 ascii_documents: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Sign documents already NFKC-normalised and UTF-8 encoded (:func:`encode_texts`).

    Args:
        buffer: the documents' UTF-8 bytes end to end (case and white space as they come).
        offsets: int64[n_docs + 1], document d is ``buffer[offsets[d]:offsets[d + 1]]``.
        params: text signature parameters (word or char unit, oph or kperm).
        ascii_documents: bool[n_docs], which documents are ASCII (found from the bytes when not given; a
            wrong True gives that document wrong tokens, never a read outside the buffer).

    Returns:
        (int64[n_docs] shingle counts f, uint8[n_docs, params.signature_bytes] packed signatures), the same
        as the numpy path gives; empty documents have f = 0 and a zero signature.
    """
    if params.input_kind != "text":
        raise ValueError("the compiled kernel signs text; integer sets take the numpy path")
    data = np.frombuffer(buffer, dtype=np.uint8)
    if data.flags.writeable:  # read-only, like every buffer given to the kernel (a bytearray is not): one type
        data = data.view()
        data.flags.writeable = False
    # Writable and contiguous, like every other array given to the kernel: numba compiles one version per
    # combination of types (read-only is one), and only this one is compiled ahead (compile_kernel).
    offsets = np.require(offsets, dtype=np.int64, requirements=["C", "W"])
    num_docs = offsets.size - 1
    if offsets[0] != 0 or offsets[-1] != data.size or np.any(np.diff(offsets) < 0):
        raise ValueError("offsets must rise from 0 to the buffer's length")
    all_ascii = bool(ascii_documents.all()) if ascii_documents is not None else bytes(buffer).isascii()
    if ascii_documents is None:
        ascii_documents = np.ones(num_docs, dtype=np.bool_) if all_ascii else ascii_documents_of(data, offsets)
    ascii_documents = np.require(ascii_documents, dtype=np.bool_, requirements=["C", "W"])
    words = params.shingle_unit == "word"
    # Character tokens read only the SPACE bits, which every tokenisation's table has.
    classes, fold, expansions = tables.code_point_tables(all_ascii, params.tokenisation if words else "w-runs")
    scheme = tables.scheme_tables(params.scheme, params.seed, params.num_perm)
    shingle_counts = np.zeros(num_docs, dtype=np.int64)
    signatures = np.zeros((num_docs, params.signature_bytes), dtype=np.uint8)
    kernel: Any = sign_documents  # a numba dispatcher, called with the compiled function's arguments
    whole_short = params.short_documents == "whole"
    kernel(data, offsets, ascii_documents, words, params.shingle_size, whole_short, params.bits, classes, fold,
           expansions, tables.hash_constants(), params.scheme == "oph", *scheme, shingle_counts, signatures)
    return shingle_counts, signatures


def sign_texts(texts: Sequence[str], params: SignatureParams) -> tuple[np.ndarray, np.ndarray]:
    """Sign raw document texts (normalised as :mod:`dedup_cli.text.normalise` defines it).

    Returns (int64[n_docs] shingle counts, uint8[n_docs, params.signature_bytes] signatures), byte-identical
    to :func:`dedup_cli.engine.stages.sign.sign_texts` with the numpy kernel.
    """
    buffer, offsets, ascii_documents = encode_texts(texts)
    return sign_encoded(buffer, offsets, params, ascii_documents)


def compile_kernel() -> None:
    """Compile the kernel into numba's cache, or load it from there (what a set-up runs once, and every process
    before it signs), and record that a fresh process can load it (:mod:`dedup_cli.kernel.cache`)."""
    sign_texts(["Warm up: one small document, in ASCII.", "Und eine zweite, nicht in ASCII."], SignatureParams())
    record_compiled(sign_documents)
