"""The options of every command, their defaults and the one place they are validated.

Each command of the public API takes one frozen dataclass of options (:class:`SignOptions` with its
:class:`InputOptions`, :class:`FindOptions`, :class:`EstimateOptions`, :class:`PlanOptions`). Their defaults
are the command line's (``dedup_cli.cli`` reads them from here), and constructing one validates every value
that can be judged alone, before any I/O; what depends on a store (``bits`` against the stored bits, a
banding against ``num_perm``) is checked by :meth:`FindOptions.check_store` and
:meth:`EstimateOptions.check_store` from the store's manifest, before the store itself is read.

A refused value raises :class:`dedup_cli.errors.OptionError` naming the parameter; its message names options
as ``{parameter}`` so that the library says ``bits 9 exceeds …`` and the command line ``--bits 9 exceeds …``.

Only the standard library is imported here (and :mod:`dedup_cli.candidates.triple_recall`, which is pure
Python), so that ``dedup --help`` needs no numpy.
"""

from __future__ import annotations

import operator
import os
from dataclasses import dataclass
from typing import Any

from dedup_cli.candidates.triple_recall import triple_recall_problem
from dedup_cli.errors import OptionError

# --- the vocabulary of choices and limits --------------------------------------------------------------------

INPUT_FORMATS = ("auto", "text", "lines", "jsonl", "parquet", "sets")
SHINGLE_UNITS = ("word", "char")
# "kperm": k independent hash functions (Li & König 2010); "oph": one permutation split into k bins, densified
# (Li, Owen & Zhang 2012; Shrivastava 2017).
SIGNATURE_SCHEMES = ("kperm", "oph")
GROUP_METHODS = ("components", "strict")
KEEP_CHOICES = ("first", "longest", "shortest", "id", "oldest", "newest")
KEEP_FIELD = "field"  # the policy of ``keep_field``: the highest value of a numeric field wins
VERIFY_MODES = ("borderline", "all", "none")
CANDIDATE_METHODS = ("lsh", "all")
OUTPUT_KINDS = ("groups", "pairs", "triples", "members")
OUTPUT_FORMATS = ("jsonl", "tsv", "csv", "parquet")
READING_OPTIONS = ("input_format", "id_field", "text_field", "id_column", "text_column")
"""The input options that decide documents' ids and texts: a store records them per sign run, for ``filter``."""

MAX_STORED_BITS = 64
MAX_NUM_PERM = 1 << 16
TEXT_UNIVERSE = 1 << 64  # hashed shingles live in 2^64
MAX_SET_UNIVERSE = 1 << 62  # integer sets: the Feistel permutations' largest domain
MAX_SEED = (1 << 63) - 1

DEFAULT_STORE = "dedup.parquet"  # in the current directory, so `dedup sign corpus/` and `dedup find` meet
STORE_VARIABLE = "DEDUP_STORE"  # names the store for every command


def default_store(named: str | os.PathLike[str] | None = None) -> str:
    """The store a command uses: the one named, else ``$DEDUP_STORE``, else ``./dedup.parquet``."""
    return os.fspath(named) if named else os.environ.get(STORE_VARIABLE) or DEFAULT_STORE


# --- checks --------------------------------------------------------------------------------------------------


def literal(value: object) -> str:
    """``str(value)`` escaped for an :class:`OptionError` template (braces doubled)."""
    return str(value).replace("{", "{{").replace("}", "}}")


def _whole(name: str, value: Any) -> int:
    try:
        return operator.index(value)
    except TypeError:
        raise OptionError(name, value, f"{{{name}}} {literal(repr(value))} must be a whole number") from None


def _in_range(name: str, value: Any, low: int, high: int, high_text: str | None = None) -> int:
    number = _whole(name, value)
    if not low <= number <= high:
        raise OptionError(name, value, f"{{{name}}} {number} is out of range; use {low} to {high_text or high}")
    return number


