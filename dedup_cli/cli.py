"""The ``dedup`` command line: parse options, call :mod:`dedup_cli.pipeline`, print, map errors to exit codes.

Exit codes: 0 success, 1 runtime error (bad input, damaged store, unreadable files), 2 usage error,
3 duplicates found with find --fail-on-duplicates, 130 interrupted.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import click

from dedup_cli import __version__, pipeline
from dedup_cli.corpus import INPUT_FORMATS, InputOptions
from dedup_cli.errors import DedupError, UsageError
from dedup_cli.finding import CANDIDATE_METHODS
from dedup_cli.grouping import GROUP_METHODS, KEEP_CHOICES
from dedup_cli.output import FORMATS, OUTPUT_KINDS, RECORD_FIELDS, RECORDS, write_records
from dedup_cli.shingling import SHINGLE_UNITS
from dedup_cli.signatures import MAX_STORED_BITS, SIGNATURE_SCHEMES, SignatureParams
from dedup_cli.storage import open_store, write_records_parquet
from dedup_cli.verification import VERIFY_MODES

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2
DEFAULT_STORE = "dedup.parquet"  # in the current directory, so `dedup sign corpus/` and `dedup find` meet
STORE_VARIABLE = "DEDUP_STORE"  # names the store for every command
EXIT_DUPLICATES = 3  # find --fail-on-duplicates found at least one record
MAX_WARNINGS = 20  # warnings listed without -v

F = TypeVar("F", bound=Callable[..., Any])


def _fail(message: str, code: int) -> None:
    click.echo(f"Error: {message}", err=True)
    sys.exit(code)


def reports_errors(command: F) -> F:
    """Turn library errors into one-line messages and exit codes instead of tracebacks."""

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except UsageError as error:
            _fail(str(error), EXIT_USAGE)
        except DedupError as error:
            _fail(str(error), EXIT_ERROR)
        except KeyboardInterrupt:
            _fail("interrupted; nothing was replaced", 130)
        except BrokenPipeError:
            # The reader went away (e.g. `| head`): stop quietly without a second error on exit.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            sys.exit(EXIT_ERROR)

    return wrapper  # type: ignore[return-value]


def _store(named: str | None) -> str:
    """The store a command uses: the one named (argument, option or its DEDUP_<COMMAND>_… variable), else
    $DEDUP_STORE, else ./dedup.parquet."""
    return named or os.environ.get(STORE_VARIABLE) or DEFAULT_STORE


def _show_progress(quiet: bool) -> bool:
    return not quiet and sys.stderr.isatty()


@contextmanager
def _output_stream(path: str | None, binary: bool = False) -> Iterator[Any]:
    """stdout, or a file written beside its final name and renamed into place only when complete."""
    if path is None or path == "-":
        yield sys.stdout.buffer if binary else sys.stdout
        return
    target = Path(path)
    temporary = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        with (open(temporary, "wb") if binary else open(temporary, "w", encoding="utf-8", newline="")) as stream:
            yield stream
        os.replace(temporary, target)
    except OSError as error:
        raise DedupError(f"cannot write {path}: {error.strerror or error}") from error
    finally:
        if temporary.exists():
            temporary.unlink()


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
@click.option("--input-format", type=click.Choice((*INPUT_FORMATS, "sets")), default="auto",
              help="auto: by extension (.jsonl, .parquet, else text); lines: one document per line; "
                   "sets: integer sets (JSON Lines or TSV) over --universe.")
@click.option("--id-field", default=None, help="JSON Lines: the field holding the id (default: FILE:LINE).")
@click.option("--text-field", default="text", help="JSON Lines: the field holding the text.")
@click.option("--id-column", default=None, help="Parquet: the column holding the id (default: FILE:ROW).")
@click.option("--text-column", default="text", help="Parquet: the column holding the text.")
@click.option("--files-from", type=click.Path(path_type=str, allow_dash=True), default=None,
              help="Read input paths from FILE (or - for stdin), one per line.")
@click.option("-0", "--null", "null_separated", is_flag=True, help="--files-from paths are NUL-separated.")
@click.option("--include", multiple=True, metavar="GLOB", help="Only files matching GLOB (path or name); repeatable.")
@click.option("--exclude", multiple=True, metavar="GLOB", help="Skip files matching GLOB (path or name); repeatable.")
@click.option("--max-document-bytes", type=click.IntRange(1), default=None,
              help="Skip (and count) documents larger than this.")
@click.option("--id-root", type=click.Path(file_okay=False, path_type=str), default=None,
              help="The directory file ids are relative to; fixed by a store's first run.  "
                   "[default: the store's, else the deepest directory holding the inputs]")
@click.option("--shingle-size", "-w", type=click.IntRange(1, 1000), default=5, help="Tokens per shingle (w).")
@click.option("--shingle-unit", type=click.Choice(SHINGLE_UNITS), default="word", help="Shingle words or characters.")
@click.option("--num-perm", "-k", type=click.IntRange(1, 65536), default=256,
              help="Minwise hash values per document (k).")
@click.option("--bits", "-b", type=click.IntRange(1, MAX_STORED_BITS), default=8,
              help="Lowest bits kept of each value; find can use any --bits up to this.")
@click.option("--seed", type=click.IntRange(0, 2**63 - 1), default=1, help="Seed of the hash family.")
@click.option("--scheme", type=click.Choice(SIGNATURE_SCHEMES), default=SignatureParams.scheme,
              help="kperm: k independent hash functions; oph: one permutation in k bins, densified.")
@click.option("--universe", "-D", type=click.IntRange(2, 2**62), default=None,
              help="With --input-format sets: the universe size D; elements lie in [0, D).")
@click.option("-j", "--jobs", type=click.IntRange(0), default=0, help="Worker processes (0: one per core).")
@click.option("--prune", is_flag=True, help="Remove stored documents that are no longer in the inputs.")
@click.option("--wait", type=click.FloatRange(0), default=0.0,
              help="Seconds to wait for another run on the same store before giving up.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar or summary.")
@click.option("-v", "--verbose", is_flag=True, help="List every skipped input, not only the first few.")
@reports_errors
def sign(inputs: tuple[str, ...], out: str | None, input_format: str, id_field: str | None, text_field: str,
         id_column: str | None, text_column: str, files_from: str | None, null_separated: bool,
         include: tuple[str, ...], exclude: tuple[str, ...], max_document_bytes: int | None, id_root: str | None,
         shingle_size: int, shingle_unit: str, num_perm: int, bits: int, seed: int, scheme: str,
         universe: int | None, jobs: int, prune: bool, wait: float, quiet: bool, verbose: bool) -> None:
    """Shingle and minhash documents into a signature store.

    INPUTS are files, directories (read recursively; hidden entries skipped) and - for stdin. Signing into
    an existing store signs only new or changed documents.

    \b
    Example:
      dedup sign corpus/
      zcat docs.jsonl.gz | dedup sign - --input-format jsonl --id-field url -o sigs.parquet
      dedup sign --input-format sets words.jsonl --universe 100000 -o words.parquet
    """
    from tqdm import tqdm

    out = _store(out)
    options = InputOptions(
        input_format=input_format, id_field=id_field, text_field=text_field, id_column=id_column,
        text_column=text_column, files_from=files_from, null_separated=null_separated, include=include,
        exclude=exclude, max_document_bytes=max_document_bytes, universe=universe, id_root=id_root,
    )
    if input_format == "sets":
        context = click.get_current_context()
        for name in ("shingle_size", "shingle_unit", "scheme"):
            if context.get_parameter_source(name) not in (None, click.core.ParameterSource.DEFAULT):
                raise UsageError(f"--{name.replace('_', '-')} applies to text; integer sets are not shingled and are "
                                 "signed with k permutations of their universe; leave it out")
        assert universe is not None  # InputOptions checked it
        params = SignatureParams.for_sets(universe, num_perm=num_perm, bits=bits, seed=seed)
    else:
        params = SignatureParams(num_perm=num_perm, bits=bits, seed=seed, shingle_size=shingle_size,
                                 shingle_unit=shingle_unit, scheme=scheme)
    bar: Any = None

    def on_start(total: int | None) -> None:
        nonlocal bar
        if _show_progress(quiet):
            bar = tqdm(total=total, unit="B", unit_scale=True, file=sys.stderr, desc="signing")

    def advance(count: int) -> None:
        if bar is not None:
            bar.update(count)

    try:
        report = pipeline.sign(inputs, out, params, options, progress=advance, on_start=on_start,
                               jobs=jobs or os.cpu_count() or 1, prune=prune, lock_timeout=wait)
    finally:
        if bar is not None:
            bar.close()
    _report_sign(report, out, quiet, verbose)


def _report_sign(report: pipeline.SignReport, out: str, quiet: bool, verbose: bool) -> None:
    read = report.read
    warnings = read.warnings()
    shown = warnings if verbose else warnings[:MAX_WARNINGS]
    for line in shown:
        click.echo(f"warning: {line}", err=True)
    if len(warnings) > len(shown):
        click.echo(f"warning: … and {len(warnings) - len(shown)} more (-v lists them all)", err=True)
    if report.prune_skipped:
        click.echo("warning: --prune skipped: some inputs could not be read, so nothing was removed", err=True)
    unreadable = read.count("unreadable")
    if not quiet:
        run = report.run
        megabytes = read.bytes_read / 1e6
        rate = megabytes / report.seconds if report.seconds > 0 else 0.0
        skipped = read.skipped
        changes = (f"{run.added} new, {run.changed} changed, {report.unchanged} unchanged, {run.removed} removed"
                   if run is not None else "")
        click.echo(
            f"signed {report.documents} documents ({changes}; {report.empty} with no shingle; "
            f"{skipped} inputs skipped) from {megabytes:.1f} MB in {report.seconds:.2f} s ({rate:.1f} MB/s) "
            f"into {out}" + (f", run {run.run}, {run.documents} documents stored" if run is not None else ""),
            err=True,
        )
    if unreadable:
        _fail(f"{unreadable} input(s) could not be read; {out} holds the rest", EXIT_ERROR)


@cli.command()
@click.argument("store", type=click.Path(path_type=str), required=False)
@click.option("--threshold", "-t", type=click.FloatRange(0.0, 1.0, min_open=True), default=0.5,
              help="Report pairs with estimated resemblance R ≥ this (R0).")
@click.option("--bits", "-b", type=click.IntRange(1, MAX_STORED_BITS), default=None,
              help="Bits per value for the estimator (b ≤ stored bits).  [default: all stored]")
@click.option("--ways", type=click.IntRange(2, 3), default=2, help="3: also find triples with 3-way R̂ ≥ R0.")
@click.option("--group", "group_method", type=click.Choice(GROUP_METHODS), default="components",
              help="components: linked pairs; strict: every pair (and triple) inside a group ≥ R0.")
@click.option("--keep", type=click.Choice(KEEP_CHOICES), default="first",
              help="Which member represents a group (first = id order; longest/shortest by shingles).")
@click.option("--verify", type=click.Choice(VERIFY_MODES), default="borderline",
              help="Re-read documents and decide pairs by exact resemblance: those whose interval "
                   "straddles R0, all, or none.")
@click.option("--candidates", type=click.Choice(CANDIDATE_METHODS), default="lsh",
              help="lsh: banding; all: compare every pair (exact, quadratic; fine for ~10^4–10^5 documents).")
@click.option("--new-since", type=click.IntRange(0), default=None, metavar="RUN",
              help="Only pairs, triples and groups involving documents signed after sign run RUN (see dedup info).")
@click.option("--bands", type=click.IntRange(1), default=None,
              help="LSH bands (default: chosen for 0.99 recall at R0).")
@click.option("--rows", type=click.IntRange(1), default=None, help="Values per LSH band.")
@click.option("--output", "kind", type=click.Choice(OUTPUT_KINDS), default="groups", help="What to print.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="jsonl", help="Output format.")
@click.option("-o", "--out", type=click.Path(dir_okay=False, path_type=str), default=None,
              help="Write to FILE instead of stdout (replaced atomically).")
@click.option("--no-header", is_flag=True, help="Omit the header row of TSV/CSV output.")
@click.option("--fail-on-duplicates", is_flag=True,
              help=f"Exit with code {EXIT_DUPLICATES} when anything is reported (like grep), for scripts and cron.")
@click.option("-q", "--quiet", is_flag=True, help="No summary on stderr.")
@click.option("-v", "--verbose", is_flag=True, help="A second summary line: the store, its runs and the banding.")
@reports_errors
def find(store: str | None, threshold: float, bits: int | None, ways: int, group_method: str, keep: str, verify: str,
         candidates: str, new_since: int | None, bands: int | None, rows: int | None, kind: str, fmt: str,
         out: str | None, no_header: bool, fail_on_duplicates: bool, quiet: bool, verbose: bool) -> None:
    """Report near-duplicate groups, pairs, triples or members in a signature store.

    STORE defaults to $DEDUP_STORE, else ./dedup.parquet.

    \b
    Example:
      dedup find --threshold 0.5 --bits 2
      dedup find sigs.parquet --threshold 0.8 --output pairs --format tsv
      dedup find sigs.parquet --group strict --keep longest --output members --format tsv
    """
    if kind == "triples" and ways != 3:
        raise UsageError("--output triples needs --ways 3")
    store = _store(store)
    result = pipeline.find(store, threshold, bits=bits, bands=bands, rows=rows, ways=ways, group=group_method,
                           keep=keep, verify=verify, candidates=candidates, new_since=new_since)
    with _output_stream(out, binary=fmt == "parquet") as stream:
        if fmt == "parquet":
            written = write_records_parquet(RECORDS[kind](result), RECORD_FIELDS[kind], stream)
        else:
            written = write_records(RECORDS[kind](result), kind, fmt, stream, header=not no_header)
    if not quiet:
        _summarise_find(store, result)
        if verbose:
            params = result.store.params
            click.echo(f"store {store}: k = {params.num_perm}, {params.bits} stored bits, scheme {params.scheme}, "
                       f"seed {params.seed}; documents of runs {_run_span(result)}", err=True)
    if fail_on_duplicates and written:
        sys.exit(EXIT_DUPLICATES)


def _run_span(result: pipeline.FindResult) -> str:
    runs = result.store.runs
    if runs is None or runs.size == 0:
        return "none"
    return f"{int(runs.min())}–{int(runs.max())}"


def _summarise_find(store: str, result: pipeline.FindResult) -> None:
    threshold = result.threshold
    documents = len(result.store)
    if result.banding is None:
        how = "all pairs compared"
    else:
        banding = result.banding
        how = (f"{banding.bands}×{banding.rows} bands on {banding.band_bits} bits "
               f"(recall {banding.recall_at(threshold):.3f} at R={threshold:g})")
    parts = [
        f"{store}: {documents} documents ({documents - result.eligible} with no shingle)",
        how,
        f"{result.candidates} candidates",
        f"{result.pairs.first.size} pairs with {result.bits}-bit R̂ ≥ {threshold:g}",
    ]
    if result.triples is not None:
        parts.append(f"{result.triples.docs.shape[0]} triples")
    parts.append(f"{len(result.groups)} groups")
    if result.verification is not None:
        parts.append(f"{result.verification.checked} pairs verified exactly")
    parts.append(f"{result.seconds:.2f} s; estimator: {result.estimator}")
    click.echo(", ".join(parts), err=True)
    if result.verification is not None and result.verification.unverifiable_documents:
        missing = result.verification.unverifiable_documents
        click.echo(f"warning: {len(missing)} document(s) could not be re-read or changed since signing "
                   f"(e.g. {missing[0]}); their pairs keep the estimate", err=True)
    if result.aliases:
        click.echo(f"warning: {result.aliases} document(s) are the same file on disk as another document (a link); "
                   "only the first id of each file is reported", err=True)
    if result.oversized_buckets:
        click.echo(f"warning: {result.oversized_buckets} LSH buckets held more than 1000 documents and were cut",
                   err=True)


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
    store = _store(store)
    opened = open_store(store)
    loaded = opened.read()
    empty = int((loaded.shingle_counts == 0).sum())
    runs = [dataclasses.asdict(record) for record in opened.runs]
    click.echo(json.dumps({"store": store, "documents": len(loaded), "empty": empty,
                           "params": opened.params.to_dict(), "id_root": opened.id_root,
                           "last_run": opened.last_run, "runs": runs}, indent=2))


def _is_store(path: str) -> bool:
    """Whether ``path`` holds a dedup store (so ``estimate STORE A B`` is told from ``estimate A B C``)."""
    try:
        open_store(path)
    except DedupError:
        return False
    return True


def _estimate_store(store: str | None, arguments: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    """Split ``estimate``'s arguments into the store and the ids: ``[STORE] ID ID [ID]``.

    The first argument is the store when ``--store`` is not given and it is a store on disk (a document id
    never is), or when there are four arguments.
    """
    if store is None and arguments and (len(arguments) == 4 or _is_store(arguments[0])):
        return arguments[0], arguments[1:]
    return _store(store), arguments


@cli.command()
@click.argument("arguments", nargs=-1, required=True, metavar="[STORE] ID ID [ID]")
@click.option("--store", "-s", type=click.Path(path_type=str), default=None,
              help=f"The store.  [default: the first argument when it is a store, else ${STORE_VARIABLE}, "
                   f"else {DEFAULT_STORE}]")
@click.option("--bits", "-b", type=click.IntRange(1, MAX_STORED_BITS), default=None,
              help="Bits per value (b ≤ stored bits).  [default: all stored]")
@click.option("--exact", is_flag=True, help="Also re-read the documents and compute the exact resemblance.")
@click.option("--level", type=click.FloatRange(0.5, 1.0, min_open=True, max_open=True), default=0.95,
              help="Confidence level of the interval.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", help="Output format.")
@reports_errors
def estimate(arguments: tuple[str, ...], store: str | None, bits: int | None, exact: bool, level: float,
             fmt: str) -> None:
    """Estimate the resemblance of two or three documents, with its uncertainty.

    With three arguments the first is the store when it is one; --store names it otherwise.

    \b
    Example:
      dedup estimate sigs.parquet KJV/ruth-01.txt ASV/ruth-01.txt --exact
      dedup estimate sigs.parquet KJV/ruth-01.txt ASV/ruth-01.txt AKJV/ruth-01.txt --bits 2 --format json
    """
    from dedup_cli.comparison import estimate_documents

    store, ids = _estimate_store(store, arguments)
    record = estimate_documents(store, ids, bits=bits, exact=exact, level=level)
    if fmt == "json":
        click.echo(json.dumps(record))
        return
    width = max(len(name) for name in record)
    for name, value in record.items():
        if isinstance(value, float):
            value = f"{value:.6g}"
        elif isinstance(value, list):
            value = ", ".join(f"{v:.6g}" if isinstance(v, float) else str(v) for v in value)
        click.echo(f"{name.ljust(width)}  {value}")


@cli.command()
@click.option("--threshold", "-t", type=click.FloatRange(0.0, 1.0, min_open=True), default=0.5,
              help="The resemblance R0 find will use.")
@click.option("--bits", "-b", type=click.IntRange(1, MAX_STORED_BITS), default=2, help="Bits for the estimator.")
@click.option("--num-perm", "-k", type=click.IntRange(1, 65536), default=256, help="Values per signature (k).")
@click.option("--stored-bits", type=click.IntRange(1, MAX_STORED_BITS), default=8,
              help="Bits the store keeps (sign --bits); band keys use them.")
@click.option("--recall", type=click.FloatRange(0.0, 1.0, min_open=True, max_open=True), default=0.99,
              help="Recall of banding to reach at R0.")
@click.option("--docs", type=click.IntRange(2), default=None,
              help="Corpus size: estimate candidate pairs and find's memory.")
@click.option("--bands", type=click.IntRange(1), default=None, help="Override the chosen bands.")
@click.option("--rows", type=click.IntRange(1), default=None, help="Override the chosen rows per band.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", help="Output format.")
@reports_errors
def plan(threshold: float, bits: int, num_perm: int, stored_bits: int, recall: float, docs: int | None,
         bands: int | None, rows: int | None, fmt: str) -> None:
    """Explain banding, accuracy, storage and memory for a threshold before any work.

    \b
    Example:
      dedup plan --threshold 0.5 --bits 2
      dedup plan --threshold 0.8 --bits 1 --num-perm 128 --docs 1000000
    """
    from dedup_cli.planning import make_plan, plan_record, render_plan

    made = make_plan(threshold, bits, num_perm=num_perm, stored_bits=stored_bits, recall=recall, docs=docs,
                     bands=bands, rows=rows)
    if fmt == "json":
        click.echo(json.dumps(plan_record(made)))
    else:
        click.echo(render_plan(made))
