"""What ``find`` reports and how it decides pairs; how ``estimate`` compares named documents."""

from __future__ import annotations

import os
from dataclasses import dataclass

from dedup_cli.candidates.triple_recall import triple_recall_problem
from dedup_cli.errors import OptionError
from dedup_cli.options.checks import (
    at_least,
    banding_values,
    check_banding,
    check_bits,
    check_half_bit_pairs,
    check_three_way_bits,
    choice,
    estimator_bits,
    literal,
    open_fraction,
    set_fields,
    threshold_value,
)
from dedup_cli.options.engine_choice import EngineOptions
from dedup_cli.options.vocabulary import (
    CANDIDATE_METHODS,
    GATHER_LIMIT,
    GROUP_METHODS,
    HALF_BIT,
    KEEP_CHOICES,
    KEEP_FIELD,
    VERIFY_MODES,
)


@dataclass(frozen=True)
class FindOptions:
    """What ``find`` reports, and how it finds and decides the pairs.

    Attributes:
        threshold: R0 in (0, 1]: report pairs (and triples) whose resemblance is ≥ R0.
        bits: b, bits per value for the estimator (None: all stored bits), or b = 1/2 (``"1/2"``, ``0.5``): the
            lowest bits of permutations j and j + k/2 combined by XOR, the estimator of Li & König 2010, eq. 25.
        ways: 2 for pairs; 3 also finds triples with 3-way R̂ ≥ R0 (needs b ≥ 2).
        group: ``components`` (linked pairs), ``strict`` (every internal pair, and with ``ways=3`` triple, ≥ R0) or
            ``witness`` (each kept document with the documents it witnesses: every dropped one has a kept one at
            R ≥ R0 beside it); None: the command's own, ``components`` for ``find`` and ``witness`` for ``filter``
            (:attr:`grouping`).
        keep: each group's representative: ``first``/``id`` (smallest id), ``longest``, ``shortest`` (by
            shingles), ``oldest``/``newest`` (by sign run, then modification time); ties go to the smallest id.
        keep_field: instead of ``keep``, the member whose numeric JSON field or Parquet column of this name is
            highest (ties by id; a missing or non-numeric value ranks lowest and is reported).
        verify: ``borderline``, ``all`` or ``none``: which pairs and triples to decide by their exact resemblance
            (``borderline``: those whose interval straddles R0, and the pairs estimated ≥ R0 that the bound for all
            the candidates at once does not clear; docs/estimators.md, "Intervals").
        candidates: ``lsh`` (banding) or ``all`` (every pair, exact and quadratic).
        new_since: report only what involves documents written after this sign run.
        bands, rows: the LSH banding (None: chosen for ``recall`` at R0).
        recall: the banding's target recall at R0 (raised per pair with ``ways=3``, so triples reach it).
        max_bucket: LSH buckets with more documents are cut to this many.
        against: a reference store: report near-duplicates of this store's documents among its documents too
            (it is only read, and its signatures must have the same parameters).
        only_across: with ``against``, only pairs (and triples, groups) across the two stores.
        engine: where to run (this process, or a Dask cluster: same answers).
        band_memory: bytes of band keys one process (the local engine's, or each Dask worker) holds in one round
            of the candidate stage; less memory means more rounds, each reading the signatures again. A tuning
            knob: the candidates are the same. None: the local engine's processes share a quarter of the
            machine's memory (1 GiB each at least), a Dask worker takes a quarter of its memory limit (1 GiB
            without one).
        work_dir: a folder where each completed stage is kept (band rounds of candidates, scored pairs, decisions),
            so that the same find run again after a failure resumes from the last completed stage; None: none.
        keep_work: keep the work folder's files after the run completes (they are removed otherwise).
        jobs: worker processes of the local engine's stages (0: one per core): the candidate stage by bands,
            scoring and exact checks by chunks of pairs; the output is the same whatever the number. Each process
            holds its own ``band_memory`` of band keys.
        gather_limit: with the Dask engine, the most pairs the driver holds at once: when the candidate pairs are
            at most this many, they are decided in the driver (the exact checks and file checks run as tasks on the
            workers), else by exchanges on the workers; when the end of find needs more, it runs per connected
            component on the workers and the records stream to the driver in chunks of at most this many (at
            least 16384 and at most 10^6 pairs a chunk, so that a low limit never cuts the work into tasks of a
            few pairs). The output is the same either way; a tuning knob.
    """

    threshold: float = 0.5
    bits: float | str | None = None
    ways: int = 2
    group: str | None = None
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
    engine: EngineOptions = EngineOptions()
    gather_limit: int = GATHER_LIMIT
    band_memory: int | None = None
    work_dir: str | None = None
    keep_work: bool = False
    jobs: int = 0

    def __post_init__(self) -> None:
        set_fields(self, threshold=threshold_value(self.threshold))
        if self.bits is not None:
            set_fields(self, bits=estimator_bits(self.bits))
        if self.keep_field is not None:
            if not self.keep_field:
                raise OptionError("keep_field", self.keep_field, "{keep_field} must name a field or column")
            if self.keep != "first":
                raise OptionError("keep", self.keep, f"{{keep_field}} chooses the kept member by its value; leave "
                                  f"out {{keep}} {literal(self.keep)}")
        if self.against is not None:
            set_fields(self, against=os.fspath(self.against))
        elif self.only_across:
            raise OptionError("only_across", True, "{only_across} needs {against} REF, the reference store")
        if self.ways not in (2, 3):
            raise OptionError("ways", self.ways, f"{{ways}} {literal(self.ways)}: choose 2 (pairs) or 3 (pairs and "
                              "triples)")
        if self.ways == 3 and self.bits is not None:
            check_three_way_bits(float(self.bits))
        choice("candidates", self.candidates, CANDIDATE_METHODS, "{{candidates}} {value}: choose {either}")
        if self.group is not None:
            choice("group", self.group, GROUP_METHODS, "{{group}} {value}: choose {either}")
        choice("keep", self.keep, KEEP_CHOICES, "{{keep}} {value} is not a policy; choose one of {choices}")
        choice("verify", self.verify, VERIFY_MODES, "{{verify}} {value}: choose one of {choices}")
        if self.new_since is not None:
            set_fields(self, new_since=at_least("new_since", self.new_since, 0))
        banding_values(self)
        set_fields(self, recall=open_fraction("recall", self.recall, "0.99"))
        if self.ways == 3:
            problem = triple_recall_problem(self.recall)
            if problem is not None:
                raise OptionError("recall", self.recall, problem)
        set_fields(self, max_bucket=at_least("max_bucket", self.max_bucket, 1))
        set_fields(self, gather_limit=at_least("gather_limit", self.gather_limit, 0))
        if self.band_memory is not None:
            set_fields(self, band_memory=at_least("band_memory", self.band_memory, 1))
        set_fields(self, jobs=at_least("jobs", self.jobs, 0))
        if self.work_dir is not None:
            set_fields(self, work_dir=os.fspath(self.work_dir))
        elif self.keep_work:
            raise OptionError("keep_work", True, "{keep_work} keeps the files of {work_dir} DIR; name one")
        if self.engine.name == "dask":
            if self.bits == HALF_BIT:
                raise OptionError("bits", "1/2", "{bits} 1/2 is scored by the local engine only; use {engine} local, "
                                  "or a whole number of {bits} with {engine} dask")
            if self.jobs:
                raise OptionError("jobs", self.jobs, "{jobs} sets the local engine's processes; with {engine} dask "
                                  "the cluster's workers run the stages")
            if self.candidates == "all":
                raise OptionError("candidates", "all", "{candidates} all compares every pair in one process; use "
                                  "{candidates} lsh with {engine} dask, or {engine} local")

    @property
    def workers(self) -> int:
        """The local engine's worker processes: ``jobs``, or one per core when it is 0."""
        return self.jobs or os.cpu_count() or 1

    @property
    def grouping(self) -> str:
        """``group``, or ``components`` (``find``'s own) when it names none; ``filter`` names ``witness`` first."""
        return self.group or "components"

    @property
    def keep_policy(self) -> str:
        """``keep``, or :data:`KEEP_FIELD` when ``keep_field`` names a field."""
        return self.keep if self.keep_field is None else KEEP_FIELD

    def bits_for(self, stored_bits: float) -> float:
        """b: the bits asked for (a whole number, or ``HALF_BIT``), or all the stored ones (``HALF_BIT`` for a
        store of XOR bits: ``SignatureParams.stored_bits``)."""
        return stored_bits if self.bits is None else float(self.bits) if self.bits == HALF_BIT else int(self.bits)

    def check_store(self, stored_bits: float, num_perm: int, store: str, input_kind: str = "text") -> None:
        """What depends on the store (read from its manifest alone): b ≤ stored bits (``SignatureParams.stored_bits``:
        1/2 for a store of XOR bits), the banding fits in k."""
        if self.keep_field is not None and input_kind == "sets":
            raise OptionError("keep_field", self.keep_field, f"{{keep_field}} reads a field of JSON Lines or Parquet "
                              f"records; {literal(store)} holds integer sets")
        bits = self.bits_for(stored_bits)
        check_bits(bits, stored_bits, store)
        check_half_bit_pairs(bits, stored_bits, num_perm, store)
        if self.ways == 3:
            check_three_way_bits(bits)
        if bits == HALF_BIT and self.engine.name == "dask":
            raise OptionError("bits", "1/2", f"{literal(store)} holds only XOR bits, which the local engine scores; "
                              "use {engine} local")
        if self.candidates == "lsh":
            check_banding(self.bands, self.rows, num_perm)