def _at_least(name: str, value: Any, low: int) -> int:
    number = _whole(name, value)
    if number < low:
        raise OptionError(name, value, f"{{{name}}} {number} must be at least {low}")
    return number


def _choice(name: str, value: Any, choices: tuple[str, ...], template: str) -> None:
    if value not in choices:
        raise OptionError(name, value, template.format(value=literal(repr(value)), choices=", ".join(choices),
                                                       either=" or ".join(choices)))


def _threshold(value: Any) -> float:
    threshold = float(value)
    if not 0.0 < threshold <= 1.0:
        raise OptionError("threshold", value, f"{{threshold}} {threshold:g} must be in (0, 1]")
    return threshold


def _open_fraction(name: str, value: Any, example: str) -> float:
    fraction = float(value)
    if not 0.0 < fraction < 1.0:
        raise OptionError(name, value, f"{{{name}}} {fraction:g} must lie strictly between 0 and 1, e.g. {example}")
    return fraction


def _set(options: Any, **values: Any) -> None:
    """Store normalised values in a frozen dataclass (from ``__post_init__``)."""
    for name, value in values.items():
        object.__setattr__(options, name, value)


def check_signature(num_perm: Any, bits: Any, seed: Any, shingle_size: Any, shingle_unit: str, scheme: str,
                    universe: Any, input_kind: str) -> None:
    """The rules every signature's parameters obey (``SignatureParams`` and :class:`SignOptions` apply them)."""
    _in_range("num_perm", num_perm, 1, MAX_NUM_PERM)
    _in_range("bits", bits, 1, MAX_STORED_BITS)
    _in_range("seed", seed, 0, MAX_SEED, "2^63 − 1")
    _at_least("shingle_size", shingle_size, 1)
    _choice("input_kind", input_kind, ("text", "sets"), "input kind {value}: choose {either}")
    if input_kind == "text":
        _choice("shingle_unit", shingle_unit, SHINGLE_UNITS, "{{shingle_unit}} {value}: choose {either}")
    _choice("scheme", scheme, SIGNATURE_SCHEMES, "{{scheme}} {value}: choose {either}")
    if input_kind == "sets" and scheme != "kperm":
        raise OptionError("scheme", scheme, f"{{scheme}} {literal(scheme)} is for text input; integer sets are signed "
                          "with k permutations of their universe, so use {scheme} kperm")
    _in_range("universe", universe, 2, TEXT_UNIVERSE, "2^64")


def check_bits(bits: int, stored_bits: int, stored_in: str | None = None) -> None:
    """``bits`` (b, for the estimator) must not exceed the stored bits B: those of the store ``stored_in``,
    or (``stored_in`` None, for ``plan``) the option ``stored_bits``."""
    if bits <= stored_bits:
        return
    if stored_in is None:
        raise OptionError("bits", bits, f"{{bits}} {bits} exceeds {{stored_bits}} {stored_bits}; use {{bits}} 1 to "
                          f"{stored_bits}, or sign with {{bits}} {bits} or more")
    raise OptionError("bits", bits, f"{{bits}} {bits} exceeds the {stored_bits} bits stored in {literal(stored_in)}; "
                      f"use {{bits}} 1 to {stored_bits}, or re-sign with {{bits}} {bits} or more")


def check_three_way_bits(bits: int, name: str = "ways") -> None:
    """Three-way estimates need b ≥ 2: of three one-bit values, either all agree or exactly one pair does."""
    if bits < 2:
        what = "{ways} 3 needs" if name == "ways" else "3-way estimation needs"
        raise OptionError("bits", bits, f"{what} {{bits}} 2 or more; 1-bit values carry no 3-way information")


