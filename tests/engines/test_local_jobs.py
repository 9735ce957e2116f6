"""find, filter and eval with -j N: the local engine's parallel stages give the same bytes as one process.

The stages fork their workers only when each gets enough work (``forked.BANDED_DOCUMENTS`` and the like); the
tests lower that to one item, so that the small corpora here run every stage in N processes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from same_answers import assert_same_answers

import dedup_cli as dedup
from dedup_cli import forked, verification
from dedup_cli.candidates import buckets
from dedup_cli.cli.main import cli
from dedup_cli.engine import find_memory
from dedup_cli.engine.local import band_rounds
from dedup_cli.engine.stages import find as find_stages
from dedup_cli.errors import DedupError, OptionError
from dedup_cli.params import SignatureParams
from dedup_cli.store.format import DocumentBatch
from dedup_cli.store.store import create_store

CORPORA = Path(__file__).resolve().parents[2] / "sample_corpora"
SHARES = ("BANDED_DOCUMENTS", "COMPARED_DOCUMENTS", "READ_DOCUMENTS", "SCORED_PAIRS", "CHECKED_DOCUMENTS",
          "CHECKED_ELEMENTS")


@pytest.fixture(autouse=True)
def small_shares(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in SHARES:
        monkeypatch.setattr(forked, name, 1)


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The sample corpora signed (k = 128), and a synthetic store of 3,000 documents in 6 row groups, 10 % of them in
    planted families."""
    folder = tmp_path_factory.mktemp("jobs")
    found = {}
    for corpus in ("bible-editions", "licenses", "udhr"):
        store = folder / f"{corpus}.parquet"
        result = CliRunner().invoke(cli, ["sign", str(CORPORA / corpus), "-o", str(store), "-k", "128", "-q"],
                                    catch_exceptions=False)
        assert result.exit_code == 0, result.stderr
        found[corpus] = store
    params = SignatureParams(num_perm=64, bits=8)
    generator = np.random.default_rng(5)
    values = generator.integers(0, 256, size=(3_000, 64), dtype=np.uint8)
    for start in range(0, 3_000, 30):  # families of 3 copying 60-90 % of a seed's values
        for member in (1, 2):
            copy = generator.random(64) < generator.uniform(0.6, 0.9)
            values[start + member, copy] = values[start, copy]
    counts = np.full(3_000, 400, np.int64)
    counts[::97] = 0  # a few documents with no shingle
    found["synthetic"] = folder / "synthetic"
    with create_store(found["synthetic"], params).begin_run(params) as writer:
        for start in range(0, 3_000, 500):
            ids = [f"doc{i:05d}" for i in range(start, start + 500)]
            writer.write(DocumentBatch(ids=ids, paths=[""] * 500, sizes=np.zeros(500, np.int64),
                                       mtimes_ns=np.zeros(500, np.int64), content_hashes=np.zeros(500, np.uint64),
                                       shingle_counts=counts[start : start + 500],
                                       signatures=values[start : start + 500]))
    return found


MATRIX = [
    dict(threshold=0.5),
    dict(threshold=0.3, bits=2, band_memory=2_000),  # a band more than the wave's bytes: waves of one round
    dict(threshold=0.5, bits=2, ways=3, band_memory=20_000),  # rounds of a band or two: waves of j rounds
    dict(threshold=0.4, bits=4, verify="all", group="strict"),
    dict(threshold=0.45, bits=2, ways=3, verify="none", group="strict", keep="longest"),
    dict(threshold=0.5, bits=2, candidates="all"),
]


@pytest.mark.parametrize("corpus", ["bible-editions", "licenses", "udhr", "synthetic"])
@pytest.mark.parametrize("given", MATRIX, ids=lambda given: ",".join(f"{k}={v}" for k, v in given.items()))
def test_find_writes_the_same_bytes_whatever_jobs(stores: dict[str, Path], corpus: str, given: dict) -> None:
    one = dedup.find(stores[corpus], dedup.FindOptions(jobs=1, **given))
    assert one.candidates > 0
    for jobs in (2, 3):
        assert_same_answers(one, dedup.find(stores[corpus], dedup.FindOptions(jobs=jobs, **given)))


