"""The spill of the later waves' band keys (engine/local/key_spill.py): the store is read once however many waves
the candidate stage takes, the pairs are those of reading it each wave, and the scratch file never outlives the
stage."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import namedtuple
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from same_answers import assert_same_answers

import dedup_cli as dedup
from dedup_cli.candidates import buckets
from dedup_cli.cli.main import cli
from dedup_cli.engine.local import band_rounds, key_spill
from dedup_cli.forked import forked_map
from dedup_cli.store.documents import NumberedDocuments


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """1,200 records of 40 words, every fourth a near copy of the one before (a word changed)."""
    folder = tmp_path_factory.mktemp("spill")
    rng = np.random.default_rng(5)
    lines = []
    words: list[str] = []
    for n in range(1_200):
        if n % 4 == 1:
            words = list(words)
            words[int(rng.integers(0, 40))] = "changed"
        else:
            words = [f"w{value}" for value in rng.integers(0, 5_000, 40).tolist()]
        lines.append(json.dumps({"id": f"r{n:04d}", "text": " ".join(words)}))
    corpus = folder / "corpus.jsonl"
    corpus.write_text("\n".join(lines) + "\n")
    signed = folder / "s.parquet"
    result = CliRunner().invoke(cli, ["sign", str(corpus), "--id-field", "id", "-o", str(signed), "-q"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    return signed


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """An empty folder on a disk, where a spill may be made: in the test's own folder, or in /var/tmp where /tmp
    is a file system in memory (as many systems mount it), since the spill is never made in memory."""
    for parent in (tmp_path, Path("/var/tmp")):
        if key_spill.file_system_type(str(parent)) not in key_spill.IN_MEMORY and os.access(parent, os.W_OK):
            folder = Path(tempfile.mkdtemp(prefix="dedup-spill-test-", dir=parent))
            yield folder
            shutil.rmtree(folder, ignore_errors=True)
            return
    pytest.skip("no folder on a disk to spill in: the temporary folder and /var/tmp are both in memory")


@pytest.fixture
def scratch(monkeypatch: pytest.MonkeyPatch, disk: Path) -> Path:
    """The system's temporary folder, for this test alone (on a disk)."""
    monkeypatch.setattr(tempfile, "tempdir", str(disk))
    return disk


