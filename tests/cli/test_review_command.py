"""``dedup review`` on the command line: find's summary then the page's, the options from flags and from
``DEDUP_REVIEW_*``, ``-q``, stdout, and the mistakes a user makes: one line each, the right exit code, and the page
that was there left as it was."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import REPO, review_data

from dedup_cli.cli.main import cli

BIBLE = REPO / "sample_corpora" / "bible-editions"


def run(*args: str, env: dict[str, str | None] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env={"DEDUP_STORE": None, **(env or {})})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("review") / "sigs.parquet"
    code, _, stderr = run("sign", str(BIBLE), "--exclude", "SOURCE", "-o", str(path), "-q")
    assert code == 0, stderr
    return path


def test_the_summary_is_finds_then_the_pages(store: Path, tmp_path: Path) -> None:
    page = tmp_path / "review.html"
    code, stdout, stderr = run("review", str(store), "-o", str(page), "-t", "0.5", "-b", "2")
    assert code == 0 and stdout == "", stderr
    find_line, review_line = stderr.splitlines()
    _, _, found = run("find", str(store), "-t", "0.5", "-b", "2")
    assert find_line.split(", 0.")[0] == found.splitlines()[-1].split(", 0.")[0]  # the same, but the time
    assert review_line.startswith(f"wrote {page} (0.1 MB): 9 of 9 groups shown (the 9 largest and 0 sampled), 37 "
                                  "members with their text; 28 documents to drop, 0.1 MB; ")
    assert len(review_data(page.read_text("utf-8"))["groups"]) == 9


def test_options_come_from_flags_or_the_environment(store: Path, tmp_path: Path) -> None:
    page = tmp_path / "review.html"
    code, _, stderr = run("review", str(store), "-o", str(page), "-b", "2", "--groups", "2", "--sample", "1",
                          "--seed", "7", "--members", "2", "--text-limit", "300", "-q")
    assert (code, stderr) == (0, "")
    flags = review_data(page.read_text("utf-8"))
    code, _, stderr = run("review", str(store), "-q", env={
        "DEDUP_REVIEW_OUT": str(tmp_path / "env.html"), "DEDUP_REVIEW_BITS": "2", "DEDUP_REVIEW_GROUPS": "2",
        "DEDUP_REVIEW_SAMPLE": "1", "DEDUP_REVIEW_SEED": "7", "DEDUP_REVIEW_MEMBERS": "2",
        "DEDUP_REVIEW_TEXT_LIMIT": "300"})
    assert (code, stderr) == (0, "")
    assert review_data((tmp_path / "env.html").read_text("utf-8")) == flags
    assert flags["text_limit"] == 300 and len(flags["groups"]) == 3
    assert all(len(group["members"]) == 2 for group in flags["groups"])


def test_the_page_can_go_to_stdout(store: Path) -> None:
    code, stdout, stderr = run("review", str(store), "-o", "-", "-b", "2", "-q")
    assert (code, stderr) == (0, "") and stdout.startswith("<!DOCTYPE html>") and stdout.endswith("</html>\n")


@pytest.mark.parametrize(("args", "code", "message"), [
    (["-o", "{tmp}"], 2, "Error: Invalid value for '-o' / '--out': File '{tmp}' is a directory."),
    (["-o", "{page}", "--bits", "17"], 2, "Error: --bits 17 exceeds the 16 bits stored in {store}; use --bits 1 to "
                                          "16, or re-sign with --bits 17 or more into a new store"),
    (["-o", "{page}", "--members", "0"], 2, "Invalid value for '--members': 0 is not in the range x>=1."),
    (["-o", "{page}", "--text-limit", "10"], 2, "Invalid value for '--text-limit': 10 is not in the range x>=200."),
    (["-o", "{tmp}/no/such/folder/review.html"], 1, "Error: cannot write {tmp}/no/such/folder/review.html"),
])
def test_mistakes_are_one_line_and_leave_the_page(store: Path, tmp_path: Path, args: list[str], code: int,
                                                  message: str) -> None:
    page = tmp_path / "review.html"
    page.write_text("the page before")
    values = {"tmp": str(tmp_path), "page": str(page), "store": str(store)}
    got, _, stderr = run("review", str(store), *[arg.format(**values) for arg in args])
    assert got == code, stderr
    assert message.format(**values) in stderr and "Traceback" not in stderr
    assert page.read_text() == "the page before"


def test_a_missing_store_says_so_before_any_work(tmp_path: Path) -> None:
    code, _, stderr = run("review", str(tmp_path / "none.parquet"), "-o", str(tmp_path / "review.html"))
    assert code == 1 and stderr.startswith("Error: store ") and len(stderr.splitlines()) == 1
    assert not (tmp_path / "review.html").exists()


def test_a_real_process_writes_the_page(store: Path, tmp_path: Path) -> None:
    environment = {key: value for key, value in os.environ.items() if not key.startswith("DEDUP_")}
    done = subprocess.run([sys.executable, "-m", "dedup_cli", "review", str(store), "-o", str(tmp_path / "r.html"),
                           "-b", "2"], capture_output=True, text=True, env=environment, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[-1].startswith(f"wrote {tmp_path / 'r.html'} ")
