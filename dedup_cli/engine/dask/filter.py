"""``filter`` on a Dask cluster: tasks on the workers rewrite the inputs, in pieces where an input is large.

The decisions (one row per document to drop, from the Dask ``find``) are sent once to every worker. The inputs
are cut into tasks of about :data:`TASK_BYTES`: runs of whole inputs, each filtered as the local engine filters it
(:func:`dedup_cli.corpus.sources.filter_source`); an uncompressed line file larger than that by byte ranges cut at
line ends, and a Parquet file by runs of row groups (:mod:`dedup_cli.corpus.filter_pieces`), whose lines are first
counted so that each piece knows the number of its first line.

- **A directory OUT**: every task writes under the scratch directory that replaces OUT when complete (a whole
  input at its place, a piece under a hidden temporary name beside it); once every piece of an input is written,
  a task joins them into the input's output and deletes them. The workers must see OUT's directory (a shared
  filesystem, as for the inputs and the store).
- **One output file** (or a device, a FIFO, stdout): the pieces' outputs come back to this process in order and
  are written through the same file the local engine writes (atomically replaced, or written in place); an input
  too small to cut is filtered here.

Either way OUT is absent or complete, and its bytes are the local engine's. A record whose id an earlier record
of its input had is skipped (:mod:`dedup_cli.corpus.lines`); a piece finds the repeats inside it, and returns the
ids it read first, so that this process can find those that repeat an earlier piece's: such a piece is filtered
again, told to skip them, before it is joined (seldom: an id repeated across pieces).
"""

from __future__ import annotations

import errno
import io
import os
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, BinaryIO

import numpy as np
from distributed import Client, Future, as_completed

from dedup_cli.atomic_files import OutputError, unlink_quietly
from dedup_cli.corpus.filter_pieces import (
    LINE_FORMATS,
    Piece,
    count_lines,
    filter_piece,
    join_lines,
    join_parquet,
    line_ranges,
    row_group_runs,
)
from dedup_cli.corpus.record_decisions import Decisions, SourceOutcome
from dedup_cli.corpus.sources import filter_source
from dedup_cli.corpus.writers import output_file
from dedup_cli.inputs.locations import Source
from dedup_cli.inputs.parquet_inputs import row_group_sizes
from dedup_cli.options.input_options import InputOptions

TASK_BYTES = 64 << 20
"""Input bytes a task aims at: a few seconds of filtering, so a lost worker costs little."""
STOP_SECONDS = 300
"""How long a failed run waits for its tasks still running (each about :data:`TASK_BYTES` of work) to end."""

Progress = Callable[[int], None]


def cut(source: Source, signed: bool, piece_bytes: int) -> list[Piece] | None:
    """The pieces of an input larger than ``piece_bytes`` that can be cut (uncompressed line files by byte ranges,
    Parquet files by row groups), first lines not yet counted; None for an input filtered whole."""
    if not signed or source.compression is not None or source.size <= piece_bytes:
        return None
    if source.format in LINE_FORMATS:
        ranges = line_ranges(source.path, source.size, piece_bytes)
        return [Piece(source, number, start, stop) for number, (start, stop) in enumerate(ranges)] \
            if len(ranges) > 1 else None
    if source.format == "parquet":
        sizes = row_group_sizes(source)
        runs = row_group_runs(source, sizes, piece_bytes) if sizes else []
        return [Piece(run, number) for number, run in enumerate(runs)] if len(runs) > 1 else None
    return None


def _numbered(client: Client, pieces: list[Piece]) -> list[Piece]:
    """Line pieces with the number of their first line: the line ends before each, counted on the workers."""
    if not pieces or pieces[0].source.format == "parquet":
        return pieces
    counts = client.gather(client.map(count_lines, [piece.source.path for piece in pieces[:-1]],
                                      [piece.start for piece in pieces[:-1]],
                                      [piece.stop for piece in pieces[:-1]], pure=False))
    firsts = np.r_[0, np.cumsum(np.asarray(counts, np.int64))] + 1
    return [Piece(piece.source, piece.number, piece.start, piece.stop, int(first))
            for piece, first in zip(pieces, firsts.tolist(), strict=True)]


def _part_name(target: str, piece: Piece) -> str:
    folder, name = os.path.split(target)
    suffix = "arrow" if piece.source.format == "parquet" else "part"
    return os.path.join(folder, f".{name}.{piece.number:06d}.{suffix}")


def _check_scratch(root: str) -> None:
    """A task writes only into a scratch directory that is still there (its run may have stopped), and that this
    worker sees."""
    if not os.path.isdir(root):
        raise OutputError(errno.ENOENT, "not found by a Dask worker; write the output on a filesystem the workers "
                          "share", root)


