"""The lines the commands print on stderr (sign's and find's summaries, warnings) and estimate's text view.

Options are named as the command line spells them, through ``flag`` (e.g. ``--max-document-bytes``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dedup_cli.options.checks import counted
from dedup_cli.options.vocabulary import band_bits_label, bits_label

if TYPE_CHECKING:  # only named in annotations: sign's summary must not import find and filter
    from dedup_cli.api.filter import FilterReport
    from dedup_cli.api.review import ReviewReport
    from dedup_cli.api.sign import SignReport
    from dedup_cli.engine.stages.results import FindResult
    from dedup_cli.inputs.report import ReadReport

Flag = Callable[[str], str]
"""Spells an option's name as the command line does: ``max_document_bytes`` → ``--max-document-bytes``."""


def read_warnings(report: ReadReport, flag: Flag) -> list[str]:
    """One line per listed skipped or repaired input; then how many more of each kind were not listed."""
    limit = report.max_document_bytes
    lines = [f"skipped binary file {path}" for path in report.binary]
    lines += [f"cannot read {path}: {reason}" for path, reason in report.unreadable]
    lines += [f"skipped {where}: {reason}" for where, reason in report.malformed]
    lines += [f"skipped {where}: id {identifier!r} was already read" for where, identifier in report.duplicate_ids]
    lines += [f"skipped {where}: id {identifier!r} is stored from another source, {stored}, which keeps it"
              for where, identifier, stored in report.held_elsewhere]
    lines += [f"skipped {where}: {size} bytes or more exceed {flag('max_document_bytes')} {limit}; raise the "
              "limit to read it" for where, size in report.oversized]
    lines += [f"read {where} with U+FFFD in place of invalid UTF-8" for where in report.invalid_utf8]
    names = {"binary": ("binary file", None), "unreadable": ("unreadable file", None),
             "malformed": ("malformed record", None), "duplicate_ids": ("duplicate id", None),
             "held_elsewhere": ("id stored from another source", "ids stored from another source"),
             "oversized": ("document too large", "documents too large"),
             "invalid_utf8": ("document with invalid UTF-8", "documents with invalid UTF-8")}
    lines += [f"... and {count} more {counted(count, *names[kind]).split(' ', 1)[1]}"
              for kind, count in sorted(report.unlisted.items()) if kind in names]  # empty files are no warning
    return lines


def stores_note(*reports: ReadReport) -> str | None:
    """``note: left out the dedup store S found among the inputs …``: the stores the walks of ``reports`` left out
    (each named once, the first five), or None when there were none."""
    stores = list(dict.fromkeys(store for report in reports for store in report.stores_left_out))
    if not stores:
        return None
    named = ", ".join(stores[:5]) + (f" and {len(stores) - 5} more" if len(stores) > 5 else "")
    what = "the dedup store" if len(stores) == 1 else f"{len(stores)} dedup stores"
    return f"note: left out {what} found among the inputs ({named}): a store's files are never documents"


def sign_summary(report: SignReport) -> str:
    """``signed N documents (…) from X MB in T s (R MB/s) into STORE, run K, M documents stored``."""
    read, run = report.read, report.run
    megabytes = read.bytes_read / 1e6
    rate = megabytes / report.seconds if report.seconds > 0 else 0.0
    # A moved document's row is written again (the run counts it changed): said apart, as it was not signed.
    changes = (f"{run.added} new, {run.changed - report.moved} changed, {report.unchanged} unchanged, "
               f"{report.moved} moved, {run.removed} removed" if run is not None else "")
    return (
        f"signed {counted(report.documents, 'document')} ({changes}; {report.empty} with no shingle; "
        f"{counted(read.skipped, 'input')} skipped) from {megabytes:.1f} MB in {report.seconds:.2f} s "
        f"({rate:.1f} MB/s) into {report.store}"
        + (f", run {run.run}, {counted(run.documents, 'document')} stored" if run is not None else "")
    )


def kernel_line(report: SignReport, flag: Flag) -> str:
    """``sign -v``: which signing kernel ran, and why."""
    # here: find and estimate print summaries too, and need neither the kernel choice nor its cache (hashlib)
    from dedup_cli.kernel.choice import (
        COMPILE_FAILED,
        INTEGER_SETS,
        LOAD_SECONDS,
        NOT_COMPILED,
        NOT_INSTALLED,
        REQUESTED,
        SMALL_RUN,
    )

    numba = f"numba {report.numba_version} (compiled)"
    if not report.kernels:
        return "kernel: none ran (nothing to sign)"
    if report.kernels == ["numba"]:
        return f"kernel: {numba}"
    if report.kernels == ["numpy", "numba"]:
        return (f"kernel: numpy, then {numba} once the tasks planned showed the run would repay loading it (the "
                "workers start before the run's size is known)")
    run_bytes = report.read.input_bytes if report.read.input_bytes is not None else report.read.bytes_read
    why = {
        REQUESTED: f"{flag('kernel')} numpy",
        NOT_INSTALLED: "numba is not installed; pip install 'dedup-cli[fast]' adds the compiled kernel",
        NOT_COMPILED: "the compiled kernel is not in numba's cache yet; it is being compiled in the background, once, "
                      "for later runs",
        COMPILE_FAILED: f"compiling the compiled kernel in the background failed: {report.compile_failure}; "
                        f"{flag('kernel')} numba compiles it in the foreground",
        SMALL_RUN: f"{run_bytes / 1e6:.1f} MB in {report.read.documents:,} documents would not repay the "
                   f"{LOAD_SECONDS:g} s of loading the compiled kernel; {flag('kernel')} numba takes it anyway",
        INTEGER_SETS: "integer sets are signed with numpy",
    }
    return f"kernel: numpy ({why.get(report.kernel_reason, report.kernel_reason)})"