def test_texts_in_memory_too() -> None:
    texts = [" ".join(f"w{(i * 7 + j) % 400}" for j in range(60)) for i in range(40)] * 2
    texts += [text + " extra words here" for text in texts[:20]]
    one = dedup.find_duplicates(texts, dedup.FindOptions(threshold=0.5, jobs=1))
    assert one.pair_count > 0
    assert_same_answers(one, dedup.find_duplicates(texts, dedup.FindOptions(threshold=0.5, jobs=3)))


def _recording(monkeypatch: pytest.MonkeyPatch, log: Path) -> None:
    """Every call of the candidate, scoring and exact-check stages appends its stage and process to ``log``."""
    def record(module: object, name: str, stage: str) -> None:
        original = getattr(module, name)

        def recorded(*args: object, **kwargs: object) -> object:
            with open(log, "a") as out:
                out.write(f"{stage} {os.getpid()}\n")
            return original(*args, **kwargs)

        monkeypatch.setattr(module, name, recorded)

    record(buckets, "band_pair_codes", "candidates")
    record(buckets, "band_keys", "reading")
    record(find_stages, "score_pairs", "scoring")
    record(verification, "read_sets", "verifying")  # the exact checks' documents, read a share a worker


@pytest.mark.parametrize("jobs", [1, 2, 3])
def test_jobs_are_worker_processes(stores: dict[str, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                   jobs: int) -> None:
    # The bible store has 49 documents in one row group (read by one process), 48 bands and 27 pairs to check.
    log = tmp_path / "calls"
    _recording(monkeypatch, log)
    dedup.find(stores["bible-editions"], dedup.FindOptions(threshold=0.3, verify="all", jobs=jobs))
    processes: dict[str, set[int]] = {}
    for line in log.read_text().splitlines():
        stage, pid = line.split()
        processes.setdefault(stage, set()).add(int(pid))
    assert set(processes) == {"reading", "candidates", "scoring", "verifying"}
    for stage in ("candidates", "scoring", "verifying"):
        assert len(processes[stage]) == jobs, stage
        assert (os.getpid() in processes[stage]) is (jobs == 1), stage
    # The synthetic store's 6 row groups are read by as many processes as there are jobs.
    log.unlink()
    dedup.find(stores["synthetic"], dedup.FindOptions(threshold=0.5, jobs=jobs))
    readers = {int(line.split()[1]) for line in log.read_text().splitlines() if line.startswith("reading")}
    assert len(readers) == jobs and (os.getpid() in readers) is (jobs == 1)


def test_eval_and_its_stages_in_workers(stores: dict[str, Path], monkeypatch: pytest.MonkeyPatch,
                                        tmp_path: Path) -> None:
    outputs = []
    for jobs in ("1", "2", "3"):
        code, stdout, stderr = run("eval", str(stores["licenses"]), "-t", "0.4", "-b", "2", "--sample", "200",
                                   "--format", "json", "-q", "-j", jobs)
        assert code == 0, stderr
        record = json.loads(stdout)
        record.pop("seconds")
        outputs.append(record)
    assert outputs[1] == outputs[0] and outputs[2] == outputs[0]
    log = tmp_path / "calls"
    _recording(monkeypatch, log)
    monkeypatch.setattr(find_stages, "bands_pair_codes", _logged(find_stages.bands_pair_codes, log, "candidates"))
    assert run("eval", str(stores["licenses"]), "-t", "0.4", "--sample", "100", "-q", "-j", "2")[0] == 0
    stages: dict[str, set[int]] = {}
    for line in log.read_text().splitlines():
        stage, pid = line.split()
        stages.setdefault(stage, set()).add(int(pid))
    for stage in ("candidates", "scoring", "verifying"):  # each stage runs one or more times, in 2 workers each
        assert len(stages[stage]) >= 2 and len(stages[stage]) % 2 == 0 and os.getpid() not in stages[stage], stage


def _logged(function: object, log: Path, stage: str) -> object:
    def logged(*args: object, **kwargs: object) -> object:
        with open(log, "a") as out:
            out.write(f"{stage} {os.getpid()}\n")
        return function(*args, **kwargs)  # type: ignore[operator]

    return logged


def test_filter_writes_the_same_bytes_whatever_jobs(tmp_path: Path) -> None:
    corpus = CORPORA / "bible-editions"
    store = tmp_path / "sigs.parquet"
    assert run("sign", str(corpus), "-o", str(store), "-k", "128", "-q")[0] == 0
    written = []
    for jobs in ("1", "2", "3"):
        out = tmp_path / f"out-{jobs}"
        removed = tmp_path / f"removed-{jobs}.tsv"
        code, _, stderr = run("filter", str(corpus), "-o", str(out), "-s", str(store), "-t", "0.4", "-q",
                              "--removed", str(removed), "-j", jobs)
        assert code == 0, stderr
        written.append({str(path.relative_to(out)): path.read_bytes() for path in sorted(out.rglob("*"))
                        if path.is_file()} | {"removed": removed.read_bytes()})
    assert written[0]["removed"].count(b"\n") > 5  # documents dropped, with their similarity to the kept one
    assert written[1] == written[0] and written[2] == written[0]


def test_jobs_is_the_local_engines(stores: dict[str, Path]) -> None:
    with pytest.raises(OptionError, match="jobs sets the local engine's processes; with engine dask"):
        dedup.FindOptions(jobs=2, engine=dedup.EngineOptions("dask"))
    with pytest.raises(OptionError, match="jobs -1"):
        dedup.FindOptions(jobs=-1)
    assert dedup.FindOptions(jobs=0).workers == (os.cpu_count() or 1)
    code, _, stderr = run("find", str(stores["licenses"]), "-j", "-1")
    assert code == 2 and "-j" in stderr


def _killing_band_pair_codes(*args: object) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_worker_that_dies_ends_the_run_with_one_line(stores: dict[str, Path],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(buckets, "band_pair_codes", _killing_band_pair_codes)
    with pytest.raises(DedupError, match=r"^a worker process of the candidate stage died \(killed by SIGKILL\); "
                                         r"nothing was written, run again \(with jobs 1 to run in one process\)$"):
        dedup.find(stores["synthetic"], dedup.FindOptions(jobs=2))


KILLED_WORKER = """
import os, signal, sys
from dedup_cli import forked
from dedup_cli.candidates import buckets
forked.BANDED_DOCUMENTS = forked.READ_DOCUMENTS = forked.SCORED_PAIRS = forked.CHECKED_DOCUMENTS = 1
def killed(*args):
    os.kill(os.getpid(), signal.SIGKILL)
buckets.band_pair_codes = killed
from dedup_cli.cli.main import cli
cli(prog_name="dedup")
"""


def _environment() -> dict[str, str]:
    return {key: value for key, value in os.environ.items() if not key.startswith("DEDUP_")}


def test_the_command_line_says_one_line_when_a_worker_dies(stores: dict[str, Path]) -> None:
    done = subprocess.run([sys.executable, "-c", KILLED_WORKER, "find", str(stores["synthetic"]), "-j", "2"],
                          capture_output=True, text=True, timeout=300, env=_environment())
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1, done.stderr
    assert "a worker process of the candidate stage died (killed by SIGKILL)" in done.stderr
    assert "--jobs 1" in done.stderr and "Exception ignored" not in done.stderr


SLEEPING_WORKERS = """
import os, sys, time
from dedup_cli import forked
from dedup_cli.candidates import buckets
forked.BANDED_DOCUMENTS = forked.READ_DOCUMENTS = forked.SCORED_PAIRS = forked.CHECKED_DOCUMENTS = 1
def sleeping(*args):
    open(os.path.join(sys.argv[1], f"worker-{os.getpid()}"), "w").close()
    time.sleep(600)
buckets.band_pair_codes = sleeping
import dedup_cli as dedup
dedup.find(sys.argv[2], dedup.FindOptions(jobs=2))
"""


def test_workers_end_when_their_driver_is_killed(stores: dict[str, Path], tmp_path: Path) -> None:
    driver = subprocess.Popen([sys.executable, "-c", SLEEPING_WORKERS, str(tmp_path), str(stores["synthetic"])],
                              env=_environment())
    try:
        deadline = time.monotonic() + 120
        while len(list(tmp_path.glob("worker-*"))) < 2 and driver.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        workers = [int(path.name.split("-")[1]) for path in tmp_path.glob("worker-*")]
        assert len(workers) == 2 and driver.poll() is None
    finally:
        driver.kill()
        driver.wait()
    deadline = time.monotonic() + 60
    while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not any(_alive(pid) for pid in workers)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as status:
            return not any(line.startswith("State:") and "Z" in line.split()[1] for line in status)
    except FileNotFoundError:
        return False


def test_the_jobs_of_the_environment(stores: dict[str, Path], monkeypatch: pytest.MonkeyPatch,
                                     tmp_path: Path) -> None:
    log = tmp_path / "calls"
    _recording(monkeypatch, log)
    result = CliRunner().invoke(cli, ["find", str(stores["bible-editions"]), "-q"], env={"DEDUP_FIND_JOBS": "3"},
                                catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    candidates = {int(line.split()[1]) for line in log.read_text().splitlines() if line.startswith("candidates")}
    assert len(candidates) == 3 and os.getpid() not in candidates


def test_a_wave_holds_no_more_than_its_processes_bytes_when_one_band_is_larger(monkeypatch: pytest.MonkeyPatch
                                                                              ) -> None:
    monkeypatch.setattr(find_memory, "machine_memory", lambda: int(23.5 * 2**30))
    # 10^9 documents' 64-bit keys are 8 GB a band, past a round's 1 GiB: the 38 rounds of one band each run 8 at a
    # time with 64 processes (the 64 GiB they hold together), not all 38 at once (304 GB of keys).
    rounds = band_rounds.band_rounds(38, 10**9, 8, 2**30)
    assert len(rounds) == 38
    assert band_rounds.wave_rounds(rounds, 10**9, 8, 2**30, 64) == 8
    assert band_rounds.wave_rounds(rounds, 10**9, 8, 2**30, 2) == 1  # one round at least, however large
    # Where a round holds whole bands within its bytes, a wave is one round a process, as before.
    rounds = band_rounds.band_rounds(38, 10**8, 8, 3 * 2**30)
    assert band_rounds.wave_rounds(rounds, 10**8, 8, 3 * 2**30, 2) == 2
    assert band_rounds.wave_rounds(rounds, 10**8, 8, 3 * 2**30, 0) == 1
    # plan's model keys and sorts the same wave: at 10^9 and -j 64, 8 bands of keys and 8 processes sorting.
    parts, _ = find_memory.find_memory(10**9, 128, 16, 2, 38, 3, 256, 10**5, 10**6, find_memory.FindProcesses(64, 1))
    sizes = {part.name: part.bytes for part in parts}
    wave = 64 * 2**30 // (8 * 10**9)
    assert sizes["band keys of a wave of j rounds, shared"] <= 64 * 2**30
    assert sizes["sorting one band in each of j processes (transient)"] == min(64, wave) * 14 * 10**9


def test_default_band_memory_takes_a_quarter_of_the_machine_for_a_wave(monkeypatch: pytest.MonkeyPatch,
                                                                       tmp_path: Path) -> None:
    # 23.5 GiB shared by a wave of two rounds: 2.9 GiB a round, three bands of 10^8 documents' 64-bit keys, so
    # the 35 bands of the card's banding take 12 rounds (6 reads of the store at -j 2), not 35 of one band each.
    memory = int(23.5 * 2**30)
    per_round = find_memory.default_round_bytes(2, memory)
    assert per_round == memory // 8
    assert len(band_rounds.band_rounds(35, 10**8, 8, per_round)) == 12
    # A small machine keeps 1 GiB a round, as before; a large one never holds more than all the bands.
    assert find_memory.default_round_bytes(4, 2 * 2**30) == 2**30
    assert len(band_rounds.band_rounds(35, 10**7, 8, find_memory.default_round_bytes(1, memory))) == 1
    # A container's limit, when lower than the machine's memory, is the machine.
    limit = tmp_path / "memory.max"
    limit.write_text("4294967296\n")
    monkeypatch.setattr(find_memory, "_CGROUP_LIMIT", str(limit))
    assert find_memory.machine_memory() == 4 * 2**30
    limit.write_text("max\n")
    assert find_memory.machine_memory() == os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
