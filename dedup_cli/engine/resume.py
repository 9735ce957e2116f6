"""What ``find --work-dir`` resumes, for every engine: a stage is looked up under its key before it runs, read back
with one note when an earlier run kept it, else run and kept; the candidate stage's rounds likewise, one key a
round.

The key, the look-up, the note and the commit are written here once; what a stage keeps is its engine's (one file
of arrays in the driver, or a folder of parts written by the workers that the stage's file lists), given as the
functions that write and read it. The work folder itself, its keys and its checksums are
:class:`dedup_cli.store.checkpoints.WorkDir`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from dedup_cli.store.checkpoints import WorkDir
from dedup_cli.verification import Verification

Kept = TypeVar("Kept")
Arrays = dict[str, np.ndarray]

RESUMED = {"scored": "scored candidate pairs", "decisions": "exact checks and decisions"}
"""How the note of a resumed stage names what it reused."""


@dataclass
class Resume:
    """One ``find``'s work folder (None without ``--work-dir``), as its stages use it; ``note`` tells the user
    (``Progress.note``)."""

    work: WorkDir | None
    note: Callable[[str], None]

    def key(self, stage: str, depends: dict[str, object]) -> str | None:
        """The key of ``stage`` given what it depends on besides the stores, or None without a work folder."""
        return None if self.work is None else self.work.key(stage, **depends)

    def stage(self, stage: str, key: str | None, run: Callable[[], Kept], keep: Callable[[Kept, str], None],
              read: Callable[[Arrays, str], Kept]) -> Kept:
        """``stage`` (one of :data:`RESUMED`) as an earlier run kept it under ``key`` (``read`` turns its arrays back
        into what ``run`` gives), with a note; else ``run`` it and ``keep`` what it gave under ``key``."""
        if self.work is None or key is None:
            return run()
        kept = self.work.load(stage, key)
        if kept is not None:
            self.note(f"resuming: {RESUMED[stage]} from {self.path}")
            return read(kept, key)
        value = run()
        keep(value, key)
        return value

    def rounds(self, rounds: Sequence[tuple[int, int]], **depends: object
               ) -> tuple[list[str | None], dict[int, Arrays]]:
        """The key of each round of bands (first band, last band + 1) of the candidate stage, and the rounds an
        earlier run kept (by index), with one note naming their bands."""
        keys = [self.key("candidates", {**depends, "first_band": first, "last_band": last}) for first, last in rounds]
        kept = {}
        for index, key in enumerate(keys):
            found = None if self.work is None or key is None else self.work.load("candidates", key)
            if found is not None:
                kept[index] = found
        if kept:
            self.note(f"resuming: candidates for {band_ranges([rounds[index] for index in sorted(kept)])} from "
                      f"{self.path}")
        return keys, kept

    def save(self, stage: str, key: str | None, arrays: Arrays) -> None:
        """Keep ``arrays`` as ``stage`` under ``key`` (nothing without a work folder)."""
        if self.work is not None and key is not None:
            self.work.save(stage, key, arrays)

    @property
    def path(self) -> str:
        return "" if self.work is None else str(self.work.path)


def verification_arrays(verification: Verification | None) -> Arrays:
    """The exact checks done, as a kept stage holds them (``checked`` −1: none asked for)."""
    checked = -1 if verification is None else verification.checked
    missing = [] if verification is None else verification.unverifiable_documents
    return {"checked": np.array(checked), "unverifiable": np.array(missing, str)}


def kept_verification(kept: Arrays) -> Verification | None:
    """The exact checks :func:`verification_arrays` kept (their values stay with the pairs)."""
    checked = int(kept["checked"])
    return None if checked < 0 else Verification(np.empty(0), checked, kept["unverifiable"].tolist())


def band_ranges(rounds: Sequence[tuple[int, int]]) -> str:
    """Rounds (first band, last band + 1) as the user counts bands: ``bands 1–24, 37–48``."""
    merged: list[list[int]] = []
    for first, last in rounds:
        if merged and merged[-1][1] == first:
            merged[-1][1] = last
        else:
            merged.append([first, last])
    return "bands " + ", ".join(f"{first + 1}–{last}" for first, last in merged)
