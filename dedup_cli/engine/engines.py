"""Where the stages run: one interface, the local engine and the Dask engine behind it.

The commands choose an engine with :func:`engine_for` and call its methods; they never branch on the engine
themselves. Both engines run the same stage functions (:mod:`dedup_cli.engine.stages.sign`,
:mod:`dedup_cli.engine.stages.find`, :mod:`dedup_cli.corpus.sources`): the local one in this process and its
pool of workers; the Dask one mapped over tasks, partitions and pieces on a cluster (:mod:`dedup_cli.engine.dask`),
imported only when chosen. ``find`` on both follows one plan (:mod:`dedup_cli.engine.stages.plan`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol, cast

from dedup_cli.engine.optional_engines import require_dask
from dedup_cli.engine.progress import InputProgress, Progress, silent
from dedup_cli.errors import UsageError
from dedup_cli.inputs.locations import STDIN, FileRun, Source
from dedup_cli.options.engine_choice import EngineOptions

if TYPE_CHECKING:
    from dedup_cli.corpus.record_decisions import Decisions, SourceOutcome
    from dedup_cli.engine.stages.results import EvalResult, FindResult
    from dedup_cli.engine.stages.sign import Signed
    from dedup_cli.inputs.report import ReadReport
    from dedup_cli.kernel.choice import KernelChoice
    from dedup_cli.options.evaluating import EvalOptions
    from dedup_cli.options.finding import FindOptions
    from dedup_cli.options.input_options import InputOptions
    from dedup_cli.params import SignatureParams
    from dedup_cli.store.document_index import DocumentIndex
    from dedup_cli.store.memory import Signatures
    from dedup_cli.store.runs import StoreRun
    from dedup_cli.store.store import Store

# Each command imports the stages of its own engine method only, inside the method: find does not import the
# sign stages and their workers, sign does not import find's plan and stages, neither imports filter's writers.

Walked = Source | FileRun
"""What an engine signs: a file (or stdin), or whole text files found together (the local engine's walk)."""

Unchanged = Callable[[str, str, Any], bool]
"""Whether a file (id, location, ``os.stat_result``) is in the store as it is now, so that it need not be read."""

Advance = Callable[[int], None]
"""Told how many bytes of the inputs (on disk) were just read."""


class Engine(Protocol):
    """The stages of ``sign``, ``find``, ``filter`` and ``eval`` on one engine, and ``find`` of texts in memory.

    Attributes:
        options: what reaches this same engine again (for the Dask engine, the scheduler already connected, so
            a ``find`` run inside a ``filter`` uses the cluster the filter started).
    """

    options: EngineOptions

    def sign(self, sources: Iterable[Walked], stream: Any, run: StoreRun, index: DocumentIndex,
             params: SignatureParams, reading: InputOptions, workers: int, choice: KernelChoice, read: ReadReport,
             progress: InputProgress, unchanged: Unchanged | None) -> Signed:
        """Sign ``sources`` (from :func:`input_sources`) into ``run``, skipping what ``index`` holds unchanged; the
        caller commits the run. ``read`` is the run's reading report, added to. ``unchanged`` None: no whole file
        is skipped unread by its status (a new store, or ``sign --checksum``), its content hash decides."""
        ...

    def find(self, store: Store, options: FindOptions, progress: Progress = silent,
             reference: Store | None = None) -> FindResult:
        """Near-duplicates in ``store`` (and against ``reference``), options already checked."""
        ...

    def find_in_memory(self, signatures: Signatures, options: FindOptions, progress: Progress = silent
                       ) -> FindResult:
        """Near-duplicates among texts signed in memory (:func:`dedup_cli.api.texts.sign_texts`), options already
        checked."""
        ...

    def evaluate(self, store: Store, options: EvalOptions, name: str, progress: Progress = silent) -> EvalResult:
        """``eval``'s measure of ``find`` with ``options.find`` on ``store`` (``name``: how the report names it),
        options already checked against it."""
        ...

    def filter_into_directory(self, sources: Sequence[Source], signed: Sequence[bool], targets: Sequence[str],
                              root: str, decisions: Decisions, reading: InputOptions, annotate: bool,
                              stdin: Any = None, progress: Advance | None = None) -> SourceOutcome:
        """Write what to keep of each source into its target under the scratch directory ``root``."""
        ...

    def filter_into_stream(self, source: Source, signed: bool, out: BinaryIO, decisions: Decisions,
                           reading: InputOptions, annotate: bool, stdin: Any = None,
                           progress: Advance | None = None) -> SourceOutcome:
        """Write what to keep of one source to the stream ``out``, in order."""
        ...


class LocalEngine:
    """This process (and, for ``sign``, its pool of workers)."""

    def __init__(self, options: EngineOptions) -> None:
        self.options = options

    def sign(self, sources: Iterable[Walked], stream: Any, run: StoreRun, index: DocumentIndex,
             params: SignatureParams, reading: InputOptions, workers: int, choice: KernelChoice, read: ReadReport,
             progress: InputProgress, unchanged: Unchanged | None) -> Signed:
        from dedup_cli.engine.local.sign import sign_locally

        return sign_locally(sources, stream, run, index, params, reading, workers, choice, read, progress, unchanged)

    def find(self, store: Store, options: FindOptions, progress: Progress = silent,
             reference: Store | None = None) -> FindResult:
        from dedup_cli.engine.local import find as local_find

        return local_find.find([store] if reference is None else [store, reference], options, progress)

    def find_in_memory(self, signatures: Signatures, options: FindOptions, progress: Progress = silent
                       ) -> FindResult:
        from dedup_cli.engine.local import find as local_find
        from dedup_cli.store.memory import MemoryDocuments

        return local_find.find_documents(MemoryDocuments(signatures), options, progress)

    def evaluate(self, store: Store, options: EvalOptions, name: str, progress: Progress = silent) -> EvalResult:
        from dedup_cli.engine.local.evaluation import evaluate_store

        return evaluate_store(store, options, name, progress)

    def filter_into_directory(self, sources: Sequence[Source], signed: Sequence[bool], targets: Sequence[str],
                              root: str, decisions: Decisions, reading: InputOptions, annotate: bool,
                              stdin: Any = None, progress: Advance | None = None) -> SourceOutcome:
        from dedup_cli.corpus.record_decisions import SourceOutcome
        from dedup_cli.corpus.sources import filter_source

        total = SourceOutcome()
        for source, target, known in zip(sources, targets, signed, strict=True):
            total.add(filter_source(source, decisions, reading, target, annotate, known, stdin, progress))
        return total

    def filter_into_stream(self, source: Source, signed: bool, out: BinaryIO, decisions: Decisions,
                           reading: InputOptions, annotate: bool, stdin: Any = None,
                           progress: Advance | None = None) -> SourceOutcome:
        from dedup_cli.corpus.sources import filter_source

        return filter_source(source, decisions, reading, out, annotate, signed, stdin, progress)


class DaskEngine:
    """A Dask cluster, through a connected client (:mod:`dedup_cli.engine.dask`)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.options = EngineOptions("dask", scheduler=client.scheduler.address)

    def sign(self, sources: Iterable[Walked], stream: Any, run: StoreRun, index: DocumentIndex,
             params: SignatureParams, reading: InputOptions, workers: int, choice: KernelChoice, read: ReadReport,
             progress: InputProgress, unchanged: Unchanged | None) -> Signed:
        from dedup_cli.engine.dask.sign import sign_on_cluster, unsplit_note
        from dedup_cli.inputs.parquet_inputs import row_group_sizes

        # Every source is planned before a task starts: the total is known, and the kernel is decided once.
        planned = cast(list[Source], list(sources))  # from plan_inputs: a Source per file
        note = unsplit_note(planned)
        if note is not None:
            progress.note(note)
        progress.start(read.input_bytes)
        choice.see(len(planned), read.input_bytes or 0)
        choice.decide()
        # No ``unchanged`` to ask: whole files are read whatever their status (sign --checksum).
        signed = sign_on_cluster(planned, reading, params, run, index, row_group_sizes, progress.advance, choice,
                                 by_status=unchanged is not None)
        read.merge(signed.report)
        signed.report = read
        return signed

    def find(self, store: Store, options: FindOptions, progress: Progress = silent,
             reference: Store | None = None) -> FindResult:
        from dedup_cli.engine.dask import find as dask_find

        return dask_find.find(store, options, progress=progress, reference=reference)

    def find_in_memory(self, signatures: Signatures, options: FindOptions, progress: Progress = silent
                       ) -> FindResult:
        """In this process, by the local engine: texts in memory are here, not where the workers could read them."""
        return LocalEngine(self.options).find_in_memory(signatures, options, progress)

    def evaluate(self, store: Store, options: EvalOptions, name: str, progress: Progress = silent) -> EvalResult:
        """In this process, by the local engine's stages (``eval`` is written against them: its sample is drawn,
        re-read and measured here), so the report is the local engine's."""
        return LocalEngine(self.options).evaluate(store, options, name, progress)

    def filter_into_directory(self, sources: Sequence[Source], signed: Sequence[bool], targets: Sequence[str],
                              root: str, decisions: Decisions, reading: InputOptions, annotate: bool,
                              stdin: Any = None, progress: Advance | None = None) -> SourceOutcome:
        from dedup_cli.engine.dask.filter import filter_into_directory

        return filter_into_directory(self.client, sources, signed, targets, root, decisions, reading, annotate,
                                     progress)

    def filter_into_stream(self, source: Source, signed: bool, out: BinaryIO, decisions: Decisions,
                           reading: InputOptions, annotate: bool, stdin: Any = None,
                           progress: Advance | None = None) -> SourceOutcome:
        from dedup_cli.engine.dask.filter import filter_into_stream

        return filter_into_stream(self.client, source, signed, out, decisions, reading, annotate, progress)


