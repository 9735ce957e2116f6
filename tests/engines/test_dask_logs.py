"""Dask's log records and its workers' stderr stay off the user's stderr: a run that fails ends with its one-line
error and nothing else, the records (a task's "Compute Failed" traceback among them) are in the run's log file in
the temporary directory, kept when the run fails and deleted when it succeeds."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import distributed
import pytest
from disks import small_disk
from distributed import LocalCluster
from helpers import REPO, SAMPLE_CORPORA

from dedup_cli.engine.dask import cluster as dask_cluster
from dedup_cli.options.engine_choice import EngineOptions

NOISY_RUN = """
import logging, sys
from dedup_cli.engine.dask.cluster import connected
from dedup_cli.options.engine_choice import EngineOptions

def noisy(fail):
    logging.getLogger("distributed.worker").error("a record a worker logged")
    print("a line a worker wrote to its stderr", file=sys.stderr, flush=True)
    if fail:
        raise ValueError("a task failed")
    return "done"

try:
    with connected(EngineOptions("dask", workers=1)) as client:
        print(client.submit(noisy, sys.argv[1] == "fail", pure=False).result())
except ValueError as error:
    print(error)
"""


KILLING_RUN = """
import os
from dedup_cli.engine.dask.cluster import connected
from dedup_cli.errors import DedupError
from dedup_cli.options.engine_choice import EngineOptions

try:
    with connected(EngineOptions("dask", workers=1)) as client:
        client.submit(os._exit, 1, pure=False).result()
except DedupError as error:
    print(error)
"""


RESTARTING_RUN = """
import json, logging, os, time
from dedup_cli.engine.dask.cluster import connected
from dedup_cli.options.engine_choice import EngineOptions

def level():
    return logging.getLogger("distributed.worker").getEffectiveLevel()

with connected(EngineOptions("dask", workers=1)) as client:
    client.wait_for_workers(1, timeout=60)
    [first] = client.scheduler_info()["workers"]
    client.submit(os._exit, 1, pure=False)  # its worker dies; its nanny starts another
    levels = []
    for _ in range(600):
        started = [address for address in client.scheduler_info()["workers"] if address != first]
        if started:
            levels = list(client.run(level, workers=started).values())
            break
        time.sleep(0.1)
print(json.dumps({"restarted": levels, "environment": os.environ.get("DASK_LOGGING__DISTRIBUTED")}))
"""


def _environment(temporary: Path) -> dict[str, str]:
    environment = {key: value for key, value in os.environ.items() if not key.startswith("DEDUP_")}
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), environment.get("PYTHONPATH")]))
    environment["TMPDIR"] = str(temporary)
    return environment


def _logs(temporary: Path) -> list[Path]:
    return sorted(temporary.glob(f"{dask_cluster.LOG_PREFIX}*.log"))


@pytest.mark.parametrize("outcome", ["fail", "succeed"])
def test_a_local_clusters_workers_write_to_the_log_not_to_stderr(tmp_path: Path, outcome: str) -> None:
    done = subprocess.run([sys.executable, "-c", NOISY_RUN, outcome], capture_output=True, text=True, timeout=300,
                          env=_environment(tmp_path))
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == ("a task failed\n" if outcome == "fail" else "done\n")
    logs = _logs(tmp_path)
    if outcome == "succeed":
        assert logs == []  # nothing to look into: not left behind
        return
    [log] = logs
    text = log.read_text()
    assert "a record a worker logged" in text and "a line a worker wrote to its stderr" in text
    assert "Compute Failed" in text and "ValueError" in text


def test_workers_that_die_three_times_name_the_log(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", KILLING_RUN], capture_output=True, text=True, timeout=300,
                          env=_environment(tmp_path))
    [log] = _logs(tmp_path)
    assert (done.returncode, done.stderr) == (0, "")  # the nanny's restarts were told to the log alone
    assert done.stdout.startswith("Dask workers died 3 times") and done.stdout.endswith(f"; Dask's log: {log}\n")
    assert "Restarting worker" in log.read_text()


def test_a_restarted_worker_starts_without_dasks_info_records(tmp_path: Path) -> None:
    # The first workers are forked and keep the driver's routing; one started again is spawned, and its Dask
    # said "Starting Worker plugin ..." on the user's stderr before its stderr went to the log.
    done = subprocess.run([sys.executable, "-c", RESTARTING_RUN], capture_output=True, text=True, timeout=300,
                          env=_environment(tmp_path))
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["restarted"] and all(level >= logging.WARNING for level in found["restarted"])
    assert found["environment"] is None  # Dask's setting of the driver's environment is undone
    assert "INFO" not in done.stderr


def test_the_drivers_records_go_to_the_log_and_its_loggers_are_restored(cluster: LocalCluster, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch,
                                                                         capfd: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    watched = [logging.getLogger(name) for name in ("distributed", "distributed.client", "tornado", "asyncio")]
    before = [(list(logger.handlers), logger.propagate) for logger in watched]
    with pytest.raises(RuntimeError):
        with dask_cluster.connected(EngineOptions("dask", scheduler=cluster.scheduler_address)):
            logging.getLogger("distributed.client").error("a record of the driver's client")
            logging.getLogger("asyncio").error("a record of the driver's event loop")
            warnings.warn_explicit("a warning of Dask's", UserWarning, distributed.__file__, 1)
            raise RuntimeError("the run failed")
    assert [(list(logger.handlers), logger.propagate) for logger in watched] == before
    # (the shared cluster's workers write to this process's stderr too, where they like: not this run's to route)
    stderr = capfd.readouterr().err
    assert "a record of the driver's" not in stderr and "a warning of Dask's" not in stderr, stderr
    [log] = _logs(tmp_path)
    text = log.read_text()
    assert "a record of the driver's client" in text and "a record of the driver's event loop" in text
    assert "UserWarning: a warning of Dask's" in text


def test_filter_on_a_full_disk_ends_with_its_one_line(tmp_path: Path) -> None:
    store, temporary = tmp_path / "store", tmp_path / "tmp"
    temporary.mkdir()
    corpus = SAMPLE_CORPORA / "devils-dictionary"
    environment = _environment(temporary)
    signed = subprocess.run([sys.executable, "-m", "dedup_cli", "sign", str(corpus), "-o", str(store), "-q"],
                            capture_output=True, text=True, env=environment, timeout=300)
    assert signed.returncode == 0, signed.stderr
    with small_disk(tmp_path / "disk", "4m") as disk:
        disk.fill(leave=64 << 10)
        out = disk.path / "clean"
        done = subprocess.run([sys.executable, "-m", "dedup_cli", "filter", str(corpus), "-s", str(store), "-o",
                               str(out), "-q", "--engine", "dask", "--workers", "2"], capture_output=True, text=True,
                              env=environment, timeout=300)
        assert (done.returncode, done.stderr) == (1, f"Error: cannot write {out}: {os.strerror(28)}\n")
        assert sorted(os.listdir(disk.path)) == ["filler"]
    [log] = _logs(temporary)
    assert "Compute Failed" in log.read_text()
