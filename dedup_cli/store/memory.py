"""Signatures held in memory: texts signed without a store, and the local engine's view of them.

:class:`Signatures` is what ``sign_texts`` returns: the same columns a store keeps (ids, shingle counts, packed
b-bit signatures, content hashes), in the order the texts were given, with the texts themselves so that exact
checks need no file. :class:`MemoryDocuments` numbers them for ``find`` as
:class:`dedup_cli.store.documents.NumberedDocuments` numbers a store's documents, with the same methods, so the
local engine runs on either: document d is the d-th text, and ``keep="first"`` keeps the earliest text given.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dedup_cli.errors import UsageError
from dedup_cli.minhash.packing import estimator_values, unpack_values
from dedup_cli.params import SignatureParams
from dedup_cli.store.snapshot import StoredSignatures

# Rows per step of the candidate stage's pass over the signatures (what a row group is in a store).
SIGNATURE_BLOCK = 65_536


@dataclass
class Signatures:
    """Documents signed in memory: aligned arrays, one row per text, in the order given.

    Attributes:
        params: the signature parameters (k, b, shingles, seed), as a store records them.
        ids: the documents' ids (unique).
        shingle_counts: int64[n], each document's distinct shingles f.
        packed: uint8[n, signature_bytes], the b-bit minwise values packed as a store keeps them.
        content_hashes: uint64[n], xxh3-64 of each text's UTF-8 bytes.
        texts: the texts, for exact checks (None when they were not kept: exact checks then find nothing to read).
    """

    params: SignatureParams
    ids: list[str]
    shingle_counts: np.ndarray
    packed: np.ndarray
    content_hashes: np.ndarray
    texts: list[str] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        count = len(self.ids)
        if len(set(self.ids)) != count:
            ordered = sorted(self.ids)
            twice = next(a for a, b in zip(ordered[:-1], ordered[1:], strict=True) if a == b)
            raise UsageError(f"id {twice!r} names two texts; give every text its own id")
        if self.packed.shape != (count, self.params.signature_bytes) or self.shingle_counts.shape != (count,):
            raise ValueError(f"{count} ids need uint8[{count}, {self.params.signature_bytes}] signatures and "
                             f"int64[{count}] shingle counts")

    def __len__(self) -> int:
        return len(self.ids)

    def values(self, bits: float | None = None) -> np.ndarray:
        """The minwise values, or only their lowest ``bits`` bits: uint[n, k]; with b = 1/2 the XOR
        bits, uint8[n, k/2] (:func:`dedup_cli.minhash.packing.xor_bits`)."""
        values = unpack_values(self.packed, self.params.bits, self.params.num_perm)
        return values if bits is None else estimator_values(values, bits, self.params.xor_pairs)

    def rows_of(self, ids: Sequence[str]) -> np.ndarray:
        """int64[len(ids)], the row of each id; a UsageError names the first id that is not here."""
        where = {identifier: row for row, identifier in enumerate(self.ids)}
        missing = [identifier for identifier in ids if identifier not in where]
        if missing:
            raise UsageError(f"no text with id {missing[0]!r} among the {len(self.ids)} signed")
        return np.array([where[identifier] for identifier in ids], dtype=np.int64)

    def stored(self, rows: np.ndarray) -> StoredSignatures:
        """The documents ``rows`` as a store read into memory, in that order, with their texts."""
        rows = np.asarray(rows, dtype=np.int64)
        listed = rows.tolist()
        count = rows.size
        return StoredSignatures(
            params=self.params, ids=[self.ids[row] for row in listed], paths=[""] * count,
            shingle_counts=self.shingle_counts[rows], packed=self.packed[rows],
            content_hashes=self.content_hashes[rows], runs=np.ones(count, np.int64),
            mtimes_ns=np.zeros(count, np.int64),
            texts=None if self.texts is None else [self.texts[row] for row in listed])


class MemoryDocuments:
    """:class:`Signatures` numbered for ``find``: document d is row d. The interface of
    :class:`dedup_cli.store.documents.NumberedDocuments` (one store, written by one run)."""

    def __init__(self, signatures: Signatures) -> None:
        self.signatures_in_memory = signatures
        self.params = signatures.params
        self.documents = len(signatures)
        self.shingle_counts = signatures.shingle_counts.astype(np.int64)
        self.runs = np.ones(self.documents, np.int64)
        self.store_starts = np.array([0, self.documents], np.int64)

    @property
    def row_groups(self) -> int:
        return -(-self.documents // SIGNATURE_BLOCK)

    reads_in_workers = True

    def signatures(self, part: int = 0, parts: int = 1) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(docs int64[m], packed uint8[m, S]) of blocks of rows in turn (blocks ``part``, ``part + parts``, …)."""
        packed = self.signatures_in_memory.packed
        for start in range(part * SIGNATURE_BLOCK, self.documents, parts * SIGNATURE_BLOCK):
            stop = min(start + SIGNATURE_BLOCK, self.documents)
            yield np.arange(start, stop, dtype=np.int64), packed[start:stop]

    def stored(self, docs: np.ndarray, columns: Sequence[str] = (), mapper: Any = None,
               forked: bool = False) -> StoredSignatures:
        """The documents ``docs`` (ascending) as a store of their own, in that order (every column; nothing is
        read, so no worker runs)."""
        return self.signatures_in_memory.stored(docs)
