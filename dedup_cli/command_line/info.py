"""``dedup info``: a store's parameters, counts and runs as JSON."""

from __future__ import annotations

import json

import click

from dedup_cli.command_line.common import (
    reports_errors,
)
from dedup_cli.options.vocabulary import default_store


@click.command()
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