@dataclass(frozen=True)
class EstimateOptions:
    """How ``estimate`` compares two or three documents.

    Attributes:
        bits: b (None: all stored bits), or b = 1/2 (``"1/2"``, ``0.5``) for two documents.
        exact: also re-read the documents and compute their exact resemblance.
        level: the confidence level of the interval, in (0, 1).
    """

    bits: float | str | None = None
    exact: bool = False
    level: float = 0.95

    def __post_init__(self) -> None:
        if self.bits is not None:
            set_fields(self, bits=estimator_bits(self.bits))
        set_fields(self, level=open_fraction("level", self.level, "0.95"))

    def check_ids(self, ids: tuple[str, ...]) -> None:
        """Two or three ids, all different."""
        if len(ids) not in (2, 3) or len(set(ids)) != len(ids):
            raise OptionError("ids", ids, "name two or three different document ids")

    def check_store(self, ids: tuple[str, ...], stored_bits: float, store: str, num_perm: int | None = None) -> float:
        """b, checked against the store's bits and, when given, its k = ``num_perm`` values (and ≥ 2 for three
        documents)."""
        wanted = stored_bits if self.bits is None else float(self.bits)
        bits = HALF_BIT if wanted == HALF_BIT else int(wanted)
        check_bits(bits, stored_bits, store)
        if num_perm is not None:
            check_half_bit_pairs(bits, stored_bits, num_perm, store)
        if len(ids) == 3:
            check_three_way_bits(bits, name="estimate")
        return bits
