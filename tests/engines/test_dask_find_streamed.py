"""find --engine dask when its output is streamed from the cluster (forced on small stores by ``gather_limit``):
every output kind in every format, the records a library user reads, the command line in-process and as a real
process, rounds of bands with progress, and a killed run resumed from its work directory. Each is compared byte
for byte with the local engine.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from helpers import REPO, on_a_terminal, reused_bands
from same_answers import without_time

import dedup_cli as dedup
from dedup_cli.cli.main import cli
from dedup_cli.engine.dask import end_on_workers
from dedup_cli.options.engine_choice import EngineOptions
from dedup_cli.store.format import DocumentBatch

SAMPLES = REPO / "sample_corpora"
KINDS = ("groups", "pairs", "triples", "members")


@pytest.fixture(scope="module")
def three_results(stores: dict[str, Path], engine: EngineOptions) -> dict[str, dedup.FindResult]:
    """One find of the sample store (triples too) by the local engine, and by the Dask engine gathered and
    streamed in chunks of 10 pairs (the floor of a chunk lowered for it: a small store has only a few hundred)."""
    options = {"ways": 3, "bits": 2, "threshold": 0.5}
    results = {"local": dedup.find(stores["sample"], dedup.FindOptions(**options)),
               "gathered": dedup.find(stores["sample"], dedup.FindOptions(engine=engine, **options))}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(end_on_workers, "MIN_PAIRS_PER_PARTITION", 1)
        results["streamed"] = dedup.find(stores["sample"], dedup.FindOptions(engine=engine, gather_limit=10,
                                                                             **options))
    assert results["gathered"].streamed is None and results["streamed"].streamed is not None
    assert len(list(results["streamed"].streamed.chunks("pairs"))) > 2
    return results


@pytest.mark.parametrize("fail", [False, True], ids=["exit-0", "fail-on-duplicates"])
@pytest.mark.parametrize("kind", KINDS)
def test_every_output_and_format_is_written_from_streamed_results(
        three_results: dict[str, dedup.FindResult], stores: dict[str, Path], kind: str, fail: bool, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The command line's writing, for a result of each path (find itself is run once per path, by the fixture).
    for fmt in ("jsonl", "tsv", "csv", "parquet"):
        written = {}
        for path, result in three_results.items():
            monkeypatch.setattr(dedup, "find", lambda *_, result=result: result)
            out = tmp_path / f"{path}.{fmt}"
            got = CliRunner().invoke(cli, ["find", str(stores["sample"]), "--ways", "3", "--output", kind, "--format",
                                           fmt, "-o", str(out), *(["--fail-on-duplicates"] if fail else [])])
            assert got.exit_code == (3 if fail else 0), got.stderr
            written[path] = out.read_bytes()
        assert written["streamed"] == written["gathered"] == written["local"], (kind, fmt)
        assert len(written["local"]) > 200


def test_the_results_in_ids_are_the_same_on_every_path(three_results: dict[str, dedup.FindResult]) -> None:
    # groups(), pairs(), triples(), members() read a streamed result chunk by chunk, as the command line does.
    for kind in KINDS:
        got = {path: [tuple(item) for item in getattr(result, kind)()] for path, result in three_results.items()}
        assert got["streamed"] == got["gathered"] == got["local"], kind
        assert got["local"], kind
    assert three_results["streamed"].to_arrow("pairs").equals(three_results["local"].to_arrow("pairs"))


def test_a_gather_limit_of_zero_streams_the_same_records_in_few_partitions(
        three_results: dict[str, dedup.FindResult], stores: dict[str, Path], engine: EngineOptions) -> None:
    """--gather-limit 0, the knob's extreme, streams every record from the workers: the records of the default
    (gathered) run, from partitions of many pairs each, not one task per pair."""
    options = {"ways": 3, "bits": 2, "threshold": 0.5}
    streamed = dedup.find(stores["sample"], dedup.FindOptions(engine=engine, gather_limit=0, **options))
    assert streamed.streamed is not None
    needed = streamed.profile["needed_pairs"]
    assert needed > 100  # a chunk per pair would be hundreds of partitions
    assert streamed.streamed.partitions == -(-needed // end_on_workers.MIN_PAIRS_PER_PARTITION) == 1
    assert len(list(streamed.streamed.chunks("pairs"))) == len(list(streamed.streamed.chunks("groups"))) == 1
    for kind in KINDS:
        got = [tuple(item) for item in getattr(streamed, kind)()]
        assert got == [tuple(item) for item in getattr(three_results["gathered"], kind)()], kind
    assert streamed.to_arrow("pairs").equals(three_results["gathered"].to_arrow("pairs"))


def test_the_streamed_output_reaches_the_command_line(stores: dict[str, Path], engine: EngineOptions,
                                                      tmp_path: Path) -> None:
    """End to end: --gather-limit sends the end of find to the workers; the file, the summary and the exit code are
    the local engine's."""
    common = ["find", str(stores["grown"]), "--output", "members", "--format", "tsv", "--fail-on-duplicates"]
    local = CliRunner().invoke(cli, [*common, "-o", str(tmp_path / "local.tsv")])
    remote = CliRunner().invoke(cli, [*common, "-o", str(tmp_path / "dask.tsv"), "--engine", "dask", "--scheduler",
                                      str(engine.scheduler), "--gather-limit", "5"])
    assert local.exit_code == remote.exit_code == 3, remote.stderr
    assert (tmp_path / "dask.tsv").read_bytes() == (tmp_path / "local.tsv").read_bytes()
    assert (tmp_path / "local.tsv").read_text().count("\n") > 10
    assert without_time(remote.stderr) == without_time(local.stderr)


