"""``dedup info``: a store's parameters, counts and runs as JSON, or its live ids one a line."""

from __future__ import annotations

import json

import click

from dedup_cli.cli.common import echo_output, out_option, output_stream, reports_errors
from dedup_cli.cli.pandas_hidden import pandas_hidden
from dedup_cli.cli.store_option import chosen_store, store_option
from dedup_cli.options.vocabulary import default_store


@click.command()
@click.argument("store", type=click.Path(path_type=str), required=False)
@store_option
@click.option("--ids", is_flag=True,
              help="Print the live documents' ids instead, one a line in id order (TSV-escaped: \\\\, \\t, \\n, \\r).")
@out_option
@reports_errors
def info(store: str | None, store_named: str | None, ids: bool, out: str | None) -> None:
    """Print a store's parameters, document counts and sign runs as JSON.

    STORE (or --store) defaults to $DEDUP_STORE, else ./dedup.parquet.

    \b
    Example:
      dedup info sigs.parquet
      dedup info sigs.parquet --ids | grep -c '^KJV/'
    """
    import dedup_cli as api

    path = default_store(chosen_store(store, store_named))
    if ids:
        _write_ids(path, out)
        return
    with pandas_hidden():  # reading a store never needs pandas (dedup_cli.cli.pandas_hidden)
        found = api.info(path)
    echo_output(json.dumps(found.record(), indent=2), out)


def _write_ids(path: str, out: str | None) -> None:
    """The store's live ids to ``out`` (stdout when None), a batch at a time."""
    import dedup_cli as api
    from dedup_cli.inputs.decoding import tsv_field

    with pandas_hidden():
        batches = api.open_store(path).live_ids()
        with output_stream(out) as stream:  # a closed pipe stops quietly (reports_errors)
            for batch in batches:
                text = "\n".join(batch)
                if text.count("\n") != len(batch) - 1 or "\\" in text or "\t" in text or "\r" in text:
                    text = "\n".join(tsv_field(name) for name in batch)  # an id holding a line break or tab
                stream.write(text + "\n")
