"""Where the records of a CSV or TSV file end, found with numpy from the bytes alone, a block at a time.

TSV has no quoting: every ``\\n`` ends a record.

CSV is read as Python's ``csv`` module reads it with its default dialect. A quote matters only where a field
starts (just after a delimiter, a newline or the start of the file): there it opens a quoted field, in which
``""`` is a quote and the delimiter and newlines are plain characters, until a quote not doubled closes it. A quote
anywhere else in an unquoted field (``a,b"c``) is a plain character, and so is anything after a closing quote
(``"a"b``). A newline ends a record unless it is inside a quoted field.

How the scan stays exact without a loop over bytes
    That reading is a four-state automaton (field start, unquoted, quoted, quote seen inside quoted), but only
    "inside a quoted field or not" decides where records end, and only quotes change it. Take the maximal runs of
    consecutive quotes. Outside quotes, a run of ``k`` quotes where a field starts opens a quoted field when ``k``
    is odd (``"``, ``\"""``) and leaves it closed when ``k`` is even (``""``, an empty field); a run in the middle
    of an unquoted field is plain characters. Inside quotes, a run of ``k`` quotes closes the field when ``k`` is
    odd (its pairs are quotes, the last one closes) and stays inside when even. So a run of even length changes
    nothing, and a run of odd length is one of two functions of "inside": *toggle*, where a field starts, and
    *close*, in the middle of a field (inside → outside, outside → outside). The state after each odd run is then
    the toggles counted since the last *close* (or since the start of the data, from the state carried in), a
    cumulative sum and a running maximum; a newline ends a record when the odd runs before it leave the state
    outside, a ``searchsorted``. Only the quotes' positions and the byte before each run are looked at.

Blocks
    The state (inside or not, and whether the next byte would start a field) is carried from block to block, and a
    run of quotes at the end of a block is left for the next one (it may go on there), so the ends found depend on
    the bytes alone, however reads return them. A byte-order mark opening a file is skipped, so that a quote after
    it opens the header's first field as it does for a reader that drops the mark.
"""

from __future__ import annotations

import numpy as np

from dedup_cli.inputs.decoding import BOM

QUOTE = 0x22
NEWLINE = 0x0A
DELIMITER_BYTES = {"csv": 0x2C, "tsv": 0x09}


def quote_runs(array: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The runs of consecutive quotes of ``array`` (uint8[n]): (the position where each starts, its length),
    int64[r] each."""
    quotes = np.flatnonzero(array == QUOTE)
    if not quotes.size:
        return quotes, quotes
    firsts = np.flatnonzero(np.diff(quotes) != 1) + 1  # where a run starts, among the quotes
    starts = np.concatenate([[0], firsts])
    return quotes[starts], np.diff(np.concatenate([starts, [quotes.size]]))


def csv_record_ends(array: np.ndarray, inside: bool, at_field_start: bool, delimiter: int = DELIMITER_BYTES["csv"]
                    ) -> tuple[np.ndarray, bool]:
    """The record ends of CSV bytes ``array`` (uint8[n], whole runs of quotes: see the module docstring), as
    int64[k] positions just past each newline outside quotes, and whether ``array`` ends inside a quoted field.

    Args:
        array: the bytes to scan.
        inside: whether they start inside a quoted field.
        at_field_start: whether their first byte starts a field (the byte before was a delimiter or newline, or
            there is none).
        delimiter: the field delimiter's byte.
    """
    newlines = np.flatnonzero(array == NEWLINE)
    starts, lengths = quote_runs(array)
    odd = (lengths & 1) == 1
    starts = starts[odd]
    if not starts.size:
        return (newlines[:0] if inside else newlines + 1), inside
    before = array[np.maximum(starts - 1, 0)]
    toggles = (before == delimiter) | (before == NEWLINE)
    if starts[0] == 0:
        toggles[0] = at_field_start
    index = np.arange(starts.size)
    last_close = np.maximum.accumulate(np.where(toggles, -1, index))
    counted = np.cumsum(toggles)
    since = counted - np.where(last_close >= 0, counted[np.maximum(last_close, 0)], 0)
    after = np.where(last_close >= 0, False, inside) ^ ((since & 1) == 1)  # inside after each odd run
    runs_before = np.searchsorted(starts, newlines) - 1
    inside_at = np.where(runs_before >= 0, after[np.maximum(runs_before, 0)], inside)
    return newlines[~inside_at] + 1, bool(after[-1])


class RecordEnds:
    """Finds the record ends of a CSV or TSV stream in a buffer that grows at its end and is cut at its front,
    carrying the quote state from one call to the next (see the module docstring).

    ``file_start``: the buffer starts at the start of the file (a byte-order mark there is skipped); else at the
    start of a record.
    """

    def __init__(self, kind: str, file_start: bool = True) -> None:
        self.quoted = kind == "csv"
        self.delimiter = DELIMITER_BYTES[kind]
        self.inside = False
        self.at_field_start = True
        self.scanned = 0  # bytes of the buffer already scanned
        self.mark_checked = not (file_start and self.quoted)

    def scan(self, held: bytes | bytearray | memoryview, final: bool = False) -> np.ndarray:
        """The record ends (int64[k], positions just past each newline) in ``held`` after what earlier calls
        scanned; ``final``: ``held`` holds the rest of the stream, so a run of quotes at its end is scanned too."""
        if not self.mark_checked:
            if len(held) < len(BOM) and not final and bytes(held) == BOM[: len(held)]:
                return np.empty(0, dtype=np.int64)  # too few bytes yet to tell a byte-order mark
            self.mark_checked = True
            self.scanned = len(BOM) if bytes(held[: len(BOM)]) == BOM else 0
        array = np.frombuffer(held, dtype=np.uint8)[self.scanned :]
        if not self.quoted:
            self.scanned += array.size
            return np.flatnonzero(array == NEWLINE) + (self.scanned - array.size + 1)
        if not final and array.size and array[-1] == QUOTE:
            others = np.flatnonzero(array != QUOTE)  # the run of quotes at the end may go on in the next block
            array = array[: int(others[-1]) + 1 if others.size else 0]
        if not array.size:
            return np.empty(0, dtype=np.int64)
        ends, self.inside = csv_record_ends(array, self.inside, self.at_field_start, self.delimiter)
        self.at_field_start = bool(array[-1] == self.delimiter or array[-1] == NEWLINE)
        start, self.scanned = self.scanned, self.scanned + array.size
        return ends + start

    def cut(self, count: int) -> None:
        """``count`` bytes were removed from the front of the buffer (all of them scanned)."""
        self.scanned -= count

    def rewind(self, length: int) -> None:
        """The buffer was cut back to ``length`` bytes, ending where a record ends (what follows was dropped)."""
        self.scanned, self.inside, self.at_field_start, self.mark_checked = length, False, True, True
