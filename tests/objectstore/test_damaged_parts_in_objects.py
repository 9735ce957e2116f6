"""A damaged part of a store in a bucket (a flipped bit, another schema) is one line naming it, as on a disk.

Against the real S3 server on 127.0.0.1 that the session starts (tests/conftest.py): the part is read in ranged
GETs there, not by Arrow's own file, and its pages' checksums are verified all the same.
"""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from helpers import SAMPLE_CORPORA

from dedup_cli.cli.main import cli

pytest.importorskip("s3fs", reason="object storage needs the s3 extra: pip install 'dedup-cli[s3]'")

CORPUS = SAMPLE_CORPORA / "licenses"


def invoke(*arguments: str) -> tuple[int, str, BaseException | None]:
    result = CliRunner().invoke(cli, list(arguments), env={"DEDUP_STORE": None})
    return result.exit_code, result.stderr, result.exception


def test_a_damaged_part_in_a_bucket_is_one_line_naming_it(bucket: str) -> None:
    from dedup_cli.objectstore import objects

    store = f"{bucket}/store"
    assert invoke("sign", str(CORPUS), "-o", store, "-q")[0] == 0
    part = next(name for name in objects.names(store) if name.startswith("part-"))
    url = f"{store}/{part}"
    data = objects.read_bytes(url)
    metadata = pq.ParquetFile(io.BytesIO(data)).metadata
    columns = [metadata.row_group(0).column(c) for c in range(metadata.num_columns)]
    signature = next(column for column in columns if column.path_in_schema == "signature")
    end = signature.dictionary_page_offset + signature.total_compressed_size
    flipped = bytearray(data)
    flipped[end - 10] ^= 0x08  # in the last page of the signatures
    foreign = pa.BufferOutputStream()
    pq.write_table(pa.table({"a": [1]}), foreign)
    fs = objects.client(store)
    # info reads no signature: it notices another schema, not a bad page of signatures.
    for content, reason, commands in ((bytes(flipped), "", ("find", "eval")),
                                      (foreign.getvalue().to_pybytes(), "not a file dedup wrote", ("find", "info"))):
        fs.pipe_file(url.removeprefix("s3://"), content)
        for arguments in ([command, store] for command in commands):
            code, stderr, exception = invoke(*arguments)
            assert code == 1 and isinstance(exception, SystemExit), (arguments, stderr, exception)
            assert stderr.count("\n") == 1 and stderr.startswith(f"Error: {store} is damaged ({part}: {reason}")
