"""Runs that did the wrong job exit non-zero in one line and store nothing, as a cron job needs: nothing read from
non-empty inputs, every record of an input skipped, a record option the inputs' format ignores, any skip with
--strict, a prune that would empty the store; and -q keeps every warning that changes what the result means."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import REPO

from dedup_cli.cli.main import cli
from dedup_cli.store.store import open_store, read_store

WORDS = ("river stone cloud lantern meadow harbor copper violet engine garden whisper orbit canyon ember "
         "falcon glacier").split()


def run(*args: str, stdin: bytes | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), input=stdin, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def dedup(*args: str, stdin: bytes | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    """The command as cron runs it: a real process."""
    return subprocess.run([sys.executable, "-m", "dedup_cli", *args], input=stdin, capture_output=True, cwd=cwd,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})


def text(number: int, length: int = 60) -> str:
    return " ".join(WORDS[(number * 7 + step * (number % 5 + 1)) % len(WORDS)] + str(step % 9)
                    for step in range(length))


def write_records(path: Path, count: int, start: int = 0) -> None:
    with path.open("w") as handle:
        for number in range(start, start + count):
            handle.write(json.dumps({"id": f"d{number}", "text": text(number), "title": "t"}) + "\n")


def store_state(store: Path) -> tuple[list[str], int]:
    """The live ids and the last run: what a refused run must leave as it was."""
    return read_store(store).ids, open_store(store).manifest.last_run


def one_error_line(stderr: str) -> str:
    assert stderr.count("\n") == 1 and stderr.startswith("Error: ") and "Traceback" not in stderr, stderr
    return stderr


# --- nothing read, every record skipped -------------------------------------------------------------------------


def test_binary_stdin_read_as_jsonl_is_an_error_and_stores_nothing(tmp_path: Path) -> None:
    # Compressed stdin is read (its codec told by its first bytes); bytes no codec explains are binary.
    store = tmp_path / "s"
    signed = dedup("sign", "-", "--input-format", "jsonl", "--id-field", "id", "-o", str(store),
                   stdin=b"\x89PNG\x00\x00" + bytes(range(256)) * 40)
    assert signed.returncode == 1
    line = one_error_line(signed.stderr.decode())
    assert "no document was read" in line and "binary" in line and "<stdin>" in line and "nothing was stored" in line
    assert read_store(store).ids == []


def test_an_id_field_no_record_has_names_the_field_the_file_and_the_fields_there(tmp_path: Path) -> None:
    corpus = tmp_path / "c.jsonl"
    write_records(corpus, 30)
    store = tmp_path / "s"
    code, _, stderr = run("sign", str(corpus), "--id-field", "url", "-o", str(store))
    assert code == 1
    line = one_error_line(stderr)
    assert f"every record of {corpus} was skipped: 30 records" in line
    assert 'no "url" field (--id-field)' in line and 'its first record has the fields "id", "text", "title"' in line
    assert read_store(store).ids == []
    # Into a store that holds documents: refused the same way, the store as it was.
    assert run("sign", str(corpus), "--id-field", "id", "-o", str(store), "-q")[0] == 0
    before = store_state(store)
    write_records(tmp_path / "more.jsonl", 5, start=100)
    code, _, stderr = run("sign", str(corpus), str(tmp_path / "more.jsonl"), "--id-field", "url", "-o", str(store))
    assert code == 1 and "every record of" in one_error_line(stderr)
    assert store_state(store) == before


def test_one_input_whose_every_record_is_skipped_stops_a_run_of_good_ones(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    write_records(corpus / "a.jsonl", 10)
    (corpus / "b.jsonl").write_text("".join(json.dumps({"body": text(n)}) + "\n" for n in range(4)))
    store = tmp_path / "s"
    code, _, stderr = run("sign", str(corpus), "--id-field", "id", "-o", str(store))
    assert code == 1
    line = one_error_line(stderr)
    assert f"every record of {corpus / 'b.jsonl'} was skipped: 4 records" in line and 'no "text" field' in line
    assert 'its first record has the fields "body"' in line
    assert read_store(store).ids == []


def test_an_id_field_for_a_folder_of_text_files_is_refused(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for number in range(3):
        (corpus / f"{number}.txt").write_text(text(number))
    store = tmp_path / "s"
    for command in (["sign", str(corpus), "-o", str(store)],
                    ["filter", str(corpus), "--sign", "-s", str(store), "-o", str(tmp_path / "out")]):
        code, _, stderr = run(*command, "--id-field", "url")
        assert code == 2
        line = one_error_line(stderr)
        assert "--id-field url applies to JSON Lines records, but the 3 input files are plain text" in line
        assert not (tmp_path / "out").exists()
        assert not store.exists() or read_store(store).ids == []
    # A store signed from them: plain filter refuses the option as well, before writing anything.
    assert run("sign", str(corpus), "-o", str(store), "-q")[0] == 0
    code, _, stderr = run("filter", str(corpus), "-s", str(store), "-o", str(tmp_path / "out"), "--id-field", "url")
    assert code == 2 and "plain text" in one_error_line(stderr) and not (tmp_path / "out").exists()


def test_strict_makes_a_partial_skip_fatal_and_without_it_it_is_a_warning(tmp_path: Path) -> None:
    corpus = tmp_path / "c.jsonl"
    write_records(corpus, 10)
    with corpus.open("a") as handle:
        handle.write("{not json\n")
    store = tmp_path / "s"
    code, _, stderr = run("sign", str(corpus), "--id-field", "id", "-o", str(store), "--strict")
    assert code == 1
    line = one_error_line(stderr)
    assert "1 malformed record skipped" in line and "c.jsonl:11" in line and "--strict" in line
    assert read_store(store).ids == []
    code, _, stderr = run("sign", str(corpus), "--id-field", "id", "-o", str(store))
    assert code == 0 and "warning: skipped" in stderr and "1 input skipped" in stderr
    assert len(read_store(store).ids) == 10
    # filter --sign passes it on: the skip is fatal, and nothing is written.
    out = tmp_path / "clean.jsonl"
    code, _, stderr = run("filter", str(corpus), "--sign", "--id-field", "id", "-s", str(tmp_path / "s2"), "-o",
                          str(out), "--strict")
    assert code == 1 and "--strict" in one_error_line(stderr) and not out.exists()
    code, _, stderr = run("filter", str(corpus), "-s", str(store), "-o", str(out), "--strict")  # nothing to sign
    assert code == 2 and "--strict applies to the signing of --sign" in one_error_line(stderr)


def test_filter_sign_stops_on_every_record_skipped_before_writing(tmp_path: Path) -> None:
    corpus = tmp_path / "c.jsonl"
    write_records(corpus, 8)
    out = tmp_path / "clean.jsonl"
    signed = dedup("filter", str(corpus), "--sign", "--id-field", "url", "-s", str(tmp_path / "s"), "-o", str(out))
    assert signed.returncode == 1 and "every record of" in one_error_line(signed.stderr.decode())
    assert not out.exists()


# --- prune -------------------------------------------------------------------------------------------------------


def test_prune_refuses_to_empty_the_store_when_the_folder_is_empty(tmp_path: Path) -> None:
    corpus = tmp_path / "mnt"
    corpus.mkdir()
    for number in range(4):
        (corpus / f"{number}.txt").write_text(text(number))
    store = tmp_path / "s"
    assert dedup("sign", str(corpus), "-o", str(store), "-q").returncode == 0
    before = store_state(store)
    for name in os.listdir(corpus):  # the disk that was not mounted tonight
        os.unlink(corpus / name)
    signed = dedup("sign", str(corpus), "-o", str(store), "--prune", "-q")
    assert signed.returncode == 1  # an empty input is the first thing wrong
    assert f"{corpus} holds no file to read" in one_error_line(signed.stderr.decode())
    assert store_state(store) == before
    signed = dedup("sign", str(corpus), "-o", str(store), "--prune", "--allow-empty", "-q")
    assert signed.returncode == 1
    line = one_error_line(signed.stderr.decode())
    assert f"--prune would remove 4 of the 4 documents in {store} (every one)" in line and "--force-prune" in line
    assert store_state(store) == before
    # More than half is refused too; half or less is a prune like any other.
    for number in range(4):
        (corpus / f"{number}.txt").write_text(text(number))
    for number in range(3):
        os.unlink(corpus / f"{number}.txt")
    code, _, stderr = run("sign", str(corpus), "-o", str(store), "--prune")
    assert code == 1 and "--prune would remove 3 of the 4 documents" in one_error_line(stderr)
    assert store_state(store) == before
    (corpus / "0.txt").write_text(text(0))
    (corpus / "1.txt").write_text(text(1))
    code, _, stderr = run("sign", str(corpus), "-o", str(store), "--prune")
    assert code == 0 and "1 removed" in stderr
    shutil.rmtree(corpus)  # removing all the rest takes --force-prune
    corpus.mkdir()
    code, _, stderr = run("sign", str(corpus), "-o", str(store), "--force-prune")
    assert code == 0 and "3 removed" in stderr and read_store(store).ids == []


# --- links to nothing --------------------------------------------------------------------------------------------


def test_a_link_to_nothing_stops_filter_and_filter_sign_before_anything_is_written(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for number in range(3):
        (corpus / f"{number}.txt").write_text(text(number))
    store = tmp_path / "s"
    assert run("sign", str(corpus), "-o", str(store), "-q")[0] == 0
    before = store_state(store)
    (corpus / "zz.txt").symlink_to(tmp_path / "nowhere")
    for command in (["filter", str(corpus), "-s", str(store)], ["filter", str(corpus), "--sign", "-s", str(store)],
                    ["filter", str(corpus), "--sign", "-s", str(tmp_path / "new")]):
        code, _, stderr = run(*command, "-o", str(tmp_path / "out"))
        assert code == 1
        line = one_error_line(stderr)
        assert f"cannot read {corpus / 'zz.txt'} (a symbolic link to nothing)" in line and "nothing was written" in line
        assert not (tmp_path / "out").exists() and not (tmp_path / "new").exists()
        assert store_state(store) == before


# --- -q: no progress, no summary, every warning -----------------------------------------------------------------


@pytest.fixture
def moved(tmp_path: Path) -> tuple[Path, Path]:
    """A store of a folder with near-duplicates and a binary file, whose b.txt then changed."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text(text(1, 200))
    (corpus / "b.txt").write_text(text(1, 200).replace("river", "brook", 1))
    (corpus / "c.txt").write_text(text(2, 200))
    (corpus / "image.bin").write_bytes(b"\x89PNG\x00binary")
    store = tmp_path / "s"
    code, _, stderr = run("sign", str(corpus), "-o", str(store), "-q")
    assert code == 0 and stderr == f"warning: skipped binary file {corpus / 'image.bin'}\n"  # the warning, no summary
    (corpus / "b.txt").write_text("a different text now")
    return corpus, store