def input_sources(options: EngineOptions, inputs: Sequence[str], reading: InputOptions, read: ReadReport,
                  stdin: Any = None) -> tuple[Iterable[Walked], Any]:
    """The sources of ``inputs`` for the engine ``options`` name, and the stream of ``-``, checked before a store
    is touched (a missing input is an error). The local engine walks directories as it signs; a cluster's tasks
    are planned from every source at once, and its workers cannot read stdin."""
    from dedup_cli.inputs.reading import plan_inputs, walk_inputs

    if options.name != "dask":
        return walk_inputs(inputs, reading, read, stdin)
    require_dask()
    sources, stream = plan_inputs(inputs, reading, read, stdin)
    check_sources(options, sources, "sign")
    return sources, stream


def check_sources(options: EngineOptions, sources: Sequence[Source], command: str = "filter") -> None:
    """Refuse, before any work, inputs the engine ``options`` name cannot read (a UsageError): stdin, which
    a cluster's workers cannot see."""
    if options.name == "dask" and any(source.path == STDIN for source in sources):
        raise UsageError(f"- (stdin) cannot be read by Dask workers; save it to a file they can read, or {command} "
                         "it with {engine} local", options=True)


@contextmanager
def engine_for(options: EngineOptions) -> Iterator[Engine]:
    """The engine ``options`` name, ready for the length of the ``with`` block: for Dask, connected to the
    scheduler named, or to a local cluster started here and closed at the end."""
    if options.name != "dask":
        yield LocalEngine(options)
        return
    require_dask()
    from dedup_cli.engine.dask import cluster

    if options.scheduler_address() is None:
        # The local cluster's workers are forked from this process (cluster.WORKER_START): every module their tasks
        # run is imported first, so that each worker does not import pandas, pyarrow and the stages again.
        import dedup_cli.engine.dask.filter
        import dedup_cli.engine.dask.find
        import dedup_cli.engine.dask.sign  # noqa: F401
    with cluster.connected(options) as client:
        yield DaskEngine(client)
