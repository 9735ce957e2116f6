"""Reading inputs: every format, document by document, with duplicate ids and change detection.

Formats (:data:`dedup_cli.options.INPUT_FORMATS`): ``text`` (a file is one document), ``lines`` (each
non-blank line is one document), ``jsonl`` (each line is a JSON object whose ``text_field`` holds the text),
``parquet`` (each row; its ``text_column`` holds the text), ``sets`` (integer sets, one a line). How inputs
are found and named is :mod:`dedup_cli.inputs.discovery`; where each document came from is recorded as a
location (:mod:`dedup_cli.inputs.locations`) so that it can be re-read.

Reading is planned as tasks (:mod:`dedup_cli.inputs.task_planning`) that can be read anywhere
(:mod:`dedup_cli.inputs.tasks`); :func:`read_inputs` reads them here, one after the other, and ``sign`` hands
them to its workers. Either way the run's report takes each task's findings in input order, and
:func:`accept_documents` keeps the first document of each id.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from typing import BinaryIO

import numpy as np

from dedup_cli.inputs.columns import Wheres
from dedup_cli.inputs.discovery import plan_sources, walk_runs
from dedup_cli.inputs.locations import FileRun, Source, where_read
from dedup_cli.inputs.records import Document, IntegerSet
from dedup_cli.inputs.report import ReadReport
from dedup_cli.inputs.task_planning import Unchanged, plan_tasks
from dedup_cli.inputs.tasks import read_task
from dedup_cli.options.input_options import InputOptions


def plan_inputs(inputs: Sequence[str], options: InputOptions, report: ReadReport,
                stdin: BinaryIO | None = None) -> tuple[list[Source], BinaryIO]:
    """Check and list the inputs (see :func:`read_inputs`); returns the sources and the stream read as stdin."""
    stream = stdin if stdin is not None else sys.stdin.buffer
    report.max_document_bytes = options.max_document_bytes
    return plan_sources(inputs, options, report, stream), stream


def walk_inputs(inputs: Sequence[str], options: InputOptions, report: ReadReport,
                stdin: BinaryIO | None = None) -> tuple[Iterator[Source | FileRun], BinaryIO]:
    """Check the inputs now and walk them as the iterator is consumed (:func:`plan_inputs`, lazily, the whole
    text files found one after another as :class:`FileRun` s); returns them and the stream read as stdin."""
    stream = stdin if stdin is not None else sys.stdin.buffer
    report.max_document_bytes = options.max_document_bytes
    return walk_runs(inputs, options, report, stream), stream


def accept_documents(report: ReadReport, seen: set[str], ids: Sequence[str], wheres: Wheres,
                     empty: Sequence[bool] | np.ndarray) -> list[int]:
    """The positions of the documents of one task to keep: all but those whose id was already read (noted as
    duplicates in ``report``). Counts the kept ones (and the empty ones among them) and adds their ids to ``seen``."""
    new = set(ids)
    if len(new) == len(ids) and seen.isdisjoint(new):  # the usual task: no id read before, set operations only
        seen |= new
        report.documents += len(ids)
        report.empty_documents += int(np.count_nonzero(empty))
        return list(range(len(ids)))
    kept = []
    for position, identifier in enumerate(ids):
        if identifier in seen:
            report.note("duplicate_ids", (wheres[position], identifier))
            continue
        seen.add(identifier)
        kept.append(position)
        report.empty_documents += bool(empty[position])
    report.documents += len(kept)
    return kept


def read_inputs(inputs: Sequence[str], options: InputOptions, report: ReadReport, stdin: BinaryIO | None = None,
                unchanged: Unchanged | None = None) -> Iterator[Document | IntegerSet]:
    """Stream the documents of ``inputs`` (paths, directories and ``-``) read as ``options`` say.

    Inputs are checked and listed now (raising :class:`InputError` for a named input that does not exist or
    a Parquet file without a named column, :class:`UsageError` for contradictory options) and
    ``report.files_found`` is set; documents are then read as the iterator is consumed. Skipped inputs and
    records, repaired text and the byte count go to ``report``; a document whose id was already read is
    skipped (the ids read so far are kept in a set for this). ``stdin`` defaults to ``sys.stdin.buffer``.

    Order: stdin first, then files by id, records in file order (so record ids are not sorted). With
    ``unchanged``, a whole text file it accepts is skipped unread and counted in ``report.unchanged``.
    """
    sources, stream = plan_inputs(inputs, options, report, stdin)
    return read_sources(sources, options, report, stream, unchanged)


def read_sources(sources: Sequence[Source], options: InputOptions, report: ReadReport,
                 stdin: BinaryIO | None = None, unchanged: Unchanged | None = None,
                 held_elsewhere: Callable[[Document | IntegerSet], str | None] | None = None
                 ) -> Iterator[Document | IntegerSet]:
    """Stream the documents of planned ``sources`` (:func:`dedup_cli.inputs.discovery.plan_sources`), in order;
    a distributed engine reads its share of them with this, as :func:`read_inputs` reads them all.

    ``held_elsewhere`` tells, before the first document of each id is kept, the location of the stored copy of a
    document whose id another source keeps (None: none does): such a document is skipped and reported, and does
    not count as the first of its id."""
    stdin = stdin if stdin is not None else sys.stdin.buffer
    report.max_document_bytes = options.max_document_bytes
    seen: set[str] = set()
    for task in plan_tasks(sources, options, report, stdin, unchanged):
        read = read_task(task, options)
        report.merge(read.report)
        documents = read.documents
        if held_elsewhere is not None:
            documents, read.wheres = _not_held_elsewhere(documents, read.wheres, held_elsewhere, report)
        for position in accept_documents(report, seen, [d.id for d in documents], read.wheres,
                                         [d.is_empty for d in documents]):
            yield documents[position]
        report.input_done += task.input_bytes


def _not_held_elsewhere(documents: list[Document | IntegerSet], wheres: Wheres,
                        held_elsewhere: Callable[[Document | IntegerSet], str | None], report: ReadReport
                        ) -> tuple[list[Document | IntegerSet], list[str]]:
    """The documents whose id no other source keeps, and where they were read; the others reported."""
    kept, kept_wheres = [], []
    for position, document in enumerate(documents):
        stored = held_elsewhere(document)
        if stored is None:
            kept.append(document)
            kept_wheres.append(wheres[position])
        else:
            report.note("held_elsewhere", (wheres[position], document.id, where_read(stored)))
    return kept, kept_wheres
