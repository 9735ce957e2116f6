"""``dedup filter``: the deduplicated corpus, in the inputs' own formats."""

from __future__ import annotations

import os
from typing import Any

import click

from dedup_cli.cli.common import (
    FORMAT_SUFFIXES,
    allow_empty_option,
    engine_of,
    engine_options,
    find_options,
    flag,
    print_warnings,
    progress_bar,
    quiet_option,
    reading_options,
    reports_errors,
    say,
    strict_option,
    tuning_options,
    write_records,
)
from dedup_cli.errors import UsageError
from dedup_cli.options.filtering import FilterOptions
from dedup_cli.options.finding import FindOptions
from dedup_cli.options.input_options import InputOptions
from dedup_cli.options.signing import SignOptions
from dedup_cli.options.vocabulary import DEFAULT_STORE, OUTPUT_FORMATS, STORE_VARIABLE, default_store


@click.command("filter")
@click.argument("inputs", nargs=-1, type=click.Path(path_type=str, allow_dash=True))
@click.option("-o", "--out", "--output", "out", required=True, type=click.Path(path_type=str, allow_dash=True),
              help="Where kept documents go: a file for one input file (- for stdout), else a directory mirroring "
                   "the inputs; it appears only when complete.")
@click.option("--store", "-s", type=click.Path(path_type=str), default=None,
              help=f"The store the inputs were signed into.  [default: ${STORE_VARIABLE}, else {DEFAULT_STORE}]")
@reading_options
@find_options
@click.option("--members", type=click.Path(dir_okay=False, path_type=str), default=FilterOptions.members,
              help="Drop what this find --output members FILE marks drop, instead of running find.")
@click.option("--annotate", is_flag=True, help="Keep every record; add dedup_group, dedup_keep, dedup_representative.")
@click.option("--sign", "sign_first", is_flag=True, help="First sign the inputs into the store (as sign would).")
@click.option("--removed", type=click.Path(dir_okay=False, path_type=str, allow_dash=True), default=None,
              help="Write one record per dropped document to FILE: id, group, representative, similarity.")
@click.option("--removed-format", type=click.Choice(OUTPUT_FORMATS), default=None,
              help="Format of --removed.  [default: by its extension (.tsv, .csv, .parquet), else jsonl]")
@strict_option
@allow_empty_option
@quiet_option
@click.option("-v", "--verbose", is_flag=True, help="List every warning, not only the first few.")
@tuning_options
@engine_options
@reports_errors
def filter_corpus(inputs: tuple[str, ...], out: str, store: str | None, group_method: str | None,
                  members: str | None,
                  annotate: bool, sign_first: bool, removed: str | None, removed_format: str | None, strict: bool,
                  allow_empty: bool, quiet: bool, verbose: bool, **given: Any) -> None:
    """Write the documents to keep, in the inputs' own formats: the deduplicated corpus.

    INPUTS (files, directories, - for stdin) are read as the store's sign runs read them; what to drop
    comes from find (its options below) or from --members.

    \b
    Example:
      dedup filter crawl.jsonl --sign -o clean.jsonl --threshold 0.8
      dedup filter corpus/ -o clean/ --keep longest --removed removed.tsv
      dedup filter train.jsonl -s train.parquet --against test.parquet --only-across -o clean.jsonl
      dedup filter /shared/corpus/ -o /shared/clean/ --engine dask --scheduler tcp://10.0.0.1:8786
    """
    import dedup_cli as api
    from dedup_cli.cli.removed import removed_fields, removed_records
    from dedup_cli.cli.summaries import (
        filter_summary,
        filter_warnings,
        kernel_line,
        read_warnings,
        sign_summary,
        stores_note,
    )

    if out == removed == "-":
        raise UsageError("-o - and --removed - cannot both be stdout; name a file for one of them")
    if strict and not sign_first:
        raise UsageError("--strict applies to the signing of --sign (filter copies the records it cannot read as they "
                         "are); add --sign, or leave --strict out")
    engine = engine_of(given)
    reading = InputOptions(**{name: given.pop(name) for name in InputOptions.__dataclass_fields__ if name in given})
    options = FilterOptions(input=reading, find=FindOptions(group=group_method, engine=engine, **given),
                            members=members, annotate=annotate, allow_empty=allow_empty,
                            sign=SignOptions(input=reading, strict=strict) if sign_first else None)
    with progress_bar(quiet, "filtering") as (on_start, advance):
        report = api.filter(inputs, out, default_store(store), options, progress=advance, on_start=on_start)
    if removed is not None:
        fmt = removed_format or FORMAT_SUFFIXES.get(os.path.splitext(removed)[1].lower(), "jsonl")
        write_records(removed_records(report), "removed", (removed_fields(report),) * 2, fmt, removed, True)
    # With --sign, what sign skipped or repaired is said as sign says it; a line the filtering pass says again
    # (the same record skipped for the same reason) is said once.
    signed = [] if report.signed is None else read_warnings(report.signed.read, flag)
    print_warnings(list(dict.fromkeys(signed + read_warnings(report.read, flag))) + filter_warnings(report), verbose)
    if not quiet:
        note = stores_note(*([] if report.signed is None else [report.signed.read]), report.read)
        if note is not None:
            say(note)
        if report.signed is not None:
            say(sign_summary(report.signed))
            if verbose:
                say(kernel_line(report.signed, flag))
        say(filter_summary(report, removed))
