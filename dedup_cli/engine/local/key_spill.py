"""The band keys of the later rounds of the candidate stage, written once, band by band, to a scratch file while the
first wave reads the store, so that each later wave reads its own bands' keys instead of the whole store again.

A wave of rounds keys a few bands of every document; the store holds every value of a document in one packed
signature (k·B/8 bytes), so a wave that reads the store reads every value to use a few. While the store stays in
the page cache that costs little; once it does not (10^8 documents of 272 bytes on a machine of 24 GB), each wave
is a read of the store from disk, and the reads grow as the waves times the store. The spill costs a write and a
read of 8 bytes a document for each later band instead: fewer bytes whenever a wave holds fewer bands than the
signature bytes ÷ 16 (:func:`worth_spilling`), and none of the later waves decodes a row group.

The file is band-major (one band's keys of every keyed document together), so a wave's band is one contiguous
read. It is an unnamed file (created and unlinked at once, or never named where the system allows), held open by
the driver and inherited by the forked readers, so that nothing is left on the disk whatever way the run ends, a
kill -9 included: the system frees it when the last process holding it ends. Each reader writes its row groups'
keys at their places with positioned writes (never a shared mapping, whose pages would count in every process's
resident memory), so what one writes the others read. Where the scratch folder cannot hold it (too little free
space, or a file system in memory, where it would take the memory the rounds are sized to leave), the stage reads
the store each wave as before: the pairs are the same either way.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from dataclasses import dataclass

import numpy as np

# Free space the spill leaves on its file system, besides its own size.
SPARE_BYTES = 1 << 30
# File systems whose files are held in memory.
IN_MEMORY = frozenset({"tmpfs", "ramfs"})


def worth_spilling(wave_bands: int, key_bytes: int, signature_bytes: int) -> bool:
    """Whether spilling reads and writes fewer bytes than reading the store again for each later wave: a later band
    costs 2·``key_bytes`` a document spilled (written, then read), against ``signature_bytes`` ÷ ``wave_bands`` a
    document of the store read again."""
    return 2 * key_bytes * wave_bands < signature_bytes


def file_system_type(path: str) -> str:
    """The type of the file system that holds ``path`` (``/proc/mounts``' longest mount point above it), or "" where
    it cannot be told."""
    path = os.path.realpath(path)
    best, kind = "", ""
    try:
        with open("/proc/mounts") as mounts:
            for line in mounts:
                fields = line.split()
                if len(fields) < 3:
                    continue
                point = fields[1].replace("\\040", " ")
                inside = path == point or path.startswith(point.rstrip("/") + "/")
                if inside and len(point) > len(best):
                    best, kind = point, fields[2]
    except OSError:
        return ""
    return kind


def has_room(size: int, parent: str) -> bool:
    """Whether the file system of ``parent`` can hold a spill of ``size`` bytes: on a disk (not in memory), with
    :data:`SPARE_BYTES` left free besides."""
    try:
        return file_system_type(parent) not in IN_MEMORY and shutil.disk_usage(parent).free >= size + SPARE_BYTES
    except OSError:
        return False


@dataclass
class KeySpill:
    """The keys of ``bands`` (sorted band numbers) of ``documents`` keyed documents, ``dtype``, in the unnamed file
    open as ``descriptor``: band ``bands[i]`` at row i, a document's key at its place among the keyed."""

    bands: np.ndarray
    documents: int
    dtype: np.dtype
    descriptor: int

    @classmethod
    def create(cls, bands: list[int], documents: int, dtype: np.dtype, parent: str | None = None
               ) -> KeySpill | None:
        """A spill for these bands in ``parent`` (the system's temporary folder by default), or None where it
        cannot hold it (:func:`has_room`)."""
        dtype = np.dtype(dtype)
        size = len(bands) * documents * dtype.itemsize
        parent = tempfile.gettempdir() if parent is None else parent
        if not bands or not documents or not has_room(size, parent):
            return None
        try:
            unnamed = tempfile.TemporaryFile(dir=parent, prefix="dedup-band-keys-", buffering=0)
        except OSError:
            return None
        descriptor = os.dup(unnamed.fileno())
        unnamed.close()
        try:
            os.ftruncate(descriptor, size)
        except OSError:
            os.close(descriptor)
            return None
        return cls(np.asarray(bands, np.int64), documents, dtype, descriptor)

    @property
    def last_band(self) -> int:
        """One past the highest band spilled."""
        return int(self.bands[-1]) + 1

    def write(self, block: np.ndarray, first_band: int, columns: np.ndarray) -> None:
        """Write the spilled bands of ``block`` (the keys of bands ``first_band`` … of a block of documents,
        dtype[bands, m]) at the keys' ``columns`` (int64[m], increasing: the documents' places among the keyed);
        a run of consecutive places is one write a band, scattered places a read, an update and a write."""
        last = first_band + block.shape[0]
        rows = np.flatnonzero((self.bands >= first_band) & (self.bands < last)).tolist()
        if not rows or not columns.size:
            return
        start, stop = int(columns[0]), int(columns[-1]) + 1
        contiguous = stop - start == columns.size
        item = self.dtype.itemsize
        # Scattered places are read, updated and written back, which must not meet another reader's write between
        # them (its places may lie among these): that takes the file alone, a run of places shares it. The locks
        # are a process's own (POSIX record locks), so the forked readers, who share one open file, exclude
        # each other.
        fcntl.lockf(self.descriptor, fcntl.LOCK_SH if contiguous else fcntl.LOCK_EX)
        try:
            for row in rows:
                band_keys = np.ascontiguousarray(block[int(self.bands[row]) - first_band], self.dtype)
                offset = (row * self.documents + start) * item
                if not contiguous:
                    span = np.frombuffer(os.pread(self.descriptor, (stop - start) * item, offset), self.dtype).copy()
                    span[columns - start] = band_keys
                    band_keys = span
                os.pwrite(self.descriptor, band_keys.tobytes(), offset)
        finally:
            fcntl.lockf(self.descriptor, fcntl.LOCK_UN)

    def fill(self, keys: np.ndarray, first_band: int) -> None:
        """Read the spilled bands among ``keys``' rows (bands ``first_band`` … ``first_band`` + rows − 1, C order)
        into them: each a contiguous read of the file."""
        last = first_band + keys.shape[0]
        for row in np.flatnonzero((self.bands >= first_band) & (self.bands < last)).tolist():
            offset = row * self.documents * self.dtype.itemsize
            view = memoryview(keys[int(self.bands[row]) - first_band]).cast("B")
            while view.nbytes:
                done = os.preadv(self.descriptor, [view], offset)
                if not done:
                    raise OSError("the band keys spilled to the temporary folder ended early")
                view, offset = view[done:], offset + done

    def close(self) -> None:
        """Close the file, which frees it."""
        os.close(self.descriptor)