def test_quiet_find_keeps_the_warning_that_pairs_were_not_checked(moved: tuple[Path, Path]) -> None:
    _, store = moved
    code, stdout, stderr = run("find", str(store), "-t", "0.5", "--verify", "all", "-q")
    assert code == 0 and stdout
    # the pairs' warning, and the grouped document's (never kept in place of a live copy): nothing else
    lines = stderr.splitlines()
    assert len(lines) == 2 and lines[1].startswith("warning: 1 document is gone or changed since signing")
    assert lines[0].startswith("warning: 1 grouped document is gone or changed since it was signed")


def test_quiet_eval_keeps_the_warning_that_documents_were_not_reread(moved: tuple[Path, Path]) -> None:
    _, store = moved
    code, _, stderr = run("eval", str(store), "-t", "0.5", "--sample", "50", "-q")
    assert code == 0
    assert stderr.startswith("warning: 1 document is gone or changed since signing") and stderr.count("\n") == 1


def test_quiet_is_one_rule_in_every_command_that_has_it(moved: tuple[Path, Path], tmp_path: Path) -> None:
    quiet = {name: next(p for p in command.params if p.name == "quiet")  # type: ignore[attr-defined]
             for name, command in cli.commands.items() if any(p.name == "quiet" for p in command.params)}
    assert set(quiet) == {"sign", "find", "filter", "eval", "review"}
    assert len({option.help for option in quiet.values()}) == 1
    assert "still go to stderr" in str(quiet["find"].help)
    corpus, store = moved
    code, _, stderr = run("filter", str(corpus), "-s", str(store), "-o", str(tmp_path / "out"), "-t", "0.5", "-q")
    assert code == 0
    assert "warning: copied" in stderr and "image.bin unread" in stderr and "filtered" not in stderr
    code, _, stderr = run("review", str(store), "-o", str(tmp_path / "review.html"), "-t", "0.5", "-q")
    assert code == 0 and "wrote" not in stderr
    assert stderr.startswith("warning: 1 grouped document is gone or changed since it was signed")


# --- summaries ---------------------------------------------------------------------------------------------------


def test_summaries_count_in_agreement_and_find_says_what_its_groups_drop(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text(text(1, 200))
    store = tmp_path / "s"
    code, _, stderr = run("sign", str(corpus), "-o", str(store))
    assert code == 0 and stderr.startswith("signed 1 document (1 new,") and ", 1 document stored" in stderr
    (corpus / "b.txt").write_text(text(1, 200))
    (corpus / "c.txt").write_text(text(1, 200))
    assert run("sign", str(corpus), "-o", str(store), "-q")[0] == 0
    code, _, stderr = run("find", str(store), "-t", "0.5")
    assert code == 0 and "3 documents (0 with no shingle)" in stderr and "1 group (2 to drop)" in stderr
