"""``find``: signatures → candidate pairs (and triples) → estimates → exact checks → groups.

Candidates come from LSH banding on all stored bits (or from comparing every pair); every candidate is
scored with the b-bit estimator (Li & König 2010, eq. 9), pairs whose interval straddles R0 may be checked
exactly, and accepted pairs (and with ``ways=3`` triples, Li, König & Gui 2010, eq. 8) become groups. The
options are checked against the store's parameters, read from its manifest alone, before the store is read;
the stages run in the engine the options name (:mod:`dedup_cli.engine.engines`: the local engine, or a Dask
cluster), with the same answers.
"""

from __future__ import annotations

import os
import time
import warnings
from pathlib import Path

from dedup_cli.engine.engines import engine_for
from dedup_cli.engine.progress import Progress, silent
from dedup_cli.engine.stages.results import FindResult
from dedup_cli.errors import DedupWarning, OptionError, UsageError
from dedup_cli.options.checks import counted, literal
from dedup_cli.options.finding import FindOptions
from dedup_cli.options.vocabulary import LEGACY_SHORT_DOCUMENTS, default_store
from dedup_cli.store.store import Store, open_store


def find(store: str | os.PathLike[str] | None = None, options: FindOptions | None = None,
         progress: Progress = silent) -> FindResult:
    """Find near-duplicate pairs (and triples) with R̂ ≥ ``options.threshold`` in a store and group them.

    Args:
        store: a store written by ``sign`` (default: ``$DEDUP_STORE``, else ``./dedup.parquet``).
        options: what to find and report (default: ``FindOptions()``, the command line's defaults).
        progress: told each stage as it begins, and its steps where they can be counted.

    Raises:
        dedup_cli.errors.OptionError: ``bits`` above the stored bits, ``ways=3`` with 1-bit values, or a
            banding that does not fit in the signatures; a ``new_since`` run the store never had, or an
            ``against`` store signed with other parameters, is a :class:`dedup_cli.errors.UsageError`.
    """
    started = time.perf_counter()
    options = FindOptions() if options is None else options
    path = default_store(store)
    opened = open_store(path)  # the manifest only: options are checked before the store is read
    params = opened.params
    options.check_store(params.stored_bits, params.num_perm, path, params.input_kind)
    if options.new_since is not None:
        opened.check_run(options.new_since)
    reference = None if options.against is None else open_reference(opened, options.against)
    with engine_for(options.engine) as engine:
        result = engine.find(opened, options, progress, reference)
    if options.verify != "none":
        _set_stdin_documents(result, opened)
    result.seconds = time.perf_counter() - started
    _warn_of_short_documents(opened, result)
    return result


def _warn_of_short_documents(store: Store, result: FindResult) -> None:
    """A store signed before short documents had a shingle (its rule ``none``) cannot compare them: say how many
    documents went uncompared and how to compare them (a new store records the rule ``whole``)."""
    params = store.params
    uncompared = result.document_count - result.eligible
    if params.short_documents != LEGACY_SHORT_DOCUMENTS or params.input_kind != "text" or uncompared == 0:
        return
    unit = "words" if params.shingle_unit == "word" else "characters"
    warnings.warn(f"{counted(uncompared, 'document')} {'has' if uncompared == 1 else 'have'} no shingle and "
                  f"were not compared: {store.path} was signed before "
                  f"documents of fewer than {params.shingle_size} {unit} had one, so identical short documents "
                  "are not found; to compare them, sign the corpus into a new store (dedup sign INPUT -o NEW)",
                  DedupWarning, stacklevel=3)


def open_reference(store: Store, against: str) -> Store:
    """The reference store ``against`` (its manifest), checked against ``store``: another store, same parameters."""
    reference = open_store(against)
    here, there = store.path, reference.path
    local = isinstance(here, Path) and isinstance(there, Path)
    if here == there or (local and os.path.exists(str(here)) and os.path.samefile(str(here), str(there))):
        raise OptionError("against", against, f"{{against}} {literal(against)} is the store itself; name another "
                          "store to compare with")
    differences = store.params.differences(reference.params)
    if differences:
        raise UsageError(f"{against} was signed with other parameters than {store.path} ({'; '.join(differences)}, "
                         f"new vs reference); sign both with the same parameters")
    return reference


def _set_stdin_documents(result: FindResult, store: Store) -> None:
    """Count the documents read from stdin, which cannot be re-read (their pairs near the threshold keep the
    estimate), and leave them out of the documents found gone or changed since signing, which they are not."""
    verification = result.verification
    unverifiable = [] if verification is None else verification.unverifiable_documents
    result.stdin_documents, from_stdin = store.stdin_documents(unverifiable)
    if verification is not None and from_stdin:
        left_out = set(from_stdin)
        verification.unverifiable_documents = [name for name in unverifiable if name not in left_out]
