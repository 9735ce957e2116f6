"""``eval``: how accurate a ``find`` on this store is, measured on a stratified sample of its pairs.

Pairs are drawn across the estimated resemblance (candidates of every R̂ bin, and non-candidates for the low
end), their documents re-read and their exact resemblance computed; design-weighted estimators then give the bias,
RMSE, variance (against Li & König 2010, eq. 11) and interval coverage of R̂_b for b = 1, 2, 4 and the stored bits,
the banding's measured S-curve, and precision and recall of ``find`` with and without exact checks, each with a
confidence interval (docs/evaluation.md). With a truth file, precision and recall are counted against it instead.
Options are checked against the store's manifest before the store is read; the stages run in the engine
``options.find.engine`` names (:meth:`dedup_cli.engine.engines.Engine.evaluate`: both measure in this process,
with the local engine's stages).
"""

from __future__ import annotations

import os
import time

from dedup_cli.atomic_files import path_kind
from dedup_cli.engine.engines import engine_for
from dedup_cli.engine.progress import Progress, silent
from dedup_cli.engine.stages.results import EvalResult
from dedup_cli.inputs.truth import read_truth
from dedup_cli.options.evaluating import EvalOptions
from dedup_cli.options.vocabulary import default_store
from dedup_cli.store.store import open_store


def evaluate(store: str | os.PathLike[str] | None = None, options: EvalOptions | None = None,
             progress: Progress = silent) -> EvalResult:
    """Measure the accuracy of ``find`` with ``options`` on the store (``dedup eval``).

    Args:
        store: a store written by ``sign`` (default: ``$DEDUP_STORE``, else ``./dedup.parquet``).
        options: the find to judge, the sample and its seed, and an optional truth file (default: ``EvalOptions()``).
        progress: told each stage as it begins.

    Raises:
        dedup_cli.errors.OptionError: ``bits`` above the stored bits, or a banding that does not fit in k.
        dedup_cli.errors.InputError: a truth file that is missing or malformed.
        dedup_cli.errors.DedupError: a store with fewer than two documents that have shingles.
    """
    started = time.perf_counter()
    options = EvalOptions() if options is None else options
    path = default_store(store)
    opened = open_store(path)  # the manifest only: options are checked before the store is read
    options.check_store(opened.params.stored_bits, opened.params.num_perm, path)
    if options.truth is not None and path_kind(options.truth) in (None, "directory"):
        read_truth(options.truth, [])  # the missing file's error, before the store is read (a pipe is read once)
    with engine_for(options.find.engine) as engine:
        result = engine.evaluate(opened, options, path, progress)
    result.seconds = time.perf_counter() - started
    return result