def check_banding(bands: int | None, rows: int | None, num_perm: int) -> None:
    """``bands`` × ``rows`` (either may be None: as many as k allows) must fit in the k = ``num_perm`` values."""
    if bands is None and rows is None:
        return
    if rows is None:
        assert bands is not None
        rows, option, name = num_perm // bands, f"{{bands}} {bands}", "bands"
    elif bands is None:
        bands, option, name = num_perm // rows, f"{{rows}} {rows}", "rows"
    else:
        option, name = f"{{bands}} {bands} × {{rows}} {rows}", "bands"
    if bands < 1 or rows < 1 or bands * rows > num_perm:
        raise OptionError(name, bands if name == "bands" else rows,
                          f"{option} needs {max(bands, 1) * max(rows, 1)} values but signatures hold {num_perm} "
                          f"({{num_perm}}); choose bands × rows ≤ {num_perm}")


def _banding_values(options: Any) -> None:
    for name in ("bands", "rows"):
        value = getattr(options, name)
        if value is not None:
            _set(options, **{name: _at_least(name, value, 1)})


def text_option_for_sets(name: str, value: object) -> OptionError:
    """The error for a text option (``shingle_size``, ``shingle_unit``, ``scheme``) given with integer sets."""
    return OptionError(name, value, f"{{{name}}} applies to text; integer sets are not shingled and are signed with "
                       "k permutations of their universe; leave it out")


# --- inputs and signing ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class InputOptions:
    """How to find and read inputs; the defaults read files and directories as plain text.

    Attributes:
        input_format: one of :data:`INPUT_FORMATS`.
        id_field, text_field: JSON Lines keys of the id (None: ``FILE:LINE``) and of the text.
        id_column, text_column: Parquet columns of the id (None: ``FILE:ROW``) and of the text.
        files_from: a file listing inputs, one a line (``-``: stdin); ``null_separated``: NUL-separated.
        include, exclude: glob patterns for files found in directories or listed by ``files_from``.
        max_document_bytes: skip (and report) documents larger than this; None for no limit.
        universe: with ``input_format="sets"``, the universe D the integer elements lie in, [0, D).
        id_root: the directory file ids are relative to (None: the store's, else the inputs' deepest
            common directory).
    """

    input_format: str = "auto"
    id_field: str | None = None
    text_field: str = "text"
    id_column: str | None = None
    text_column: str = "text"
    files_from: str | None = None
    null_separated: bool = False
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    max_document_bytes: int | None = None
    universe: int | None = None
    id_root: str | None = None

    def __post_init__(self) -> None:
        _set(self, include=tuple(self.include), exclude=tuple(self.exclude))
        _choice("input_format", self.input_format, INPUT_FORMATS,
                "unknown input format {value}; choose one of {choices}")
        if self.input_format == "sets":
            if self.universe is None:
                raise OptionError("universe", None, "{input_format} sets needs {universe} D, the number of possible "
                                  "elements")
            if self.text_field != "text" or self.text_column != "text":
                raise OptionError("text_field", self.text_field, "{text_field} and {text_column} do not apply to "
                                  "{input_format} sets; a set line holds an id and its elements")
            _set(self, universe=_in_range("universe", self.universe, 2, MAX_SET_UNIVERSE, "2^62"))
        elif self.universe is not None:
            raise OptionError("universe", self.universe, "{universe} applies only to {input_format} sets; text "
                              "shingles are hashed into 2^64")
        if self.max_document_bytes is not None:
            _set(self, max_document_bytes=_at_least("max_document_bytes", self.max_document_bytes, 1))
        if not self.text_field or not self.text_column:
            raise OptionError("text_field", self.text_field, "{text_field} and {text_column} must name a field; the "
                              "default is text")
        if self.id_field is not None and self.input_format not in ("auto", "jsonl"):
            raise OptionError("id_field", self.id_field, f"{{id_field}} applies to JSON Lines, not {{input_format}} "
                              f"{self.input_format}; for Parquet use {{id_column}}")
        if self.id_column is not None and self.input_format not in ("auto", "parquet"):
            raise OptionError("id_column", self.id_column, f"{{id_column}} applies to Parquet, not {{input_format}} "
                              f"{self.input_format}; for JSON Lines use {{id_field}}")
        if self.null_separated and self.files_from is None:
            raise OptionError("null_separated", True, "{null_separated} applies to {files_from}; add {files_from} "
                              "FILE (or -)")


