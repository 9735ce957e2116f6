"""``dedup estimate``: the resemblance of two or three named documents, with its uncertainty."""

from __future__ import annotations

import json
from typing import Any

import click

from dedup_cli.cli.common import ESTIMATOR_BITS, echo_output, out_option, reports_errors
from dedup_cli.cli.pandas_hidden import pandas_hidden
from dedup_cli.cli.store_option import chosen_store
from dedup_cli.options.finding import EstimateOptions
from dedup_cli.options.vocabulary import DEFAULT_STORE, STORE_VARIABLE


@click.command()
@click.argument("arguments", nargs=-1, required=True, metavar="[STORE] ID ID [ID]")
@click.option("--store", "-s", type=click.Path(path_type=str), default=None,
              help=f"The store.  [default: the first argument when it is a store, else ${STORE_VARIABLE}, "
                   f"else {DEFAULT_STORE}]")
@click.option("--bits", "-b", type=ESTIMATOR_BITS, default=EstimateOptions.bits,
              help="Bits per value (b ≤ stored bits), or 1/2 (two documents): the lowest bits of two "
                   "permutations combined by XOR.  [default: all stored]")
@click.option("--exact", is_flag=True, help="Also re-read the documents and compute the exact resemblance.")
@click.option("--level", type=click.FloatRange(0.5, 1.0, min_open=True, max_open=True),
              default=EstimateOptions.level, help="Confidence level of the interval.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", help="Output format.")
@out_option
@reports_errors
def estimate(arguments: tuple[str, ...], store: str | None, fmt: str, out: str | None, **given: Any) -> None:
    """Estimate the resemblance of two or three documents, with its uncertainty.

    With three arguments the first is the store when it is one; --store names it otherwise.

    \b
    Example:
      dedup estimate sigs.parquet KJV/ruth-01.txt ASV/ruth-01.txt --exact
      dedup estimate sigs.parquet KJV/ruth-01.txt ASV/ruth-01.txt AKJV/ruth-01.txt --bits 2 --format json
    """
    import dedup_cli as api
    from dedup_cli.api.estimate import store_and_ids
    from dedup_cli.cli.summaries import estimate_lines

    if store is not None and len(arguments) == 4:  # STORE ID ID ID and --store: one store, named twice
        store, arguments = chosen_store(arguments[0], store), arguments[1:]
    store, ids = store_and_ids(store, arguments)
    with pandas_hidden():  # signatures and re-read documents never need pandas (dedup_cli.cli.pandas_hidden)
        record = api.estimate(ids, store, EstimateOptions(**given)).record()
    echo_output(json.dumps(record) if fmt == "json" else "\n".join(estimate_lines(record)), out)
