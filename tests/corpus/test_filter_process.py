"""dedup filter as a stage and as a process: kept lines are the input's lines less the dropped ones, in order and
byte for byte (a property), and a filter killed with SIGKILL leaves no partial output."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from dedup_cli.corpus.lines import filter_lines
from dedup_cli.corpus.record_decisions import Decisions
from dedup_cli.inputs.locations import Source
from dedup_cli.inputs.records import text_hash
from dedup_cli.options.input_options import InputOptions

ENDINGS = st.sampled_from([b"\n", b"\r\n"])
LINES = st.one_of(
    st.tuples(st.integers(0, 5), st.sampled_from(["x", "y", "é ☃"]), ENDINGS).map(
        lambda t: json.dumps({"id": f"d{t[0]}", "text": t[1]}, ensure_ascii=False).encode() + t[2]),
    st.sampled_from([b"\n", b"   \n", b"{broken\n", b"[1, 2]\n", b'{"id": "d1"}\n']),
)


def _record(raw: bytes) -> tuple[str, str] | None:
    try:
        record = json.loads(raw)
    except ValueError:
        return None
    if isinstance(record, dict) and isinstance(record.get("text"), str):
        return record["id"], record["text"]
    return None


@given(st.lists(LINES, max_size=40), st.sets(st.integers(0, 5)), st.booleans(), st.booleans())
def test_kept_lines_are_the_input_less_the_dropped_lines(lines: list[bytes], drop: set[int], by_number: bool,
                                                         last_newline: bool) -> None:
    if lines and not last_newline:
        lines[-1] = lines[-1].rstrip(b"\r\n")
    records = [_record(raw) for raw in lines]
    # The store holds the first record of each id (as sign keeps it); a later one with the same id, whatever its
    # text, is skipped as sign skipped it (a repeated id), not written again nor taken for a change.
    stored: dict[str, str] = {}
    for number, record in enumerate(records, start=1):
        if record is not None:
            stored.setdefault(f"c:{number}" if by_number else record[0], record[1])
    chosen = sorted(key for key in stored if int(key[1:] if not by_number else key.split(":")[1]) % 6 in drop)
    decisions = Decisions(chosen, np.array([text_hash(stored[key]) for key in chosen], np.uint64),
                          np.ones(len(chosen), bool), np.ones(len(chosen), np.int64), ["r"] * len(chosen))
    options = InputOptions(id_field=None if by_number else "id")
    out = io.BytesIO()
    outcome = filter_lines(io.BytesIO(b"".join(lines)), Source("c", "c", "c", "jsonl", None), options, decisions, out)
    expected = []
    seen: set[str] = set()
    for number, (raw, record) in enumerate(zip(lines, records, strict=True), start=1):
        key = None if record is None else (f"c:{number}" if by_number else record[0])
        repeated = key in seen
        dropped = key in chosen and record is not None and stored[key] == record[1]
        if key is not None:
            seen.add(key)
        if not dropped and not repeated:
            expected.append(raw)
    assert out.getvalue() == b"".join(expected)
    assert outcome.dropped + len(outcome.repeated) == len(lines) - len(expected)


# --- killed processes ------------------------------------------------------------------------------------------


def dedup(*args: str, **kwargs: object) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "dedup_cli", *args], **kwargs)  # type: ignore[call-overload]


def corpus_lines(count: int) -> bytes:
    return b"".join(json.dumps({"id": f"r{i}", "text": f"topic {i % 50} " + " ".join(
        f"w{i % 50}x{j}" for j in range(30)) + (f" v{i}" if i >= 50 else "")}).encode() + b"\n" for i in range(count))


def wait_for(condition: object, process: subprocess.Popen[bytes], seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():  # type: ignore[operator]
        assert process.poll() is None, process.stderr.read() if process.stderr else "the process ended"
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.02)


def scratch_of(path: Path) -> list[str]:
    return sorted(name for name in os.listdir(path.parent) if name.startswith(f".{path.name}."))


def test_killed_filter_leaves_no_output_file(tmp_path: Path) -> None:
    data = corpus_lines(400)
    store = tmp_path / "s.parquet"
    signing = dedup("sign", "-", "--input-format", "jsonl", "--id-field", "id", "-k", "64", "-o", str(store), "-q",
                    stdin=subprocess.PIPE)
    signing.communicate(data)
    assert signing.returncode == 0
    out = tmp_path / "out.jsonl"
    filtering = dedup("filter", "-", "-s", str(store), "-o", str(out), "-q", stdin=subprocess.PIPE,
                      stderr=subprocess.PIPE)
    assert filtering.stdin is not None
    filtering.stdin.write(data[: len(data) // 2])
    filtering.stdin.flush()
    wait_for(lambda: scratch_of(out), filtering)  # writing: the scratch file exists, stdin is half read
    filtering.send_signal(signal.SIGKILL)
    filtering.wait()
    assert filtering.returncode == -signal.SIGKILL
    assert not out.exists()
    assert scratch_of(out) == [f".out.jsonl.tmp-{filtering.pid}"]  # hidden, never visible as OUT
    again = dedup("filter", "-", "-s", str(store), "-o", str(out), "-q", stdin=subprocess.PIPE)
    again.communicate(data)
    assert again.returncode == 0
    kept = [json.loads(line)["id"] for line in out.read_bytes().splitlines()]
    # Records i and i + 50 j are near-duplicates; each group keeps its smallest id, in input order.
    assert kept == [f"r{i}" for i in range(400) if f"r{i}" == min(f"r{i % 50 + 50 * j}" for j in range(8))]
    assert scratch_of(out) == []  # the killed run's scratch file was cleaned up


def test_killed_filter_leaves_an_earlier_output_directory_as_it_was(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    data = corpus_lines(200)
    (corpus / "a.jsonl").write_bytes(data)
    fifo = corpus / "b.jsonl"
    os.mkfifo(fifo)
    store = tmp_path / "s.parquet"

    def feed(content: bytes) -> threading.Thread:
        def write() -> None:
            with open(fifo, "wb") as pipe:
                pipe.write(content)
        thread = threading.Thread(target=write)
        thread.start()
        return thread

    feeder = feed(data)
    signing = dedup("sign", str(corpus), "-k", "64", "-o", str(store), "-q")
    assert signing.wait() == 0
    feeder.join()
    out = tmp_path / "clean"
    feeder = feed(data)
    assert dedup("filter", str(corpus), "-s", str(store), "-o", str(out), "-q").wait() == 0
    feeder.join()
    before = {path.name: path.read_bytes() for path in out.iterdir()}
    assert before["b.jsonl"] == b"" and before["a.jsonl"]  # b.jsonl repeats a.jsonl, whose ids are smaller
    filtering = dedup("filter", str(corpus), "-s", str(store), "-o", str(out), "-q", stderr=subprocess.PIPE)
    with open(fifo, "wb") as pipe:  # blocks until the filter opens the FIFO: a.jsonl is written by then
        pipe.write(data[:1000])
        pipe.flush()
        wait_for(lambda: scratch_of(out), filtering)
        filtering.send_signal(signal.SIGKILL)
        filtering.wait()
    assert {path.name: path.read_bytes() for path in out.iterdir()} == before
    assert scratch_of(out) == [f".clean.tmp-{filtering.pid}"]
