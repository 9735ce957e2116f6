"""Messages that name the right path and the right cause: a disk that really fills up (a small tmpfs, see
tests/disks.py) under the store's commit and under filter's output, and a store whose manifest is damaged.

Each failure is one line on stderr, exit code 1, and leaves what was there before as it was.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from disks import SmallDisk, small_disk
from helpers import REPO, SAMPLE_CORPORA

from dedup_cli.cli.main import cli
from dedup_cli.store.format import MANIFEST_NAME

FULL = os.strerror(28)  # ENOSPC: "No space left on device"


def dedup(*args: str, cwd: Path | None = None) -> tuple[int, str, str]:
    """A real process, as a user runs it."""
    environment = {key: value for key, value in os.environ.items() if not key.startswith("DEDUP_")}
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), environment.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, "-m", "dedup_cli", *args], capture_output=True, text=True, cwd=cwd,
                          env=environment, timeout=300)
    return done.returncode, done.stdout, done.stderr


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[SmallDisk]:
    with small_disk(tmp_path / "disk", "8m") as mounted:
        yield mounted


def test_a_full_disk_at_the_commit_names_the_manifest(disk: SmallDisk) -> None:
    store = disk.path / "store"
    code, _, stderr = dedup("sign", str(SAMPLE_CORPORA / "licenses"), "-o", str(store), "-q")
    assert code == 0, stderr
    manifest = (store / MANIFEST_NAME).read_bytes()
    disk.fill()
    # nothing new to store: the run's only write is its record in the manifest, and it finds no space
    code, _, stderr = dedup("sign", str(SAMPLE_CORPORA / "licenses"), "-o", str(store), "-q")
    assert (code, stderr) == (1, f"Error: cannot write {store / MANIFEST_NAME}: {FULL}\n")
    assert (store / MANIFEST_NAME).read_bytes() == manifest
    assert sorted(name for name in os.listdir(store) if name.startswith(".")) == []  # no scratch manifest left
    disk.empty()
    code, stdout, stderr = dedup("info", str(store))
    assert code == 0 and json.loads(stdout)["last_run"] == 1, stderr  # the store as the first run left it


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Stores on an ordinary disk: the Devil's Dictionary (a file per document) and a JSON Lines file."""
    root = tmp_path_factory.mktemp("signed")
    lines = root / "records.jsonl"
    with lines.open("w") as out:
        for number in range(4000):
            out.write(json.dumps({"id": f"record-{number}", "text": f"record {number} says " * 30}) + "\n")
    for corpus, store in ((SAMPLE_CORPORA / "devils-dictionary", root / "words"), (lines, root / "lines")):
        code, _, stderr = dedup("sign", str(corpus), "-o", str(store), "-q", "--exclude", "SOURCE")
        assert code == 0, stderr
    return {"words": root / "words", "lines": root / "lines", "records.jsonl": lines}


@pytest.mark.parametrize("corpus, out", [("words", "clean"), ("lines", "clean.jsonl"), ("lines", "clean-dir/")])
def test_filter_out_of_space_names_its_output_not_an_input(disk: SmallDisk, signed: dict[str, Path], corpus: str,
                                                           out: str) -> None:
    inputs = SAMPLE_CORPORA / "devils-dictionary" if corpus == "words" else signed["records.jsonl"]
    leave = 64 << 10
    assert sum(path.stat().st_size for path in ([inputs] if inputs.is_file() else inputs.iterdir())) > 4 * leave
    disk.fill(leave=leave)  # a part of the output fits
    target = f"{disk.path}/{out}"
    code, stdout, stderr = dedup("filter", str(inputs), "-s", str(signed[corpus]), "-o", target, "-q",
                                 "--exclude", "SOURCE")
    assert (code, stdout, stderr) == (1, "", f"Error: cannot write {target}: {FULL}\n")
    assert sorted(os.listdir(disk.path)) == ["filler"]  # nothing half-written is left


# --- a damaged store is named as damaged, not as absent ----------------------------------------------------------


@pytest.fixture
def store(tmp_path: Path) -> Path:
    store = tmp_path / "store"
    result = CliRunner().invoke(cli, ["sign", str(SAMPLE_CORPORA / "bible-editions" / "KJV"), "-o", str(store), "-q"])
    assert result.exit_code == 0, result.output
    return store


@pytest.mark.parametrize("manifest, cause", [
    (lambda text: text[: len(text) // 2], "has a damaged manifest"),
    (lambda text: "{not json", "has a damaged manifest"),
    (lambda text: json.dumps({**json.loads(text), "format_version": 99}), "uses store format 99"),
])
def test_estimate_on_a_damaged_store_says_it_is_damaged(store: Path, tmp_path: Path, manifest: object,
                                                        cause: str) -> None:
    damaged = store
    path = damaged / MANIFEST_NAME
    path.write_text(manifest(path.read_text()))  # type: ignore[operator]
    os.chdir(tmp_path)  # no default store here: the old message blamed its absence
    for args in (["estimate", str(damaged), "jonah-01.txt", "jonah-02.txt"],
                 ["estimate", str(damaged), "jonah-01.txt", "jonah-02.txt", "ruth-01.txt"],
                 ["info", str(damaged)], ["find", str(damaged)]):
        result = CliRunner().invoke(cli, args, env={"DEDUP_STORE": None})
        assert result.exit_code == 1 and result.stderr.startswith(f"Error: {damaged} {cause}"), (args, result.stderr)
        assert len(result.stderr.splitlines()) == 1


def test_estimate_still_takes_a_first_argument_that_is_no_store_for_an_id(store: Path, tmp_path: Path) -> None:
    shutil.copy(SAMPLE_CORPORA / "bible-editions" / "KJV" / "jonah-01.txt", tmp_path / "jonah-01.txt")
    os.chdir(tmp_path)  # a file named like the first id is there; it is an id all the same
    result = CliRunner().invoke(cli, ["estimate", "jonah-01.txt", "jonah-02.txt", "ruth-01.txt", "-s", str(store)])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[0].split(None, 1) == ["ids", "jonah-01.txt, jonah-02.txt, ruth-01.txt"]