TEXT_OPTIONS = ("shingle_size", "shingle_unit", "scheme")
"""The options of :class:`SignOptions` that apply to text only, not to integer sets."""


@dataclass(frozen=True)
class SignOptions:
    """What ``sign`` reads, how it signs, and how the run behaves.

    Attributes:
        input: how to find and read the inputs (with ``input_format="sets"`` and a universe, integer sets:
            then the text options keep their defaults).
        shingle_size: w, tokens per shingle.
        shingle_unit: ``word`` (runs of ``\\w``) or ``char``.
        num_perm: k, minwise values per document.
        bits: B, the lowest bits kept of each value (``find`` may use any b ≤ B).
        seed: the hash family's seed; stores with different seeds are not comparable.
        scheme: ``oph`` (one permutation in k bins, densified) or ``kperm`` (k hash functions).
        jobs: worker processes (0: one per core); the store is the same whatever the number.
        prune: remove stored documents this run did not see (skipped when an input was unreadable).
        wait: seconds to wait for another run on the same store (0: fail at once).
    """

    input: InputOptions = InputOptions()
    shingle_size: int = 5
    shingle_unit: str = "word"
    num_perm: int = 256
    bits: int = 8
    seed: int = 1
    scheme: str = "oph"
    jobs: int = 0
    prune: bool = False
    wait: float = 0.0

    def __post_init__(self) -> None:
        sets = self.input.input_format == "sets"
        if sets:
            defaults = SignOptions.__dataclass_fields__
            for name in TEXT_OPTIONS:
                if getattr(self, name) != defaults[name].default:
                    raise text_option_for_sets(name, getattr(self, name))
        check_signature(self.num_perm, self.bits, self.seed, self.shingle_size, self.shingle_unit,
                        "kperm" if sets else self.scheme, self.input.universe if sets else TEXT_UNIVERSE,
                        "sets" if sets else "text")
        _set(self, jobs=_at_least("jobs", self.jobs, 0))
        if not self.wait >= 0:
            raise OptionError("wait", self.wait, f"{{wait}} {self.wait:g} must be at least 0 seconds")

    @property
    def workers(self) -> int:
        """The worker processes to use: ``jobs``, or one per core when it is 0."""
        return self.jobs or os.cpu_count() or 1


