"""What ``filter`` reads, how it decides what to drop, and what it writes."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass

from dedup_cli.errors import OptionError
from dedup_cli.options.checks import set_fields
from dedup_cli.options.finding import FindOptions
from dedup_cli.options.input_options import InputOptions
from dedup_cli.options.signing import SignOptions

FILTER_GROUP = "witness"
"""How ``filter`` groups when its ``find`` names no ``group``: no document is dropped without a kept one beside it."""


@dataclass(frozen=True)
class FilterOptions:
    """What ``filter`` reads, how it decides which documents to drop, and what it writes.

    Attributes:
        input: how to find and read the inputs. When every one of :data:`READING_OPTIONS` is at its default,
            the inputs are read as the store's sign runs recorded they read them (``auto`` for older stores).
        find: the ``find`` whose groups decide what to drop (its ``keep`` policy chooses the kept member); its
            ``engine`` also rewrites the inputs (with a members file too). Its groups are ``witness`` groups unless
            it names a ``group`` (:data:`FILTER_GROUP`): no document is dropped without a kept one at R ≥ R0 beside
            it, which connected components do not promise (A ~ B ~ C keeps A and drops C, however unlike A it is).
        members: instead of running ``find``, a ``find --output members`` file (JSON Lines, TSV, CSV or
            Parquet) whose ``drop`` rows are the documents to drop; ``find`` must then keep its defaults.
        annotate: keep every record and add ``dedup_group``, ``dedup_keep`` and ``dedup_representative``.
        sign: first sign the inputs into the store (created if missing) with these options, incrementally.
        allow_empty: an input that holds nothing (stdin or a file named by itself with no byte, a file of records
            with no record) is no error, here and in the signing of ``sign``; without it such a run writes
            nothing and stores nothing.
    """

    input: InputOptions = InputOptions()
    find: FindOptions = FindOptions()
    members: str | None = None
    annotate: bool = False
    sign: SignOptions | None = None
    allow_empty: bool = False

    def __post_init__(self) -> None:
        if self.allow_empty and self.sign is not None and not self.sign.allow_empty:
            set_fields(self, sign=dataclasses.replace(self.sign, allow_empty=True))
        if self.input.id_root is not None:
            raise OptionError("id_root", self.input.id_root, "{id_root} is the store's for filter; leave it out")
        if self.sign is not None and (self.members is not None or self.sign.input.input_format == "sets"):
            raise OptionError("sign", True, "{sign} signs text for find; leave it out with {members} or sets")
        if self.members is None:
            return
        set_fields(self, members=os.fspath(self.members))
        # The engine also rewrites the inputs, so it applies with a members file too.
        default, names = FindOptions(), FindOptions.__dataclass_fields__
        given = [name for name in names if name != "engine" and getattr(self.find, name) != getattr(default, name)]
        if given:
            raise OptionError(given[0], getattr(self.find, given[0]), f"{{members}} FILE says what to drop, so "
                              f"{{{given[0]}}} does not apply; leave it out (or leave out {{members}} to run find)")
