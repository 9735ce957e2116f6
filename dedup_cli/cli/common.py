"""What every command of the command line shares: flag wording, error → exit code, output files, progress.

Exit codes (docs/outputs.md): 0 success, 1 runtime error (bad input, damaged store, unreadable files, a run that
did the wrong job), 2 usage error, 3 duplicates found with find --fail-on-duplicates, 130 interrupted.

``-q`` means the same in every command: no progress and no summary, but every warning (what was skipped, not
re-read or left unchecked: what changes the meaning of the result) still reaches stderr.
"""

from __future__ import annotations

import errno
import os
import sys
import traceback
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import Any, TypeVar

import click

from dedup_cli.atomic_files import OutputError, open_output
from dedup_cli.errors import DedupError, DedupWarning, UsageError
from dedup_cli.inputs.locations import display_name
from dedup_cli.options.checks import memory_bytes
from dedup_cli.options.engine_choice import EngineOptions
from dedup_cli.options.finding import FindOptions
from dedup_cli.options.input_options import InputOptions
from dedup_cli.options.vocabulary import (
    CANDIDATE_METHODS,
    ENGINES,
    GROUP_METHODS,
    HALF_BIT,
    INPUT_FORMATS,
    KEEP_CHOICES,
    MAX_STORED_BITS,
    SCHEDULER_VARIABLE,
    VERIFY_MODES,
)


class EstimatorBitsType(click.ParamType):
    """b for the estimator on the command line: a whole number 1..64, or ``1/2`` (also ``0.5``)."""

    name = "B|1/2"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return value
        text = str(value).strip()
        if text in ("1/2", "0.5", ".5"):
            return HALF_BIT
        try:
            number = int(text)
        except ValueError:
            self.fail(f"{value!r}: use a whole number 1 to {MAX_STORED_BITS}, or 1/2", param, ctx)
        if not 1 <= number <= MAX_STORED_BITS:
            self.fail(f"{number} is out of range; use 1 to {MAX_STORED_BITS}, or 1/2", param, ctx)
        return number


ESTIMATOR_BITS = EstimatorBitsType()

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2
EXIT_DUPLICATES = 3  # find --fail-on-duplicates found at least one record
MAX_WARNINGS = 20  # warnings listed without -v

F = TypeVar("F", bound=Callable[..., Any])

# Options whose flag is not ``--`` and the name with dashes.
_FLAGS = {"null_separated": "-0/--null"}
FORMAT_SUFFIXES = {".tsv": "tsv", ".csv": "csv", ".parquet": "parquet"}  # --removed FILE's default format


class MemorySize(click.ParamType):
    """An amount of memory: ``512MiB``, ``1.5GB``, ``1GiB`` or a number of bytes."""

    name = "bytes"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        found = memory_bytes(str(value))
        if found is None or found < 1:
            self.fail(f"{value!r} is not an amount of memory; write e.g. 512MiB, 1.5GB or 1GiB", param, ctx)
        return found


MEMORY_SIZE = MemorySize()


def flag(name: str) -> str:
    """How the command line spells the option the library calls ``name``: ``bits`` → ``--bits``."""
    return _FLAGS.get(name, "--" + name.replace("_", "-"))


def message(error: DedupError) -> str:
    """A library error worded for the command line (options named by their flags)."""
    return error.worded(flag)


_CONTROL = {code: f"\\x{code:02x}" for code in range(32)} | {ord("\n"): "\\n", ord("\t"): "\\t", 127: "\\x7f"}


def one_line(text: str) -> str:
    """``text`` as one printable line: names that hold newlines or other control characters (a path list read
    with the wrong separator) are escaped, bytes that are not UTF-8 written ``\\xNN``."""
    return display_name(text).translate(_CONTROL)


def fail(text: str, code: int) -> None:
    click.echo(f"Error: {one_line(text)}", err=True)
    sys.exit(code)


def warn(text: str) -> None:
    click.echo(f"warning: {one_line(text)}", err=True)


