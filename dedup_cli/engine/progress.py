"""What a long ``find`` or ``eval`` tells its caller as it goes: each stage by name, and its steps when they can be
counted. The command line draws these as bars on a terminal; the library is silent unless given a reporter."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

Advance = Callable[[int], None]
"""Told how many more steps of the current stage are done."""


class Progress(Protocol):
    """Receives the stages of a run in order."""

    def stage(self, name: str, total: int | None = None, unit: str = "steps") -> Advance:
        """A stage begins (the previous one is over); ``total`` steps, when known. Returns the step counter."""
        ...

    def note(self, text: str) -> None:
        """Something the user should know as it happens (what a resumed run reused)."""
        ...


class _Silent:
    def stage(self, name: str, total: int | None = None, unit: str = "steps") -> Advance:
        return _ignore

    def note(self, text: str) -> None:
        pass


def _ignore(count: int) -> None:
    pass


silent: Progress = _Silent()
"""The reporter that reports nothing (the library's default)."""
