"""The ``dedup`` command line: Click options → the API's option objects, results → output and exit codes.

Nothing here computes: each command (one module of :mod:`dedup_cli.cli` each) builds the options of
:mod:`dedup_cli.options` (whose defaults are the flags' defaults), calls the public API (:mod:`dedup_cli`), and
prints what comes back: records through :mod:`dedup_cli.cli.record_writers`, summaries and reports through
:mod:`dedup_cli.cli.summaries`, :mod:`dedup_cli.cli.plan_report` and :mod:`dedup_cli.cli.eval_report`. numpy and
pyarrow are imported only by the commands that run, so ``dedup --help`` and ``dedup --version`` stay fast.

Exit codes: 0 success, 1 runtime error (bad input, damaged store, unreadable files), 2 usage error,
3 duplicates found with find --fail-on-duplicates, 130 interrupted.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping
from typing import TYPE_CHECKING

import click

import dedup_cli.cli.blas_threads  # noqa: F401  (first: before any command imports numpy)
from dedup_cli.cli.common import (
    CONTEXT_SETTINGS,
    EXIT_DUPLICATES,
    EXIT_ERROR,
    EXIT_OK,
    EXIT_USAGE,
    flag,
    message,
)
from dedup_cli.version import __version__

if TYPE_CHECKING:  # imported when first looked up (LazyCommands); named here for the layer rules and mypy
    import dedup_cli.cli.estimate
    import dedup_cli.cli.eval
    import dedup_cli.cli.filter
    import dedup_cli.cli.find
    import dedup_cli.cli.info
    import dedup_cli.cli.plan
    import dedup_cli.cli.review
    import dedup_cli.cli.sign  # noqa: F401

__all__ = ["EXIT_DUPLICATES", "EXIT_ERROR", "EXIT_OK", "EXIT_USAGE", "cli", "flag", "message"]


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


def _variables_spelt_like_flags(command: click.Command, name: str) -> None:
    """Name each option's environment variable after its long flag (``--format`` → DEDUP_FIND_FORMAT), as the
    help says, where Click would name it after the parameter (DEDUP_FIND_FMT); that older name still works."""
    for parameter in command.params:
        if not isinstance(parameter, click.Option) or parameter.envvar or parameter.name is None:
            continue
        longs = [option for option in parameter.opts if option.startswith("--")]
        if not longs:
            continue
        spelt = longs[0][2:].replace("-", "_").upper()
        if spelt != parameter.name.upper():
            parameter.envvar = [f"DEDUP_{name.upper()}_{spelt}", f"DEDUP_{name.upper()}_{parameter.name.upper()}"]


COMMANDS = {"sign": "dedup_cli.cli.sign:sign", "find": "dedup_cli.cli.find:find",
            "filter": "dedup_cli.cli.filter:filter_corpus", "estimate": "dedup_cli.cli.estimate:estimate",
            "eval": "dedup_cli.cli.eval:evaluate", "plan": "dedup_cli.cli.plan:plan", "info": "dedup_cli.cli.info:info",
            "review": "dedup_cli.cli.review:review"}
"""Each command's name and where it is defined (``module:attribute``)."""


class LazyCommands(MutableMapping[str, click.Command]):
    """The group's commands by name, each imported when first looked up: a run of ``dedup find`` does not import
    the other commands' modules and the options they build their defaults from (7 ms of every start-up). Listing
    the names imports nothing; ``dedup --help`` and iterating the items import them all."""

    def __init__(self, places: dict[str, str]) -> None:
        self._places = dict(places)
        self._loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._loaded:
            module, attribute = self._places[name].split(":")  # KeyError for an unknown name, as a dict
            command = getattr(importlib.import_module(module), attribute)
            _variables_spelt_like_flags(command, name)
            self._loaded[name] = command
        return self._loaded[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._places.pop(name, None)
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        if name not in self._places and name not in self._loaded:
            raise KeyError(name)
        self._places.pop(name, None)
        self._loaded.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter([*self._places, *(name for name in self._loaded if name not in self._places)])

    def __len__(self) -> int:
        return len(set(self._places) | set(self._loaded))


cli.commands = LazyCommands(COMMANDS)
