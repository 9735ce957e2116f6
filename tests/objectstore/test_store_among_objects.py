"""A store kept under the prefix it signs is left out of the objects read, as a store inside a folder is."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import REPO

from dedup_cli.cli.main import cli
from dedup_cli.store.store import read_store

pytest.importorskip("s3fs", reason="object storage needs the s3 extra: pip install 'dedup-cli[s3]'")


def test_a_store_under_the_signed_prefix_is_left_out(bucket: str, tmp_path: Path) -> None:
    from dedup_cli.objectstore import objects

    kjv = REPO / "sample_corpora" / "bible-editions" / "KJV"
    for path in sorted(kjv.glob("*.txt")):
        objects.put(f"{bucket}/corpus/{path.name}", path.read_bytes())
    store = f"{bucket}/corpus/sigs"
    for run in (1, 2, 3):  # the first run lists the prefix before it creates the store there
        result = CliRunner().invoke(cli, ["sign", f"{bucket}/corpus/", "-o", store], env={"DEDUP_STORE": None})
        assert result.exit_code == 0, result.stderr
        assert (f"note: left out the dedup store found among the inputs ({store})" in result.stderr) == (run > 1)
    assert "8 unchanged" in result.stderr
    assert read_store(store).ids == sorted(path.name for path in kjv.glob("*.txt"))
