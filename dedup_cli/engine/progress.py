"""What a long ``find`` or ``eval`` tells its caller as it goes: each stage by name, and its steps when they can be
counted; and what ``sign`` tells, bytes of the inputs. The command line draws these as bars on a terminal; the
library is silent unless given a reporter."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from dedup_cli.inputs.locations import FileRun, Source
    from dedup_cli.inputs.report import ReadReport

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


class InputProgress:
    """``sign``'s progress: the caller's callbacks, told the inputs' total (``on_start``) once the walk of the
    inputs has found it, notes (``on_note``), and bytes read or skipped (``progress``); bytes done before the
    total is known are added up and told right after it, so a walk that goes on while the first tasks sign never
    shows a bar without an end."""

    def __init__(self, on_start: Callable[[int | None], None] | None, progress: Advance | None,
                 on_note: Callable[[str], None] | None = None) -> None:
        self.on_start = on_start
        self.progress = progress
        self.on_note = on_note
        self.started = False
        self.owed = 0

    def walked(self, sources: Iterable[Source | FileRun], read: ReadReport) -> Iterator[Source | FileRun]:
        yield from sources
        self.start(read.input_bytes)

    def start(self, total: int | None) -> None:
        if self.started:
            return
        self.started = True
        if self.on_start is not None:
            self.on_start(total)
        if self.owed:
            self.advance(0)

    def note(self, text: str) -> None:
        """Something the user should know as it happens (an input a cluster cannot share out), told ``on_note``."""
        if self.on_note is not None:
            self.on_note(text)

    def advance(self, count: int) -> None:
        if not self.started:
            self.owed += count
        elif self.progress is not None:
            self.progress(self.owed + count)
            self.owed = 0
