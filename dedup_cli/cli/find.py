"""``dedup find``: groups, pairs, triples or members from a store."""

from __future__ import annotations

import sys
from typing import Any

import click

from dedup_cli.cli.common import (
    EXIT_DUPLICATES,
    StageBars,
    engine_of,
    engine_options,
    find_options,
    flag,
    out_option,
    quiet_option,
    reports_errors,
    say,
    tuning_options,
    warn,
    write_records,
)
from dedup_cli.cli.pandas_hidden import pandas_hidden
from dedup_cli.cli.store_option import chosen_store, store_option
from dedup_cli.errors import UsageError
from dedup_cli.options.finding import FindOptions
from dedup_cli.options.vocabulary import OUTPUT_FORMATS, OUTPUT_KINDS, default_store


@click.command()
@click.argument("store", type=click.Path(path_type=str), required=False)
@store_option
@find_options
@click.option("--output", "kind", type=click.Choice(OUTPUT_KINDS), default="groups", help="What to print.")
@click.option("--format", "fmt", type=click.Choice(OUTPUT_FORMATS), default="jsonl", help="Output format.")
@out_option
@click.option("--no-header", is_flag=True, help="Omit the header row of TSV/CSV output.")
@tuning_options
@click.option("--work-dir", type=click.Path(path_type=str, file_okay=False), default=None, metavar="DIR",
              help="Keep each completed stage in DIR (created if missing; for --engine dask, a path every worker "
                   "sees), so that the same find run again after a failure resumes there.")
@click.option("--keep-work", is_flag=True, help="With --work-dir: keep its files after the run completes.")
@click.option("--fail-on-duplicates", is_flag=True,
              help=f"Exit with code {EXIT_DUPLICATES} when anything is reported (like grep), for scripts and cron.")
@quiet_option
@click.option("-v", "--verbose", is_flag=True, help="A second summary line: the store, its runs and the banding.")
@engine_options
@reports_errors
def find(store: str | None, store_named: str | None, group_method: str | None, kind: str, fmt: str, out: str | None,
         no_header: bool, fail_on_duplicates: bool, quiet: bool, verbose: bool, **given: Any) -> None:
    """Report near-duplicate groups, pairs, triples or members in a signature store.

    STORE (or --store) defaults to $DEDUP_STORE, else ./dedup.parquet.

    \b
    Example:
      dedup find --threshold 0.5 --bits 2
      dedup find sigs.parquet --threshold 0.8 --output pairs --format tsv
      dedup find sigs.parquet --group strict --keep longest --output members --format tsv
      dedup find train.parquet --against test.parquet --only-across --output pairs
    """
    import dedup_cli as api
    from dedup_cli.cli.summaries import find_store_line, find_summary, find_warnings, stdin_warning
    from dedup_cli.engine.stages.results import fields_of, find_records
    from dedup_cli.options.checks import counted

    if kind == "triples" and given["ways"] != 3:
        raise UsageError("--output triples needs --ways 3")
    engine = engine_of(given)
    options = FindOptions(group=group_method, engine=engine, **given)
    store = default_store(chosen_store(store, store_named))
    with StageBars(quiet) as stages:
        with pandas_hidden():  # as in the core install, on either engine (dedup_cli.cli.pandas_hidden)
            result = api.find(store, options, stages)
        totals = {"pairs": result.pair_count, "groups": result.group_count, "triples": result.triple_count}
        advance = stages.stage("writing", totals.get(kind), "records")
        fields = (fields_of(kind, result, True), fields_of(kind, result, False))
        written = write_records(find_records(kind, result), kind, fields, fmt, out, not no_header,
                                EXIT_DUPLICATES if fail_on_duplicates else None, advance)
    unverified = stdin_warning(result)
    if unverified is not None:
        warn(unverified)
    if not quiet:
        say(find_summary(store, result, (counted(written, kind[:-1], kind), out)))
        if verbose:
            say(find_store_line(store, result))
    for line in find_warnings(result, flag):  # with -q too: they change what the output means
        warn(line)
    if fail_on_duplicates and written:
        sys.exit(EXIT_DUPLICATES)