def written(files: list[tuple[str, str | None]]) -> str:
    """What a summary line ends with when the run wrote files: ``; wrote groups to out.jsonl``, for each (what,
    path) whose path is a file (None or ``-``, stdout, is not one); empty when there is none."""
    named = [f"{what} to {path}" for what, path in files if path is not None and path != "-"]
    return f"; wrote {' and '.join(named)}" if named else ""


def find_summary(store: str, result: FindResult, out: tuple[str, str | None] = ("", None)) -> str:
    """One line: documents, banding, candidates, pairs, triples, groups, checks, time and estimator, and the file
    written (``out``: what, and where)."""
    threshold = result.threshold
    documents = result.document_count
    if result.banding is None:
        how = "all pairs compared"
    else:
        banding, choice = result.banding, result.banding_choice
        recall, shortest = banding.recall_at(threshold), ""
        if choice is not None and choice.sizes is not None and round(choice.recall, 3) < round(recall, 3):
            # one permutation hashing: the pairs of the shortest documents are the ones the recall is chosen for,
            # named where their recall differs in what the summary shows (documents longer than k differ by less)
            recall, shortest = choice.recall, f" for its shortest documents, of {choice.shingles} shingles"
        how = (f"{banding.bands}×{banding.rows} bands on {band_bits_label(banding.band_bits)} "
               f"(recall {recall:.3f} at R={threshold:g}{shortest})")
    stores = f"{store}: {counted(documents, 'document')}"
    if result.reference is not None:
        against = (int(result.reference.sum()) if result.reference_documents is None
                   else result.reference_documents)
        stores = f"{store}: {counted(documents - against, 'document')} against {against} in {result.against}"
    parts = [
        f"{stores} ({documents - result.eligible} with no shingle)",
        how,
        counted(result.candidates, "candidate"),
        f"{counted(result.pair_count, 'pair')} with {bits_label(result.bits)}-bit R̂ ≥ {threshold:g}",
    ]
    if result.triple_count is not None:
        parts.append(counted(result.triple_count, "triple"))
    parts.append(f"{counted(result.group_count, 'group')} ({result.drop_count} to drop)")
    if result.verification is not None:
        parts.append(f"{counted(result.verification.checked, 'pair')} verified exactly")
    parts.append(f"{result.seconds:.2f} s; estimator: {result.estimator}")
    return ", ".join(parts) + written([out])


def stdin_warning(result: FindResult) -> str | None:
    """The line that says a store's documents read from stdin were not verified exactly (printed even with
    ``--quiet``: it changes what the pairs near the threshold mean)."""
    if not result.stdin_documents:
        return None
    count = result.stdin_documents
    return (f"{counted(count, 'document')} {'was' if count == 1 else 'were'} signed from stdin and cannot be "
            "re-read: their pairs near the threshold are decided from the estimate alone; sign from files to verify "
            "them (docs/inputs.md)")


def find_warnings(result: FindResult, flag: Flag) -> list[str]:
    """Documents that could not be re-read, documents gone and same-file aliases left out, LSH buckets cut."""
    lines = _gone_lines(result.gone)
    if result.verification is not None and result.verification.unverifiable_documents:
        missing = result.verification.unverifiable_documents
        lines.append(f"{_are(len(missing), 'document')} gone or changed since signing "
                     f"(e.g. {missing[0]}); their pairs keep the estimate")
    if result.aliases:
        lines.append(f"{_are(result.aliases, 'document')} the same file on disk as another document (a link); "
                     "only the first id of each file is reported")
    if result.oversized_buckets:
        lines.append(f"{counted(result.oversized_buckets, 'LSH bucket')} held more than 1000 documents and "
                     f"{'was' if result.oversized_buckets == 1 else 'were'} cut")
    if result.banding_choice is not None:
        from dedup_cli.api.plan import banding_warnings  # here: sign's summary must not import plan

        params = result.store.params
        lines += banding_warnings(result.banding_choice, result.threshold, params.permutations, flag,
                                  params.stored_bits, result.bits)
    return lines + _keep_field_lines(result.keep_field_problems)