def _reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the passes over the stored signatures (one a call of NumberedDocuments.signatures)."""
    calls: list[int] = []
    original = NumberedDocuments.signatures

    def counted(self: NumberedDocuments, part: int = 0, parts: int = 1):  # type: ignore[no-untyped-def]
        calls.append(part)
        return original(self, part, parts)

    monkeypatch.setattr(NumberedDocuments, "signatures", counted)
    return calls


# One band a round and one round a wave: as many waves as bands.
ONE_BAND = dict(threshold=0.5, bits=2, band_memory=1, jobs=1)


def test_the_store_is_read_once_and_the_pairs_are_those_of_reading_it_each_wave(
        store: Path, scratch: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    one_wave = dedup.find(store, dedup.FindOptions(threshold=0.5, bits=2, jobs=1))
    assert one_wave.pair_count > 250
    reads = _reads(monkeypatch)
    spilled = dedup.find(store, dedup.FindOptions(**ONE_BAND))
    assert spilled.banding is not None and spilled.banding.bands > 30
    assert len(reads) == 1  # the first wave's; every later one read its keys from the spill
    assert_same_answers(one_wave, spilled)
    assert list(scratch.iterdir()) == []  # the spill is gone with the stage
    reads.clear()
    monkeypatch.setattr(key_spill.KeySpill, "create", classmethod(lambda cls, *arguments: None))
    unspilled = dedup.find(store, dedup.FindOptions(**ONE_BAND))
    assert len(reads) == spilled.banding.bands  # no room for a spill: the store read again for each wave
    assert_same_answers(one_wave, unspilled)


def test_forked_readers_write_the_spill_that_the_later_waves_read(store: Path, scratch: Path) -> None:
    one = dedup.find(store, dedup.FindOptions(threshold=0.5, bits=2, jobs=1))
    for jobs in (2, 3):
        # Rounds of one band, waves of jobs rounds: the first wave's readers (one a share of the row groups) spill.
        assert_same_answers(one, dedup.find(store, dedup.FindOptions(threshold=0.5, bits=2, band_memory=20_000,
                                                                     jobs=jobs)))
        assert list(scratch.iterdir()) == []


def test_the_spill_is_removed_when_the_stage_fails(store: Path, scratch: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    original = buckets.round_pair_codes

    def failing(*arguments, **named):  # type: ignore[no-untyped-def]
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("a failure in the third round")
        return original(*arguments, **named)

    monkeypatch.setattr(band_rounds, "round_pair_codes", failing)
    with pytest.raises(RuntimeError, match="third round"):
        dedup.find(store, dedup.FindOptions(**ONE_BAND))
    assert list(scratch.iterdir()) == []


def test_a_spill_is_made_only_where_it_reads_less_and_the_scratch_can_hold_it(
        disk: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A later band costs 16 bytes a document spilled (8 written, 8 read) against 256 ÷ bands a wave of the store.
    assert key_spill.worth_spilling(6, 8, 256) and key_spill.worth_spilling(15, 8, 256)
    assert not key_spill.worth_spilling(16, 8, 256) and not key_spill.worth_spilling(38, 8, 256)
    assert key_spill.worth_spilling(31, 4, 256) and not key_spill.worth_spilling(32, 4, 256)
    made = key_spill.KeySpill.create([3, 4, 9], 10, np.dtype(np.uint64), str(disk))
    assert made is not None and made.last_band == 10
    assert os.fstat(made.descriptor).st_size == 3 * 10 * 8
    assert list(disk.iterdir()) == []  # unnamed from the start
    made.close()
    assert list(disk.iterdir()) == []
    # A file system in memory, or too little free space: no spill, and nothing made.
    monkeypatch.setattr(key_spill, "file_system_type", lambda path: "tmpfs")
    assert key_spill.KeySpill.create([3], 10, np.dtype(np.uint64), str(disk)) is None
    monkeypatch.setattr(key_spill, "file_system_type", lambda path: "ext4")
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(key_spill.shutil, "disk_usage", lambda path: usage(2**40, 2**40, key_spill.SPARE_BYTES))
    assert key_spill.KeySpill.create([3], 10, np.dtype(np.uint64), str(disk)) is None
    assert list(disk.iterdir()) == []


def test_the_spill_writes_and_reads_the_bands_it_holds(disk: Path) -> None:
    spill = key_spill.KeySpill.create([2, 3, 5], 6, np.dtype(np.uint32), str(disk))
    assert spill is not None
    block = np.arange(6 * 3, dtype=np.uint32).reshape(6, 3)  # bands 0-5 of three documents
    spill.write(block, 0, np.array([1, 2, 3]))  # contiguous places
    spill.write(block[2:] + 100, 2, np.array([0, 4, 5]))  # scattered places, from band 2 on
    keys = np.zeros((4, 6), np.uint32)  # bands 2-5
    spill.fill(keys, 2)
    assert keys[0].tolist() == [106, 6, 7, 8, 107, 108]
    assert keys[1].tolist() == [109, 9, 10, 11, 110, 111]
    assert keys[2].tolist() == [0] * 6  # band 4 is not spilled: left as it was
    assert keys[3].tolist() == [115, 15, 16, 17, 116, 117]
    spill.close()


def test_the_file_system_of_a_path_is_that_of_its_longest_mount_point() -> None:
    with open("/proc/mounts") as mounts:
        root = next(line.split()[2] for line in mounts if line.split()[1] == "/")
    assert key_spill.file_system_type("/") == root
    assert key_spill.file_system_type("/proc/self") == "proc"


def test_readers_writing_interleaved_places_at_once_lose_no_key(disk: Path) -> None:
    # Four forked writers, each the places of one residue mod 4 (row groups of a store whose ids interleave), a
    # block of 25 places at a time: every place read, updated and written back under the file's lock.
    documents = 400
    spill = key_spill.KeySpill.create([0, 1], documents, np.dtype(np.uint64), str(disk))
    assert spill is not None

    def write(residue: int) -> int:
        places = np.arange(residue, documents, 4)
        for start in range(0, places.size, 25):
            columns = places[start : start + 25]
            spill.write(np.vstack([columns, columns * 10]).astype(np.uint64), 0, columns)
        return residue

    assert sorted(forked_map(write, range(4), 4, "the test")) == [0, 1, 2, 3]
    keys = np.zeros((2, documents), np.uint64)
    spill.fill(keys, 0)
    assert keys[0].tolist() == list(range(documents)) and keys[1].tolist() == [10 * i for i in range(documents)]
    spill.close()


def test_the_command_line_spills_with_a_small_band_memory_and_a_kill_leaves_nothing(store: Path, disk: Path,
                                                                                     tmp_path: Path) -> None:
    # Through the command line, as a cron job runs it: --band-memory forces rounds of a band, the later waves read
    # the spill, the output is the default run's; a driver killed mid-stage leaves nothing in $TMPDIR and no worker.
    scratch = disk
    environment = dict(os.environ, TMPDIR=str(scratch))
    command = [sys.executable, "-m", "dedup_cli", "find", str(store), "-t", "0.5", "-b", "2", "--output", "pairs",
               "--format", "tsv", "-q"]
    default = subprocess.run(command, capture_output=True, text=True, env=environment, check=True)
    spilled = subprocess.run([*command, "--band-memory", "1", "-j", "2"], capture_output=True, text=True,
                             env=environment, check=True)
    assert spilled.stdout == default.stdout and spilled.stdout.count("\n") > 250
    assert list(scratch.iterdir()) == []
    marker = tmp_path / "rounds"
    slow = ("import sys, time\n"
            "from dedup_cli.candidates import buckets\n"
            "from dedup_cli.engine.local import band_rounds\n"
            "original = buckets.round_pair_codes\n"
            "def slow(*arguments, **named):\n"
            f"    with open({str(marker)!r}, 'a') as out:\n"
            "        out.write('round\\n')\n"
            "    time.sleep(0.2)\n"
            "    return original(*arguments, **named)\n"
            "band_rounds.round_pair_codes = slow\n"
            "from dedup_cli.cli.main import cli\n"
            "cli(sys.argv[1:], prog_name='dedup')\n")
    driver = subprocess.Popen([sys.executable, "-c", slow, *command[3:], "--band-memory", "1", "-j", "2"],
                              env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while (not marker.exists() or marker.read_text().count("round") < 6) and time.monotonic() < deadline:
        assert driver.poll() is None, "the find ended before it was killed"
        time.sleep(0.05)
    os.kill(driver.pid, signal.SIGKILL)  # the driver alone, within the later waves, which read the spill
    driver.wait()
    for _ in range(50):
        alive = subprocess.run(["pgrep", "-f", str(store)], capture_output=True, text=True).stdout.split()
        if not alive:
            break
        time.sleep(0.1)
    assert not alive  # its workers ended with it
    assert list(scratch.iterdir()) == []
