"""Exact checks on the cluster's workers: a document a worker cannot read (the kernel's own EIO) stops the run with
the local engine's one line naming it; one that is gone keeps its estimate, with the warning, as locally."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from dedup_cli.cli.main import cli
from dedup_cli.options.engine_choice import EngineOptions

FIND = ("-t", "0.3", "-b", "2", "--verify", "all", "--output", "pairs")


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env={"DEDUP_STORE": None})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.skipif(not os.path.exists("/proc/self/mem"), reason="needs /proc/self/mem (Linux) for a real EIO")
def test_a_document_a_worker_cannot_read_is_one_line(tmp_path: Path, engine: EngineOptions) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    text = " ".join(f"w{i}" for i in range(300))
    (tmp_path / "a.txt").write_text(text)
    (corpus / "b.txt").write_text(text.replace("w7 ", "x "))
    link = corpus / "a.txt"
    link.symlink_to(tmp_path / "a.txt")
    store = str(tmp_path / "sigs")
    assert invoke("sign", str(corpus), "-o", store, "-q")[0] == 0
    on_cluster = ("--engine", "dask", "--scheduler", str(engine.scheduler))
    code, clean, _ = invoke("find", store, *FIND, *on_cluster, "-q")
    assert code == 0 and json.loads(clean)["exact"] is not None
    assert invoke("find", store, *FIND, "-q")[1] == clean
    link.unlink()
    link.symlink_to("/proc/self/mem")  # read at offset 0: unmapped, so EIO, in whichever process reads it
    for engine_options in ((), on_cluster):
        code, stdout, stderr = invoke("find", store, *FIND, *engine_options, "-q")
        assert (code, stdout) == (1, "")
        assert stderr == f"Error: cannot re-read {link} for the exact checks: Input/output error\n"
    link.unlink()
    for engine_options in ((), on_cluster):
        code, stdout, stderr = invoke("find", store, *FIND, *engine_options)
        assert code == 0 and json.loads(stdout)["exact"] is None
        assert "1 document is gone or changed since signing" in stderr
