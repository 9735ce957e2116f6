"""The command line under a fuzzer: every command with random combinations of its options and hostile values.

Each case runs one command with options drawn from its own Click declaration (so a new option is fuzzed without
touching this file) and values drawn from pools of what users and scripts get wrong: numbers out of range, NaN,
inf, empty strings, 300-character and non-UTF-8 names, missing files, directories where files belong and the
reverse, FIFOs, ``/dev/null``, ``/dev/full``, symbolic-link loops, stores of other formats, JSON Lines whose first
line is ``null``, ids and file names holding a carriage return, a line feed, a tab or a NUL, a store with a part of
a foreign schema and one with a byte flipped inside a part. Whatever happens, the command must end with an exit
code in {0, 1, 2, 3}, no traceback, a few lines on stderr (one ``Error:`` line when it fails), and nothing outside
the case's temporary directory created, changed or replaced; the special files inside it stay what they are (a
FIFO is never replaced by a file). Cases naming an input that once crashed the interpreter run as real processes,
so that a crash fails the case instead of ending the test session.

Beside the random cases, fixed ones check what the random ones cannot: a damaged store (foreign part, flipped
byte) is one line naming the part for every command that reads it; a first line ``null`` neither crashes nor
loses the records after it; and the ids with control characters come back unchanged from every output format
(JSON Lines, CSV read by the csv module and by pyarrow, TSV unescaped as PostgreSQL's text format writes it:
``\t``, ``\n``, ``\r``, ``\\``; Parquet).

``make test`` runs a few hundred cases in process (CliRunner) and a sample through real subprocesses; the
``long_fuzz`` marker runs many more (``pytest -m long_fuzz``; ``DEDUP_FUZZ_EXAMPLES`` sets how many).
"""

from __future__ import annotations

import csv
import faulthandler
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import click
import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from helpers import REPO, StoreWriter, csv_module_rows
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dedup_cli.cli.main import cli
from dedup_cli.engine.stages.results import FIELDS, RECORD_FIELDS
from dedup_cli.store.format import DocumentBatch
from dedup_cli.store.store import read_store

EXAMPLES = int(os.environ.get("DEDUP_FUZZ_EXAMPLES", "0")) or None
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
OUTSIDE = ("/dev/null", "/dev/full")  # real files outside the case's directory that cases name
NON_UTF8 = os.fsdecode(b"caf\xe9-\xff.txt")
LONG = "n" * 300
HANG_SECONDS = 120  # a case that takes this long is a hang: dump every thread's stack and fail the run

# Options never drawn: they reach outside this machine (a scheduler address) or start a cluster per case.
SKIPPED_OPTIONS = {"engine_name", "scheduler", "help", "version"}

INTS = ["-1", "0", "1", "2", "3", "8", "9", "17", "64", "65", "1000", str(2**31), str(2**63), "nan", "", "x", "1e3",
        "0x10"]
FLOATS = ["nan", "inf", "-inf", "0", "1", "0.5", "0.99", "-0.1", "1.1", "", "1e-300", "x"]
STRINGS = ["", "x", "text", "id", LONG, NON_UTF8, "0", "-", "*", "\t", "a,b"]

ODD_IDS = ["cr\rid", "lf\nid", "tab\tid", "nul\x00id", "crlf\r\nid", "back\\slash", 'quote"id', "comma,id",
           "plain"]
"""JSON Lines ids that CSV must quote and TSV escape (a NUL included: JSON can hold one, a file name cannot)."""
ODD_NAMES = ["cr\rname.txt", "lf\nname.txt", "tab\tname.txt", "back\\slash.txt", 'quote".txt', "plain.txt"]
"""File names (so ids) with the same characters, NUL aside: POSIX file names never hold one."""
CRASH_INPUTS = {"null.jsonl", "null-then.jsonl"}
"""Inputs that once crashed the interpreter (a segmentation fault in Arrow's JSON reader): run in a real process."""