# --- find, estimate, plan -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FindOptions:
    """What ``find`` reports, and how it finds and decides the pairs.

    Attributes:
        threshold: R0 in (0, 1]: report pairs (and triples) whose resemblance is ≥ R0.
        bits: b, bits per value for the estimator (None: all stored bits).
        ways: 2 for pairs; 3 also finds triples with 3-way R̂ ≥ R0 (needs b ≥ 2).
        group: ``components`` or ``strict`` (every internal pair, and with ``ways=3`` triple, ≥ R0).
        keep: each group's representative: ``first``/``id`` (smallest id), ``longest``, ``shortest`` (by
            shingles), ``oldest``/``newest`` (by sign run, then modification time); ties go to the smallest id.
        keep_field: instead of ``keep``, the member whose numeric JSON field or Parquet column of this name is
            highest (ties by id; a missing or non-numeric value ranks lowest and is reported).
        verify: ``borderline``, ``all`` or ``none``: which pairs to decide by their exact resemblance.
        candidates: ``lsh`` (banding) or ``all`` (every pair, exact and quadratic).
        new_since: report only what involves documents written after this sign run.
        bands, rows: the LSH banding (None: chosen for ``recall`` at R0).
        recall: the banding's target recall at R0 (raised per pair with ``ways=3``, so triples reach it).
        max_bucket: LSH buckets with more documents are cut to this many.
        against: a reference store: report near-duplicates of this store's documents among its documents too
            (it is only read, and its signatures must have the same parameters).
        only_across: with ``against``, only pairs (and triples, groups) across the two stores.
    """

    threshold: float = 0.5
    bits: int | None = None
    ways: int = 2
    group: str = "components"
    keep: str = "first"
    verify: str = "borderline"
    candidates: str = "lsh"
    new_since: int | None = None
    bands: int | None = None
    rows: int | None = None
    recall: float = 0.99
    max_bucket: int = 1000
    keep_field: str | None = None
    against: str | None = None
    only_across: bool = False

    def __post_init__(self) -> None:
        _set(self, threshold=_threshold(self.threshold))
        if self.bits is not None:
            _set(self, bits=_in_range("bits", self.bits, 1, MAX_STORED_BITS))
        if self.keep_field is not None:
            if not self.keep_field:
                raise OptionError("keep_field", self.keep_field, "{keep_field} must name a field or column")
            if self.keep != "first":
                raise OptionError("keep", self.keep, f"{{keep_field}} chooses the kept member by its value; leave "
                                  f"out {{keep}} {literal(self.keep)}")
        if self.against is not None:
            _set(self, against=os.fspath(self.against))
        elif self.only_across:
            raise OptionError("only_across", True, "{only_across} needs {against} REF, the reference store")
        if self.ways not in (2, 3):
            raise OptionError("ways", self.ways, f"{{ways}} {literal(self.ways)}: choose 2 (pairs) or 3 (pairs and "
                              "triples)")
        if self.ways == 3 and self.bits is not None:
            check_three_way_bits(self.bits)
        _choice("candidates", self.candidates, CANDIDATE_METHODS, "{{candidates}} {value}: choose {either}")
        _choice("group", self.group, GROUP_METHODS, "{{group}} {value}: choose {either}")
        _choice("keep", self.keep, KEEP_CHOICES, "{{keep}} {value} is not a policy; choose one of {choices}")
        _choice("verify", self.verify, VERIFY_MODES, "{{verify}} {value}: choose one of {choices}")
        if self.new_since is not None:
            _set(self, new_since=_at_least("new_since", self.new_since, 0))
        _banding_values(self)
        _set(self, recall=_open_fraction("recall", self.recall, "0.99"))
        if self.ways == 3:
            problem = triple_recall_problem(self.recall)
            if problem is not None:
                raise OptionError("recall", self.recall, problem)
        _set(self, max_bucket=_at_least("max_bucket", self.max_bucket, 1))

    @property
    def keep_policy(self) -> str:
        """``keep``, or :data:`KEEP_FIELD` when ``keep_field`` names a field."""
        return self.keep if self.keep_field is None else KEEP_FIELD

    def bits_for(self, stored_bits: int) -> int:
        """b: the bits asked for, or all the stored ones."""
        return stored_bits if self.bits is None else self.bits

    def check_store(self, stored_bits: int, num_perm: int, store: str, input_kind: str = "text") -> None:
        """What depends on the store (read from its manifest alone): b ≤ stored bits, the banding fits in k."""
        if self.keep_field is not None and input_kind == "sets":
            raise OptionError("keep_field", self.keep_field, f"{{keep_field}} reads a field of JSON Lines or Parquet "
                              f"records; {literal(store)} holds integer sets")
        bits = self.bits_for(stored_bits)
        check_bits(bits, stored_bits, store)
        if self.ways == 3:
            check_three_way_bits(bits)
        if self.candidates == "lsh":
            check_banding(self.bands, self.rows, num_perm)


@dataclass(frozen=True)
class EstimateOptions:
    """How ``estimate`` compares two or three documents.

    Attributes:
        bits: b (None: all stored bits).
        exact: also re-read the documents and compute their exact resemblance.
        level: the confidence level of the interval, in (0, 1).
    """

    bits: int | None = None
    exact: bool = False
    level: float = 0.95

    def __post_init__(self) -> None:
        if self.bits is not None:
            _set(self, bits=_in_range("bits", self.bits, 1, MAX_STORED_BITS))
        _set(self, level=_open_fraction("level", self.level, "0.95"))

    def check_ids(self, ids: tuple[str, ...]) -> None:
        if len(ids) not in (2, 3) or len(set(ids)) != len(ids):
            raise OptionError("ids", ids, "name two or three different document ids")

    def check_store(self, ids: tuple[str, ...], stored_bits: int, store: str) -> int:
        """b, checked against the store's bits (and ≥ 2 for three documents)."""
        bits = stored_bits if self.bits is None else self.bits
        check_bits(bits, stored_bits, store)
        if len(ids) == 3:
            check_three_way_bits(bits, name="estimate")
        return bits


