"""``review``: look before you delete. One HTML page of what ``find`` grouped: which texts, how alike, what differs,
which one is kept and why.

The page is written from one ``find`` (on either engine, with every option of ``find``), its largest groups and a
seeded sample of the others (:mod:`dedup_cli.groups.selection`), their members as far as ``find`` knows them
(:mod:`dedup_cli.api.review_groups`), their texts read again and compared word by word
(:mod:`dedup_cli.api.review_texts`), the banding's S-curve and the reported estimates
(:mod:`dedup_cli.api.review_charts`), all in one self-contained file (:mod:`dedup_cli.api.review_page`) replaced
atomically. After ``find``, the work is proportional to what the page shows, never to the store (the bytes to drop
aside: one read of the store's ``size`` column).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass

from dedup_cli.api.find import find
from dedup_cli.api.review_charts import estimate_histogram, histogram_svg, s_curve_svg
from dedup_cli.api.review_groups import review_groups
from dedup_cli.api.review_page import PageParts, review_page
from dedup_cli.api.review_texts import review_texts
from dedup_cli.atomic_files import open_output, path_kind
from dedup_cli.engine.progress import Progress, silent
from dedup_cli.engine.stages.results import FindResult
from dedup_cli.errors import OptionError
from dedup_cli.options.checks import literal
from dedup_cli.options.reviewing import ReviewOptions
from dedup_cli.options.vocabulary import default_store
from dedup_cli.store.store import open_store


@dataclass
class ReviewReport:
    """What a review wrote."""

    store: str
    out: str
    result: FindResult  # the find reviewed
    groups: int  # groups found
    shown: int  # groups on the page
    largest: int  # of them, those shown for their size (the others are the sample)
    members: int  # members shown with their text
    unread: int  # of them, those whose text could not be read (each says why on the page)
    dropped: int  # documents the groups drop
    dropped_bytes: int
    page_bytes: int
    seconds: float  # the whole review, find included


def review(store: str | os.PathLike[str] | None, out: str | os.PathLike[str],
           options: ReviewOptions | None = None, progress: Progress = silent) -> ReviewReport:
    """Write the review page of ``find``'s groups to ``out`` (replaced atomically; a device or FIFO is written in
    place).

    Args:
        store: a store written by ``sign`` (default: ``$DEDUP_STORE``, else ``./dedup.parquet``).
        out: the HTML file to write (``-``: stdout).
        options: the ``find`` reviewed and what the page shows of it (default: ``ReviewOptions()``, the command
            line's defaults).
        progress: told each stage as it begins (find's, then reading the texts and writing the page).

    Raises:
        dedup_cli.errors.OptionError: ``out`` is a directory, or an option of ``find`` does not fit the store.
        dedup_cli.errors.InputError, dedup_cli.errors.StoreError: as ``find`` raises them. A member whose text
            cannot be read is no error: the page says why in its place.
    """
    started = time.perf_counter()
    options = ReviewOptions() if options is None else options
    path = default_store(store)
    target = os.fspath(out)
    if path_kind(target) == "directory":
        raise OptionError("out", target, f"{{out}} {literal(target)} is a directory; name the page's file, e.g. "
                          f"{literal(os.path.join(target, 'review.html'))}")
    open_store(path)  # a missing or foreign store is said before anything else
    result = find(path, options.find, progress)
    progress.stage("choosing the groups to show", None)
    reviewed = review_groups(result, open_store(path), options)
    progress.stage("reading the shown texts", reviewed.members_shown, "texts")
    texts = review_texts(reviewed.groups, options.text_limit, jobs=options.find.jobs or os.cpu_count() or 1)
    progress.stage("writing the page", None)
    page = review_page(PageParts(path, result, options, reviewed, texts, s_curve_svg(result.banding, result.threshold),
                                 histogram_svg(estimate_histogram(result), result.threshold)))
    encoded = page.encode("utf-8")
    if target == "-":
        sys.stdout.buffer.write(encoded)
        sys.stdout.buffer.flush()
    else:
        with open_output(target) as stream:
            stream.write(encoded)
    unread = sum(view.kind in ("unread", "left-out") for views in texts for view in views)
    return ReviewReport(path, target, result, reviewed.group_count, len(reviewed.groups), reviewed.largest,
                        reviewed.members_shown, unread, reviewed.dropped, reviewed.dropped_bytes, len(encoded),
                        time.perf_counter() - started)