def whole_task(sources: list[Source], signed: list[bool], targets: list[str], root: str, decisions: Decisions,
               options: InputOptions, annotate: bool) -> list[SourceOutcome]:
    """Filter whole inputs into their places under the scratch directory ``root`` (runs on a worker)."""
    _check_scratch(root)
    return [filter_source(source, decisions, options, target, annotate, known)
            for source, known, target in zip(sources, signed, targets, strict=True)]


def piece_task(piece: Piece, decisions: Decisions, options: InputOptions, annotate: bool, part: str | None,
               root: str | None, repeated: frozenset[str] = frozenset()
               ) -> tuple[SourceOutcome, list[int], bytes | None, set[str]]:
    """Filter one piece into the file ``part`` (under the scratch directory ``root``), or into bytes returned to the
    driver when ``part`` is None (runs on a worker); also returns the ids the piece read first (named ids only).
    ``repeated``: ids of earlier pieces that this one repeats, skipped as the local engine skips them."""
    seen = set(repeated)
    if part is None:
        buffer = io.BytesIO()
        outcome, numbers = filter_piece(piece, decisions, options, annotate, buffer, seen)
        return outcome, numbers, buffer.getvalue(), seen - repeated
    assert root is not None
    _check_scratch(root)
    with output_file(part) as out:
        outcome, numbers = filter_piece(piece, decisions, options, annotate, out, seen)
    return outcome, numbers, None, seen - repeated


def repeats_of_earlier_pieces(first_ids: list[set[str]]) -> list[frozenset[str]]:
    """For each piece of one input (in order), the ids it read first that an earlier piece read too: what the piece
    must skip to write what filtering the input whole writes (a repeated id is written once, its first time)."""
    earlier: set[str] = set()
    repeats = []
    for ids in first_ids:
        repeats.append(frozenset(ids & earlier))
        earlier |= ids
    return repeats


def join_task(source: Source, parts: list[str], numbers: list[list[int]], target: str, root: str,
              options: InputOptions, annotate: bool) -> None:
    """Join the pieces of one input written under ``root`` into its output ``target``, then delete them (runs on a
    worker)."""
    _check_scratch(root)
    handles = [open(part, "rb") for part in parts]  # noqa: SIM115 - closed below
    try:
        with output_file(target) as out:
            if source.format == "parquet":
                join_parquet(source, options, annotate, zip(handles, numbers, strict=True), out)
            else:
                join_lines(handles, out)
    finally:
        for handle in handles:
            handle.close()
    for part in parts:
        unlink_quietly(part)


def _tasks(sources: Sequence[Source], task_bytes: int) -> list[list[int]]:
    """Runs of consecutive inputs (their indices) of about ``task_bytes`` together."""
    runs: list[list[int]] = []
    size = 0
    for index, source in enumerate(sources):
        if runs and size + source.size <= task_bytes:
            runs[-1].append(index)
            size += source.size
        else:
            runs.append([index])
            size = source.size
    return runs


UNFINISHED_STATES = frozenset({"waiting", "ready", "constrained", "executing", "long-running", "cancelled",
                               "resumed"})
"""A worker's task states that may still run the task: queued, running, or cancelled while running (a cancelled
task runs to its end: "cancelled" and "resumed" are states of a task still executing)."""


def _unfinished(dask_worker: Any) -> list[str]:
    """The tasks a worker holds that may still run, or are running (run on each worker by :func:`stop`)."""
    return [str(key) for key, task in dask_worker.state.tasks.items() if task.state in UNFINISHED_STATES]


def stop(client: Client, futures: Sequence[Future]) -> None:
    """Cancel ``futures`` and wait until none of them may still run on a worker: cancelling does not interrupt a
    running task, and one still writing would put files back into a scratch directory being removed.

    A task is waited for while its worker holds it queued or running. The worker must be asked twice, a moment
    apart, before the answer counts: the question travels on another connection than the scheduler's orders, so
    a task sent to a worker just before the cancel can reach it after the first answer, and then start."""
    keys = {str(future.key) for future in futures}
    deadline = time.monotonic() + STOP_SECONDS
    quiet = 0
    try:
        client.cancel(list(futures))
        while time.monotonic() < deadline and quiet < 2:
            held = client.run(_unfinished, on_error="ignore")
            found = keys.intersection(key for tasks in held.values() if isinstance(tasks, list) for key in tasks)
            quiet = 0 if found else quiet + 1
            time.sleep(0.05)
    except Exception:  # noqa: BLE001 - the cluster is gone: nothing of it runs any more; the first error is raised
        return


def _settle(client: Client, futures: list[Future], sizes: dict[Future, int], progress: Progress | None) -> None:
    """Wait for every future, telling ``progress`` each one's input bytes; at the first failure the others are
    stopped and the failure raised."""
    try:
        for future in as_completed(futures):
            future.result()  # raises the task's error
            if progress is not None:
                progress(sizes.get(future, 0))
    except BaseException:
        stop(client, futures)
        raise


