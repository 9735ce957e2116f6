"""Where CSV and TSV records end: the vectorised scan against the four-state automaton run one byte at a time, however
the bytes are cut into blocks and the buffer is cut at its front."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dedup_cli.inputs.decoding import BOM
from dedup_cli.inputs.record_ends import RecordEnds, csv_record_ends

FIELD_START, UNQUOTED, QUOTED, QUOTE_IN_QUOTED = range(4)


def automaton_ends(data: bytes, delimiter: int = 0x2C) -> tuple[list[int], bool]:
    """The reference: Python's csv reader (default dialect, not strict) as a four-state automaton, a byte at a time;
    the positions just past each newline that ends a record, and whether the data ends inside a quoted field."""
    state, ends = FIELD_START, []
    for position in range(3 if data.startswith(BOM) else 0, len(data)):
        byte = data[position]
        if state == QUOTED:
            state = QUOTE_IN_QUOTED if byte == 0x22 else QUOTED
        elif byte == 0x0A:
            ends.append(position + 1)
            state = FIELD_START
        elif byte == delimiter:
            state = FIELD_START
        elif byte == 0x22:
            state = QUOTED if state in (FIELD_START, QUOTE_IN_QUOTED) else UNQUOTED
        else:
            state = UNQUOTED
    return ends, state == QUOTED


def scanned_ends(data: bytes, blocks: list[int], kind: str = "csv") -> tuple[list[int], bool]:
    """The record ends :class:`RecordEnds` finds when ``data`` arrives in blocks of the given sizes, the buffer cut
    at its front after every end found (as the chunk planner cuts it)."""
    scanner, held, at, offset, ends = RecordEnds(kind), bytearray(), 0, 0, []
    for size in [*blocks, len(data)]:
        block = data[at : at + size]
        at += len(block)
        held += block
        found = scanner.scan(held, final=at >= len(data)).tolist()
        ends += [offset + end for end in found]
        if found:
            del held[: found[-1]]
            scanner.cut(found[-1])
            offset += found[-1]
        if at >= len(data):
            return ends, scanner.inside
    raise AssertionError("unreachable")


CSV_BYTES = st.lists(st.sampled_from([b'"', b",", b"\n", b"a", b"\r", b'""', b"\xc3\xa9"]), max_size=80).map(b"".join)
BLOCKS = st.lists(st.integers(1, 9), max_size=30)


@settings(max_examples=400)
@given(data=CSV_BYTES, blocks=BLOCKS, mark=st.booleans())
def test_the_scan_finds_the_automatons_record_ends_whatever_the_blocks(data: bytes, blocks: list[int],
                                                                       mark: bool) -> None:
    data = BOM + data if mark else data
    assert scanned_ends(data, blocks) == automaton_ends(data)
    assert scanned_ends(data, []) == automaton_ends(data)


@settings(max_examples=200)
@given(data=CSV_BYTES, inside=st.booleans(), at_field_start=st.booleans())
def test_the_scan_of_one_block_from_any_state(data: bytes, inside: bool, at_field_start: bool) -> None:
    """From inside quotes (a quote first), or mid-field (an ``x`` first), as the automaton would be there."""
    prefix = b'"' if inside else (b"" if at_field_start else b"x")
    expected, ends_inside = automaton_ends(prefix + data)
    if data.startswith(b'"') and not inside and not at_field_start:
        return  # a run of quotes is never cut from the byte before it
    ends, got_inside = csv_record_ends(np.frombuffer(data, np.uint8), inside, at_field_start)
    assert ((ends + len(prefix)).tolist(), got_inside) == (expected, ends_inside)


def test_quotes_matter_only_where_a_field_starts() -> None:
    assert automaton_ends(b'a,b"c\nd\n') == ([6, 8], False)  # a stray quote in an unquoted field
    assert scanned_ends(b'a,b"c\nd\n', [3]) == ([6, 8], False)
    assert scanned_ends(b'"a\nb","x""\n"\ny"z\n', [1, 1, 1]) == ([13, 17], False)
    assert scanned_ends(b'1,"open\n2,x\n', [2]) == ([], True)  # a quoted field left open to the end
    assert scanned_ends(BOM + b'"h\n1",t\n', [1, 1, 1, 1]) == ([11], False)  # a byte-order mark, then a quote
    assert scanned_ends(b'12" pipe\n"a\n', [], "tsv") == ([9, 12], False)  # TSV: every newline


@settings(max_examples=50)
@given(seed=st.integers(0, 2**32 - 1))
def test_long_random_csv_in_large_blocks(seed: int) -> None:
    rng = np.random.default_rng(seed)
    data = rng.choice(np.frombuffer(b'"",\n\naaaaaaaaaa', np.uint8), size=5000).tobytes()
    blocks = rng.integers(1, 700, size=20).tolist()
    assert scanned_ends(data, blocks) == automaton_ends(data)
