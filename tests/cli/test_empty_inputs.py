"""An input that holds nothing is a run that did the wrong job (exit 1, one line, nothing stored or written):
stdin with no byte (a pipe whose writer failed, or gzip data of nothing), a file named by itself with no byte, a
file of records with no record, a named folder with no file, a run that found no file at all. An empty text file
among others stays a document with no shingle, and ``--allow-empty`` lets an empty batch through where it is
normal."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import REPO

from dedup_cli.cli.main import cli
from dedup_cli.store.store import open_store, read_store

HINT = "if an empty input is normal for this job, pass --allow-empty"


def run(*args: str, stdin: bytes | None = None, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), input=stdin, env={"DEDUP_STORE": None, **(env or {})},
                                catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def shell(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """A pipeline as a cron job runs it, with ``dedup`` this checkout."""
    environment = {name: value for name, value in os.environ.items() if not name.startswith("DEDUP_")}
    dedup = f"{sys.executable} -m dedup_cli"
    return subprocess.run(["bash", "-o", "pipefail", "-c", command.replace("dedup ", dedup + " ")], cwd=cwd,
                          capture_output=True, text=True, timeout=300,
                          env={**environment, "PYTHONPATH": str(REPO)})


def one_error_line(stderr: str) -> str:
    assert stderr.count("\n") == 1 and stderr.startswith("Error: ") and "Traceback" not in stderr, stderr
    return stderr


def words(seed: int, length: int = 40) -> str:
    return " ".join(f"w{(seed * 31 + step * 7) % 97}" for step in range(length))


def store_state(store: Path) -> tuple[list[str], int]:
    return read_store(store).ids, open_store(store).manifest.last_run


@pytest.fixture
def signed(tmp_path: Path) -> Path:
    """A store holding a folder of three documents."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for number in range(3):
        (corpus / f"{number}.txt").write_text(words(number))
    store = tmp_path / "s"
    assert run("sign", str(corpus), "-o", str(store), "-q")[0] == 0
    return store


# --- stdin -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("pipe", "what"), [(":", "is empty (0 bytes)"),
                                            ("gzip < /dev/null", "is empty (gzip data that decompresses to nothing)"),
                                            ("zcat missing.gz 2>/dev/null || true", "is empty (0 bytes)")])
def test_an_empty_pipe_is_a_failed_run_that_stores_nothing(signed: Path, tmp_path: Path, pipe: str, what: str) -> None:
    before = store_state(signed)
    done = shell(f"{pipe} | dedup sign - -o {signed}", tmp_path)
    assert done.returncode == 1
    line = one_error_line(done.stderr)
    assert line == f"Error: stdin {what}; nothing was stored; {HINT}\n"
    assert store_state(signed) == before
    done = shell(f"{pipe} | dedup sign - --input-format jsonl --id-field id -o {tmp_path / 'new'}", tmp_path)
    assert done.returncode == 1 and f"stdin {what}" in one_error_line(done.stderr)
    assert read_store(tmp_path / "new").ids == []


