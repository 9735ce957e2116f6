"""find --work-dir: a run killed part-way resumes from its last completed stage, and nothing else is ever reused.

The kill tests SIGKILL a real ``dedup find`` process while its candidate stage runs (many rounds of one band, on a
synthetic store) and while its exact checks run (every pair re-read, on a corpus of files), then run the same
command again: the output is the clean run's, and stderr says what was reused.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from helpers import planted_families, reused_bands

from dedup_cli.cli.main import cli
from dedup_cli.params import SignatureParams
from dedup_cli.store.format import DocumentBatch
from dedup_cli.store.store import create_store

DOCUMENTS = 200_000


def dedup(*args: str) -> subprocess.Popen[bytes]:
    environment = {key: value for key, value in os.environ.items() if not key.startswith("DEDUP_")}
    return subprocess.Popen([sys.executable, "-m", "dedup_cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=environment)


def finished(*args: str) -> tuple[int, bytes, str]:
    child = dedup(*args)
    stdout, stderr = child.communicate(timeout=300)
    return child.returncode, stdout, stderr.decode()


def kill_when(child: subprocess.Popen[bytes], ready: callable) -> None:  # type: ignore[valid-type]
    deadline = time.monotonic() + 120
    while not ready() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    assert child.poll() is None, "the run ended before it could be killed; make its stage last longer"
    child.send_signal(signal.SIGKILL)
    child.wait()


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """200,000 random 64-value signatures, 1 % in planted pairs: a store whose candidate stage takes a second or
    two in rounds of one band."""
    path = tmp_path_factory.mktemp("resume") / "sigs"
    params = SignatureParams(num_perm=64, bits=8)
    rng = np.random.default_rng(3)
    values = rng.integers(0, 256, size=(DOCUMENTS, 64), dtype=np.uint8)
    copies = np.arange(0, DOCUMENTS, 100)
    values[copies + 1] = values[copies]
    values[copies + 1, :8] = rng.integers(0, 256, size=(copies.size, 8), dtype=np.uint8)
    with create_store(path, params).begin_run(params) as run:
        for start in range(0, DOCUMENTS, 50_000):
            count = 50_000
            run.write(DocumentBatch(
                ids=[f"doc{start + i:07d}" for i in range(count)], paths=[""] * count,
                sizes=np.zeros(count, np.int64), mtimes_ns=np.zeros(count, np.int64),
                content_hashes=np.zeros(count, np.uint64), shingle_counts=np.full(count, 500, np.int64),
                signatures=values[start : start + count]))
    return path


def test_a_run_killed_in_the_candidate_stage_resumes_at_its_last_round(synthetic: Path, tmp_path: Path) -> None:
    common = ["find", str(synthetic), "-t", "0.6", "--output", "pairs", "--verify", "none", "--band-memory", "1KiB"]
    code, clean, _ = finished(*common)
    assert code == 0 and clean.count(b"\n") > 1000
    work = tmp_path / "work"
    child = dedup(*common, "--work-dir", str(work))
    kill_when(child, lambda: len(list(work.glob("candidates-*.npz"))) >= 3)
    kept = len(list(work.glob("candidates-*.npz")))
    code, resumed, stderr = finished(*common, "--work-dir", str(work))
    assert code == 0 and resumed == clean
    assert stderr.startswith("resuming: candidates for bands 1–"), stderr
    assert reused_bands(stderr.splitlines()[0]) >= kept
    assert not work.exists()  # a finished run removes its work files


def test_a_run_killed_in_its_exact_checks_resumes_with_the_scored_pairs(tmp_path: Path) -> None:
    planted_families(tmp_path / "docs", families=40, size=25, edit_rate=(0.0, 0.2), seed=4)
    store = tmp_path / "sigs"
    assert CliRunner().invoke(cli, ["sign", str(tmp_path / "docs"), "-o", str(store), "-q"]).exit_code == 0
    common = ["find", str(store), "-t", "0.5", "--verify", "all", "--output", "pairs", "--format", "tsv"]
    code, clean, _ = finished(*common)
    assert code == 0 and clean.count(b"\n") > 1000
    work = tmp_path / "work"
    child = dedup(*common, "--work-dir", str(work))
    kill_when(child, lambda: any(work.glob("scored-*.npz")))
    assert not any(work.glob("decisions-*.npz"))
    code, resumed, stderr = finished(*common, "--work-dir", str(work), "--keep-work")
    assert code == 0 and resumed == clean
    assert stderr.splitlines()[0] == f"resuming: scored candidate pairs from {work}"
    code, again, stderr = finished(*common, "--work-dir", str(work))
    assert code == 0 and again == clean
    assert stderr.splitlines()[:2] == [f"resuming: scored candidate pairs from {work}",
                                       f"resuming: exact checks and decisions from {work}"]


def test_work_of_another_snapshot_or_other_options_is_never_reused(tmp_path: Path) -> None:
    planted_families(tmp_path / "docs", families=6, size=5, edit_rate=(0.0, 0.2), seed=5)
    store = tmp_path / "sigs"
    runner = CliRunner()
    assert runner.invoke(cli, ["sign", str(tmp_path / "docs"), "-o", str(store), "-q"]).exit_code == 0
    work = tmp_path / "work"
    keep = ["--work-dir", str(work), "--keep-work"]
    first = runner.invoke(cli, ["find", str(store), "--output", "pairs", *keep])
    assert first.exit_code == 0 and "resuming" not in first.stderr
    # Other options: another banding (R0) shares nothing; other bits share the candidates only.
    other = runner.invoke(cli, ["find", str(store), "--output", "pairs", "-t", "0.8", *keep])
    assert other.exit_code == 0 and "resuming" not in other.stderr
    bits = runner.invoke(cli, ["find", str(store), "--output", "pairs", "--bits", "2", *keep])
    assert bits.exit_code == 0 and bits.stderr.startswith("resuming: candidates for bands 1–")
    assert "scored" not in bits.stderr
    # Another snapshot: one more document signed into the store.
    (tmp_path / "docs" / "new.txt").write_text((tmp_path / "docs" / "f00-0.txt").read_text() + " and more")
    assert runner.invoke(cli, ["sign", str(tmp_path / "docs"), "-o", str(store), "-q"]).exit_code == 0
    grown = runner.invoke(cli, ["find", str(store), "--output", "pairs", *keep])
    assert grown.exit_code == 0 and "resuming" not in grown.stderr
    assert "new.txt" in grown.stdout
    clean = runner.invoke(cli, ["find", str(store), "--output", "pairs"])
    assert grown.stdout == clean.stdout


def test_damaged_work_files_are_recomputed_not_trusted(tmp_path: Path) -> None:
    planted_families(tmp_path / "docs", families=6, size=5, edit_rate=(0.0, 0.2), seed=6)
    store = tmp_path / "sigs"
    runner = CliRunner()
    assert runner.invoke(cli, ["sign", str(tmp_path / "docs"), "-o", str(store), "-q"]).exit_code == 0
    work = tmp_path / "work"
    common = ["find", str(store), "--output", "pairs", "--band-memory", "16", "--work-dir", str(work),
              "--keep-work"]
    clean = runner.invoke(cli, common)
    assert clean.exit_code == 0
    rounds = sorted(work.glob("candidates-*.npz"))
    assert len(rounds) > 5
    for file in (*work.glob("scored-*.npz"), *work.glob("decisions-*.npz")):
        file.unlink()
    truncated, flipped = rounds[0], rounds[1]
    truncated.write_bytes(truncated.read_bytes()[:200])
    data = bytearray(flipped.read_bytes())
    data[len(data) // 2] ^= 0xFF
    flipped.write_bytes(bytes(data))
    again = runner.invoke(cli, common)
    assert again.exit_code == 0 and again.stdout == clean.stdout
    note = again.stderr.splitlines()[0]
    assert note.startswith("resuming: candidates for bands ")
    assert reused_bands(note) == len(rounds) - 2  # a band a round: the two damaged rounds were redone
    assert sorted(work.glob("candidates-*.npz")) == rounds  # and kept again, whole


def test_a_work_dir_that_is_a_file_is_refused(tmp_path: Path) -> None:
    planted_families(tmp_path / "docs", families=2, size=3, edit_rate=(0.0, 0.2), seed=7)
    store = tmp_path / "sigs"
    assert CliRunner().invoke(cli, ["sign", str(tmp_path / "docs"), "-o", str(store), "-q"]).exit_code == 0
    (tmp_path / "file").write_text("x")
    result = CliRunner().invoke(cli, ["find", str(store), "--work-dir", str(tmp_path / "file")])
    assert result.exit_code == 2 and result.stderr.splitlines()[-1].endswith("file' is a file.")
    result = CliRunner().invoke(cli, ["find", str(store), "--keep-work"])
    assert result.exit_code == 2 and result.stderr == "Error: --keep-work keeps the files of --work-dir DIR; name one\n"
    result = CliRunner().invoke(cli, ["find", str(store), "--work-dir", "s3://bucket/work"])
    assert result.exit_code == 2 and "not in object storage; name a folder" in result.stderr
    assert not Path("s3:").exists()