@dataclass(frozen=True)
class PlanOptions:
    """The parameters ``plan`` explains: those of a ``find`` (and of the ``sign`` before it).

    Attributes:
        threshold: R0 in (0, 1].
        bits: b, the bits per value the estimator uses (≤ ``stored_bits``).
        num_perm: k, minwise values per document.
        stored_bits: B, bits kept per value in the store; band keys use all B of them.
        recall: target Pr(candidate) at R0 for the automatic banding, in (0, 1).
        docs: N, the number of documents, for the expected candidates and the memory of ``find``.
        bands, rows: a banding to explain instead of the automatic one.
    """

    threshold: float = 0.5
    bits: int = 2
    num_perm: int = 256
    stored_bits: int = 8
    recall: float = 0.99
    docs: int | None = None
    bands: int | None = None
    rows: int | None = None

    def __post_init__(self) -> None:
        _set(self, threshold=_threshold(self.threshold))
        _set(self, bits=_whole("bits", self.bits), stored_bits=_whole("stored_bits", self.stored_bits),
             num_perm=_whole("num_perm", self.num_perm))
        _in_range("bits", self.bits, 1, MAX_STORED_BITS)
        _in_range("stored_bits", self.stored_bits, 1, MAX_STORED_BITS)
        _in_range("num_perm", self.num_perm, 1, MAX_NUM_PERM)
        check_bits(self.bits, self.stored_bits)
        _set(self, recall=_open_fraction("recall", self.recall, "0.99"))
        if self.docs is not None:
            _set(self, docs=_at_least("docs", self.docs, 1))
        _banding_values(self)
        check_banding(self.bands, self.rows, self.num_perm)



# --- filter ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FilterOptions:
    """What ``filter`` reads, how it decides which documents to drop, and what it writes.

    Attributes:
        input: how to find and read the inputs. When every one of :data:`READING_OPTIONS` is at its default,
            the inputs are read as the store's sign runs recorded they read them (``auto`` for older stores).
        find: the ``find`` whose groups decide what to drop (its ``keep`` policy chooses the kept member).
        members: instead of running ``find``, a ``find --output members`` file (JSON Lines, TSV, CSV or
            Parquet) whose ``drop`` rows are the documents to drop; ``find`` must then keep its defaults.
        annotate: keep every record and add ``dedup_group``, ``dedup_keep`` and ``dedup_representative``.
        sign: first sign the inputs into the store (created if missing) with these options, incrementally.
    """

    input: InputOptions = InputOptions()
    find: FindOptions = FindOptions()
    members: str | None = None
    annotate: bool = False
    sign: SignOptions | None = None

    def __post_init__(self) -> None:
        if self.input.id_root is not None:
            raise OptionError("id_root", self.input.id_root, "{id_root} is the store's for filter; leave it out")
        if self.sign is not None and (self.members is not None or self.sign.input.input_format == "sets"):
            raise OptionError("sign", True, "{sign} signs text for find; leave it out with {members} or sets")
        if self.members is None:
            return
        _set(self, members=os.fspath(self.members))
        default, names = FindOptions(), FindOptions.__dataclass_fields__
        given = [name for name in names if getattr(self.find, name) != getattr(default, name)]
        if given:
            raise OptionError(given[0], getattr(self.find, given[0]), f"{{members}} FILE says what to drop, so "
                              f"{{{given[0]}}} does not apply; leave it out (or leave out {{members}} to run find)")