@dataclass(frozen=True)
class World:
    """The case's directory: a corpus, stores of every kind, and files that are not what a path expects."""

    root: Path

    @property
    def paths(self) -> list[str]:
        """Paths for any argument, relative to ``root`` (the working directory) or outside it."""
        return ["corpus", "corpus/KJV/jonah-01.txt", "lines.jsonl", "rows.parquet", "store", "legacy.parquet",
                "not-a-store.parquet", "bad-manifest", "empty-dir", "notes.txt", "members.tsv", "truth.tsv",
                "fifo", "loop", "dangling", "missing", "missing/deeper/file", LONG, NON_UTF8, "read-only/out",
                "link-to-notes", "out.jsonl", "out-dir", "-", "", "null.jsonl", "null-then.jsonl", "odd-ids.jsonl",
                "odd-names", "foreign-part", "flipped", *OUTSIDE]


DRAIN = """
import os, select, sys, time
fifo = sys.argv[1]
while True:
    time.sleep(0.02)
    try:
        reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        continue
    try:
        while select.select([reader], [], [], 0.05)[0] and os.read(reader, 1 << 16):
            pass
    finally:
        os.close(reader)
    try:
        writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        continue
    try:
        os.write(writer, b"in the beginning was the word and the word was with the fifo\\n")
    except OSError:
        pass
    finally:
        os.close(writer)
"""
"""Keeps a FIFO usable by whatever a case does with it: a writer waiting for a reader is read to its end; a reader
waiting for a writer gets a short document and its end; never blocks. A process of its own, so that the workers
a case forks never inherit its end of the FIFO (a reader would then wait for that writer forever)."""


def near_duplicates(count: int) -> list[str]:
    """``count`` texts of 80 words, each one word away from the first: every pair is a near-duplicate."""
    words = [f"w{index}" for index in range(80)]
    return [" ".join(words[: 9 * n] + [f"v{n}"] + words[9 * n + 1:]) for n in range(count)]


def write_odd_ids(root: Path) -> None:
    """``odd-ids.jsonl`` (ids :data:`ODD_IDS`) and ``odd-names/`` (files :data:`ODD_NAMES`), all near-duplicates."""
    with (root / "odd-ids.jsonl").open("w") as out:
        for id_, text in zip(ODD_IDS, near_duplicates(len(ODD_IDS)), strict=True):
            out.write(json.dumps({"id": id_, "text": text}) + "\n")
    (root / "odd-names").mkdir()
    for name, text in zip(ODD_NAMES, near_duplicates(len(ODD_NAMES)), strict=True):
        (root / "odd-names" / name).write_text(text)


def parts_of(store: Path) -> list[Path]:
    return sorted(store.glob("part-*.parquet"))


def foreign_part(store: Path) -> Path:
    """Replace the store's (first) part by valid Parquet of another schema; returns the part."""
    part = parts_of(store)[0]
    pq.write_table(pa.table({"id": ["a", "b"], "x": [1, 2]}), part)
    return part


def flip_a_byte(store: Path) -> Path:
    """Flip one byte in the middle of the signatures of the store's (first) part; returns the part."""
    part = parts_of(store)[0]
    metadata = pq.ParquetFile(part).metadata.row_group(0)
    [column] = [metadata.column(i) for i in range(metadata.num_columns)
                if metadata.column(i).path_in_schema == "signature"]
    # the chunk starts at its dictionary page (the signatures themselves, dictionary-encoded) when it has one
    start = column.dictionary_page_offset if column.has_dictionary_page else column.data_page_offset
    offset = start + column.total_compressed_size // 2
    data = bytearray(part.read_bytes())
    data[offset] ^= 0x10
    part.write_bytes(bytes(data))
    return part