def test_allow_empty_lets_an_empty_batch_through_from_the_flag_or_the_environment(signed: Path,
                                                                                  tmp_path: Path) -> None:
    before = store_state(signed)
    done = shell(f"gzip < /dev/null | dedup sign - --input-format jsonl --id-field id --allow-empty -o {signed}",
                 tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("signed 0 documents (0 new, 0 changed, 0 unchanged, 0 moved, 0 removed;")
    assert read_store(signed).ids == before[0]
    code, _, stderr = run("sign", "-", "--input-format", "jsonl", "--id-field", "id", "-o", str(signed), "-q",
                          stdin=b"", env={"DEDUP_SIGN_ALLOW_EMPTY": "1"})
    assert code == 0 and stderr == ""
    assert read_store(signed).ids == before[0]  # an empty batch is no document, not even an empty one


def test_stdin_of_blank_lines_holds_no_record(tmp_path: Path) -> None:
    code, _, stderr = run("sign", "-", "--input-format", "jsonl", "-o", str(tmp_path / "s"), stdin=b"\n  \n\n")
    assert code == 1 and one_error_line(stderr) == f"Error: stdin holds no record; nothing was stored; {HINT}\n"
    # White space read as one text is a document, with no shingle (it is not empty of bytes).
    code, _, stderr = run("sign", "-", "-o", str(tmp_path / "t"), stdin=b"\n")
    assert code == 0 and "1 with no shingle" in stderr


# --- files and folders ----------------------------------------------------------------------------------------


def test_named_files_that_hold_nothing_stop_the_run(signed: Path) -> None:
    corpus = signed.parent / "corpus"
    cases = {"e.txt": (b"", "is empty (0 bytes)"),
             "e.txt.gz": (gzip.compress(b""), "is empty (gzip data that decompresses to nothing)"),
             "e.jsonl": (b"", "is empty (0 bytes)"),
             "blank.jsonl": (b"\n\n", "holds no record"),
             "header.csv": (b"id,text\n", "holds no record"),
             "e.jsonl.gz": (gzip.compress(b""), "holds no record")}
    before = store_state(signed)
    for name, (content, what) in cases.items():
        (corpus / name).write_bytes(content)
        code, _, stderr = run("sign", str(corpus / "0.txt"), str(corpus / name), "-o", str(signed))
        assert code == 1, (name, stderr)
        assert one_error_line(stderr) == f"Error: {corpus / name} {what}; nothing was stored; {HINT}\n"
        assert store_state(signed) == before
    code, _, stderr = run("sign", *(str(corpus / name) for name in cases), "-o", str(signed))
    assert code == 1 and "(and 5 other inputs)" in one_error_line(stderr)
    code, _, stderr = run("sign", str(corpus / "e.txt"), "-o", str(signed), "--allow-empty")
    assert code == 0 and "1 new" in stderr and "1 with no shingle" in stderr


def test_an_empty_file_in_a_folder_is_a_document_but_a_file_of_no_record_is_not(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text(words(1))
    (corpus / "empty.txt").write_text("")
    store = tmp_path / "s"
    code, _, stderr = run("sign", str(corpus), "-o", str(store))
    assert code == 0 and "signed 2 documents" in stderr and "1 with no shingle" in stderr
    (corpus / "records.jsonl").write_text("")
    code, _, stderr = run("sign", str(corpus), "-o", str(store))
    assert code == 1
    assert one_error_line(stderr) == (f"Error: {corpus / 'records.jsonl'} is empty (0 bytes); nothing was stored; "
                                      f"{HINT}\n")
    (corpus / "records.jsonl").write_text(json.dumps({"text": words(2)}) + "\n")
    assert run("sign", str(corpus), "-o", str(store), "-q")[0] == 0


def test_a_named_folder_with_no_file_and_a_run_that_finds_none_stop(signed: Path, tmp_path: Path) -> None:
    corpus = signed.parent / "corpus"
    mount = corpus / "mnt"
    mount.mkdir()
    (mount / ".hidden").write_text(words(9))
    before = store_state(signed)
    for inputs in ([str(mount)], [str(corpus), str(mount)]):
        code, _, stderr = run("sign", *inputs, "-o", str(signed))
        assert code == 1
        assert one_error_line(stderr) == f"Error: {mount} holds no file to read; nothing was stored; {HINT}\n"
        assert store_state(signed) == before
    code, _, stderr = run("sign", str(corpus), "--exclude", "*.txt", "-o", str(signed))
    assert code == 1 and f"{corpus} holds no file to read" in one_error_line(stderr)
    listing = tmp_path / "list.txt"
    listing.write_text("")
    code, _, stderr = run("sign", "--files-from", str(listing), "-o", str(signed))
    assert code == 1
    assert one_error_line(stderr) == (f"Error: no document was read: no file to read was found in {listing}; "
                                      f"nothing was stored; {HINT}\n")
    assert store_state(signed) == before
    code, _, stderr = run("sign", str(mount), "-o", str(signed), "--allow-empty")
    assert code == 0 and "signed 0 documents" in stderr and store_state(signed)[0] == before[0]


def test_unchanged_inputs_are_no_empty_run(signed: Path) -> None:
    code, _, stderr = run("sign", str(signed.parent / "corpus"), "-o", str(signed))
    assert code == 0 and "signed 0 documents (0 new, 0 changed, 3 unchanged" in stderr


# --- filter --------------------------------------------------------------------------------------------------


def test_filter_stops_on_an_empty_input_before_its_output_is_replaced(tmp_path: Path) -> None:
    crawl = tmp_path / "crawl.jsonl"
    crawl.write_text("".join(json.dumps({"id": f"d{n}", "text": words(n % 3)}) + "\n" for n in range(6)))
    store = tmp_path / "s"
    out = tmp_path / "clean.jsonl"
    code, _, stderr = run("filter", str(crawl), "--sign", "--id-field", "id", "-s", str(store), "-o", str(out))
    assert code == 0, stderr
    kept = out.read_bytes()
    assert 0 < kept.count(b"\n") < 6
    crawl.write_text("")  # tonight's download failed
    before = store_state(store)
    for extra in ([], ["--sign", "--id-field", "id"]):
        code, _, stderr = run("filter", str(crawl), *extra, "-s", str(store), "-o", str(out))
        assert code == 1
        assert f"{crawl} is empty (0 bytes); nothing " in one_error_line(stderr) and HINT in stderr
        assert out.read_bytes() == kept and store_state(store) == before
    code, _, stderr = run("filter", str(crawl), "-s", str(store), "-o", str(out), "--allow-empty", "-q")
    assert code == 0 and out.read_bytes() == b""


def test_filter_of_an_empty_pipe_fails_and_writes_nothing(tmp_path: Path) -> None:
    store = tmp_path / "s"
    lines = "".join(json.dumps({"id": f"d{n}", "text": words(n % 2)}) + "\n" for n in range(4)).encode()
    assert run("sign", "-", "--id-field", "id", "-o", str(store), "-q", stdin=lines)[0] == 0
    out = tmp_path / "clean.jsonl"
    out.write_text("yesterday's\n")
    done = shell(f"gzip < /dev/null | dedup filter - -s {store} -o {out}", tmp_path)
    assert done.returncode == 1
    assert one_error_line(done.stderr) == ("Error: stdin is empty (gzip data that decompresses to nothing); nothing "
                                           f"was written; {HINT}\n")
    assert out.read_text() == "yesterday's\n"
    done = shell(f": | dedup filter - -s {store} -o {out} --allow-empty -q", tmp_path)
    assert done.returncode == 0 and "Error" not in done.stderr and out.read_text() == ""
