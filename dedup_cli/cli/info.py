"""``dedup info``: a store's parameters, counts and runs as JSON."""

from __future__ import annotations

import json

import click

from dedup_cli.cli.common import echo_output, out_option, reports_errors
from dedup_cli.cli.pandas_hidden import pandas_hidden
from dedup_cli.options.vocabulary import default_store


@click.command()
@click.argument("store", type=click.Path(path_type=str), required=False)
@out_option
@reports_errors
def info(store: str | None, out: str | None) -> None:
    """Print a store's parameters, document counts and sign runs as JSON.

    STORE defaults to $DEDUP_STORE, else ./dedup.parquet.

    \b
    Example:
      dedup info sigs.parquet
    """
    import dedup_cli as api

    with pandas_hidden():  # reading a store never needs pandas (dedup_cli.cli.pandas_hidden)
        found = api.info(default_store(store))
    echo_output(json.dumps(found.record(), indent=2), out)