@pytest.mark.parametrize("gather_limit", ["5", "20000000"], ids=["streamed", "gathered"])
def test_a_real_process_writes_the_local_engines_bytes(stores: dict[str, Path], engine: EngineOptions,
                                                       gather_limit: str, tmp_path: Path) -> None:
    common = [sys.executable, "-m", "dedup_cli", "find", str(stores["sample"]), "--output", "pairs",
              "--fail-on-duplicates", "-q"]
    local = subprocess.run(common, capture_output=True, timeout=300)
    remote = subprocess.run([*common, "--engine", "dask", "--scheduler", str(engine.scheduler)], capture_output=True,
                            timeout=300, env={**os.environ, "DEDUP_FIND_GATHER_LIMIT": gather_limit})
    assert local.returncode == remote.returncode == 3, remote.stderr
    assert remote.stdout == local.stdout and local.stdout.count(b"\n") > 10


def test_rounds_of_bands_and_progress_through_the_command_line(stores: dict[str, Path], engine: EngineOptions,
                                                               tmp_path: Path) -> None:
    """--band-memory forces several rounds on the workers: the same file as the local engine's; and on a terminal
    the driver shows the stages."""

    common = ["find", str(stores["grown"]), "--output", "pairs", "--format", "csv", "--ways", "3", "--bits", "2"]
    local = CliRunner().invoke(cli, [*common, "-o", str(tmp_path / "local.csv")])
    remote = CliRunner().invoke(cli, [*common, "-o", str(tmp_path / "dask.csv"), "--engine", "dask", "--scheduler",
                                      str(engine.scheduler), "--band-memory", "2KiB"])
    assert local.exit_code == remote.exit_code == 0, remote.stderr
    assert (tmp_path / "dask.csv").read_bytes() == (tmp_path / "local.csv").read_bytes()
    code, shown = on_a_terminal(*common, "--engine", "dask", "--scheduler", str(engine.scheduler), "--band-memory",
                                "2KiB", "-o", str(tmp_path / "shown.csv"))
    assert code == 0
    assert "round 3 of" in shown and "round 9 of" not in shown, shown[-2000:]  # a few rounds: the stages show
    for stage in ("reading the store's pieces", "candidates, bands 1–", "round 2 of", "scoring the candidate pairs",
                  "exact checks and decisions", "groups", "writing"):
        assert stage in shown, shown[-2000:]


def test_a_killed_dask_find_resumes_from_its_work_dir(engine: EngineOptions, tmp_path: Path) -> None:
    """The driver SIGKILLed during the candidate stage (a band a round), then run again: the local engine's bytes,
    the rounds kept by the killed run reused, and the same again from the kept scores and decisions."""
    import signal
    import time

    from dedup_cli.params import SignatureParams
    from dedup_cli.store.store import create_store

    store = tmp_path / "sigs"
    params = SignatureParams(num_perm=64, bits=8)
    rng = np.random.default_rng(9)
    values = rng.integers(0, 256, size=(40_000, 64), dtype=np.uint8)
    values[1::50] = values[::50]
    with create_store(store, params).begin_run(params) as run:
        run.write(DocumentBatch([f"d{i:06d}" for i in range(40_000)], [""] * 40_000, np.zeros(40_000, np.int64),
                                np.zeros(40_000, np.int64), np.zeros(40_000, np.uint64),
                                np.full(40_000, 100, np.int64), values))
    common = ["find", str(store), "-t", "0.6", "--output", "pairs", "--verify", "none", "--band-memory", "1KiB"]
    local = CliRunner().invoke(cli, common)
    assert local.exit_code == 0 and local.stdout.count("\n") > 500
    work = tmp_path / "work"
    remote = [sys.executable, "-m", "dedup_cli", *common, "--engine", "dask", "--scheduler", str(engine.scheduler),
              "--work-dir", str(work)]
    child = subprocess.Popen(remote, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while len(list(work.glob("candidates-*.npz"))) < 2 and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert child.poll() is None
    child.send_signal(signal.SIGKILL)
    child.wait()
    kept = len(list(work.glob("candidates-*.npz")))
    resumed = subprocess.run([*remote, "--keep-work"], capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout == local.stdout
    assert resumed.stderr.startswith("resuming: candidates for bands 1–") and reused_bands(resumed.stderr) >= kept
    again = subprocess.run(remote, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and again.stdout == local.stdout
    assert again.stderr.splitlines()[:2] == [f"resuming: scored candidate pairs from {work}",
                                             f"resuming: exact checks and decisions from {work}"]
    assert not work.exists()
