"""The ``dedup`` command line: Click options → the API's option objects, results → output and exit codes.

Nothing here computes: each command (one module of :mod:`dedup_cli.cli` each) builds the options of
:mod:`dedup_cli.options` (whose defaults are the flags' defaults), calls the public API (:mod:`dedup_cli`), and
prints what comes back: records through :mod:`dedup_cli.cli.writers`, summaries and reports through
:mod:`dedup_cli.cli.summaries`, :mod:`dedup_cli.cli.plan_report` and :mod:`dedup_cli.cli.eval_report`. numpy and
pyarrow are imported only by the commands that run, so ``dedup --help`` and ``dedup --version`` stay fast.

Exit codes: 0 success, 1 runtime error (bad input, damaged store, unreadable files), 2 usage error,
3 duplicates found with find --fail-on-duplicates, 130 interrupted.
"""

from __future__ import annotations

import click

from dedup_cli.cli.common import (
    CONTEXT_SETTINGS,
    EXIT_DUPLICATES,
    EXIT_ERROR,
    EXIT_OK,
    EXIT_USAGE,
    flag,
    message,
)
from dedup_cli.cli.estimate import estimate
from dedup_cli.cli.eval import evaluate
from dedup_cli.cli.filter import filter_corpus
from dedup_cli.cli.find import find
from dedup_cli.cli.info import info
from dedup_cli.cli.plan import plan
from dedup_cli.cli.sign import sign
from dedup_cli.version import __version__

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


for command in (sign, find, filter_corpus, estimate, evaluate, plan, info):
    cli.add_command(command)
    assert command.name is not None
    _variables_spelt_like_flags(command, command.name)
