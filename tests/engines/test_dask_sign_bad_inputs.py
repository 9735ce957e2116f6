"""sign --engine dask on inputs that once crashed a reader, and on an input whose reading kills every worker.

A JSON Lines file whose first line is ``null`` crashed Arrow's block parser, and so the worker process reading it,
until Dask gave up; the workers read with the same code as the local engine, so its bad records are skipped and
reported alike. A task that still kills every worker that runs it ends the run with one line naming what it read.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from distributed import Client
from distributed.diagnostics.plugin import WorkerPlugin

import dedup_cli as dedup
from dedup_cli.engine.dask import sign as dask_sign
from dedup_cli.errors import DedupError
from dedup_cli.options.engine_choice import EngineOptions
from dedup_cli.store.store import read_store

GOOD = b"".join(json.dumps({"text": f"the record number {n} of a good file"}).encode() + b"\n" for n in range(3))


@pytest.fixture(autouse=True)
def small_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dask_sign, "TASK_BYTES", 200)  # about one file a task


def corpus(folder: Path) -> Path:
    folder.mkdir()
    (folder / "a-null.jsonl").write_bytes(b"null\n" + GOOD)  # an input whose every record is skipped stops a run
    for number, first in enumerate([b"null", b"[]", b"true", b'"text"', b"7"]):
        (folder / f"b-{number}.jsonl").write_bytes(first + b"\n" + GOOD)
    (folder / "c-good.jsonl").write_bytes(GOOD)
    return folder


def test_records_that_are_not_objects_are_skipped_as_by_the_local_engine(engine: EngineOptions,
                                                                        tmp_path: Path) -> None:
    inputs = [str(corpus(tmp_path / "corpus"))]
    local = dedup.sign(inputs, tmp_path / "local", dedup.SignOptions())
    remote = dedup.sign(inputs, tmp_path / "dask", dedup.SignOptions(engine=engine))
    assert remote.read.skipped == local.read.skipped == 6
    assert sorted(remote.read.malformed) == sorted(local.read.malformed)
    assert read_store(tmp_path / "dask").ids == read_store(tmp_path / "local").ids
    assert len(read_store(tmp_path / "local")) == 21


class PoisonedInput(WorkerPlugin):
    """On every worker, now and as they are restarted: a sign task reading ``poison.jsonl`` kills its process."""

    name = "poisoned-input"

    def setup(self, worker: Any) -> None:
        original = dask_sign.sign_task
        self.original = original

        def crashing(task: dask_sign.SignTask) -> dask_sign.TaskResult:
            if any(source.display.endswith("poison.jsonl") for source in task.sources):
                os.kill(os.getpid(), signal.SIGKILL)
            return original(task)

        dask_sign.sign_task = crashing  # type: ignore[assignment]

    def teardown(self, worker: Any) -> None:
        dask_sign.sign_task = self.original  # type: ignore[assignment]


def test_a_task_that_kills_every_worker_names_its_input(client: Client, engine: EngineOptions, tmp_path: Path) -> None:
    folder = corpus(tmp_path / "corpus")
    (folder / "poison.jsonl").write_bytes(GOOD)
    client.register_plugin(PoisonedInput(), name=PoisonedInput.name)
    try:
        with pytest.raises(DedupError) as raised:
            dedup.sign([str(folder)], tmp_path / "store", dedup.SignOptions(engine=engine))
    finally:
        client.unregister_worker_plugin(PoisonedInput.name)
    message = str(raised.value)
    assert message.startswith("Dask workers died 3 times while reading ")
    assert "poison.jsonl; nothing was stored" in message and "\n" not in message
    assert not (tmp_path / "store").exists() or len(read_store(tmp_path / "store")) == 0
    client.wait_for_workers(2, timeout=60)
