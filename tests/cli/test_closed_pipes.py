"""Every command that writes to stdout stops quietly when its reader goes away (``| head``): exit 0, nothing on
stderr (no traceback, no "Exception ignored" at exit), nothing left behind. Run as the user runs them: a real
process whose stdout is a pipe the reader closes, either after 100 bytes or before the command writes a byte. The
commands run without -q: a summary on stderr would show that a command wrote everything and never met the closed
pipe."""

from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

RECORDS = 4000


def into_closed_pipe(args: list[str] | tuple[str, ...], cwd: Path, read: int | None = 100) -> tuple[int, bytes]:
    """Run ``dedup ARGS`` with stdout a pipe whose reader takes ``read`` bytes then closes it (``read`` None: the
    reader is gone before the command starts); its exit status and stderr."""
    environment = {key: value for key, value in os.environ.items() if not key.startswith("DEDUP_")}
    reader, writer = os.pipe()
    if read is None:
        os.close(reader)
    try:
        process = subprocess.Popen([sys.executable, "-m", "dedup_cli", *args], stdout=writer,
                                   stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, cwd=cwd, env=environment)
    finally:
        os.close(writer)
    if read is not None:
        taken = b""
        while len(taken) < read:
            chunk = os.read(reader, read - len(taken))
            if not chunk:
                break
            taken += chunk
        os.close(reader)
        assert len(taken) == read, taken  # the command had more to write than the reader took
    _, stderr = process.communicate(timeout=300)
    return process.returncode, stderr


def listing(folder: Path) -> list[str]:
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*"))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A JSON Lines corpus (about 1.6 MB, far more than a pipe holds) with a copy of every other record, signed
    into ``sigs``; and the same gzip-compressed, signed into ``sigs-of-gz``."""
    root = tmp_path_factory.mktemp("closed-pipes")
    generator = random.Random(7)
    words = [f"word{number}" for number in range(3000)]
    lines = []
    for number in range(RECORDS):
        text = " ".join(generator.choice(words) for _ in range(40))
        lines.append(json.dumps({"id": f"document-number-{number:06d}", "text": text}))
        if number % 2 == 0:
            lines.append(json.dumps({"id": f"copy-of-document-{number:06d}", "text": text}))
    data = ("\n".join(lines) + "\n").encode()
    (root / "big.jsonl").write_bytes(data)
    (root / "big.jsonl.gz").write_bytes(gzip.compress(data))
    for name, store in (("big.jsonl", "sigs"), ("big.jsonl.gz", "sigs-of-gz")):
        done = subprocess.run([sys.executable, "-m", "dedup_cli", "sign", name, "--id-field", "id", "-o", store, "-q"],
                              cwd=root, capture_output=True, timeout=300)
        assert done.returncode == 0, done.stderr
    return root


@pytest.mark.parametrize("args", [
    ("find", "sigs"),
    ("find", "sigs", "--output", "pairs", "-j", "2"),
    ("find", "sigs", "--output", "members", "--format", "tsv"),
    ("filter", "big.jsonl", "-s", "sigs", "--id-field", "id", "-o", "-"),
    ("filter", "big.jsonl", "-s", "sigs", "--id-field", "id", "-o", "-", "-j", "2"),
    ("filter", "big.jsonl.gz", "-s", "sigs-of-gz", "--id-field", "id", "-o", "-"),
    ("filter", "big.jsonl", "-s", "sigs", "--id-field", "id", "--annotate", "-o", "-"),
    ("filter", "big.jsonl", "-s", "sigs", "--id-field", "id", "-o", "kept.jsonl", "--removed", "-"),
    ("info", "sigs", "--ids"),
], ids=lambda args: " ".join(args))
def test_a_reader_that_goes_away_after_100_bytes(corpus: Path, args: tuple[str, ...]) -> None:
    before = listing(corpus)
    code, stderr = into_closed_pipe(args, corpus)
    assert (code, stderr) == (0, b"")
    assert listing(corpus) == sorted(before + (["kept.jsonl"] if "kept.jsonl" in args else []))


@pytest.mark.parametrize("args", [
    ("find", "sigs", "-j", "2"),
    ("filter", "big.jsonl", "-s", "sigs", "--id-field", "id", "-o", "-"),
    ("info", "sigs"),
    ("info", "sigs", "--ids"),
    ("estimate", "sigs", "document-number-000000", "copy-of-document-000000"),
    ("estimate", "sigs", "document-number-000000", "copy-of-document-000000", "--format", "json", "--exact"),
    ("eval", "sigs", "--format", "json", "--sample", "200"),
    ("eval", "sigs", "--sample", "200", "-o", "-"),
    ("plan",),
    ("plan", "--format", "json", "--docs", "1000000"),
], ids=lambda args: " ".join(args))
def test_a_reader_gone_before_the_first_byte(corpus: Path, args: tuple[str, ...]) -> None:
    before = listing(corpus)
    assert into_closed_pipe(args, corpus, read=None) == (0, b"")
    assert listing(corpus) == before


def test_filter_sign_into_a_closed_pipe_leaves_a_whole_store(corpus: Path, tmp_path: Path) -> None:
    """The store is committed before a byte of the output is written: a closed pipe then leaves it whole."""
    (tmp_path / "big.jsonl").symlink_to(corpus / "big.jsonl")
    code, stderr = into_closed_pipe(["filter", "big.jsonl", "--sign", "-s", "new", "--id-field", "id", "-o", "-"],
                                    tmp_path)
    assert (code, stderr) == (0, b"")
    shown = subprocess.run([sys.executable, "-m", "dedup_cli", "info", "new"], cwd=tmp_path, capture_output=True,
                           timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["documents"] == RECORDS + RECORDS // 2
    assert not [name for name in listing(tmp_path) if ".tmp-" in name or ".old-" in name], listing(tmp_path)
