"""One way to name the store on every command that reads one: ``-s/--store``, beside the positional STORE of the
commands that have one (find, eval, info); naming two different stores is a usage error."""

from __future__ import annotations

import os

import click

from dedup_cli.errors import UsageError
from dedup_cli.objectstore.urls import is_url
from dedup_cli.options.vocabulary import DEFAULT_STORE, STORE_VARIABLE

store_option = click.option(
    "--store", "-s", "store_named", type=click.Path(path_type=str), default=None,
    help=f"The store (the same as STORE).  [default: ${STORE_VARIABLE}, else {DEFAULT_STORE}]")


def _same(first: str, second: str) -> bool:
    if is_url(first) or is_url(second):
        return first.rstrip("/") == second.rstrip("/")
    return os.path.abspath(first) == os.path.abspath(second)


def chosen_store(positional: str | None, named: str | None) -> str | None:
    """The store named by the positional STORE or by ``--store`` (None: neither, the default then applies).

    Raises:
        UsageError: both name stores, different ones.
    """
    if positional and named and not _same(positional, named):
        raise UsageError(f"STORE {positional} and --store {named} name two stores; give one of them")
    return positional or named
