"""Re-reading a local document that is there but cannot be read now stops the run with one line naming it; one
that is gone keeps its estimate, with the warning.

Each document sits behind a symbolic link, is signed, and the link is then pointed at something the kernel cannot
read as a file: ``/proc/self/mem`` (offset 0 is unmapped, so a read fails with EIO, in whichever process reads it),
the link itself (a loop: ELOOP), a directory (EISDIR); then at nothing (gone). Every command that re-reads is run:
``find`` (exact checks, ``--keep-field``), ``eval``, ``filter`` and ``estimate --exact``, on texts, JSON Lines
records and integer sets.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from dedup_cli.cli.main import cli

FIND = ("-t", "0.3", "-b", "2", "--verify", "all", "--output", "pairs")
WORDS = [f"w{i}" for i in range(300)]


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env={"DEDUP_STORE": None})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def linked_corpus(tmp_path: Path, kind: str) -> tuple[Path, Path, list[str], list[str]]:
    """(the corpus folder, the link to re-point, sign's options, the two ids): two near-duplicates, one of them (or
    the file holding it) behind a symbolic link."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    first, second = " ".join(WORDS), " ".join(WORDS).replace("w7 ", "x ")
    if kind == "text":
        (tmp_path / "a.txt").write_text(first)
        (corpus / "b.txt").write_text(second)
        link, options, ids = corpus / "a.txt", [], ["a.txt", "b.txt"]
    elif kind == "jsonl":
        (tmp_path / "a.jsonl").write_text(json.dumps({"id": "a", "text": first, "stars": 3}) + "\n")
        (corpus / "b.jsonl").write_text(json.dumps({"id": "b", "text": second, "stars": 5}) + "\n")
        link, options, ids = corpus / "a.jsonl", ["--id-field", "id"], ["a", "b"]
    else:
        (tmp_path / "a.sets").write_text("a\t" + " ".join(str(i) for i in range(300)) + "\n")
        (corpus / "b.sets").write_text("b\t" + " ".join(str(i) for i in range(1, 301)) + "\n")
        link, options, ids = corpus / "a.sets", ["--input-format", "sets", "--universe", "1000"], ["a", "b"]
    link.symlink_to(tmp_path / link.name)
    return corpus, link, options, ids


@pytest.mark.parametrize("kind", ["text", "jsonl", "sets"])
def test_a_local_document_that_cannot_be_read_is_one_line_and_a_missing_one_a_warning(tmp_path: Path,
                                                                                       kind: str) -> None:
    corpus, link, options, ids = linked_corpus(tmp_path, kind)
    store = str(tmp_path / "sigs")
    assert invoke("sign", str(corpus), "-o", store, *options, "-q")[0] == 0
    code, clean, _ = invoke("find", store, *FIND, "-q")
    assert code == 0 and json.loads(clean)["exact"] is not None
    commands = [["find", store, *FIND, "-q"], ["eval", store, "-t", "0.3", "--sample", "50", "-q"],
                ["estimate", store, *ids, "--exact"]]
    if kind == "text":
        commands.append(["filter", str(corpus), "--store", store, "-o", str(tmp_path / "kept"), "-t", "0.3",
                         "--verify", "all", "-q"])
    (tmp_path / "directory").mkdir()
    targets = {"Input/output error": Path("/proc/self/mem"), "Too many levels of symbolic links": link,
               "Is a directory": tmp_path / "directory"}
    if not os.path.exists("/proc/self/mem"):
        del targets["Input/output error"]
    for reason, target in targets.items():
        link.unlink()
        link.symlink_to(target)
        for command in commands:
            code, stdout, stderr = invoke(*command)
            assert (code, stdout) == (1, ""), (command, stderr)
            assert stderr == f"Error: cannot re-read {link} for the exact checks: {reason}\n", command
    link.unlink()
    code, stdout, stderr = invoke("find", store, *FIND)
    assert code == 0 and json.loads(stdout)["exact"] is None
    assert "1 document is gone or changed since signing" in stderr


@pytest.mark.skipif(not os.path.exists("/proc/self/mem"), reason="needs /proc/self/mem (Linux) for a real EIO")
def test_keep_field_on_a_record_that_cannot_be_read_is_one_line(tmp_path: Path) -> None:
    corpus, link, options, _ = linked_corpus(tmp_path, "jsonl")
    store = str(tmp_path / "sigs")
    assert invoke("sign", str(corpus), "-o", store, *options, "-q")[0] == 0
    keep = ("find", store, "-t", "0.3", "--verify", "none", "--keep-field", "stars", "--output", "members", "-q")
    code, stdout, _ = invoke(*keep)
    assert code == 0 and [json.loads(line)["action"] for line in stdout.splitlines()] == ["drop", "keep"]
    link.unlink()
    link.symlink_to("/proc/self/mem")
    code, stdout, stderr = invoke(*keep)
    assert (code, stdout) == (1, "")
    assert stderr == f"Error: cannot re-read {link} for its field 'stars': Input/output error\n"
