"""The Dask engine with its inputs, store and output in a bucket of the test S3 server: the workers read the
objects and write the parts themselves, the driver commits, and the answers are the local engine's, byte for byte.
"""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner
from helpers import SAMPLE_CORPORA

import dedup_cli as dedup
from dedup_cli.cli.main import cli
from dedup_cli.engine.dask import sign as dask_sign
from dedup_cli.options.engine_choice import EngineOptions

pytest.importorskip("s3fs", reason="object storage needs the s3 extra: pip install 'dedup-cli[s3]'")

BIBLE = SAMPLE_CORPORA / "bible-editions"


def test_sign_and_find_on_a_cluster_against_a_bucket(bucket: str, engine: EngineOptions,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from dedup_cli.objectstore import objects

    fs = objects.client(bucket)
    for path in sorted(BIBLE.rglob("*.txt")):
        fs.pipe_file(f"{bucket.removeprefix('s3://')}/bible/{path.relative_to(BIBLE).as_posix()}", path.read_bytes())
    monkeypatch.setattr(dask_sign, "TASK_BYTES", 20_000)  # several tasks, so several parts written by workers
    local = dedup.sign([f"{bucket}/bible/"], f"{bucket}/local", dedup.SignOptions())
    on_cluster = dedup.sign([f"{bucket}/bible/"], f"{bucket}/dask", dedup.SignOptions(engine=engine))
    assert local.documents == on_cluster.documents == 48
    parts = dedup.open_store(f"{bucket}/dask").manifest.parts  # type: ignore[union-attr]
    assert len(parts) > 1 and all(part.file.count("-") == 2 for part in parts)  # part-NNNNNN-TOKEN.parquet
    x, y = dedup.read_store(f"{bucket}/local"), dedup.read_store(f"{bucket}/dask")
    assert x.ids == y.ids and x.paths == y.paths and np.array_equal(x.packed, y.packed)
    listed = {part.file for part in parts} | {"_dedup_manifest.json"}
    assert {item.url.rsplit("/", 1)[1] for item in objects.listing(f"{bucket}/dask")} == listed
    for store, options in ((f"{bucket}/local", []), (f"{bucket}/dask", ["--engine", "dask", "--scheduler",
                                                                         engine.scheduler or ""])):
        result = CliRunner().invoke(cli, ["find", store, "-t", "0.5", "-b", "2", "-q", "-o", f"{store}.jsonl",
                                          *options])
        assert result.exit_code == 0, result.stderr
    assert objects.read_bytes(f"{bucket}/local.jsonl") == objects.read_bytes(f"{bucket}/dask.jsonl")
