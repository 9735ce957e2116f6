"""How the local engine's ``sign`` hands tasks to its forked workers: by index, through shared memory
(:class:`TaskBoard`), with the driver's cyclic garbage collection paused while it walks and hands out
(:func:`collector_paused`)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection inside: while the driver walks and hands out tasks it makes objects by the
    hundred thousand (a directory's entries, its names, the tasks) and little cyclic garbage, and each collection
    would look through them again (a few percent of its CPU). Collection resumes, as it was, on leaving."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


# A task's slot on the board (:class:`TaskBoard`): a files task of a few hundred files takes tens of KB pickled;
# a larger one (thousands of long paths, a stream's chunk of text) is handed to its worker through its pipe.
BOARD_SLOT_BYTES = 256 << 10


class TaskBoard:
    """Tasks handed out by index, through memory shared with the forked workers: no pickling thread, no write
    to a pipe per task. The driver posts task i (pickled) into slot i mod ``slots`` and counts it on a
    semaphore; a worker waits on the semaphore, takes the next index from a shared counter and reads its slot.
    Slot i mod ``slots`` is posted again only once task i was done (the driver keeps at most ``slots`` tasks
    handed out and not yet done), so a slot is never written while read. A task whose pickle is larger than a
    slot is marked so (length -1): its worker asks the driver for it, which sends it through that worker's pipe.
    Once every task is posted, the count of tasks is set and each worker is given one more index, at or past it:
    the end."""

    def __init__(self, context: Any, slots: int, slot_bytes: int) -> None:
        import mmap

        self.slots = slots
        self.slot_bytes = slot_bytes
        self.memory = mmap.mmap(-1, max(1, slots * slot_bytes))  # anonymous and shared: forked workers see it
        self.lengths = context.RawArray("q", slots)  # slot → the length of the task's pickle (-1: ask for it)
        self.taken = context.RawValue("q", 0)  # the next index to take
        self.count = context.RawValue("q", 1 << 62)  # the number of tasks, once all are posted
        self.lock = context.Lock()
        self.posted = context.Semaphore(0)

    def post(self, index: int, pickled: bytes | memoryview) -> bool:
        """Post task ``index`` (driver); False when too large for its slot (its worker will ask for it)."""
        slot = index % self.slots
        fits = len(pickled) <= self.slot_bytes
        if fits:
            start = slot * self.slot_bytes
            self.memory[start:start + len(pickled)] = pickled
        self.lengths[slot] = len(pickled) if fits else -1
        self.posted.release()
        return fits

    def end(self, count: int, workers: int) -> None:
        """Tell the ``workers`` that there are ``count`` tasks in all (driver)."""
        self.count.value = count
        for _ in range(workers):
            self.posted.release()

    def take(self) -> tuple[int, bytes | None] | None:
        """The next task's index and pickle (None: ask the driver for it), or None once all are taken (worker)."""
        self.posted.acquire()
        with self.lock:
            index = self.taken.value
            self.taken.value = index + 1
        if index >= self.count.value:
            return None
        slot = index % self.slots
        length = self.lengths[slot]
        if length < 0:
            return index, None
        start = slot * self.slot_bytes
        return index, self.memory[start:start + length]

    def close(self) -> None:
        self.memory.close()
