"""What ``sign`` reads, how it signs, and how the run behaves."""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass

from dedup_cli.errors import OptionError
from dedup_cli.options.checks import (
    at_least,
    check_signature,
    choice,
    estimator_bits,
    set_fields,
    text_option_for_sets,
)
from dedup_cli.options.engine_choice import EngineOptions
from dedup_cli.options.input_options import InputOptions
from dedup_cli.options.vocabulary import (
    DEFAULT_NUM_PERM,
    DEFAULT_SCHEME,
    DEFAULT_STORED_BITS,
    HALF_BIT,
    SIGNING_KERNELS,
    TEXT_UNIVERSE,
    WORD_TOKENISATIONS,
)

TEXT_OPTIONS = ("shingle_size", "shingle_unit", "tokenisation", "scheme")
"""The options of :class:`SignOptions` that apply to text only, not to integer sets."""

PRUNE_SHARE = 0.5
"""The largest share of a store's documents a prune removes without ``force_prune``: more is what a corpus that
was moved, or a mount that was not there, looks like."""


@dataclass(frozen=True)
class SignOptions:
    """What ``sign`` reads, how it signs, and how the run behaves.

    Attributes:
        input: how to find and read the inputs (with ``input_format="sets"`` and a universe, integer sets:
            then the text options keep their defaults).
        shingle_size: w, tokens per shingle.
        shingle_unit: ``word`` or ``char``.
        tokenisation: how the word unit finds words: ``unicode-words`` (ideographs, kana and the letters of
            Thai, Lao, Khmer and Myanmar one token each, combining marks kept in their word; otherwise runs of
            ``\\w``) or ``w-runs`` (runs of ``\\w`` only, as stores signed before ``unicode-words`` were);
            None: the store's, or ``unicode-words`` for a new store.
        num_perm: k, minwise values per document; None: the store's, or for a new store :data:`DEFAULT_NUM_PERM`
            (chosen for ``docs`` when given).
        bits: B, the lowest bits kept of each value (``find`` may use any b ≤ B); or 1/2 (``"1/2"``, ``0.5``): keep
            only the XOR of the lowest bits of permutations j and j + k/2, k/2 bits a document (Li & König 2010,
            Sec. 5.3), a store that answers only b = 1/2. None: the store's, or for a new store
            :data:`DEFAULT_STORED_BITS` (chosen for ``docs`` when given).
        docs: the number of documents the store is expected to hold: a new store's k and B are then chosen for it
            (:func:`dedup_cli.candidates.banding.layout_for_documents`), where not given.
        seed: the hash family's seed; stores with different seeds are not comparable.
        scheme: ``oph`` (one permutation in k bins, densified) or ``kperm`` (k hash functions).
        jobs: worker processes of the local engine (0: one per core); the store is the same whatever the number.
        kernel: the signing kernel: ``numba`` (compiled; the ``fast`` extra), ``numpy``, or ``auto`` (numba for
            runs large enough to repay loading it); the store is the same whatever the kernel.
        prune: remove stored documents this run did not see (skipped when an input was unreadable); refused
            when it would remove every stored document, or more than :data:`PRUNE_SHARE` of them, unless
            ``force_prune``.
        force_prune: let ``prune`` remove any share of the store, all of it included.
        strict: any input or record skipped (binary, unreadable, malformed, a duplicate id, too large) is an
            error, and nothing is stored; without it, skips are reported and the rest is signed.
        checksum: read again the whole files whose size and modification time are the store's, and sign again
            those whose content hash is not the stored one (as ``rsync -c`` does): for files that may have been
            rewritten with their old size and time (``cp -p``, ``tar x``, a restore). Without it such a file is
            taken as unchanged unread.
        allow_empty: an input that holds nothing (stdin or a file named by itself with no byte, a file of records
            with no record) or a run that finds no file is no error: for jobs where an empty batch is normal.
            Without it such a run did the wrong job, and stores nothing (``force_prune`` allows it too: emptying
            the store is what it is for).
        wait: seconds to wait for another run on the same store (0: fail at once).
        engine: where to sign (the local engine, or tasks on a Dask cluster, each writing a part).
    """

    input: InputOptions = InputOptions()
    shingle_size: int = 5
    shingle_unit: str = "word"
    tokenisation: str | None = None
    num_perm: int | None = None
    bits: float | str | None = None
    docs: int | None = None
    seed: int = 1
    scheme: str = DEFAULT_SCHEME
    jobs: int = 0
    kernel: str = "auto"
    prune: bool = False
    force_prune: bool = False
    strict: bool = False
    checksum: bool = False
    allow_empty: bool = False
    wait: float = 0.0
    engine: EngineOptions = EngineOptions()

    def __post_init__(self) -> None:
        sets = self.input.input_format == "sets"
        if sets:
            defaults = SignOptions.__dataclass_fields__
            for name in TEXT_OPTIONS:
                if getattr(self, name) != defaults[name].default:
                    raise text_option_for_sets(name, getattr(self, name))
        if self.bits is not None:
            set_fields(self, bits=estimator_bits(self.bits))
        if self.docs is not None:
            set_fields(self, docs=at_least("docs", self.docs, 1))
        num_perm = DEFAULT_NUM_PERM if self.num_perm is None else self.num_perm
        if self.bits == HALF_BIT and (isinstance(num_perm, bool) or not isinstance(num_perm, int) or num_perm % 2):
            raise OptionError("num_perm", num_perm, "{bits} 1/2 combines the permutations in pairs; use an even "
                              "{num_perm}")
        bits = DEFAULT_STORED_BITS if self.bits is None else 1 if self.bits == HALF_BIT else self.bits
        check_signature(num_perm, bits, self.seed, self.shingle_size,
                        self.shingle_unit,
                        "kperm" if sets else self.scheme, self.input.universe if sets else TEXT_UNIVERSE,
                        "sets" if sets else "text")
        if self.tokenisation is not None and not sets:
            choice("tokenisation", self.tokenisation, WORD_TOKENISATIONS,
                   "unknown {{tokenisation}} {value}; choose {either}")
            if self.shingle_unit != "word":
                raise OptionError("tokenisation", self.tokenisation, "{tokenisation} says how words are found; "
                                  "character shingles have one tokenisation, so leave it out")
        set_fields(self, jobs=at_least("jobs", self.jobs, 0))
        if self.force_prune:
            set_fields(self, prune=True)
        choice("kernel", self.kernel, SIGNING_KERNELS, "unknown kernel {value}; choose one of {choices}")
        if self.kernel == "numba" and sets:
            raise OptionError("kernel", self.kernel, "{kernel} numba signs text; integer sets are signed with numpy")
        if self.kernel == "numba" and importlib.util.find_spec("numba") is None:
            raise OptionError("kernel", self.kernel, "{kernel} numba needs numba, which is not installed; install "
                              "it with pip install 'dedup-cli[fast]', or leave {kernel} at auto")
        if self.jobs and self.engine.name == "dask":
            raise OptionError("jobs", self.jobs, "{jobs} sets the local engine's processes; with {engine} dask "
                              "the cluster's workers sign")
        if not self.wait >= 0:
            raise OptionError("wait", self.wait, f"{{wait}} {self.wait:g} must be at least 0 seconds")

    @property
    def workers(self) -> int:
        """The worker processes to use: ``jobs``, or one per core when it is 0."""
        return self.jobs or os.cpu_count() or 1
