"""Errors a user can cause, each carrying a one-line message that names the fix.

The CLI maps :class:`DedupError` to exit code 1 and :class:`UsageError` to exit code 2;
anything else is a bug and is allowed to surface as a traceback.
"""

from __future__ import annotations


class DedupError(Exception):
    """A runtime problem caused by input or environment (exit code 1)."""


class UsageError(DedupError, ValueError):
    """A bad combination of options or parameters (exit code 2)."""


class InputError(DedupError):
    """An input file or directory cannot be read."""


class StoreError(DedupError):
    """A signature store is missing, foreign, damaged or incompatible."""
