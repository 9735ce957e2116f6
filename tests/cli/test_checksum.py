"""sign --checksum reads again the files whose size and modification time are the store's and signs again those
whose content changed, so that a file rewritten with its old size and time (cp -p, tar x) is not taken for the
text it held: find no longer lists it to drop, and the README's rm recipe deletes nothing it should keep."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner
from helpers import REPO

from dedup_cli.cli.main import cli
from dedup_cli.store.store import read_store

KJV = REPO / "sample_corpora" / "bible-editions" / "KJV"


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env={"DEDUP_STORE": None, **(env or {})}, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def rewrite_keeping_size_and_time(path: Path, other: Path) -> None:
    """``path`` now holds the start of the text of ``other`` (as many bytes as it had), with its old modification
    time, as ``cp -p`` leaves a file of the same size copied over it."""
    status = path.stat()
    path.write_bytes((other.read_bytes() * 3)[:status.st_size])
    os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns))
    assert path.stat().st_size == status.st_size and path.stat().st_mtime_ns == status.st_mtime_ns


def members(store: Path) -> dict[str, str]:
    code, stdout, stderr = run("find", str(store), "-t", "0.5", "--output", "members", "--format", "tsv", "-q")
    assert code == 0, stderr
    return {row.split("\t")[0]: row.split("\t")[2] for row in stdout.splitlines()[1:]}


def test_a_copy_rewritten_with_its_old_time_is_signed_again_only_with_checksum(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    shutil.copytree(KJV, corpus)
    shutil.copy2(corpus / "jonah-01.txt", corpus / "jonah-01-copy.txt")
    store = tmp_path / "s"
    assert run("sign", str(corpus), "-o", str(store), "-q")[0] == 0
    assert members(store) == {"jonah-01-copy.txt": "keep", "jonah-01.txt": "drop"}  # the first id is kept
    rewrite_keeping_size_and_time(corpus / "jonah-01-copy.txt", corpus / "ruth-01.txt")
    before = read_store(store)
    code, _, stderr = run("sign", str(corpus), "-o", str(store))
    assert code == 0 and "0 changed, 9 unchanged" in stderr  # taken as unchanged, unread
    # The rm recipe would delete jonah-01.txt, whose only copy now holds another text.
    assert members(store)["jonah-01.txt"] == "drop"
    code, _, stderr = run("sign", str(corpus), "-o", str(store), "--checksum")
    assert code == 0 and "signed 1 document (0 new, 1 changed, 8 unchanged" in stderr
    after = read_store(store)
    changed = after.ids.index("jonah-01-copy.txt")
    assert after.content_hashes is not None and before.content_hashes is not None
    assert after.content_hashes[changed] != before.content_hashes[changed]
    assert "jonah-01.txt" not in members(store)
    # Nothing else was signed again, and a second run finds everything unchanged.
    assert [after.runs[i] for i in range(len(after.ids)) if i != changed] == [
        before.runs[i] for i in range(len(before.ids)) if i != changed]
    code, _, stderr = run("sign", str(corpus), "-o", str(store), env={"DEDUP_SIGN_CHECKSUM": "1"})
    assert code == 0 and "signed 0 documents (0 new, 0 changed, 9 unchanged" in stderr


def test_the_rm_recipe_after_sign_checksum_keeps_a_restored_file(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    shutil.copytree(KJV, corpus)
    shutil.copy2(corpus / "ruth-02.txt", corpus / "ruth-02-again.txt")
    environment = {name: value for name, value in os.environ.items() if not name.startswith("DEDUP_")}
    environment["PYTHONPATH"] = str(REPO)
    dedup = f"{sys.executable} -m dedup_cli"

    def shell(command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", "-e", "-o", "pipefail", "-c", command.replace("dedup ", dedup + " ")],
                              cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=300)

    assert shell("dedup sign corpus/ -q").returncode == 0
    rewrite_keeping_size_and_time(corpus / "ruth-02-again.txt", corpus / "jonah-03.txt")
    listed = shell("dedup sign corpus/ -q && cd corpus && dedup find ../dedup.parquet --group strict --keep longest "
                   "--output members --format tsv -q | awk -F'\\t' '$3==\"drop\"' | cut -f1")
    assert listed.returncode == 0 and listed.stdout.strip() in ("ruth-02.txt", "ruth-02-again.txt")  # without it
    done = shell("dedup sign --checksum corpus/ -q && cd corpus && dedup find ../dedup.parquet --group strict "
                 "--keep longest --output members --format tsv -q | awk -F'\\t' '$3==\"drop\"' | cut -f1 "
                 "| xargs -d '\\n' rm --")
    assert done.returncode == 0, done.stderr
    assert (corpus / "ruth-02-again.txt").exists() and (corpus / "ruth-02.txt").exists()