def _gone_lines(gone: list[str]) -> list[str]:
    if not gone:
        return []
    verb = "is gone or changed since it was" if len(gone) == 1 else "are gone or changed since they were"
    return [f"{counted(len(gone), 'grouped document')} {verb} signed (their file or "
            f"line is missing or holds other text, e.g. {gone[0]}): never kept in place of a live copy, never dropped "
            "(members say gone); sign again, with --prune to remove the gone ones"]


def _keep_field_lines(problems: list[tuple[str, str]]) -> list[str]:
    if not problems:
        return []
    identifier, reason = problems[0]
    have = "has" if len(problems) == 1 else "have"
    return [f"{counted(len(problems), 'grouped document')} {have} no value to keep by and rank lowest (e.g. "
            f"{identifier}: {reason})"]


def _are(count: int, noun: str) -> str:
    """``1 document is``, ``2 documents are``: a count, its noun and the verb in agreement."""
    return f"{counted(count, noun)} {'is' if count == 1 else 'are'}"


def filter_summary(report: FilterReport, removed: str | None = None) -> str:
    """``filtered N records from M inputs into OUT (store S): K kept, D dropped from G groups, C changed …``, and
    the ``--removed`` file written."""
    dropped = "marked dedup_keep false (annotated, kept)" if report.annotated else "dropped"
    parts = [f"{report.kept} kept", f"{report.dropped} {dropped} from {counted(report.groups, 'group')}",
             f"{len(report.changed)} changed since signing and kept"]
    if report.repeated:
        parts.append(f"{report.repeated} with an id already read skipped")
    if report.unsigned:
        parts.append(f"{counted(len(report.unsigned), 'file')} not in the store copied")
    where = "stdout" if report.out == "-" else report.out
    inputs = counted(report.inputs, "input")
    dropped_listed = f"the {counted(len(report.removed.ids) if report.removed else 0, 'document')} dropped"
    return (f"filtered {counted(report.records, 'record')} from {inputs} into {where} (store {report.store}): "
            f"{', '.join(parts)}; {report.seconds:.2f} s" + written([(dropped_listed, removed)]))


def filter_warnings(report: FilterReport) -> list[str]:
    """Documents kept because they changed, files the store never read, documents to drop no input held,
    stored documents gone since signing."""
    lines = _gone_lines(report.gone)
    lines += [f"kept {where} (id {identifier!r}): it changed since it was signed" for where, identifier in
             report.changed]
    lines += [f"copied {name} unread: the store holds none of its documents" for name in report.unsigned]
    if report.not_found:
        lines.append(f"{counted(len(report.not_found), 'document')} to drop "
                     f"{'is' if len(report.not_found) == 1 else 'are'} in none of these inputs (e.g. "
                     f"{report.not_found[0]!r}); were they signed from other files, or read with other options?")
    return lines + _keep_field_lines(report.keep_field_problems)


def review_summary(report: ReviewReport) -> str:
    """``wrote review.html (…): G of N groups shown (the L largest and S sampled), M texts (U unread), …``."""
    megabytes = report.page_bytes / 1e6
    where = "stdout" if report.out == "-" else report.out
    unread = f", {report.unread} not shown (the page says why)" if report.unread else ""
    return (f"wrote {where} ({megabytes:.1f} MB): {report.shown} of {counted(report.groups, 'group')} shown (the "
            f"{report.largest} largest and {report.shown - report.largest} sampled), "
            f"{counted(report.members, 'member')} with their text{unread}; {report.dropped} documents to drop, "
            f"{report.dropped_bytes / 1e6:.1f} MB; {report.seconds:.2f} s in all")


def find_store_line(store: str, result: FindResult) -> str:
    """The second summary line of ``find -v``: the store's parameters and the runs its documents came from."""
    params = result.store.params
    runs = result.store.runs
    if result.run_span is not None:
        span = f"{result.run_span[0]}–{result.run_span[1]}"
    else:
        span = "none" if runs is None or runs.size == 0 else f"{int(runs.min())}–{int(runs.max())}"
    stored = (f"{params.num_perm} XOR bits of {params.permutations} permutations" if params.xor_pairs
              else f"k = {params.num_perm}, {params.bits} stored bits")
    return (f"store {store}: {stored}, scheme {params.scheme}, "
            f"seed {params.seed}; documents of runs {span}")


def estimate_lines(record: dict[str, Any]) -> list[str]:
    """``dedup estimate``'s text view: one aligned ``name  value`` line per field."""
    width = max(len(name) for name in record)
    lines = []
    for name, value in record.items():
        if isinstance(value, float):
            value = f"{value:.6g}"
        elif isinstance(value, list):
            value = ", ".join(f"{v:.6g}" if isinstance(v, float) else str(v) for v in value)
        lines.append(f"{name.ljust(width)}  {value}")
    return lines
