"""Reading as tasks: chunks of lines cut by the bytes alone and split as iter_lines splits, tasks that travel.

The reference for lines is :func:`dedup_cli.inputs.byte_streams.iter_lines` over the whole stream, what reading did
before it was cut into tasks: every line number, line (or None when over the limit) and byte count must be the
same, whatever the blocks the stream returns and whether a chunk carries its lines or their place in the file.
"""

from __future__ import annotations

import io
import pickle
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dedup_cli.inputs import chunks
from dedup_cli.inputs.byte_streams import iter_lines
from dedup_cli.inputs.chunks import LineChunk, chunk_lines, in_place_chunks, line_chunks
from dedup_cli.inputs.reading import read_inputs
from dedup_cli.inputs.report import ReadReport
from dedup_cli.inputs.tasks import FilesTask, LinesTask, read_task
from dedup_cli.options.input_options import InputOptions

LINE_PIECES = [b"a", b"word ", b'{"text": "x"}', b"\r", b"\xef\xbb\xbf", b"\xc3\xa9", b"\t", b" " * 9, b"z" * 40]


class Dribble(io.RawIOBase):
    """A stream returning at most ``most`` bytes a read, as a pipe may."""

    def __init__(self, data: bytes, most: int) -> None:
        super().__init__()
        self.data, self.at, self.most = data, 0, most

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        size = self.most if size < 0 else min(size, self.most)
        piece = self.data[self.at : self.at + size]
        self.at += len(piece)
        return piece

    def readinto(self, buffer: Any) -> int:
        piece = self.read(len(buffer))
        buffer[: len(piece)] = piece
        return len(piece)

    def position(self) -> int:
        return self.at


def reference(data: bytes, limit: int | None) -> list[tuple[int, bytes | None, int]]:
    return list(iter_lines(io.BufferedReader(io.BytesIO(data)), limit))


def chunked(data: bytes, limit: int | None, most: int = 1 << 16, in_place: Path | None = None
            ) -> list[tuple[int, bytes | None, int]]:
    stream = Dribble(data, most)
    found = []
    for chunk in line_chunks(stream, limit, stream.position, in_place is not None):
        if in_place is not None:
            assert chunk.data == b"" and chunk.offset >= 0
            chunk = chunk.with_data(str(in_place))
        found.extend(chunk_lines(chunk, limit))
    return found


@settings(max_examples=200)
@given(lines=st.lists(st.lists(st.sampled_from(LINE_PIECES), max_size=8).map(b"".join), max_size=30),
       ending=st.sampled_from([b"\n", b"\r\n"]), last_newline=st.booleans(),
       limit=st.sampled_from([None, 1, 5, 20, 60]), most=st.sampled_from([1, 3, 64, 1 << 16]))
def test_chunks_split_into_the_lines_iter_lines_reads(lines: list[bytes], ending: bytes, last_newline: bool,
                                                       limit: int | None, most: int) -> None:
    data = ending.join(lines) + (ending if last_newline and lines else b"")
    expected = reference(data, limit)
    assert chunked(data, limit, most) == expected
    with tempfile.TemporaryDirectory() as directory:  # the chunks of a plain file leave their lines in it
        path = Path(directory) / "lines"
        path.write_bytes(data)
        assert chunked(data, limit, most, in_place=path) == expected


def test_a_byte_order_mark_counts_against_the_limit_as_iter_lines_reads_it() -> None:
    # iter_lines reads at most limit + 2 bytes of a line, mark included: line 1 is over a limit of 5 though its
    # text (after the 3-byte mark) is 4 bytes; line 2, the same bytes but no mark to drop, is over too.
    data = b"\xef\xbb\xbfabcd\nabcd\xef\xbb\xbf\nabc\n"
    assert chunked(data, 5) == reference(data, 5) == [(1, None, 8), (2, None, 8), (3, b"abc", 4)]


def test_cuts_depend_on_the_bytes_alone(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 100)
    monkeypatch.setattr(chunks, "CHUNK_LINES", 7)
    data = b"".join(b"line %d %s\n" % (number, b"x" * (number % 23)) for number in range(300))
    path = tmp_path / "lines.txt"
    path.write_bytes(data)

    def cuts(most: int, in_place: bool) -> list[tuple[int, int]]:
        stream = Dribble(data, most)
        return [(chunk.first_line, chunk.length or len(chunk.data))
                for chunk in line_chunks(stream, None, stream.position, in_place)]

    expected = cuts(1 << 16, False)
    assert len(expected) > 40 and all(length <= 100 + 32 for _, length in expected)
    assert cuts(5, False) == cuts(97, True) == expected
    for head in (0, 3, 2000):  # a plain file read in place without a limit: only its newlines' places are kept
        stream = Dribble(data[head:], 1 << 20)
        placed = list(in_place_chunks(stream, data[:head]))
        assert [(chunk.first_line, chunk.length) for chunk in placed] == expected
        assert [chunk.offset for chunk in placed] == np.cumsum([0] + [length for _, length in expected])[:-1].tolist()
        assert [chunk.newlines for chunk in placed] == [data[c.offset : c.offset + c.length].count(b"\n")
                                                       for c in placed]
    assert list(in_place_chunks(Dribble(b"", 1), b"")) == []
    assert [(c.first_line, c.length, c.newlines) for c in in_place_chunks(Dribble(b"", 1), b"a\nb")] == [(1, 3, 1)]
    assert chunked(data, None, 13, in_place=path) == reference(data, None)


