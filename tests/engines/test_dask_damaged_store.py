"""find --engine dask on a store with a damaged part: the workers read it, and the error that comes back is the
same one line naming the part as with the local engine (page checksums verified, columns checked)."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from click.testing import CliRunner
from helpers import SAMPLE_CORPORA

from dedup_cli.cli.main import cli
from dedup_cli.options.engine_choice import EngineOptions


def test_a_damaged_part_read_by_workers_is_one_line_naming_it(engine: EngineOptions, tmp_path: Path) -> None:
    clean = tmp_path / "clean"
    assert CliRunner().invoke(cli, ["sign", str(SAMPLE_CORPORA / "licenses"), "-o", str(clean), "-q"]).exit_code == 0
    part = next(path.name for path in clean.iterdir() if path.name.startswith("part-"))
    data = (clean / part).read_bytes()
    metadata = pq.ParquetFile(io.BytesIO(data)).metadata
    signature = next(metadata.row_group(0).column(c) for c in range(metadata.num_columns)
                     if metadata.row_group(0).column(c).path_in_schema == "signature")
    flipped = bytearray(data)
    flipped[signature.dictionary_page_offset + signature.total_compressed_size - 10] ^= 0x10
    foreign = pa.BufferOutputStream()
    pq.write_table(pa.table({"a": [1]}), foreign)
    for number, (content, reason) in enumerate(((bytes(flipped), ""),
                                                (foreign.getvalue().to_pybytes(), "not a file dedup wrote"))):
        store = tmp_path / f"store-{number}"
        shutil.copytree(clean, store)
        (store / part).write_bytes(content)
        result = CliRunner().invoke(cli, ["find", str(store), "--engine", "dask", "--scheduler",
                                          str(engine.scheduler)])
        assert result.exit_code == 1 and isinstance(result.exception, SystemExit), (result.output, result.exception)
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"Error: {store.resolve()} is damaged ({part}: {reason}"), lines


def test_a_missing_part_is_damage_on_the_cluster_too(engine: EngineOptions, tmp_path: Path) -> None:
    """Not "changed while it was read; run again": the manifest did not change, so no run would do better."""
    corpus, store = tmp_path / "corpus", tmp_path / "store"
    shutil.copytree(SAMPLE_CORPORA / "licenses", corpus)
    assert CliRunner().invoke(cli, ["sign", str(corpus), "-o", str(store), "-q"]).exit_code == 0
    (corpus / "extra.txt").write_text("a document of a second run, in a second part")
    assert CliRunner().invoke(cli, ["sign", str(corpus), "-o", str(store), "-q"]).exit_code == 0
    (store / "part-000001.parquet").unlink()
    on_cluster = ["--engine", "dask", "--scheduler", str(engine.scheduler)]
    for arguments in (["find", str(store)], ["filter", str(corpus), "-s", str(store), "-o", str(tmp_path / "kept")]):
        result = CliRunner().invoke(cli, [*arguments, *on_cluster])
        assert result.exit_code == 1 and isinstance(result.exception, SystemExit), (result.output, result.exception)
        assert result.stderr.splitlines() == [
            f"Error: {store} is damaged (part-000001.parquet is listed in its manifest but missing); sign the "
            "corpus again into a new store"]