def _batch_of(store: Path) -> DocumentBatch:
    stored = read_store(store)
    count = len(stored.ids)
    return DocumentBatch(stored.ids, stored.paths, np.zeros(count, np.int64), np.zeros(count, np.int64),
                         np.zeros(count, np.uint64), stored.shingle_counts, stored.packed)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The world every case starts from (copied per case, so that no case sees another's writes)."""
    root = tmp_path_factory.mktemp("fuzz-world")
    corpus = root / "corpus"
    for edition in ("KJV", "AKJV", "ASV"):
        (corpus / edition).mkdir(parents=True)
        for chapter in ("jonah-01.txt", "jonah-02.txt"):
            shutil.copy(REPO / "sample_corpora" / "bible-editions" / edition / chapter, corpus / edition / chapter)
    texts = [(corpus / "KJV" / name).read_text() for name in ("jonah-01.txt", "jonah-02.txt")]
    lines = [f'{{"id": "doc-{n}", "text": {text!r}}}'.replace("'", '"') for n, text in enumerate(texts * 2)]
    (root / "lines.jsonl").write_text("\n".join(line.replace("\n", " ") for line in lines) + "\n{broken\n")
    pq.write_table(pa.table({"id": ["r1", "r2"], "text": texts}), root / "rows.parquet")
    result = CliRunner().invoke(cli, ["sign", str(corpus), "-o", str(root / "store"), "-q"])
    assert result.exit_code == 0, result.output
    with StoreWriter(root / "legacy.parquet", read_store(root / "store").params) as writer:
        writer.write(_batch_of(root / "store"))
    pq.write_table(pa.table({"x": [1, 2]}), root / "not-a-store.parquet")
    (root / "bad-manifest").mkdir()
    (root / "bad-manifest" / "manifest.json").write_text("{not json")
    (root / "empty-dir").mkdir()
    (root / "notes.txt").write_text("a plain file\n")
    members = CliRunner().invoke(cli, ["find", str(root / "store"), "--output", "members", "--format", "tsv",
                                       "-o", str(root / "members.tsv"), "-q"])
    assert members.exit_code == 0, members.output
    (root / "truth.tsv").write_text("id_a\tid_b\tresemblance\nKJV/jonah-01.txt\tAKJV/jonah-01.txt\t0.9\n")
    os.symlink("loop", root / "loop")
    os.symlink("nowhere", root / "dangling")
    os.symlink("notes.txt", root / "link-to-notes")
    (root / "read-only").mkdir()
    (root / "list.txt").write_text("corpus/KJV/jonah-01.txt\ncorpus/ASV/jonah-01.txt\n")
    (root / "null.jsonl").write_text("null\n")
    (root / "null-then.jsonl").write_text('null\n{"id": "after-null", "text": "a record after a null line"}\n')
    write_odd_ids(root)
    for name, damage in (("foreign-part", foreign_part), ("flipped", flip_a_byte)):
        shutil.copytree(root / "store", root / name)
        damage(root / name)
    (root.parent / "case").mkdir()
    return root


def _snapshot(path: Path) -> tuple[int, int, int, int]:
    status = os.lstat(path)
    return status.st_ino, status.st_mode, status.st_rdev, status.st_size


@contextmanager
def world_of(template: Path) -> Iterator[World]:
    """A fresh copy of the template, the working directory while the case runs, its FIFO kept unblocked."""
    scratch = template.parent / "case"
    root = scratch / "world"
    if root.exists():
        (root / "read-only").chmod(0o755)
        shutil.rmtree(root)
    shutil.copytree(template, root, symlinks=True)
    os.mkfifo(root / "fifo")  # copytree copies no FIFO
    if not IS_ROOT:  # root writes through a read-only directory: nothing to learn from it then
        (root / "read-only").chmod(0o555)
    outside = {name: _snapshot(Path(name)) for name in OUTSIDE}
    around = sorted(os.listdir(scratch.parent)), sorted(os.listdir(scratch))
    drainer = subprocess.Popen([sys.executable, "-c", DRAIN, str(root / "fifo")])
    previous = os.getcwd()
    os.chdir(root)
    faulthandler.dump_traceback_later(HANG_SECONDS, exit=True)
    try:
        yield World(root)
    finally:
        faulthandler.cancel_dump_traceback_later()
        os.chdir(previous)
        drainer.kill()
        drainer.wait()
    assert {name: _snapshot(Path(name)) for name in OUTSIDE} == outside, "a file outside the case was replaced"
    assert (sorted(os.listdir(scratch.parent)), sorted(os.listdir(scratch))) == around, \
        "a file was created outside the case's directory"
    assert stat.S_ISFIFO(os.lstat(root / "fifo").st_mode), "the FIFO was replaced"
    assert os.readlink(root / "loop") == "loop" and os.readlink(root / "link-to-notes") == "notes.txt"


OUTPUT_OPTIONS = {"out", "removed", "plot"}
STORE_OPTIONS = {"store", "against"}
GOOD_PATHS = {
    "out": ["out.jsonl", "out-dir", "/dev/null", "/dev/full", "fifo", "link-to-notes", "-"],
    "store": ["store", "legacy.parquet", "foreign-part", "flipped"],
    "truth": ["truth.tsv", "fifo"],
    "members": ["members.tsv", "fifo"],
    "files_from": ["list.txt", "-"],
    "id_root": ["."],
}
GOOD_STRINGS = {"id_field": ["id"], "text_field": ["text"], "id_column": ["id"], "text_column": ["text"],
                "keep_field": ["size"], "include": ["*.txt"], "exclude": ["*ASV*"], "memory_limit": ["1GiB"]}
ODD_INPUTS = ["null.jsonl", "null-then.jsonl", "odd-ids.jsonl", "odd-names"]
DAMAGED_STORES = ["foreign-part", "flipped"]
GOOD_ARGUMENTS = {"sign": ["corpus", "lines.jsonl", "rows.parquet", "fifo", *ODD_INPUTS],
                  "filter": ["corpus", "lines.jsonl", "rows.parquet", "corpus/KJV/jonah-01.txt", *ODD_INPUTS],
                  "find": ["store", *DAMAGED_STORES], "eval": ["store", *DAMAGED_STORES],
                  "info": ["store", "legacy.parquet", *DAMAGED_STORES],
                  "estimate": ["store", "KJV/jonah-01.txt", "AKJV/jonah-01.txt"],
                  "review": ["store", *DAMAGED_STORES]}


def _good_values(parameter: click.Parameter) -> list[str]:
    """Values a careful user might give: in range, of the right kind."""
    kind, name = parameter.type, parameter.name or ""
    if isinstance(kind, click.Choice):
        return list(map(str, kind.choices))
    if isinstance(kind, click.IntRange):
        low = kind.min if kind.min is not None else 0
        high = kind.max if kind.max is not None else low + 8
        return sorted({str(low + (1 if kind.min_open else 0)), str(min(high, low + 2)), str(min(high, 8))})
    if isinstance(kind, click.FloatRange):
        low, high = kind.min if kind.min is not None else 0.0, kind.max if kind.max is not None else 10.0
        return [str(low + (high - low) * share) for share in (0.5, 0.8, 0.95)]
    if kind is click.INT:
        return ["1", "2", "8"]
    if kind is click.FLOAT:
        return ["0.5", "1"]
    if name in OUTPUT_OPTIONS:
        return GOOD_PATHS["out"]
    if name in STORE_OPTIONS:
        return GOOD_PATHS["store"]
    return GOOD_PATHS.get(name) or GOOD_STRINGS.get(name) or ["x"]


def _hostile_values(parameter: click.Parameter, world: World) -> list[str]:
    """Values users and scripts get wrong."""
    kind = parameter.type
    if isinstance(kind, click.Choice):
        return ["", "bogus"]
    if isinstance(kind, click.IntRange) or kind is click.INT:
        return INTS
    if isinstance(kind, click.FloatRange) or kind is click.FLOAT:
        return FLOATS
    if isinstance(kind, click.Path):
        return world.paths
    return STRINGS + world.paths[:6]


@st.composite
def value_of(draw: st.DrawFn, parameter: click.Parameter, world: World, hostility: int) -> str:
    """A good value, or one time in ``hostility`` a hostile one (never, when ``hostility`` is 0)."""
    hostile = hostility > 0 and draw(st.integers(1, hostility)) == 1
    return draw(st.sampled_from(_hostile_values(parameter, world) if hostile else _good_values(parameter)))


@st.composite
def invocations(draw: st.DrawFn, world: World) -> list[str]:
    """A command line: a command, its arguments and a random subset of its options. Half the cases are careful
    (good values, so that the command gets past parsing into the work), half hostile (a value in three, an
    argument in four)."""
    name = draw(st.sampled_from(sorted(cli.commands)))
    hostility = draw(st.sampled_from([0, 3]))
    command = cli.commands[name]
    args = [name]
    for parameter in command.params:
        if not isinstance(parameter, click.Option) or parameter.name in SKIPPED_OPTIONS:
            continue
        usual = name == "filter" and parameter.name == "store"  # filter without its store reads ./dedup.parquet
        if not parameter.required and draw(st.integers(0, 4)) > (3 if usual else 0):
            continue  # a fifth of the optional options
        flag = draw(st.sampled_from(parameter.opts))
        args += [flag] if parameter.is_flag else [flag, draw(value_of(parameter, world, hostility))]
    for parameter in command.params:
        if not isinstance(parameter, click.Argument):
            continue
        good = GOOD_ARGUMENTS[name]
        if name == "estimate":
            chosen = good[: draw(st.sampled_from([3, 3, 3, 2]))]
        else:
            chosen = [draw(st.sampled_from(good)) for _ in range(draw(st.sampled_from([1, 1, 1, 2, 0])))]
        for value in chosen:
            hostile = draw(st.integers(0, 3)) == 0
            args.append(draw(st.sampled_from(world.paths)) if hostile else value)
    return args


def check_outcome(args: list[str], code: int, stdout: str, stderr: str) -> None:
    """What every case must end with, whatever it asked for (``-v`` may add a traceback before the error)."""
    shown = " ".join(args)
    assert code in (0, 1, 2, 3), (shown, code, stderr)
    verbose = "-v" in args or "--verbose" in args
    if verbose and "Traceback" in stderr:
        stderr = stderr[stderr.rindex("\nError:") + 1:] if "\nError:" in stderr else stderr
    assert "Traceback" not in stderr and "Traceback" not in stdout, (shown, stderr)
    lines = stderr.splitlines()
    # A few warnings at most; eval's summary is its report, 28 lines with the recall comparison of --recall.
    assert len(lines) <= (40 if args[:1] == ["eval"] else 25), (shown, stderr)
    if code in (1, 2):
        errors = [line for line in lines if line.startswith("Error:")]
        assert len(errors) == 1 and lines[-1] == errors[0] or "Usage:" in stderr, (shown, stderr)


def run_in_process(args: list[str]) -> None:
    if CRASH_INPUTS & set(args):
        run_subprocess(args)
        return
    result = CliRunner().invoke(cli, args, env={"DEDUP_STORE": None, "DEDUP_SCHEDULER": None})
    assert result.exception is None or isinstance(result.exception, SystemExit), (args, result.exception,
                                                                                     result.stderr)
    check_outcome(args, result.exit_code, result.stdout, result.stderr)


def run_subprocess(args: list[str]) -> None:
    environment = {key: value for key, value in os.environ.items() if not key.startswith("DEDUP_")}
    done = subprocess.run([sys.executable, "-m", "dedup_cli", *args], capture_output=True, timeout=HANG_SECONDS,
                          env=environment)
    check_outcome(args, done.returncode, done.stdout.decode("utf-8", "replace"),
                  done.stderr.decode("utf-8", "replace"))


@pytest.mark.slow
@settings(max_examples=300, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_command_survives_hostile_options(template: Path, data: st.DataObject) -> None:
    with world_of(template) as world:
        run_in_process(data.draw(invocations(world)))


@pytest.mark.slow
@settings(max_examples=12, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_a_sample_survives_as_a_real_process(template: Path, data: st.DataObject) -> None:
    with world_of(template) as world:
        run_subprocess(data.draw(invocations(world)))


@pytest.mark.long_fuzz
@settings(max_examples=EXAMPLES or 3000, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_many_more_hostile_options(template: Path, data: st.DataObject) -> None:
    with world_of(template) as world:
        run_in_process(data.draw(invocations(world)))


# --- fixed cases: what the random ones can only survive, checked for what it should be ---------------------------


def run_process(args: list[str], cwd: Path) -> tuple[int, str, str]:
    """A real process (an interpreter crash is its exit status, not the test session's end)."""
    environment = {key: value for key, value in os.environ.items() if not key.startswith("DEDUP_")}
    done = subprocess.run([sys.executable, "-m", "dedup_cli", *args], capture_output=True, timeout=HANG_SECONDS,
                          env=environment, cwd=cwd)
    return done.returncode, done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace")


@pytest.mark.parametrize("jobs", ["0", "1"])
@pytest.mark.parametrize("name", sorted(CRASH_INPUTS))
def test_a_first_line_null_is_a_skipped_record_not_a_crash(template: Path, tmp_path: Path, name: str,
                                                           jobs: str) -> None:
    args = ["sign", str(template / name), "-o", "store", "--id-field", "id", "--jobs", jobs]
    code, stdout, stderr = run_process(args, tmp_path)
    check_outcome(args, code, stdout, stderr)
    assert f"{name}:1" in stderr, stderr  # the null line is named as skipped (or as the one line of the error)
    if name == "null-then.jsonl":  # the record after it is signed as any other
        assert code == 0, stderr
        assert list(read_store(tmp_path / "store").ids) == ["after-null"]
        args = ["filter", str(template / name), "-s", "store", "-o", "out.jsonl", "-q"]
        code, stdout, stderr = run_process(args, tmp_path)
        assert (code, stderr) == (0, ""), stderr
        assert (tmp_path / "out.jsonl").read_bytes() == (template / name).read_bytes()  # nothing dropped


DAMAGED_COMMANDS = {
    "find": ["find", "{store}", "-q"],
    "info": ["info", "{store}"],
    "estimate": ["estimate", "{store}", "KJV/jonah-01.txt", "AKJV/jonah-01.txt"],
    "eval": ["eval", "{store}", "--sample", "50", "-q"],
    "sign": ["sign", "{corpus}", "-o", "{store}", "-q"],
    "filter": ["filter", "{corpus}", "-s", "{store}", "-o", "out-dir", "-q"],
    "review": ["review", "{store}", "-o", "review.html", "-q"],
}
UNREAD_SIGNATURES = {"info", "sign"}
"""Commands that never read a part's signatures: a byte flipped there is not theirs to see (no page is read)."""


@pytest.mark.parametrize("command", sorted(DAMAGED_COMMANDS))
@pytest.mark.parametrize("damage", DAMAGED_STORES)
def test_a_damaged_part_is_one_line_naming_it(template: Path, damage: str, command: str) -> None:
    if damage == "flipped" and command in UNREAD_SIGNATURES:
        pytest.skip(f"{command} reads no signature, where the byte is flipped")
    [part] = parts_of(template / damage)
    # the stores' ids are relative to the template's corpus, not to the case's copy of it
    args = [argument.format(store=damage, corpus=template / "corpus") for argument in DAMAGED_COMMANDS[command]]
    with world_of(template):
        before = part.read_bytes()
        result = CliRunner().invoke(cli, args, env={"DEDUP_STORE": None, "DEDUP_SCHEDULER": None})
        assert result.exception is None or isinstance(result.exception, SystemExit), (args, result.exception)
        lines = result.stderr.splitlines()
        assert result.exit_code == 1 and len(lines) == 1 and lines[0].startswith("Error:"), (args, result.stderr)
        assert part.name in lines[0], (args, result.stderr)
        assert (template / damage / part.name).read_bytes() == before  # the damaged part is left for a look


# Ids with control characters through every output format, parsed back and compared with the JSON Lines records.

OUTPUT_KINDS = ["pairs", "members", "groups"]
POSTGRES_TEXT_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "\\": "\\"}


def _unescape(value: str) -> str:
    """A TSV field as PostgreSQL's text format escapes it: ``\\t``, ``\\n``, ``\\r`` and ``\\\\``."""
    out, position = [], 0
    while position < len(value):
        character = value[position]
        if character == "\\" and position + 1 < len(value):
            following = value[position + 1]
            out.append(POSTGRES_TEXT_ESCAPES.get(following, character + following))
            position += 2
        else:
            out.append(character)
            position += 1
    return "".join(out)


def _delimited_rows(records: list[dict], kind: str) -> list[list[str]]:
    """What TSV and CSV should hold: a header, then the records' fields as text (groups: a row per member)."""
    rows = [list(FIELDS[kind])]
    for record in records:
        if kind == "groups":
            rows += [[str(record["group"]), str(record["size"]), member] for member in record["members"]]
        else:
            rows.append(["" if record[name] is None else str(record[name]) for name in FIELDS[kind]])
    return rows


def _ids_in(records: list[dict], kind: str) -> set[str]:
    if kind == "groups":
        return {member for record in records for member in record["members"]}
    if kind == "members":
        return {record["id"] for record in records}
    return {record[name] for record in records for name in ("id_a", "id_b")}


def _pyarrow_rows(path: Path, fields: tuple[str, ...], delimiter: str) -> list[list[str]]:
    tsv = delimiter == "\t"
    table = pa_csv.read_csv(
        path,
        parse_options=pa_csv.ParseOptions(delimiter=delimiter, quote_char=False if tsv else '"',
                                          newlines_in_values=not tsv),
        convert_options=pa_csv.ConvertOptions(column_types={name: pa.string() for name in fields},
                                              strings_can_be_null=False, quoted_strings_can_be_null=False))
    rows = [list(fields)] + [[row[name] for name in fields] for row in table.to_pylist()]
    return [[_unescape(value) for value in row] for row in rows] if tsv else rows


@pytest.fixture(scope="module")
def odd_stores(template: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, list[str]]]:
    """Stores of the ids with control characters: from JSON Lines ids and from file names; and the template's
    store of plain ids, whose outputs every parser reads as is."""
    root = tmp_path_factory.mktemp("odd-stores")
    stores = {"plain": (template / "store", list(read_store(template / "store").ids))}
    for source, args, ids in (("json-ids", ["odd-ids.jsonl", "--id-field", "id"], ODD_IDS),
                              ("file-names", ["odd-names"], ODD_NAMES)):
        store = root / source
        result = CliRunner().invoke(cli, ["sign", str(template / args[0]), *args[1:], "-o", str(store), "-q"])
        assert result.exit_code == 0, result.output
        assert sorted(read_store(store).ids) == sorted(ids)  # the ids stored as they were given
        stores[source] = (store, ids)
    return stores


@pytest.mark.parametrize("kind", OUTPUT_KINDS)
@pytest.mark.parametrize("source", ["plain", "json-ids", "file-names"])
def test_ids_with_control_characters_come_back_from_every_format(odd_stores: dict[str, tuple[Path, list[str]]],
                                                                 tmp_path: Path, source: str, kind: str) -> None:
    store, ids = odd_stores[source]
    out = {}
    for fmt in ("jsonl", "tsv", "csv", "parquet"):
        out[fmt] = tmp_path / f"out.{fmt}"
        result = CliRunner().invoke(cli, ["find", str(store), "--output", kind, "--format", fmt, "-o", str(out[fmt]),
                                          "-q", "-t", "0.5"])
        assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in out["jsonl"].read_bytes().decode("utf-8").split("\n") if line]
    found = _ids_in(records, kind)
    assert found == set(ids) if source != "plain" else len(found) > 1 and found <= set(ids)  # all near-duplicates
    expected = _delimited_rows(records, kind)
    fields = FIELDS[kind]
    # bytes decoded, not read_text, whose universal newlines would turn a quoted \r into \n
    csv_text, tsv_text = out["csv"].read_bytes().decode("utf-8"), out["tsv"].read_bytes().decode("utf-8")
    readers = {
        "CSV, csv module": lambda: csv_module_rows(csv_text),
        "CSV, pyarrow": lambda: _pyarrow_rows(out["csv"], fields, ","),
        "TSV, unescaped": lambda: [[_unescape(value) for value in line.split("\t")]
                                   for line in tsv_text.split("\n")[:-1]],
        "TSV, pyarrow, unescaped": lambda: _pyarrow_rows(out["tsv"], fields, "\t"),
    }
    misread = {}
    for name, read in readers.items():  # every parser tried, so that a failure lists all that misread
        try:
            rows = read()
        except (pa.ArrowInvalid, csv.Error) as error:
            misread[name] = str(error)
            continue
        if rows != expected:
            misread[name] = f"{len(rows) - 1} rows, first differing: " + next(
                (repr(row) for row, wanted in zip(rows, expected, strict=False) if row != wanted), "(a row short)")
    table = pq.read_table(out["parquet"])
    if table.column_names != list(RECORD_FIELDS[kind]) or table.to_pylist() != records:
        misread["Parquet"] = repr(table.slice(0, 3).to_pylist())
    assert not misread, (f"{len(expected) - 1} rows", misread)