def test_a_line_over_the_limit_is_skipped_as_it_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    # A line longer than a read is never held whole when there is a limit; its bytes are still counted.
    data = b"short\n" + b"x" * 5000 + b"\nafter\n" + b"y" * 300
    stream = Dribble(data, 64)
    held = []
    real_append = chunks._Held.append

    def watched(self: Any, block: bytes) -> bool:
        held.append(len(self.data) + len(block))
        return bool(real_append(self, block))

    monkeypatch.setattr(chunks._Held, "append", watched)
    found = [line for chunk in line_chunks(stream, 100, stream.position) for line in chunk_lines(chunk, 100)]
    assert found == reference(data, 100) == [(1, b"short", 6), (2, None, 5001), (3, b"after", 6), (4, None, 300)]
    assert max(held) < 300


def test_a_file_that_changes_under_a_chunk_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "lines.txt"
    path.write_bytes(b"one\ntwo\nthree\n")
    stream = Dribble(path.read_bytes(), 1 << 16)
    [chunk] = line_chunks(stream, None, stream.position, in_place=True)
    path.write_bytes(b"one two\nthree\n")
    with pytest.raises(ValueError, match="changed while it was read"):
        chunk.with_data(str(path))


def test_tasks_travel_small_and_read_the_same_anywhere(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for index in range(50):
        (corpus / f"{index:02d}.txt").write_text(f"document {index} " * 20)
    (corpus / "records.jsonl").write_text("".join(f'{{"text": "record {i} of many words"}}\n' for i in range(30)))
    report = ReadReport()
    documents = list(read_inputs([str(corpus)], InputOptions(), report))
    assert report.documents == 80 and [d.id for d in documents][:2] == ["00.txt", "01.txt"]
    from dedup_cli.inputs.reading import plan_inputs
    from dedup_cli.inputs.task_planning import plan_tasks

    sources, stream = plan_inputs([str(corpus)], InputOptions(), ReadReport())
    tasks = list(plan_tasks(sources, InputOptions(), ReadReport(), stream))
    assert [type(task) for task in tasks] == [FilesTask, LinesTask]
    files, lines = tasks
    # Names travel, not texts (each about 240 bytes here): a few bytes a file beyond its path and id, however long
    # the temporary folder's path is.
    assert isinstance(files, FilesTask)
    names = sum(len(path.encode()) + len(name.encode()) for path, name in zip(files.paths, files.ids, strict=True))
    assert len(pickle.dumps(files)) < names + 20 * len(files.paths)
    assert isinstance(lines, LinesTask) and lines.chunk.data == b"" and lines.chunk.newlines == 30
    travelled = [read_task(pickle.loads(pickle.dumps(task)), InputOptions()) for task in tasks]
    assert [d for read in travelled for d in read.documents] == documents


def test_a_chunk_of_stdin_carries_its_lines() -> None:
    chunk = LineChunk(b"x\ny\n", 5)
    assert chunk.with_data("-") is chunk
    assert list(chunk_lines(chunk, None)) == [(5, b"x", 2), (6, b"y", 2)]


@settings(max_examples=200, deadline=None)
@given(names=st.lists(st.text(alphabet=st.sampled_from(["a", "é", "\0", "/", " ", "\udcff"]), max_size=4),
                      max_size=6),
       other=st.lists(st.text(max_size=3), max_size=6))
def test_a_files_task_pickled_is_the_same_task(names: list[str], other: list[str]) -> None:
    """A files task travels as two strings, NUL between the names, unless a name holds a NUL (then as the names
    themselves): either way it unpickles to the same ids and paths, empty names and no names included."""
    paths = [f"/d/{name}" for name in names] if len(other) % 2 else other
    task = FilesTask(tuple(names), tuple(paths), 7)
    assert pickle.loads(pickle.dumps(task)) == task


@settings(max_examples=150, deadline=None)
@given(runs=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 3000), st.booleans()), min_size=1, max_size=6),
       task_files=st.integers(1, 9), task_bytes=st.integers(1, 5000))
def test_files_of_one_size_are_cut_as_their_running_sizes_say(runs: list[tuple[int, int, bool]], task_files: int,
                                                              task_bytes: int) -> None:
    """Runs whose files all have one size (a sample's mean) are cut without a list of their running sizes: into
    the same tasks as with that list, whatever came before them."""
    from dedup_cli.inputs import task_planning

    def tasks(uniform_ends: Any) -> list[tuple[tuple[str, ...], int]]:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(task_planning, "TASK_FILES", task_files)
            patch.setattr(task_planning, "TASK_BYTES", task_bytes)
            patch.setattr(task_planning, "_UniformEnds", uniform_ends)
            ahead, found, number = task_planning._FilesAhead(), [], 0
            for count, size, mixed in runs:
                names = [f"f{number + n}" for n in range(count)]
                sizes = [size + (n % 3 if mixed else 0) for n in range(count)]
                found += [(task.paths, task.input_bytes) for task in ahead.add(names, names, sizes)]
                number += count
            return found + [(task.paths, task.input_bytes) for task in ahead.flush()]

    assert tasks(task_planning._UniformEnds) == tasks(lambda size, count: [size * (k + 1) for k in range(count)])
