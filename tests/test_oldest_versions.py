"""The core install at the oldest versions pyproject.toml allows (tests/oldest-requirements.txt: no extras, so no
pandas and no numba) runs every command the same as this environment: the same store, the same groups, the
same kept documents. ``make test`` builds that environment and names its Python in ``DEDUP_OLDEST_PYTHON``;
elsewhere these tests are skipped.

A release of pyarrow that changed where it imports pandas once made ``sign`` and ``find`` fail on every pyarrow
before it, in installs without the extras, which is what most users have; the suite, run only at the newest
versions with every extra, did not see it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers import REPO, review_data

OLDEST_PYTHON = os.environ.get("DEDUP_OLDEST_PYTHON")
pytestmark = pytest.mark.skipif(not OLDEST_PYTHON, reason="DEDUP_OLDEST_PYTHON is unset (make test sets it)")
CORPUS = REPO / "sample_corpora"


def dedup(python: str, folder: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    """``dedup ARGUMENTS`` run by ``python`` in ``folder`` with this checkout's package; fails on a crash."""
    result = subprocess.run([python, "-m", "dedup_cli", *arguments], cwd=folder, capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300)
    assert result.returncode in (0, 1) and "Traceback" not in result.stderr, (python, arguments, result.stderr)
    return result


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The same commands in two folders, by this Python and by the oldest one."""
    folders = {}
    for name, python in (("current", sys.executable), ("oldest", str(OLDEST_PYTHON))):
        folder = folders[name] = tmp_path_factory.mktemp(name)
        dedup(python, folder, "sign", str(CORPUS / "licenses"), str(CORPUS / "udhr"), "-o", "store", "-j", "2", "-q")
        dedup(python, folder, "sign", str(CORPUS / "bible-editions"), "-o", "store", "-j", "1", "-q")
        for jobs in ("1", "2"):
            dedup(python, folder, "find", "store", "-t", "0.5", "-b", "2", "-j", jobs, "-q",
                  "-o", f"groups-{jobs}.jsonl")
        dedup(python, folder, "find", "store", "-t", "0.5", "-b", "2", "--verify", "all", "--output", "pairs", "-q",
              "-o", "pairs.jsonl")
        dedup(python, folder, "filter", str(CORPUS / "licenses"), "-s", "store", "-t", "0.5", "-b", "2", "-q",
              "-o", "kept")
        (folder / "info.json").write_text(dedup(python, folder, "info", "store").stdout)
        dedup(python, folder, "review", "store", "-t", "0.5", "-b", "2", "--groups", "5", "--sample", "5", "-q",
              "-o", "review.html")
    return folders


def test_the_oldest_versions_are_what_the_requirements_name() -> None:
    found = subprocess.run([str(OLDEST_PYTHON), "-c", "import importlib.util as u, numpy, pyarrow; "
                            "print(numpy.__version__, pyarrow.__version__, u.find_spec('pandas') is None, "
                            "u.find_spec('numba') is None)"], capture_output=True, text=True, check=True).stdout.split()
    wanted = (REPO / "tests" / "oldest-requirements.txt").read_text()
    assert f"numpy=={found[0]}" in wanted and f"pyarrow=={found[1]}" in wanted
    assert found[2:] == ["True", "True"]  # the core install: no pandas, no numba


def test_the_oldest_versions_sign_the_same_store(runs: dict[str, Path]) -> None:
    columns = ["id", "path", "size", "content_hash", "shingle_count", "signature"]
    current, oldest = (pq.read_table(runs[name] / "store", columns=columns).sort_by("id") for name in runs)
    assert current.num_rows > 100 and current.equals(oldest)


@pytest.mark.parametrize("output", ["groups-1.jsonl", "groups-2.jsonl", "pairs.jsonl"])
def test_the_oldest_versions_find_the_same(runs: dict[str, Path], output: str) -> None:
    current, oldest = ((runs[name] / output).read_text() for name in runs)
    assert current.count("\n") > 3 and current == oldest


def test_the_oldest_versions_keep_the_same_documents(runs: dict[str, Path]) -> None:
    # (filter's record of the run names its own store: it differs by the folder)
    current, oldest = ({str(path.relative_to(runs[name] / "kept")): path.read_bytes()
                        for path in (runs[name] / "kept").rglob("*")
                        if path.is_file() and not path.name.startswith(".dedup-")} for name in runs)
    assert 0 < len(current) < len(list((CORPUS / "licenses").iterdir())) and current == oldest
    summaries = [json.loads((runs[name] / "info.json").read_text())["documents"] for name in runs]
    assert summaries[0] == summaries[1]


def test_the_oldest_versions_review_the_same(runs: dict[str, Path]) -> None:
    current, oldest = (review_data((runs[name] / "review.html").read_text("utf-8")) for name in runs)
    assert len(current["groups"]) == 10 and current == oldest

