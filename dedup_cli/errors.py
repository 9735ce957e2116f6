"""Errors a user can cause, each carrying a one-line message that names the fix.

The CLI maps :class:`UsageError` (and so :class:`OptionError`) to exit code 2 and every other
:class:`DedupError` to exit code 1; anything else is a bug and is allowed to surface as a traceback. The
math and stage modules raise plain ``ValueError`` for arguments no caller should pass: those are bugs too.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable

_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([a-z_]+)\}")


def _fill(template: str, spell: Callable[[str], str]) -> str:
    def replace(match: re.Match[str]) -> str:
        return match.group(0)[0] if match.group(1) is None else spell(match.group(1))

    return _PLACEHOLDER.sub(replace, template)


class DedupError(Exception):
    """A runtime problem caused by input or environment (exit code 1).

    With ``options=True`` the message is a template that names options as ``{name}`` (and ``{{``, ``}}`` for
    literal braces): ``str(error)`` spells them as the library's parameters (``jobs``) and :meth:`worded` lets
    the command line spell them as its flags (``--jobs``).
    """

    def __init__(self, message: str = "", *, options: bool = False) -> None:
        self.template = message if options else None
        super().__init__(_fill(message, str) if options else message)

    def worded(self, spell: Callable[[str], str]) -> str:
        """The message with every ``{option}`` replaced by ``spell(option)``."""
        return str(self) if self.template is None else _fill(self.template, spell)


class UsageError(DedupError, ValueError):
    """A bad combination of options or parameters (exit code 2)."""


class OptionError(UsageError):
    """An option value the library refuses, with the parameter's name and value.

    The message is a template naming options as ``{option}`` (see :class:`DedupError`): ``str(error)`` says
    ``bits 9 exceeds …``, the command line ``--bits 9 exceeds …``.

    Attributes:
        name: the parameter, e.g. ``"bits"``.
        value: the value refused.
    """

    def __init__(self, name: str, value: object, template: str) -> None:
        self.name = name
        self.value = value
        super().__init__(template, options=True)


class InputError(DedupError):
    """An input file or directory cannot be read."""


class StoreError(DedupError):
    """A signature store is missing, foreign, damaged or incompatible."""


STORE_SUFFIX = "-sigs.parquet"


def store_beside(path: str | os.PathLike[str]) -> str:
    """A new store's name beside the corpus ``path``: ``corpus.parquet`` → ``corpus-sigs.parquet``, ``data.jsonl``
    → ``data-sigs.parquet``, ``corpus/`` → ``corpus-sigs.parquet`` (the name without its last extension, in the
    same directory), so that signing into it never overwrites the corpus."""
    text = os.fspath(path).rstrip("/") or "corpus"
    folder, name = os.path.split(text)
    stem = name if name.startswith(".") else os.path.splitext(name)[0]
    return os.path.join(folder, (stem or "corpus") + STORE_SUFFIX)


class NotAStore(StoreError):
    """A path given as a store holds something else (a corpus file or directory, maybe): ``problem`` says what;
    the message adds how to sign its documents into a new store beside it (:func:`store_beside`) and name that
    one, a hint that works when followed."""

    def __init__(self, path: str | os.PathLike[str], problem: str) -> None:
        self.problem = problem
        store = shlex.quote(store_beside(path))
        super().__init__(f"{problem}; if it holds documents, sign them into a store first "
                         f"(dedup sign {shlex.quote(os.fspath(path))} -o {store}) and name that store")


class DedupWarning(UserWarning):
    """Something the run did that the user should know of, though it went on (:func:`warnings.warn` category;
    the CLI prints it as one ``warning:`` line)."""
