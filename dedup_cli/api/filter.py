"""``filter``: the deduplicated corpus itself, written in the inputs' own formats.

Which documents to drop comes from ``find`` (its groups and keep policy; with ``against``, a new document that
duplicates a reference document is dropped and the reference copy kept) or from a ``find --output members``
file. Everything that can be checked is checked before ``find`` runs: the store, the options, the inputs (each
named one must have been signed into the store) and where the output goes. The inputs are then read again as
the store's sign runs read them, one source at a time, and each kept record is written in its own format
(:mod:`dedup_cli.corpus`) into a scratch file or directory that replaces OUT only when complete. Memory holds
the documents to drop (ids, content hashes, groups), not the corpus (docs/filter.md).
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from shlex import quote
from typing import Any, BinaryIO

import numpy as np

from dedup_cli.api.find import find, open_reference
from dedup_cli.api.sign import SignReport, sign
from dedup_cli.atomic_files import OutputStream, open_output, output_directory, path_kind, remove_others
from dedup_cli.corpus.layout import MARKER, Layout, plan_layout, write_marker
from dedup_cli.corpus.record_decisions import Decisions, SourceOutcome, SourceOwners
from dedup_cli.engine.engines import Engine, check_sources, engine_for
from dedup_cli.engine.stages.filter import find_decisions, pair_estimates
from dedup_cli.errors import InputError, UsageError
from dedup_cli.inputs.discovery import plan_sources
from dedup_cli.inputs.locations import STDIN, Source, display_name, location_path
from dedup_cli.inputs.members import read_members
from dedup_cli.inputs.report import ReadReport
from dedup_cli.inputs.skips import check_options_apply, empty_inputs, refuse_empty
from dedup_cli.objectstore.urls import absolute as absolute_path
from dedup_cli.objectstore.urls import is_url
from dedup_cli.options.checks import literal
from dedup_cli.options.filtering import FILTER_GROUP, FilterOptions
from dedup_cli.options.input_options import InputOptions
from dedup_cli.options.vocabulary import READING_OPTIONS, default_store
from dedup_cli.store.manifest import RunInput
from dedup_cli.store.store import Store, open_store, stored_id_root

Progress = Callable[[int], None]
"""Called with the number of input bytes (on disk) just read."""

MEMBERS_BATCH = 1 << 16
"""Documents to drop whose stored rows a members file's run reads at a time (their signatures, for the similarity
to the kept one): about 25 MB of rows at k = 256."""


@dataclass
class Removed:
    """The documents dropped, in group order: what ``--removed`` lists; arrays aligned by document."""

    ids: list[str]
    groups: np.ndarray  # int64[d]
    representatives: list[str]
    similarity: np.ndarray  # float64[d]: to the representative; exact where verified, NaN where unknown
    verified: np.ndarray  # bool[d]: the similarity is the exact resemblance
    representative_stores: list[str] | None = None  # "new" or "reference", with ``against``


@dataclass
class FilterReport:
    """What a filter run did."""

    store: str = ""
    out: str = ""
    inputs: int = 0  # input sources (files, stdin)
    records: int = 0  # records read: whole files, non-blank lines, rows
    dropped: int = 0  # records left out (with ``annotate``: marked ``dedup_keep`` false, and kept)
    # records skipped because an earlier record of their input had their id, or another input holds it (``read``
    # lists them, as duplicate ids and as ids stored from another source)
    repeated: int = 0
    annotated: bool = False
    changed: list[tuple[str, str]] = field(default_factory=list)  # (where, id): to drop but changed since; kept
    unsigned: list[str] = field(default_factory=list)  # files under a named directory the store never read
    not_found: list[str] = field(default_factory=list)  # ids to drop that no input held
    gone: list[str] = field(default_factory=list)  # stored ids gone since signing: never kept, never dropped
    groups: int = 0
    removed: Removed | None = None
    against: str | None = None
    keep_field_problems: list[tuple[str, str]] = field(default_factory=list)
    read: ReadReport = field(default_factory=ReadReport)
    signed: SignReport | None = None  # the sign run of ``options.sign``
    seconds: float = 0.0

    @property
    def kept(self) -> int:
        """Records written (all of them with ``annotate``)."""
        return self.records if self.annotated else self.records - self.dropped - self.repeated


@dataclass
class _Plan:
    """What the run decided to drop: the decisions, and for each the similarity to its representative."""

    decisions: Decisions
    similarity: np.ndarray
    verified: np.ndarray
    representative_stores: list[str] | None
    groups: int
    keep_field_problems: list[tuple[str, str]]
    gone: list[str] = field(default_factory=list)


def reading_options(store: Store, given: InputOptions) -> InputOptions:
    """``given``; or, when all its :data:`READING_OPTIONS` are at their defaults, those the store's sign runs
    recorded (the inputs are then read exactly as they were signed). Older stores recorded none."""
    defaults = InputOptions()
    recorded = {tuple(run.reading().items()) for run in store.inputs}
    if any(getattr(given, name) != getattr(defaults, name) for name in READING_OPTIONS) or not recorded:
        return given
    if len(recorded) > 1:
        values = {name: sorted({str(dict(options)[name]) for options in recorded}) for name in READING_OPTIONS}
        differing = "; ".join(f"{{{name}}} {' or '.join(literal(v) for v in found)}"
                              for name, found in values.items() if len(found) > 1)
        raise UsageError(f"the sign runs of {literal(store.path)} read their inputs differently ({differing}); say "
                         "how to read these with those options", options=True)
    chosen: dict[str, Any] = dict(next(iter(recorded)))
    universe = store.params.universe if chosen["input_format"] == "sets" else None
    return dataclasses.replace(given, universe=universe, **chosen)


def _check_id_scheme(store: Store, path: str, reading: InputOptions, sources: Sequence[Source]) -> None:
    """Refuse to read records with ids given another way than the store's runs gave them (another input format or
    id field): no record would then match its stored document, and the whole input would be copied as it is.

    Raises:
        UsageError: naming both ways, as ``sign`` does.
    """
    pinned = next((recorded for recorded in reversed(store.inputs) if recorded.records), None)
    if pinned is None or all(source.format == "text" and source.path != STDIN for source in sources):
        return
    asked = RunInput(0, **{name: getattr(reading, name) for name in READING_OPTIONS})
    if not asked.gives_ids_as(pinned):
        raise UsageError(f"these inputs would be read with ids by {asked.id_options()}, but {literal(path)} gives "
                         f"them by {pinned.id_options()} (as its run {pinned.run} did), so no record would match its "
                         "stored document; filter with those options, or leave them out (filter reads the inputs as "
                         "the store's runs read them)", options=True)


def _signed(store: Store, path: str, inputs: Sequence[str], sources: Sequence[Source],
            reading: InputOptions) -> list[bool]:
    """Whether the store read each source; a named input it never read (no file under it) is an error, whose hint
    signs it as ``reading`` says (the store's runs read their inputs so), so that filter then finds it."""
    files = store.source_files()
    signed = [(STDIN if source.path == STDIN else location_path(source.path)) in files for source in sources]
    for name in inputs:
        absolute = STDIN if name == STDIN else absolute_path(name)
        if not any(known and (source.path == absolute or source.path.startswith(absolute.rstrip(os.sep) + os.sep))
                   for source, known in zip(sources, signed, strict=True)):
            shown = "stdin" if name == STDIN else display_name(name)
            defaults = InputOptions()
            # --id-column and --text-column are other names of --id-field and --text-field: named once, not twice.
            aliases = {"id_column": "id_field", "text_column": "text_field"}
            named = [option for option in READING_OPTIONS if getattr(reading, option) != getattr(defaults, option)
                     and not (option in aliases and getattr(reading, option) == getattr(reading, aliases[option]))]
            flags = "".join(f" {{{option}}} {literal(quote(str(getattr(reading, option))))}" for option in named)
            raise InputError(f"input {literal(shown)} was never signed into {literal(path)}; sign it first (dedup sign "
                             f"{literal(quote(name))} -o {literal(quote(path))}{flags}), or name the store it was "
                             "signed into", options=True)
    return signed


def _check_present(sources: Sequence[Source]) -> None:
    """Refuse, before anything is signed or written, a file the walk found but that is not there: a symbolic link
    to nothing (``sign`` would skip it as unreadable after storing the rest, and ``filter`` copy the link).

    Raises:
        InputError: naming the first such file.
    """
    for source in sources:
        if source.status is not None or source.path == STDIN or is_url(source.path):
            continue
        try:
            os.stat(source.path)
        except OSError as error:
            if not isinstance(error, FileNotFoundError):
                continue  # there, but not readable: the reading (or the exact checks) says why
            link = " (a symbolic link to nothing)" if os.path.islink(source.path) else ""
            raise InputError(f"cannot read {source.display}{link}: {error.strerror or error}; remove it or name "
                             "the inputs without it; nothing was written") from None


def _plan(store: Store, path: str, options: FilterOptions) -> _Plan:
    return _from_find(path, options) if options.members is None else _from_members(store, path, options)


def _from_find(path: str, options: FilterOptions) -> _Plan:
    """The decisions of ``find`` (on either engine; a result streamed from a cluster is read chunk by chunk)."""
    result = find(path, options.find)
    found = find_decisions(result, dropped_only=not options.annotate)
    decisions = Decisions(found.ids, found.content_hashes, found.drop, found.groups, found.representatives,
                          _owners(path, options))
    stores = None
    if found.representative_in_reference is not None:
        stores = ["reference" if origin else "new" for origin in found.representative_in_reference.tolist()]
    return _Plan(decisions, found.similarity, found.verified, stores, found.group_count, result.keep_field_problems,
                 result.gone)


def _owners(path: str, options: FilterOptions) -> SourceOwners | None:
    """Which input holds each stored id, when ids are named by a field (ids of files and record numbers cannot
    repeat across inputs): so that a record delivered in two inputs is written once, where the store holds it."""
    reading = options.input
    if reading.id_field is None and reading.id_column is None and reading.input_format != "sets":
        return None
    index = open_store(path).document_index()
    return SourceOwners.of(index.id_array, index.path_array)


def _from_members(store: Store, path: str, options: FilterOptions) -> _Plan:
    """The decisions a members file lists, with the stored content hash of each document to drop and its
    estimated similarity to its representative, read :data:`MEMBERS_BATCH` documents at a time."""
    assert options.members is not None
    members = read_members(options.members)
    listed = np.flatnonzero(np.ones(members.drop.size, bool) if options.annotate else members.drop)
    ids = [members.ids[index] for index in listed.tolist()]
    representatives = [members.representatives[index] for index in listed.tolist()]
    drop = members.drop[listed]
    hashes = np.zeros(len(ids), np.uint64)
    estimate = np.full(len(ids), np.nan)
    dropping = np.flatnonzero(drop)
    for start in range(0, dropping.size, MEMBERS_BATCH):
        part = dropping[start : start + MEMBERS_BATCH]
        names = [ids[index] for index in part.tolist()]
        kept = [representatives[index] for index in part.tolist()]
        stored, missing = store.read_documents(list(dict.fromkeys(names + kept)))
        absent = sorted(set(missing).intersection(names))
        if absent:
            raise InputError(f"{{members}} {literal(options.members)} names documents to drop that {literal(path)} "
                             f"does not hold (e.g. {literal(absent[0])}); pass the members file of this store",
                             options=True)
        row = {identifier: index for index, identifier in enumerate(stored.ids)}
        rows = np.array([row[name] for name in names], np.int64)
        assert stored.content_hashes is not None
        hashes[part] = stored.content_hashes[rows]
        estimate[part] = pair_estimates(stored, rows, np.array([row.get(r, -1) for r in kept], np.int64),
                                        store.params.stored_bits)
    return _Plan(Decisions(ids, hashes, drop, members.groups[listed], representatives, _owners(path, options)),
                 estimate,
                 np.zeros(len(ids), bool), None, len(set(members.groups.tolist())), [])


def _write(layout: Layout, sources: Sequence[Source], signed: Sequence[bool], decisions: Decisions,
           reading: InputOptions, options: FilterOptions, store: str, inputs: Sequence[str], stdin: Any,
           stdout: BinaryIO | None, progress: Progress | None, engine: Engine, read: ReadReport) -> SourceOutcome:
    """Filter every source into OUT: a scratch file or directory that replaces OUT when complete, by ``engine``
    (here, or by tasks on a cluster's workers); unless ``options.allow_empty``, an input that held nothing stops
    the run before OUT is replaced (:func:`_refuse_empty`; the walk's findings are in ``read``)."""
    total = SourceOutcome()

    def each(targets: Sequence[str | BinaryIO], root: str | None = None) -> None:
        if root is not None:
            total.add(engine.filter_into_directory(sources, signed, [str(t) for t in targets], root, decisions,
                                                   reading, options.annotate, stdin, progress))
        else:
            for source, target, known in zip(sources, targets, signed, strict=True):
                assert not isinstance(target, str)
                total.add(engine.filter_into_stream(source, known, target, decisions, reading, options.annotate,
                                                    stdin, progress))
        if not options.allow_empty:
            _refuse_empty(total, read, inputs, reading)

    if layout.out == STDIN:
        # Its write errors (a reader gone away: EPIPE) are the output's, never an input's that was being read.
        out: Any = OutputStream(stdout if stdout is not None else sys.stdout.buffer, "stdout")
        each([out] * len(sources))
        out.flush()
        return total
    try:
        if layout.single:  # a file, a link to one, or a device, FIFO or descriptor written in place
            with open_output(layout.out) as out:
                each([out] * len(sources))
        else:
            with output_directory(layout.out) as scratch:
                each([os.path.join(scratch, target) for target in layout.targets], str(scratch))
                write_marker(scratch, store, inputs)
                if is_url(scratch):  # objects of an earlier output that this one did not write
                    remove_others(str(scratch), [*layout.targets, MARKER])
    except OSError as error:
        raise InputError(f"cannot write {display_name(layout.out)}: {error.strerror or error}") from error
    return total


def _refuse_empty(outcome: SourceOutcome, read: ReadReport, inputs: Sequence[str], reading: InputOptions) -> None:
    """Stop a run given an input that held nothing (:func:`dedup_cli.inputs.skips.empty_inputs`: stdin or a file
    named by itself with no byte, a file of records with no record, a named folder with no file), before its output
    replaces OUT.

    Raises:
        InputError: naming the first such input.
    """
    listed = [] if reading.files_from is None else [reading.files_from]
    refuse_empty(empty_inputs([*read.empty_inputs, *outcome.empty], {name: [0, 0] for name in outcome.no_record},
                              set(), [*inputs, *listed]), "nothing was written")


def filter(
    inputs: Sequence[str],
    out: str | os.PathLike[str],
    store: str | os.PathLike[str] | None = None,
    options: FilterOptions | None = None,
    progress: Progress | None = None,
    on_start: Callable[[int | None], None] | None = None,
    stdin: Any = None,
    stdout: BinaryIO | None = None,
) -> FilterReport:
    """Write the documents of ``inputs`` to keep to ``out``, in their own formats, dropping near-duplicates.

    Args:
        inputs: files, directories and ``-`` (stdin) that were signed into ``store``, found and read as
            ``options.input`` says (by default as the store's sign runs read them).
        out: one file for one input file (``-``: stdout), else a directory mirroring the inputs
            (:mod:`dedup_cli.corpus.layout`); replaced only when complete.
        store: the store (default: ``$DEDUP_STORE``, else ``./dedup.parquet``).
        options: what to drop and how (default: ``FilterOptions()``, the command line's defaults).
        progress: told how many bytes of the inputs (on disk) were just read.
        on_start: told the inputs' total size on disk (None when reading stdin), before they are read.
        stdin, stdout: binary streams for ``-`` (default: the process's).

    Raises:
        dedup_cli.errors.UsageError: bad options, an output inside the inputs or the store.
        dedup_cli.errors.InputError: an input never signed into the store, or unreadable (nothing is written).
        dedup_cli.errors.DedupError: an output that exists and is not ``filter``'s to replace.

    With ``options.sign``, the inputs are first signed into the store (``sign``, incrementally; it is created if
    missing), so that one call goes from a corpus to its deduplicated copy.
    """
    started = time.perf_counter()
    options = FilterOptions() if options is None else options
    if options.find.group is None and options.members is None:
        # filter's own grouping: no document dropped without a kept one beside it
        options = dataclasses.replace(options, find=dataclasses.replace(options.find, group=FILTER_GROUP))
    path = default_store(store)
    signing = None
    if options.sign is not None:
        if STDIN in inputs:
            raise UsageError("{sign} cannot read stdin twice (to sign, then to filter); sign it first", options=True)
        stream = stdin if stdin is not None else sys.stdin.buffer
        _check_present(plan_sources(inputs, dataclasses.replace(options.sign.input, id_root=stored_id_root(path)),
                                    ReadReport(), stream))  # before the store is touched
        signing = sign(inputs, path, options.sign, progress, on_start)
        if signing.read.unreadable:
            where, reason = signing.read.unreadable[0]
            raise InputError(f"cannot read {where}: {reason}; nothing was written")
    opened = open_store(path)  # the manifest only: everything is checked before find reads the store
    reading = reading_options(opened, options.input)
    if options.members is None:
        params = opened.params
        options.find.check_store(params.stored_bits, params.num_perm, path, params.input_kind)
        if options.find.against is not None:
            open_reference(opened, options.find.against)
    elif (kind := path_kind(options.members)) in (None, "directory"):
        problem = "does not exist" if kind is None else "is a directory"
        raise InputError(f"{{members}} {literal(options.members)} {problem}; write it with dedup find "
                         f"{literal(quote(path))} --output members -o {literal(quote(options.members))}", options=True)
    report = FilterReport(store=path, out=os.fspath(out), against=options.find.against, annotated=options.annotate,
                          signed=signing)
    stream = stdin if stdin is not None else sys.stdin.buffer
    sources = plan_sources(inputs, dataclasses.replace(reading, id_root=stored_id_root(path)), report.read, stream)
    if report.read.unreadable:
        where, reason = report.read.unreadable[0]
        raise InputError(f"cannot read {where}: {reason}; nothing was written")
    _check_present(sources)
    check_options_apply(reading, report.read, inputs)
    _check_id_scheme(opened, path, reading, sources)
    check_sources(options.find.engine, sources)
    layout = plan_layout(inputs, sources, report.out, path, reading.files_from)
    signed = _signed(opened, path, inputs, sources, reading)
    if options.annotate and not any(source.format in ("jsonl", "json", "csv", "tsv", "parquet") for source in sources):
        raise UsageError("{annotate} adds fields to JSON Lines, JSON array, CSV and TSV records and Parquet rows; "
                         "these inputs hold none",
                         options=True)
    with engine_for(options.find.engine) as engine:
        # find runs on the same engine (a local cluster started here lives until the inputs are written).
        plan = _plan(opened, path, dataclasses.replace(options, input=reading, find=dataclasses.replace(
            options.find, engine=engine.options)))
        if on_start is not None:
            on_start(report.read.input_bytes)
        outcome = _write(layout, sources, signed, plan.decisions, reading, options, path, inputs, stream, stdout,
                         progress, engine, report.read)
    _summarise(report, plan, outcome, len(sources))
    report.seconds = time.perf_counter() - started
    return report


def _summarise(report: FilterReport, plan: _Plan, outcome: SourceOutcome, sources: int) -> None:
    decisions = plan.decisions
    report.inputs, report.records, report.dropped = sources, outcome.records, outcome.dropped
    report.changed, report.unsigned = outcome.changed, outcome.unsigned
    report.repeated = len(outcome.repeated) + len(outcome.held)
    for repeat in outcome.repeated:  # said as sign says it: "skipped WHERE: id 'x' was already read"
        report.read.note("duplicate_ids", repeat)
    for held in outcome.held:  # "skipped WHERE: id 'x' is stored from another source, OTHER, which keeps it"
        report.read.note("held_elsewhere", held)
    report.groups, report.keep_field_problems, report.gone = plan.groups, plan.keep_field_problems, plan.gone
    met = np.zeros(len(decisions), bool)
    met[np.array(outcome.seen, np.int64)] = True
    report.not_found = [decisions.ids[p] for p in np.flatnonzero(decisions.drop & ~met).tolist()]
    dropped = np.zeros(len(decisions), bool)
    dropped[np.array(outcome.dropped_positions, np.int64)] = True
    rows = np.flatnonzero(dropped)
    stores = plan.representative_stores
    report.removed = Removed(
        ids=[decisions.ids[p] for p in rows.tolist()], groups=decisions.groups[rows],
        representatives=[decisions.representatives[p] for p in rows.tolist()], similarity=plan.similarity[rows],
        verified=plan.verified[rows], representative_stores=None if stores is None else [stores[p] for p in rows],
    )


# The same function under a name that does not shadow Python's built-in filter after ``from dedup_cli import *``.
filter_corpus = filter