def say(text: str) -> None:
    """A line of the summary on stderr."""
    click.echo(one_line(text), err=True)


def os_error_message(error: OSError) -> str:
    """An operating system's error in one line: the path(s) it names and the cause (``cannot write`` for an
    output)."""
    names = [display_name(os.fsdecode(name)) for name in (error.filename, error.filename2) if name is not None]
    cause = error.strerror or " ".join(str(error).split()) or type(error).__name__
    if isinstance(error, OutputError):
        return f"cannot write {names[0] if names else 'the output'}: {cause}"
    return f"{' → '.join(names)}: {cause}" if names else cause


def stop_quietly(code: int = EXIT_OK) -> None:
    """The reader of stdout went away (``| head``): stop at once, as ``cat`` and ``grep`` do, without a message
    and without a second error when Python flushes stdout on exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real stdout (tests capture it)
        pass
    sys.exit(code)


def _warning_lines(show: Callable[..., None]) -> Callable[..., None]:
    """``show`` (:func:`warnings.showwarning`), but the library's own warnings (:class:`DedupWarning`) as one
    ``warning:`` line each."""

    def shown(text: Warning | str, category: type[Warning], *where: Any, **more: Any) -> None:
        if issubclass(category, DedupWarning):
            warn(str(text))
        else:
            show(text, category, *where, **more)

    return shown


def reports_errors(command: F) -> F:
    """Turn library errors and the operating system's errors into one-line messages and exit codes instead of
    tracebacks (``-v`` adds the traceback of an operating system's error), and the library's warnings into
    ``warning:`` lines."""

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("always", DedupWarning)
                warnings.showwarning = _warning_lines(warnings.showwarning)
                return command(*args, **kwargs)
        except UsageError as error:
            fail(message(error), EXIT_USAGE)
        except DedupError as error:
            fail(message(error), EXIT_ERROR)
        except KeyboardInterrupt:
            fail("interrupted; nothing was replaced", 130)
        except OSError as error:
            if error.errno == errno.EPIPE:
                stop_quietly()
            if kwargs.get("verbose"):
                traceback.print_exc()
            fail(os_error_message(error), EXIT_ERROR)

    return wrapper  # type: ignore[return-value]


@contextmanager
def output_stream(path: str | None, binary: bool = False) -> Iterator[Any]:
    """stdout, or the output ``path`` written as :func:`dedup_cli.atomic_files.open_output` says (a file replaced
    atomically, a device or FIFO in place); flushed before the block ends, so that a closed pipe is seen here."""
    if path is None or path == "-":
        stream = sys.stdout.buffer if binary else sys.stdout
        yield stream
        stream.flush()
        return
    with open_output(path, binary=binary) as stream:
        yield stream
def option_group(*decorators: Callable[[F], F]) -> Callable[[F], F]:
    """Several Click options as one decorator, so that commands share them."""

    def apply(command: F) -> F:
        for decorator in reversed(decorators):
            command = decorator(command)
        return command

    return apply


reading_options = option_group(
    click.option("--input-format", type=click.Choice(INPUT_FORMATS), default=InputOptions.input_format,
                 help="auto: by extension (.jsonl, .json, .csv, .tsv, .parquet, else text; stdin: JSON Lines when its "
                      "first line is a JSON object, a JSON array when it is one, else text); lines: one document per "
                      "line; json: one per element of a JSON array; csv, tsv: one per record after a header row; "
                      "sets: integer sets (JSON Lines or TSV) over --universe."),
    click.option("--id-field", default=InputOptions.id_field,
                 help="The JSON field, or CSV, TSV or Parquet column, holding the id (default: FILE:LINE, FILE:N for "
                      "the N-th CSV/TSV record or JSON array element, FILE:ROW for Parquet)."),
    click.option("--text-field", default=InputOptions.text_field,
                 help="The JSON field, or CSV, TSV or Parquet column, holding the text."),
    click.option("--id-column", default=InputOptions.id_column,
                 help="Another name for --id-field (with both, this one is for Parquet)."),
    click.option("--text-column", default=InputOptions.text_column,
                 help="Another name for --text-field (with both, this one is for Parquet)."),
    click.option("--files-from", type=click.Path(path_type=str, allow_dash=True), default=InputOptions.files_from,
                 help="Read input paths from FILE (or - for stdin), one per line."),
    click.option("-0", "--null", "null_separated", is_flag=True, help="--files-from paths are NUL-separated."),
    click.option("--include", multiple=True, metavar="GLOB",
                 help="Only files matching GLOB (path or name); repeatable."),
    click.option("--exclude", multiple=True, metavar="GLOB",
                 help="Skip files matching GLOB (path or name); repeatable."),
)

RECALL = click.FloatRange(0.0, 1.0, min_open=True, max_open=True)

recall_option = click.option(
    "--recall", type=RECALL, default=FindOptions.recall,
    help="Chance that a pair at R0 becomes a candidate, for which the banding is chosen (higher: fewer misses "
         "just above R0, more candidates and time; see dedup plan --recall).")

find_options = option_group(
    click.option("--threshold", "-t", type=click.FloatRange(0.0, 1.0, min_open=True), default=FindOptions.threshold,
                 help="Report pairs with estimated resemblance R ≥ this (R0)."),
    click.option("--bits", "-b", type=ESTIMATOR_BITS, default=FindOptions.bits,
                 help="Bits per value for the estimator (b ≤ stored bits), or 1/2: the lowest bits of two "
                      "permutations combined by XOR.  [default: all stored]"),
    click.option("--ways", type=click.IntRange(2, 3), default=FindOptions.ways,
                 help="3: also find triples with 3-way R̂ ≥ R0."),
    click.option("--group", "group_method", type=click.Choice(GROUP_METHODS), default=None,
                 help="components: linked pairs; strict: every pair (and triple) inside a group ≥ R0; witness: each "
                      "kept document with those it witnesses, so every dropped one has a kept one at R ≥ R0.  "
                      "[default: components; filter: witness]"),
    click.option("--keep", type=click.Choice(KEEP_CHOICES), default=FindOptions.keep,
                 help="Which member represents a group: first = id order; longest/shortest by shingles; "
                      "oldest/newest by sign run, then modification time."),
    click.option("--keep-field", metavar="FIELD", default=FindOptions.keep_field,
                 help="Keep the member whose numeric JSON field or Parquet column FIELD is highest (ties by id)."),
    click.option("--verify", type=click.Choice(VERIFY_MODES), default=FindOptions.verify,
                 help="Re-read documents and decide pairs (and triples) by exact resemblance: those whose "
                      "interval straddles R0 or that a bound for all candidates cannot clear, all, or none."),
    click.option("--candidates", type=click.Choice(CANDIDATE_METHODS), default=FindOptions.candidates,
                 help="lsh: banding; all: compare every pair (exact, quadratic; fine for ~10^4–10^5 documents)."),
    click.option("--new-since", type=click.IntRange(0), default=FindOptions.new_since, metavar="RUN",
                 help="Only pairs, triples and groups involving documents signed after sign run RUN "
                      "(see dedup info)."),
    click.option("--bands", type=click.IntRange(1), default=FindOptions.bands,
                 help="LSH bands (default: chosen for --recall at R0)."),
    click.option("--rows", type=click.IntRange(1), default=FindOptions.rows, help="Values per LSH band."),
    recall_option,
    click.option("--against", metavar="REF", type=click.Path(path_type=str), default=FindOptions.against,
                 help="Also compare with the reference store REF (read only); its documents are always kept."),
    click.option("--only-across", is_flag=True, help="With --against: only pairs across the two stores."),
)

jobs_option = click.option(
    "-j", "--jobs", type=click.IntRange(0), default=FindOptions.jobs,
    help="Worker processes of the local engine's stages (0: one per core), each holding its own --band-memory; "
         "the output is the same.")

tuning_options = option_group(
    jobs_option,
    click.option("--band-memory", type=MEMORY_SIZE, default=FindOptions.band_memory, metavar="BYTES",
                 show_default=False,
                 help="Band keys one process (each Dask worker) holds per round of the candidate stage, e.g. 512MiB; "
                      "less means more rounds, each a read of the signatures or of the later rounds' keys, which "
                      "the first round spills to the temporary folder ($TMPDIR) where that reads less (a tuning "
                      "knob; the output is the same).  [default: the -j processes share a quarter of the "
                      "machine's memory, 1GiB each at least; a Dask worker a quarter of its memory limit]"),
    click.option("--gather-limit", type=click.IntRange(0), default=FindOptions.gather_limit, metavar="PAIRS",
                 help="With --engine dask: the most pairs the driver holds at once: up to it the candidate pairs are "
                      "decided in the driver (their checks run on the workers); past it the decisions, then the end of "
                      "find, run on the workers and the records stream in chunks of this many, 16384 at least (a "
                      "tuning knob; the output is the same)."),
)


engine_options = option_group(
    click.option("--engine", "engine_name", type=click.Choice(ENGINES), default=EngineOptions.name,
                 help="local: this machine; dask: a Dask cluster (pip install 'dedup-cli[dask]')."),
    click.option("--scheduler", default=EngineOptions.scheduler, metavar="ADDRESS",
                 help=f"With --engine dask: a running scheduler, e.g. tcp://10.0.0.1:8786.  "
                      f"[default: ${SCHEDULER_VARIABLE}, else a local cluster]"),
    click.option("--workers", type=click.IntRange(0), default=EngineOptions.workers,
                 help="With --engine dask and no scheduler: worker processes (0: one per core)."),
    click.option("--memory-limit", default=EngineOptions.memory_limit, metavar="BYTES",
                 help="With --engine dask and no scheduler: memory per worker before it spills to disk, e.g. 2GiB."),
)


def engine_of(given: dict[str, Any]) -> EngineOptions:
    """The ``EngineOptions`` of a command's arguments (taken out of ``given``)."""
    return EngineOptions(name=given.pop("engine_name"), scheduler=given.pop("scheduler"),
                         workers=given.pop("workers"), memory_limit=given.pop("memory_limit"))


class RecordCounter:
    """Records passed through, counted: how many a closed pipe had already been offered (and each told to
    ``advance``, a progress bar)."""

    def __init__(self, records: Iterator[dict[str, Any]], advance: Callable[[int], None] | None = None) -> None:
        self._records = records
        self._advance = advance
        self.count = 0

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for record in self._records:
            self.count += 1
            if self._advance is not None:
                self._advance(1)
            yield record


def write_records(records: Iterator[dict[str, Any]], kind: str, fields: tuple[tuple[str, ...], tuple[str, ...]],
                  fmt: str, out: str | None, header: bool, found_code: int | None = None,
                  advance: Callable[[int], None] | None = None) -> int:
    """Write records to ``out`` (stdout when None) in ``fmt``; ``fields``: (TSV/CSV columns, the others).

    When the reader of the output goes away (a closed pipe), stop quietly: exit 0, or ``found_code`` if any
    record had been written (``find --fail-on-duplicates`` keeps its meaning under ``| head``).
    """
    counted = RecordCounter(records, advance)
    try:
        with output_stream(out, binary=fmt == "parquet") as stream:
            if fmt == "parquet":
                from dedup_cli.cli.record_writers import write_records_parquet

                return write_records_parquet(iter(counted), fields[1], stream)
            from dedup_cli.cli.record_writers import write_records

            return write_records(iter(counted), kind, fmt, stream, header=header, fields=fields[0])
    except OSError as error:
        if error.errno != errno.EPIPE:
            raise
        stop_quietly(found_code if found_code is not None and counted.count else EXIT_OK)
        raise  # not reached


def echo_output(text: str, out: str | None) -> None:
    """One text (JSON or a report) to ``out`` (stdout when None), with a final newline."""
    with output_stream(out) as stream:
        stream.write(text + "\n")


quiet_option = click.option(
    "-q", "--quiet", is_flag=True,
    help="No progress and no summary; warnings that change what the result means (inputs or records skipped, "
         "documents not re-read, pairs left unchecked) still go to stderr.")

strict_option = click.option(
    "--strict", is_flag=True,
    help="Any input or record skipped in signing (binary, unreadable, malformed, a duplicate id, too large) is an "
         "error (exit 1), and nothing is stored or written; without it, skips are warnings and the rest is signed "
         "(filter: with --sign).")

allow_empty_option = click.option(
    "--allow-empty", is_flag=True,
    help="An input that holds nothing (stdin or a file named by itself with no byte, a file of records with no "
         "record) or inputs with no file are no error, for jobs where an empty batch is normal; without it such a "
         "run exits 1 and stores and writes nothing.")

out_option = click.option("-o", "--out", type=click.Path(dir_okay=False, path_type=str, allow_dash=True),
                          default=None, help="Write to FILE instead of stdout (a file is replaced atomically; a "
                                             "device or FIFO is written in place).")


@contextmanager
def progress_bar(quiet: bool, description: str) -> Iterator[tuple[Callable[[int | None], None], Callable[..., None]]]:
    """(on_start, progress) callbacks that drive a bar of input bytes on stderr when it is a terminal."""
    bar: Any = None

    def on_start(total: int | None) -> None:
        nonlocal bar
        if bar is not None:  # a second stage (filter --sign: signing, then filtering)
            bar.close()
        if not quiet and sys.stderr.isatty():
            from tqdm import tqdm  # 40 ms: only when a bar is shown

            bar = tqdm(total=total, unit="B", unit_scale=True, file=sys.stderr, desc=description)

    def advance(count: int) -> None:
        if bar is not None:
            bar.update(count)

    try:
        yield on_start, advance
    finally:
        if bar is not None:
            bar.close()


class StageBars:
    """The stages of a long run on stderr (a ``Progress``): a bar per stage where its steps are counted, a line
    with a running clock where they are not; nothing unless stderr is a terminal and ``quiet`` is off. Use as a
    context manager, so the last bar is closed."""

    def __init__(self, quiet: bool) -> None:
        self._quiet = quiet
        self._shown = not quiet and sys.stderr.isatty()
        self._bar: Any = None

    def note(self, text: str) -> None:
        """A line on stderr (unless ``quiet``), above the bar."""
        if self._quiet:
            return
        if self._bar is not None:
            self._bar.clear()
        click.echo(one_line(text), err=True)
        if self._bar is not None:
            self._bar.refresh()

    def stage(self, name: str, total: int | None = None, unit: str = "steps") -> Callable[[int], None]:
        self.close()
        if not self._shown:
            return _ignore
        from tqdm import tqdm  # 40 ms: only when a bar is shown

        self._bar = tqdm(total=total, desc=name, unit=f" {unit}" if total else "", file=sys.stderr, leave=False,
                         bar_format=None if total else "{desc} {elapsed}")
        return self._bar.update

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> StageBars:
        return self

    def __exit__(self, *exception: object) -> None:
        self.close()


def _ignore(count: int) -> None:
    pass


def print_warnings(warnings: list[str], verbose: bool) -> None:
    shown = warnings if verbose else warnings[:MAX_WARNINGS]
    for line in shown:
        warn(line)
    if len(warnings) > len(shown):
        warn(f"… and {len(warnings) - len(shown)} more (-v lists them all)")


CONTEXT_SETTINGS: dict[str, Any] = {
    "help_option_names": ["-h", "--help"],
    "auto_envvar_prefix": "DEDUP",
    "show_default": True,
}
