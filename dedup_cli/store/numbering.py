"""What ``find`` needs of the documents it searches, whichever holds them: a store on disk
(:class:`dedup_cli.store.documents.NumberedDocuments`) or texts signed in memory
(:class:`dedup_cli.store.memory.MemoryDocuments`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol

import numpy as np

from dedup_cli.params import SignatureParams
from dedup_cli.store.snapshot import StoredSignatures


class Documents(Protocol):
    """Live documents numbered 0 … documents − 1 (a store's by (store, id), texts in memory as given).

    Attributes:
        params: their signature parameters.
        documents: how many.
        shingle_counts: int64[documents].
        runs: int64[documents], the run that wrote each.
        store_starts: int64[stores + 1], the number of each store's first document, then ``documents``.
    """

    params: SignatureParams
    documents: int
    shingle_counts: np.ndarray
    runs: np.ndarray
    store_starts: np.ndarray

    @property
    def row_groups(self) -> int:
        """Steps of one pass over :meth:`signatures` (for progress)."""
        ...

    @property
    def reads_in_workers(self) -> bool:
        """Whether processes forked from this one may each read a share of :meth:`signatures`."""
        ...

    def signatures(self, part: int = 0, parts: int = 1) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(docs int64[m], packed uint8[m, S]) of every document, a block at a time (with ``parts`` > 1, only
        blocks ``part``, ``part + parts``, …: one reader's share)."""
        ...

    def stored(self, docs: np.ndarray, columns: Sequence[str] = ..., mapper: Any = None,
               forked: bool = False) -> StoredSignatures:
        """The documents ``docs`` (int64, ascending, unique) as a store of their own, in that order (``mapper``:
        how a store on disk reads its row groups, ``map`` or in worker processes; ``forked``: processes forked
        from this one, which may write into its shared memory)."""
        ...
