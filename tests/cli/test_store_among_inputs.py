"""A store inside the corpus it signs is left out of the inputs: ``cd corpus && dedup sign .`` twice signs the
corpus and nothing of the store (its lock, manifest and parts), says once which store it left out, and ``find``
and ``filter`` work on it; so are other stores found there (another directory store, a single-file store)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import REPO, StoreWriter

from dedup_cli.cli.main import cli
from dedup_cli.params import SignatureParams
from dedup_cli.store.store import read_store

BIBLE = REPO / "sample_corpora" / "bible-editions"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env={"DEDUP_STORE": None}, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def dedup(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    environment = {name: value for name, value in os.environ.items() if not name.startswith("DEDUP_")}
    return subprocess.run([sys.executable, "-m", "dedup_cli", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300, env={**environment, "PYTHONPATH": str(REPO)})


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """Two editions of the sample corpus: 16 chapters, some of them near-duplicates across editions."""
    folder = tmp_path / "corpus"
    for edition in ("KJV", "AKJV"):
        shutil.copytree(BIBLE / edition, folder / edition)
    return folder


def corpus_ids(corpus: Path) -> list[str]:
    return sorted(path.relative_to(corpus).as_posix() for path in corpus.rglob("*.txt"))


def test_a_store_inside_the_corpus_is_never_signed_and_find_works(corpus: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(corpus)
    for _ in (1, 2):
        code, _, stderr = run("sign", ".")
        assert code == 0, stderr
        assert stderr.count("note: left out the dedup store found among the inputs") == 1
        assert f"({corpus / 'dedup.parquet'})" in stderr and "a store's files are never documents" in stderr
        assert "_dedup" not in stderr and "part-" not in stderr
        assert read_store(corpus / "dedup.parquet").ids == corpus_ids(corpus)
    assert "16 unchanged" in stderr and "0 inputs skipped" in stderr
    code, stdout, stderr = run("find", "-t", "0.5", "--output", "members", "--format", "tsv", "-q")
    assert code == 0, stderr
    members = [line.split("\t") for line in stdout.splitlines()[1:]]
    assert members and all(not row[0].startswith("dedup.parquet") for row in members)
    # -q leaves the note out: it changes nothing in what was signed.
    code, _, stderr = run("sign", ".", "-q")
    assert code == 0 and stderr == ""


def test_a_real_process_in_the_corpus_signs_it_twice_and_the_store_stays_out(corpus: Path) -> None:
    for _ in range(2):
        signed = dedup("sign", ".", cwd=corpus)
        assert signed.returncode == 0, signed.stderr
        assert signed.stderr.count("note: left out the dedup store") == 1
    assert "16 unchanged" in signed.stderr
    assert read_store(corpus / "dedup.parquet").ids == corpus_ids(corpus)
    found = dedup("find", "-t", "0.5", "-q", cwd=corpus)
    assert found.returncode == 0 and found.stdout and "dedup.parquet/" not in found.stdout


def test_every_kind_of_store_in_the_corpus_is_left_out_and_named(corpus: Path, tmp_path: Path) -> None:
    assert run("sign", str(corpus / "KJV"), "-o", str(corpus / "old-sigs"), "-q")[0] == 0  # a directory store
    with StoreWriter(corpus / "legacy.parquet", SignatureParams()):  # a single-file store (format 1), empty
        pass
    with StoreWriter(corpus / "AKJV" / "older.parquet", SignatureParams(num_perm=64)):
        pass
    (corpus / "AKJV" / "notes.jsonl").write_text(json.dumps({"id": "n1", "text": "a record beside the stores"}) + "\n")
    store = tmp_path / "sigs"
    code, _, stderr = run("sign", str(corpus), "-o", str(store), "--id-field", "id")
    assert code == 0, stderr
    note = next(line for line in stderr.splitlines() if line.startswith("note:"))
    assert "3 dedup stores" in note
    for name in ("old-sigs", "legacy.parquet", "AKJV/older.parquet"):
        assert str(corpus / name) in note
    assert sorted(read_store(store).ids) == sorted([*corpus_ids(corpus), "n1"])


def test_store_files_named_or_listed_by_themselves_are_left_out(corpus: Path, tmp_path: Path) -> None:
    store = corpus / "sigs"
    assert run("sign", str(corpus), "-o", str(store), "-q")[0] == 0
    listing = tmp_path / "files.txt"
    listing.write_text("".join(f"{path}\n" for path in sorted(corpus.rglob("*")) if path.is_file()))
    code, _, stderr = run("sign", "--files-from", str(listing), "-o", str(store))
    assert code == 0, stderr
    assert f"note: left out the dedup store found among the inputs ({store})" in stderr
    assert "16 unchanged" in stderr and read_store(store).ids == corpus_ids(corpus)
    code, _, stderr = run("sign", str(corpus / "KJV"), str(store / "_dedup_manifest.json"), "-o", str(store))
    assert code == 0 and f"({store})" in stderr and read_store(store).ids == corpus_ids(corpus)


def test_filter_leaves_the_store_out_of_what_it_reads_and_writes(corpus: Path, tmp_path: Path) -> None:
    store = corpus / "dedup.parquet"
    out = tmp_path / "clean"
    code, _, stderr = run("filter", str(corpus), "--sign", "-s", str(store), "-o", str(out), "-t", "0.5")
    assert code == 0, stderr
    assert stderr.count("note: left out the dedup store") == 1
    written = sorted(path.relative_to(out).as_posix() for path in out.rglob("*") if path.is_file()
                     and path.name != ".dedup-filter.json")
    assert written and set(written) < set(corpus_ids(corpus))
    assert not (out / "dedup.parquet").exists()
    assert read_store(store).ids == corpus_ids(corpus)
