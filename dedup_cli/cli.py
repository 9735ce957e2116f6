"""The ``dedup`` command line: Click options → the API's option objects, results → output and exit codes.

Nothing here computes: each command builds the options of :mod:`dedup_cli.options` (whose defaults are the
flags' defaults), calls the public API (:mod:`dedup_cli`), and prints what comes back through
:mod:`dedup_cli.output`. numpy and pyarrow are imported only by the commands that run, so ``dedup --help``
and ``dedup --version`` stay fast.

Exit codes: 0 success, 1 runtime error (bad input, damaged store, unreadable files), 2 usage error,
3 duplicates found with find --fail-on-duplicates, 130 interrupted.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import Any, TypeVar

import click

from dedup_cli.errors import DedupError, UsageError
from dedup_cli.files import atomic_write
from dedup_cli.options import (
    CANDIDATE_METHODS,
    DEFAULT_STORE,
    GROUP_METHODS,
    INPUT_FORMATS,
    KEEP_CHOICES,
    MAX_NUM_PERM,
    MAX_SEED,
    MAX_SET_UNIVERSE,
    MAX_STORED_BITS,
    OUTPUT_FORMATS,
    OUTPUT_KINDS,
    SHINGLE_UNITS,
    SIGNATURE_SCHEMES,
    STORE_VARIABLE,
    TEXT_OPTIONS,
    VERIFY_MODES,
    EstimateOptions,
    FilterOptions,
    FindOptions,
    InputOptions,
    PlanOptions,
    SignOptions,
    default_store,
    text_option_for_sets,
)
from dedup_cli.version import __version__

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2
EXIT_DUPLICATES = 3  # find --fail-on-duplicates found at least one record
MAX_WARNINGS = 20  # warnings listed without -v

F = TypeVar("F", bound=Callable[..., Any])

# Options whose flag is not ``--`` and the name with dashes.
_FLAGS = {"null_separated": "-0/--null"}
_FORMAT_SUFFIXES = {".tsv": "tsv", ".csv": "csv", ".parquet": "parquet"}  # --removed FILE's default format


def flag(name: str) -> str:
    """How the command line spells the option the library calls ``name``: ``bits`` → ``--bits``."""
    return _FLAGS.get(name, "--" + name.replace("_", "-"))


def message(error: DedupError) -> str:
    """A library error worded for the command line (options named by their flags)."""
    return error.worded(flag)


def _fail(text: str, code: int) -> None:
    click.echo(f"Error: {text}", err=True)
    sys.exit(code)


def reports_errors(command: F) -> F:
    """Turn library errors into one-line messages and exit codes instead of tracebacks."""

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except UsageError as error:
            _fail(message(error), EXIT_USAGE)
        except DedupError as error:
            _fail(message(error), EXIT_ERROR)
        except KeyboardInterrupt:
            _fail("interrupted; nothing was replaced", 130)
        except BrokenPipeError:
            # The reader went away (e.g. `| head`): stop quietly without a second error on exit.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            sys.exit(EXIT_ERROR)

    return wrapper  # type: ignore[return-value]


@contextmanager
def _output_stream(path: str | None, binary: bool = False) -> Iterator[Any]:
    """stdout, or a file written beside its final name and renamed into place only when complete."""
    if path is None or path == "-":
        yield sys.stdout.buffer if binary else sys.stdout
        return
    try:
        with atomic_write(path, binary=binary) as stream:
            yield stream
    except OSError as error:
        raise DedupError(f"cannot write {path}: {error.strerror or error}") from error


def _options(*decorators: Callable[[F], F]) -> Callable[[F], F]:
    """Several Click options as one decorator, so that commands share them."""

    def apply(command: F) -> F:
        for decorator in reversed(decorators):
            command = decorator(command)
        return command

    return apply


_reading_options = _options(
    click.option("--input-format", type=click.Choice(INPUT_FORMATS), default=InputOptions.input_format,
                 help="auto: by extension (.jsonl, .parquet, else text); lines: one document per line; "
                      "sets: integer sets (JSON Lines or TSV) over --universe."),
    click.option("--id-field", default=InputOptions.id_field,
                 help="JSON Lines: the field holding the id (default: FILE:LINE)."),
    click.option("--text-field", default=InputOptions.text_field, help="JSON Lines: the field holding the text."),
    click.option("--id-column", default=InputOptions.id_column,
                 help="Parquet: the column holding the id (default: FILE:ROW)."),
    click.option("--text-column", default=InputOptions.text_column, help="Parquet: the column holding the text."),
    click.option("--files-from", type=click.Path(path_type=str, allow_dash=True), default=InputOptions.files_from,
                 help="Read input paths from FILE (or - for stdin), one per line."),
    click.option("-0", "--null", "null_separated", is_flag=True, help="--files-from paths are NUL-separated."),
    click.option("--include", multiple=True, metavar="GLOB",
                 help="Only files matching GLOB (path or name); repeatable."),
    click.option("--exclude", multiple=True, metavar="GLOB",
                 help="Skip files matching GLOB (path or name); repeatable."),
)

_find_options = _options(
    click.option("--threshold", "-t", type=click.FloatRange(0.0, 1.0, min_open=True), default=FindOptions.threshold,
                 help="Report pairs with estimated resemblance R ≥ this (R0)."),
    click.option("--bits", "-b", type=click.IntRange(1, MAX_STORED_BITS), default=FindOptions.bits,
                 help="Bits per value for the estimator (b ≤ stored bits).  [default: all stored]"),
    click.option("--ways", type=click.IntRange(2, 3), default=FindOptions.ways,
                 help="3: also find triples with 3-way R̂ ≥ R0."),
    click.option("--group", "group_method", type=click.Choice(GROUP_METHODS), default=FindOptions.group,
                 help="components: linked pairs; strict: every pair (and triple) inside a group ≥ R0."),
    click.option("--keep", type=click.Choice(KEEP_CHOICES), default=FindOptions.keep,
                 help="Which member represents a group: first = id order; longest/shortest by shingles; "
                      "oldest/newest by sign run, then modification time."),
    click.option("--keep-field", metavar="FIELD", default=FindOptions.keep_field,
                 help="Keep the member whose numeric JSON field or Parquet column FIELD is highest (ties by id)."),
    click.option("--verify", type=click.Choice(VERIFY_MODES), default=FindOptions.verify,
                 help="Re-read documents and decide pairs by exact resemblance: those whose interval "
                      "straddles R0, all, or none."),
    click.option("--candidates", type=click.Choice(CANDIDATE_METHODS), default=FindOptions.candidates,
                 help="lsh: banding; all: compare every pair (exact, quadratic; fine for ~10^4–10^5 documents)."),
    click.option("--new-since", type=click.IntRange(0), default=FindOptions.new_since, metavar="RUN",
                 help="Only pairs, triples and groups involving documents signed after sign run RUN "
                      "(see dedup info)."),
    click.option("--bands", type=click.IntRange(1), default=FindOptions.bands,
                 help="LSH bands (default: chosen for 0.99 recall at R0)."),
    click.option("--rows", type=click.IntRange(1), default=FindOptions.rows, help="Values per LSH band."),
    click.option("--against", metavar="REF", type=click.Path(path_type=str), default=FindOptions.against,
                 help="Also compare with the reference store REF (read only); its documents are always kept."),
    click.option("--only-across", is_flag=True, help="With --against: only pairs across the two stores."),
)


def _write_records(records: Iterator[dict[str, Any]], kind: str, fields: tuple[tuple[str, ...], tuple[str, ...]],
                   fmt: str, out: str | None, header: bool) -> int:
    """Write records to ``out`` (stdout when None) in ``fmt``; ``fields``: (TSV/CSV columns, the others)."""
    with _output_stream(out, binary=fmt == "parquet") as stream:
        if fmt == "parquet":
            from dedup_cli.output.parquet import write_records_parquet

            return write_records_parquet(records, fields[1], stream)
        from dedup_cli.output.delimited import write_records

        return write_records(records, kind, fmt, stream, header=header, fields=fields[0])


@contextmanager
def _progress_bar(quiet: bool, description: str) -> Iterator[tuple[Callable[[int | None], None], Callable[..., None]]]:
    """(on_start, progress) callbacks that drive a bar of input bytes on stderr when it is a terminal."""
    from tqdm import tqdm

    bar: Any = None

    def on_start(total: int | None) -> None:
        nonlocal bar
        if bar is not None:  # a second stage (filter --sign: signing, then filtering)
            bar.close()
        if not quiet and sys.stderr.isatty():
            bar = tqdm(total=total, unit="B", unit_scale=True, file=sys.stderr, desc=description)

    def advance(count: int) -> None:
        if bar is not None:
            bar.update(count)

    try:
        yield on_start, advance
    finally:
        if bar is not None:
            bar.close()


def _print_warnings(warnings: list[str], verbose: bool) -> None:
    shown = warnings if verbose else warnings[:MAX_WARNINGS]
    for line in shown:
        click.echo(f"warning: {line}", err=True)
    if len(warnings) > len(shown):
        click.echo(f"warning: … and {len(warnings) - len(shown)} more (-v lists them all)", err=True)


CONTEXT_SETTINGS: dict[str, Any] = {
    "help_option_names": ["-h", "--help"],
    "auto_envvar_prefix": "DEDUP",
    "show_default": True,
}


@click.group(context_settings=CONTEXT_SETTINGS)
@click.version_option(__version__, "--version", prog_name="dedup")
def cli() -> None:
    """Find near-duplicate documents with b-bit minwise hashing and LSH.

    \b
    Example:
      dedup sign corpus/
      dedup find --threshold 0.5 --bits 2

    The store is ./dedup.parquet unless a command names another (or DEDUP_STORE does).
    Every option can also be set by an environment variable DEDUP_<COMMAND>_<OPTION>,
    e.g. DEDUP_FIND_THRESHOLD=0.8.
    """


@cli.command()
@click.argument("inputs", nargs=-1, type=click.Path(path_type=str, allow_dash=True))
@click.option("-o", "--out", "--output", "out", default=None, type=click.Path(path_type=str),
              help=f"The store (a directory of Parquet parts); created, or extended incrementally.  "
                   f"[default: ${STORE_VARIABLE}, else {DEFAULT_STORE}]")
@_reading_options
@click.option("--max-document-bytes", type=click.IntRange(1), default=InputOptions.max_document_bytes,
              help="Skip (and count) documents larger than this.")
@click.option("--id-root", type=click.Path(file_okay=False, path_type=str), default=InputOptions.id_root,
              help="The directory file ids are relative to; fixed by a store's first run.  "
                   "[default: the store's, else the deepest directory holding the inputs]")
@click.option("--shingle-size", "-w", type=click.IntRange(1, 1000), default=SignOptions.shingle_size,
              help="Tokens per shingle (w).")
@click.option("--shingle-unit", type=click.Choice(SHINGLE_UNITS), default=SignOptions.shingle_unit,
              help="Shingle words or characters.")
@click.option("--num-perm", "-k", type=click.IntRange(1, MAX_NUM_PERM), default=SignOptions.num_perm,
              help="Minwise hash values per document (k).")
@click.option("--bits", "-b", type=click.IntRange(1, MAX_STORED_BITS), default=SignOptions.bits,
              help="Lowest bits kept of each value; find can use any --bits up to this.")
@click.option("--seed", type=click.IntRange(0, MAX_SEED), default=SignOptions.seed, help="Seed of the hash family.")
@click.option("--scheme", type=click.Choice(SIGNATURE_SCHEMES), default=SignOptions.scheme,
              help="kperm: k independent hash functions; oph: one permutation in k bins, densified.")
@click.option("--universe", "-D", type=click.IntRange(2, MAX_SET_UNIVERSE), default=InputOptions.universe,
              help="With --input-format sets: the universe size D; elements lie in [0, D).")
@click.option("-j", "--jobs", type=click.IntRange(0), default=SignOptions.jobs,
              help="Worker processes (0: one per core).")
@click.option("--prune", is_flag=True, help="Remove stored documents that are no longer in the inputs.")
@click.option("--wait", type=click.FloatRange(0), default=SignOptions.wait,
              help="Seconds to wait for another run on the same store before giving up.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar or summary.")
@click.option("-v", "--verbose", is_flag=True, help="List every skipped input, not only the first few.")
@reports_errors
def sign(inputs: tuple[str, ...], out: str | None, quiet: bool, verbose: bool, **given: Any) -> None:
    """Shingle and minhash documents into a signature store.

    INPUTS are files, directories (read recursively; hidden entries skipped) and - for stdin. Signing into
    an existing store signs only new or changed documents.

    \b
    Example:
      dedup sign corpus/
      zcat docs.jsonl.gz | dedup sign - --input-format jsonl --id-field url -o sigs.parquet
      dedup sign --input-format sets words.jsonl --universe 100000 -o words.parquet
    """
    import dedup_cli as api
    from dedup_cli.output.summaries import read_warnings, sign_summary

    reading = InputOptions(**{name: given.pop(name) for name in InputOptions.__dataclass_fields__})
    if reading.input_format == "sets":
        context = click.get_current_context()
        for name in TEXT_OPTIONS:
            if context.get_parameter_source(name) not in (None, click.core.ParameterSource.DEFAULT):
                raise text_option_for_sets(name, given[name])
            del given[name]  # integer sets are signed with permutations of their universe
    options = SignOptions(input=reading, **given)
    with _progress_bar(quiet, "signing") as (on_start, advance):
        report = api.sign(inputs, default_store(out), options, progress=advance, on_start=on_start)
    _print_warnings(read_warnings(report.read, flag), verbose)
    if report.prune_skipped:
        click.echo("warning: --prune skipped: some inputs could not be read, so nothing was removed", err=True)
    if not quiet:
        click.echo(sign_summary(report), err=True)
    unreadable = report.read.count("unreadable")
    if unreadable:
        _fail(f"{unreadable} input(s) could not be read; {report.store} holds the rest", EXIT_ERROR)


@cli.command()
@click.argument("store", type=click.Path(path_type=str), required=False)
@_find_options
@click.option("--output", "kind", type=click.Choice(OUTPUT_KINDS), default="groups", help="What to print.")
@click.option("--format", "fmt", type=click.Choice(OUTPUT_FORMATS), default="jsonl", help="Output format.")
@click.option("-o", "--out", type=click.Path(dir_okay=False, path_type=str), default=None,
              help="Write to FILE instead of stdout (replaced atomically).")
@click.option("--no-header", is_flag=True, help="Omit the header row of TSV/CSV output.")
@click.option("--fail-on-duplicates", is_flag=True,
              help=f"Exit with code {EXIT_DUPLICATES} when anything is reported (like grep), for scripts and cron.")
@click.option("-q", "--quiet", is_flag=True, help="No summary on stderr.")
@click.option("-v", "--verbose", is_flag=True, help="A second summary line: the store, its runs and the banding.")
@reports_errors
def find(store: str | None, group_method: str, kind: str, fmt: str, out: str | None, no_header: bool,
         fail_on_duplicates: bool, quiet: bool, verbose: bool, **given: Any) -> None:
    """Report near-duplicate groups, pairs, triples or members in a signature store.

    STORE defaults to $DEDUP_STORE, else ./dedup.parquet.

    \b
    Example:
      dedup find --threshold 0.5 --bits 2
      dedup find sigs.parquet --threshold 0.8 --output pairs --format tsv
      dedup find sigs.parquet --group strict --keep longest --output members --format tsv
      dedup find train.parquet --against test.parquet --only-across --output pairs
    """
    import dedup_cli as api
    from dedup_cli.output.records import RECORDS, fields_of
    from dedup_cli.output.summaries import find_store_line, find_summary, find_warnings

    if kind == "triples" and given["ways"] != 3:
        raise UsageError("--output triples needs --ways 3")
    options = FindOptions(group=group_method, **given)
    store = default_store(store)
    result = api.find(store, options)
    fields = (fields_of(kind, result, True), fields_of(kind, result, False))
    written = _write_records(RECORDS[kind](result), kind, fields, fmt, out, not no_header)
    if not quiet:
        click.echo(find_summary(store, result), err=True)
        for line in find_warnings(result):
            click.echo(f"warning: {line}", err=True)
        if verbose:
            click.echo(find_store_line(store, result), err=True)
    if fail_on_duplicates and written:
        sys.exit(EXIT_DUPLICATES)


@cli.command("filter")
@click.argument("inputs", nargs=-1, type=click.Path(path_type=str, allow_dash=True))
@click.option("-o", "--out", "--output", "out", required=True, type=click.Path(path_type=str, allow_dash=True),
              help="Where kept documents go: a file for one input file (- for stdout), else a directory mirroring "
                   "the inputs; it appears only when complete.")
@click.option("--store", "-s", type=click.Path(path_type=str), default=None,
              help=f"The store the inputs were signed into.  [default: ${STORE_VARIABLE}, else {DEFAULT_STORE}]")
@_reading_options
@_find_options
@click.option("--members", type=click.Path(dir_okay=False, path_type=str), default=FilterOptions.members,
              help="Drop what this find --output members FILE marks drop, instead of running find.")
@click.option("--annotate", is_flag=True, help="Keep every record; add dedup_group, dedup_keep, dedup_representative.")
@click.option("--sign", "sign_first", is_flag=True, help="First sign the inputs into the store (as sign would).")
@click.option("--removed", type=click.Path(dir_okay=False, path_type=str, allow_dash=True), default=None,
              help="Write one record per dropped document to FILE: id, group, representative, similarity.")
@click.option("--removed-format", type=click.Choice(OUTPUT_FORMATS), default=None,
              help="Format of --removed.  [default: by its extension (.tsv, .csv, .parquet), else jsonl]")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar or summary.")
@click.option("-v", "--verbose", is_flag=True, help="List every warning, not only the first few.")
@reports_errors
def filter_corpus(inputs: tuple[str, ...], out: str, store: str | None, group_method: str, members: str | None,
                  annotate: bool, sign_first: bool, removed: str | None, removed_format: str | None, quiet: bool,
                  verbose: bool, **given: Any) -> None:
    """Write the documents to keep, in the inputs' own formats: the deduplicated corpus.

    INPUTS (files, directories, - for stdin) are read as the store's sign runs read them; what to drop
    comes from find (its options below) or from --members.

    \b
    Example:
      dedup filter crawl.jsonl --sign -o clean.jsonl --threshold 0.8
      dedup filter corpus/ -o clean/ --keep longest --removed removed.tsv
      dedup filter train.jsonl -s train.parquet --against test.parquet --only-across -o clean.jsonl
    """
    import dedup_cli as api
    from dedup_cli.output.records import removed_fields, removed_records
    from dedup_cli.output.summaries import filter_summary, filter_warnings, read_warnings, sign_summary

    if out == removed == "-":
        raise UsageError("-o - and --removed - cannot both be stdout; name a file for one of them")
    reading = InputOptions(**{name: given.pop(name) for name in InputOptions.__dataclass_fields__ if name in given})
    options = FilterOptions(input=reading, find=FindOptions(group=group_method, **given), members=members,
                            annotate=annotate, sign=SignOptions(input=reading) if sign_first else None)
    with _progress_bar(quiet, "filtering") as (on_start, advance):
        report = api.filter(inputs, out, default_store(store), options, progress=advance, on_start=on_start)
    if removed is not None:
        fmt = removed_format or _FORMAT_SUFFIXES.get(os.path.splitext(removed)[1].lower(), "jsonl")
        _write_records(removed_records(report), "removed", (removed_fields(report),) * 2, fmt, removed, True)
    _print_warnings(read_warnings(report.read, flag) + filter_warnings(report), verbose)
    if not quiet:
        if report.signed is not None:
            click.echo(sign_summary(report.signed), err=True)
        click.echo(filter_summary(report), err=True)


@cli.command()
@click.argument("store", type=click.Path(path_type=str), required=False)
@reports_errors
def info(store: str | None) -> None:
    """Print a store's parameters, document counts and sign runs as JSON.

    STORE defaults to $DEDUP_STORE, else ./dedup.parquet.

    \b
    Example:
      dedup info sigs.parquet
    """
    import dedup_cli as api

    click.echo(json.dumps(api.info(default_store(store)).record(), indent=2))


@cli.command()
@click.argument("arguments", nargs=-1, required=True, metavar="[STORE] ID ID [ID]")
@click.option("--store", "-s", type=click.Path(path_type=str), default=None,
              help=f"The store.  [default: the first argument when it is a store, else ${STORE_VARIABLE}, "
                   f"else {DEFAULT_STORE}]")
@click.option("--bits", "-b", type=click.IntRange(1, MAX_STORED_BITS), default=EstimateOptions.bits,
              help="Bits per value (b ≤ stored bits).  [default: all stored]")
@click.option("--exact", is_flag=True, help="Also re-read the documents and compute the exact resemblance.")
@click.option("--level", type=click.FloatRange(0.5, 1.0, min_open=True, max_open=True),
              default=EstimateOptions.level, help="Confidence level of the interval.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", help="Output format.")
@reports_errors
def estimate(arguments: tuple[str, ...], store: str | None, fmt: str, **given: Any) -> None:
    """Estimate the resemblance of two or three documents, with its uncertainty.

    With three arguments the first is the store when it is one; --store names it otherwise.

    \b
    Example:
      dedup estimate sigs.parquet KJV/ruth-01.txt ASV/ruth-01.txt --exact
      dedup estimate sigs.parquet KJV/ruth-01.txt ASV/ruth-01.txt AKJV/ruth-01.txt --bits 2 --format json
    """
    import dedup_cli as api
    from dedup_cli.commands.estimate import store_and_ids
    from dedup_cli.output.summaries import estimate_lines

    store, ids = store_and_ids(store, arguments)
    record = api.estimate(ids, store, EstimateOptions(**given)).record()
    if fmt == "json":
        click.echo(json.dumps(record))
        return
    for line in estimate_lines(record):
        click.echo(line)


@cli.command()
@click.option("--threshold", "-t", type=click.FloatRange(0.0, 1.0, min_open=True), default=PlanOptions.threshold,
              help="The resemblance R0 find will use.")
@click.option("--bits", "-b", type=click.IntRange(1, MAX_STORED_BITS), default=PlanOptions.bits,
              help="Bits for the estimator.")
@click.option("--num-perm", "-k", type=click.IntRange(1, MAX_NUM_PERM), default=PlanOptions.num_perm,
              help="Values per signature (k).")
@click.option("--stored-bits", type=click.IntRange(1, MAX_STORED_BITS), default=PlanOptions.stored_bits,
              help="Bits the store keeps (sign --bits); band keys use them.")
@click.option("--recall", type=click.FloatRange(0.0, 1.0, min_open=True, max_open=True), default=PlanOptions.recall,
              help="Recall of banding to reach at R0.")
@click.option("--docs", type=click.IntRange(2), default=PlanOptions.docs,
              help="Corpus size: estimate candidate pairs and find's memory.")
@click.option("--bands", type=click.IntRange(1), default=PlanOptions.bands, help="Override the chosen bands.")
@click.option("--rows", type=click.IntRange(1), default=PlanOptions.rows, help="Override the chosen rows per band.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", help="Output format.")
@reports_errors
def plan(fmt: str, **given: Any) -> None:
    """Explain banding, accuracy, storage and memory for a threshold before any work.

    \b
    Example:
      dedup plan --threshold 0.5 --bits 2
      dedup plan --threshold 0.8 --bits 1 --num-perm 128 --docs 1000000
    """
    import dedup_cli as api
    from dedup_cli.output.plan_report import plan_record, render_plan

    made = api.plan(PlanOptions(**given))
    if fmt == "json":
        click.echo(json.dumps(plan_record(made)))
    else:
        click.echo(render_plan(made))