def filter_into_directory(client: Client, sources: Sequence[Source], signed: Sequence[bool], targets: Sequence[str],
                          root: str, decisions: Decisions, options: InputOptions, annotate: bool,
                          progress: Progress | None = None, task_bytes: int | None = None) -> SourceOutcome:
    """Filter every input into its ``target`` under the scratch directory ``root`` on the workers (see the module
    docstring); returns what they did, added up in the inputs' order."""
    task_bytes = TASK_BYTES if task_bytes is None else task_bytes
    cuts = {index: pieces for index, source in enumerate(sources)
            if (pieces := cut(source, signed[index], task_bytes)) is not None}
    whole = [index for index in range(len(sources)) if index not in cuts]
    shared = client.scatter(decisions, broadcast=True, hash=False)
    futures: list[Future] = []
    sizes: dict[Future, int] = {}
    try:
        cuts = {index: _numbered(client, pieces) for index, pieces in cuts.items()}
        runs = [[whole[i] for i in run] for run in _tasks([sources[index] for index in whole], task_bytes)]
        run_futures: list[Future] = []
        for run in runs:
            future: Future = client.submit(whole_task, [sources[i] for i in run], [signed[i] for i in run],
                                   [targets[i] for i in run], root, shared, options, annotate, pure=False)
            run_futures.append(future)
            sizes[future] = sum(sources[i].size for i in run)
        piece_futures: dict[int, list[Future]] = {}
        for index, pieces in cuts.items():
            piece_futures[index] = []
            for piece in pieces:
                future = client.submit(piece_task, piece, shared, options, annotate,
                                       _part_name(targets[index], piece), root, pure=False)
                piece_futures[index].append(future)
                sizes[future] = piece.size
        futures = run_futures + [future for found in piece_futures.values() for future in found]
        _settle(client, futures, sizes, progress)
        # A piece that repeats ids of earlier pieces is filtered again, skipping them (seldom: repeats are rare).
        again: list[Future] = []
        for index, pieces in cuts.items():
            repeats = repeats_of_earlier_pieces([future.result()[3] for future in piece_futures[index]])
            for place, (piece, repeated) in enumerate(zip(pieces, repeats, strict=True)):
                if repeated:
                    future = client.submit(piece_task, piece, shared, options, annotate,
                                           _part_name(targets[index], piece), root, repeated, pure=False)
                    piece_futures[index][place] = future
                    again.append(future)
        futures += again
        _settle(client, again, {}, None)
        joins = [client.submit(join_task, sources[index], [_part_name(targets[index], piece) for piece in pieces],
                               [future.result()[1] for future in piece_futures[index]], targets[index], root, options,
                               annotate, pure=False) for index, pieces in cuts.items()]
        futures += joins
        _settle(client, joins, {}, None)
        outcomes: dict[int, list[SourceOutcome]] = {}
        for run, future in zip(runs, run_futures, strict=True):
            for index, outcome in zip(run, future.result(), strict=True):
                outcomes[index] = [outcome]
        for index, found in piece_futures.items():
            outcomes[index] = [future.result()[0] for future in found]
    finally:
        client.cancel([shared, *futures])
    total = SourceOutcome()
    for index in range(len(sources)):
        for outcome in outcomes[index]:
            total.add(outcome)
    return total


def filter_into_stream(client: Client, source: Source, signed: bool, out: BinaryIO, decisions: Decisions,
                       options: InputOptions, annotate: bool, progress: Progress | None = None,
                       task_bytes: int | None = None) -> SourceOutcome:
    """Filter one input into the stream ``out``: in pieces on the workers, written here in order, when it can be
    cut; else here, as the local engine does."""
    pieces = cut(source, signed, TASK_BYTES if task_bytes is None else task_bytes)
    if pieces is None:
        return filter_source(source, decisions, options, out, annotate, signed, None, progress)
    shared = client.scatter(decisions, broadcast=True, hash=False)
    futures: list[Future] = []
    total = SourceOutcome()
    try:
        pieces = _numbered(client, pieces)
        futures = [client.submit(piece_task, piece, shared, options, annotate, None, None, pure=False)
                   for piece in pieces]

        def parts() -> Iterator[tuple[Any, list[int]]]:
            earlier: set[str] = set()
            for piece, future in zip(pieces, futures, strict=True):
                outcome, numbers, data, first_ids = future.result()
                future.release()  # the next parts are being filtered meanwhile; this one is done with
                if repeated := frozenset(first_ids & earlier):  # filtered again, skipping ids of earlier pieces
                    outcome, numbers, data, _ = client.submit(piece_task, piece, shared, options, annotate, None,
                                                              None, repeated, pure=False).result()
                earlier |= first_ids
                total.add(outcome)
                if progress is not None:
                    progress(piece.size)
                yield data, numbers

        if source.format == "parquet":
            join_parquet(source, options, annotate, parts(), out)
        else:
            join_lines((data for data, _ in parts()), out)
    except BaseException:
        stop(client, futures)
        raise
    finally:
        client.cancel([shared])
    return total
