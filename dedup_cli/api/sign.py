"""``sign``: documents (or integer sets) → shingles → minwise signatures → the store, incrementally.

The engine the options name (:mod:`dedup_cli.engine.engines`) reads the inputs in tasks (whole files, chunks of
lines, Parquet rows) and signs them: the local one in a pool of processes, writing a Parquet row group per few
thousand documents so that memory does not grow with the corpus; the Dask one in tasks on a cluster. A run
into an existing store is incremental: whole files whose location, size and modification time match the
store are skipped unread (read all the same with ``checksum``), documents whose content hash matches are skipped
after reading, and only new or changed documents are signed and written as one more part of the store
(docs/store-format.md).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from dedup_cli.candidates.banding import layout_for_documents
from dedup_cli.engine.engines import engine_for, input_sources
from dedup_cli.engine.progress import Advance, InputProgress
from dedup_cli.errors import InputError, OptionError, StoreError, UsageError
from dedup_cli.inputs.locations import STDIN
from dedup_cli.inputs.report import ReadReport
from dedup_cli.inputs.skips import check_options_apply, check_reading
from dedup_cli.kernel.background import compile_later
from dedup_cli.kernel.cache import failure
from dedup_cli.kernel.choice import COMPILE_FAILED, INTEGER_SETS, NOT_COMPILED, KernelChoice, numba_version
from dedup_cli.objectstore.urls import absolute
from dedup_cli.options.checks import counted, literal
from dedup_cli.options.signing import PRUNE_SHARE, SignOptions
from dedup_cli.options.vocabulary import READING_OPTIONS, default_store
from dedup_cli.params import SignatureParams
from dedup_cli.store.document_index import DocumentIndex, GoneSources
from dedup_cli.store.manifest import RunInput, RunRecord
from dedup_cli.store.runs import StoreRun
from dedup_cli.store.store import create_store, stored_id_root, stored_params


@dataclass
class SignReport:
    """What a sign run did."""

    store: str = ""  # the store signed into
    documents: int = 0  # documents signed in this run
    empty: int = 0  # of those, documents with no shingle
    unchanged: int = 0  # documents already in the store as they are now (skipped)
    moved: int = 0  # documents whose text is the stored one's, found at a new place (written again, unsigned)
    read: ReadReport = field(default_factory=ReadReport)
    seconds: float = 0.0
    files_found: int = 0
    run: RunRecord | None = None  # the committed run: its number and added/changed/removed counts
    prune_skipped: bool = False  # prune was asked for but some input could not be read
    kernels: list[str] = field(default_factory=list)  # the signing kernels that ran ("numpy", "numba"), in order
    kernel_reason: str = ""  # why numpy signed, when it did (dedup_cli.kernel.choice: requested, small run, …)
    numba_version: str | None = None  # when the compiled kernel ran
    compile_failure: str | None = None  # why compiling the kernel in the background failed, when that kept numpy


def sign(
    inputs: Sequence[str],
    store: str | os.PathLike[str] | None = None,
    options: SignOptions | None = None,
    progress: Advance | None = None,
    on_start: Callable[[int | None], None] | None = None,
    stdin: Any = None,
    on_note: Callable[[str], None] | None = None,
) -> SignReport:
    """Sign the documents (or integer sets) of ``inputs`` into ``store``, incrementally.

    Args:
        inputs: files, directories and ``-`` (stdin), read as ``options.input`` says.
        store: the store; created if missing, else extended by one run (atomically, under a lock). Default:
            ``$DEDUP_STORE``, else ``./dedup.parquet``.
        options: what to read, the signature parameters (they must equal the store's), and the run's
            behaviour: workers, prune, wait (default: ``SignOptions()``, the command line's defaults).
        progress: told how many bytes of the inputs (on disk) were just read or skipped.
        on_start: told the inputs' total size on disk (None when reading stdin), before reading.
        stdin: a binary stream for ``-`` (default: the process's stdin).
        on_note: told a line the user should know before reading, about how the run will go (on a Dask cluster:
            a compressed input too large for one task, which one worker reads alone).

    Ids of files are relative to the store's id root: the root ``options.input.id_root`` names on the first
    run, else the deepest directory holding the first run's inputs; later runs keep it, and refuse an input
    outside it (:class:`dedup_cli.errors.UsageError`) rather than give a document a second id.

    A run that did the wrong job stores nothing and raises: an :class:`~dedup_cli.errors.OptionError` for a record
    option (``id_field``, ...) given for inputs that are all plain text files; an
    :class:`~dedup_cli.errors.InputError` when no document was read though inputs were skipped, when every
    record of an input was skipped, when an input held nothing or no file was found (unless
    ``options.allow_empty``), with ``options.strict`` when anything was skipped, and when a prune would remove every
    stored document or more than half of them (unless ``options.force_prune``).
    """
    started = time.perf_counter()
    options = SignOptions() if options is None else options
    output = default_store(store)
    # A store keeps the tokenisation it was signed with unless the options name one (then they must agree), and
    # its k and B; a new one takes them for the corpus size it is told, else the defaults.
    stored = stored_params(output)
    params = SignatureParams.from_options(_laid_out(options, stored), stored)
    report = SignReport(store=output)
    index: DocumentIndex | None = None
    seen: list[str] = []  # ids this run read or found unchanged: the others are what a prune removes

    def file_unchanged(identifier: str, location: str, status: os.stat_result) -> bool:
        unchanged = index is not None and index.file_unchanged(identifier, location, status.st_size,
                                                               status.st_mtime_ns)
        if unchanged:
            seen.append(identifier)
        return unchanged

    # Inputs are checked (a missing one is an error) before the store is created or locked; the local engine's
    # walk of the directories then goes on as the run signs, and the progress starts once it knows the total.
    reading = dataclasses.replace(options.input, id_root=_id_root(output, options.input.id_root))
    sources, stream = input_sources(options.engine, inputs, reading, report.read, stdin)
    created = create_store(output, params, exist_ok=True, lock_timeout=options.wait)
    with created.begin_run(params, lock_timeout=options.wait) as run, engine_for(options.engine) as engine:
        _record_input(run, options, report.read.id_root, output)
        index = run.document_index()
        _refuse_second_stdin_batch(inputs, options, index, output)
        index.gone = GoneSources(options.prune, None if options.input.files_from is not None else
                                 tuple(STDIN if name == STDIN else absolute(name) for name in inputs))
        choice = KernelChoice(options.kernel if params.input_kind == "text" else "numpy", options.workers, params)
        if choice.blocked == NOT_COMPILED:
            compile_later()  # for later runs: this one signs with numpy, and never waits for the compiler
        # A new store has nothing to look up; with checksum every whole file is read, and its content hash decides.
        known = file_unchanged if len(index) and not options.checksum else None
        signed = engine.sign(sources, stream, run, index, params, reading, options.workers, choice, report.read,
                             InputProgress(on_start, progress, on_note), known)
        report.documents += signed.documents
        report.empty += signed.empty
        report.unchanged += signed.unchanged
        report.moved += signed.moved
        seen.extend(signed.seen)
        report.files_found = report.read.files_found
        check_options_apply(options.input, report.read, inputs)
        listed = [] if options.input.files_from is None else [options.input.files_from]
        check_reading(report.read, options.strict, inputs=[*inputs, *listed],
                      allow_empty=options.allow_empty or options.force_prune)
        _check_id_scheme(run, inputs, report.read, output)
        removed = signed.removed  # what a source read completely no longer holds: never a place to trust
        if options.prune:
            if report.read.count("unreadable"):
                report.prune_skipped = True
            else:
                removed = index.ids_at(index.absent(seen, [read.ids for read in signed.seen_ids]))
        _check_prune(len(set(removed).union(signed.removed)), len(index), output, options.force_prune, options.prune)
        run.remove(removed)
        run.remove(signed.removed)
    _report_kernel(report, choice, params)
    report.unchanged += report.read.unchanged
    report.run = run.record
    report.seconds = time.perf_counter() - started
    return report


def _laid_out(options: SignOptions, stored: SignatureParams | None) -> SignOptions:
    """``options`` with a new store's k and B chosen for ``options.docs`` documents where not given
    (:func:`dedup_cli.candidates.banding.layout_for_documents`)."""
    if stored is not None or options.docs is None or (options.num_perm is not None and options.bits is not None):
        return options
    layout = layout_for_documents(options.docs)
    return dataclasses.replace(options, num_perm=layout.num_perm if options.num_perm is None else options.num_perm,
                               bits=layout.stored_bits if options.bits is None else options.bits)


def _check_prune(removed: int, stored: int, output: str, forced: bool, prune: bool) -> None:
    """Refuse a run that would remove every stored document, or more than :data:`PRUNE_SHARE` of them (inputs
    moved, not mounted or emptied look so), unless ``forced``: a prune, or files of records read whole that no
    longer hold what the store holds of them.

    Raises:
        InputError: naming how many documents it would remove of how many.
    """
    if forced or not removed or (removed < stored and removed <= PRUNE_SHARE * stored):
        return
    share = "every one" if removed == stored else f"more than {PRUNE_SHARE:.0%}"
    doing = "{prune} would remove" if prune else "this run would remove (their files no longer hold them)"
    raise InputError(f"{doing} {removed} of the {counted(stored, 'document')} in {literal(output)} "
                     f"({share}): are the inputs all there? Nothing was stored; pass {{force_prune}} to remove them",
                     options=True)


def _id_root(output: str, asked: str | None) -> str | None:
    """The directory the ids of this run's files are relative to: the store's, else the one asked for (None: the
    reading finds it from the inputs).

    Raises:
        OptionError: the one asked for is not the store's.
    """
    recorded = stored_id_root(output)
    if asked is not None and recorded is not None and absolute(asked) != recorded:
        raise OptionError("id_root", asked, f"{{id_root}} {literal(asked)} differs from {literal(recorded)}, the "
                          f"directory the ids of {literal(output)} are relative to; leave {{id_root}} out, or sign "
                          "into another store")
    return recorded if recorded is not None else asked


def _record_input(run: StoreRun, options: SignOptions, read_root: str | None, output: str) -> None:
    """Record in the run the id root of its files (a first run's, found by reading) and how it read its inputs.

    Raises:
        StoreError: another run fixed a different id root between this one's reading and its lock.
    """
    if run.id_root is None:
        run.id_root = read_root
    elif read_root is not None and read_root != run.id_root:
        raise StoreError(f"another run fixed the id root of {output} while this one started; run again")
    run.input = RunInput(run.number, **{name: getattr(options.input, name) for name in READING_OPTIONS})


def _check_id_scheme(run: StoreRun, inputs: Sequence[str], read: ReadReport, output: str) -> None:
    """Refuse a run that names documents another way than the store's runs that read records did (before its
    commit: nothing is stored). A run of plain-text files only names them by their paths, whatever the options.

    Raises:
        UsageError: naming both ways.
    """
    assert run.input is not None
    records = STDIN in inputs or set(read.formats) != {"text"}
    run.input = dataclasses.replace(run.input, records=records)
    pinned = next((recorded for recorded in reversed(run.inputs_before) if recorded.records), None)
    if records and pinned is not None and not run.input.gives_ids_as(pinned):
        raise UsageError(f"this run would give documents ids by {run.input.id_options()}, but {literal(output)} "
                         f"gives them by {pinned.id_options()} (as its run {pinned.run} did), so each document "
                         "would be stored twice; sign with those options, or into another store", options=True)


def _refuse_second_stdin_batch(inputs: Sequence[str], options: SignOptions, index: DocumentIndex,
                               output: str) -> None:
    """Refuse stdin read without ids into a store that holds documents read so: their ids are line numbers
    (``-:N``), which this batch's would reuse, replacing the earlier batch's documents. With ``prune`` the stream
    is the whole corpus again, and a line that changed is a changed document.

    Raises:
        UsageError: stdin without an id field, no prune, and documents of an earlier stdin batch stored.
    """
    reading = options.input
    if STDIN not in inputs or options.prune or reading.input_format == "sets" or reading.id_field is not None:
        return
    earlier = index.stdin_documents()
    if earlier:
        raise UsageError(f"{literal(output)} holds {counted(earlier, 'document')} of an earlier stdin batch, whose "
                         "ids are positions in the stream (-, or -:LINE) that this batch would reuse and replace; "
                         "give the records ids ({id_field}), save each batch to a file and sign the files, or add "
                         "{prune} if this stream is the whole corpus again", options=True)


def _report_kernel(report: SignReport, choice: KernelChoice, params: SignatureParams) -> None:
    """The kernels that signed, why numpy did when it did, numba's version, and why compiling failed."""
    report.kernels = choice.used
    report.kernel_reason = INTEGER_SETS if params.input_kind == "sets" else choice.reason
    if "numba" in choice.used:
        report.numba_version = numba_version()
    if report.kernel_reason == COMPILE_FAILED:
        report.compile_failure = failure()
