"""JSON Lines whose first record is not an object (``null``, ``[]``, a number, a string, ``true``) are read as any
bad record is: skipped, counted and reported, the other records signed.

Arrow's block parser crashes the process (a segmentation fault) on a block whose first value is ``null``, so these
inputs are signed in real processes: a crash is an exit status here, not the end of the test run. The block parser
must decline such a chunk before Arrow sees it (:func:`dedup_cli.inputs.blocks.opens_with_object`), whatever the
engine and however many workers sign.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO

from dedup_cli.inputs import blocks
from dedup_cli.inputs.locations import Source
from dedup_cli.store.store import read_store

# The first values that Arrow's parser crashes on (null and anything it opens) or refuses (the others).
NOT_OBJECTS = [b"null", b"  null", b"nullx", b'null {"text": "a b c"}', b"[]", b"[null]", b"-1", b"2.5", b'"text"',
               b"true", b"false"]
GOOD = b"".join(json.dumps({"text": f"the record number {n} of a good file"}).encode() + b"\n" for n in range(3))


def dedup(*arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dedup_cli", *arguments], capture_output=True, text=True, cwd=cwd,
                          timeout=300, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})


def test_the_block_parser_declines_a_chunk_whose_first_value_is_not_an_object() -> None:
    # Declining is safe in this process: Arrow is never called.
    source = Source("r", "/r.jsonl", "r.jsonl", "jsonl", None)
    for first in NOT_OBJECTS:
        for data in (first + b"\n", b"\n \r\n\t" + first + b"\n" + GOOD, b"\xef\xbb\xbf" + first + b"\n" + GOOD):
            assert not blocks.opens_with_object(data.replace(b"\xef\xbb\xbf", b"   "))
            for id_field in (None, "id"):
                assert blocks.parse_block(data, 1, source, "text", id_field, None, 0) is None
    assert blocks.opens_with_object(b' \r\n\t{"text": "a"}\nnull\n')
    assert blocks.parse_block(GOOD, 1, source, "text", None, None, 0) is not None


def test_a_file_of_one_null_line_signs_nothing_and_says_why(tmp_path: Path) -> None:
    (tmp_path / "n.jsonl").write_bytes(b"null\n")
    signed = dedup("sign", "n.jsonl", "-o", "s", cwd=tmp_path)
    # Every record of the input skipped: the run did the wrong job, says so in one line, and stores nothing.
    assert signed.returncode == 1, signed.stderr
    assert signed.stderr.count("\n") == 1 and "Traceback" not in signed.stderr
    assert "every record of" in signed.stderr and "/n.jsonl was skipped" in signed.stderr
    assert "expected a JSON object, found null" in signed.stderr
    assert len(read_store(tmp_path / "s")) == 0


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_folder_with_one_bad_file_beside_good_ones_is_signed(tmp_path: Path, jobs: str) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a-null.jsonl").write_bytes(b"null\n" + GOOD)  # the five bytes that stopped a whole corpus, first
    for number, first in enumerate(NOT_OBJECTS):
        (corpus / f"b-{number:02d}.jsonl").write_bytes(first + b"\n" + GOOD)
    for number in range(3):
        (corpus / f"c-good-{number}.jsonl").write_bytes(GOOD)
    signed = dedup("sign", "corpus", "-o", "s", "--jobs", jobs, cwd=tmp_path)
    assert signed.returncode == 0, signed.stderr
    assert "Traceback" not in signed.stderr
    skipped = 1 + len(NOT_OBJECTS)
    assert f"{skipped} inputs skipped" in signed.stderr
    assert "/corpus/a-null.jsonl:1: expected a JSON object, found null" in signed.stderr
    # Every record but the first line of each b- file, by its file's id and line number.
    expected = [f"a-null.jsonl:{line}" for line in (2, 3, 4)]
    expected += [f"b-{n:02d}.jsonl:{line}" for n in range(len(NOT_OBJECTS)) for line in (2, 3, 4)]
    expected += [f"c-good-{n}.jsonl:{line}" for n in range(3) for line in (1, 2, 3)]
    assert sorted(read_store(tmp_path / "s").ids) == sorted(expected)


def test_records_with_an_id_field_after_a_null_line(tmp_path: Path) -> None:
    records = b"".join(json.dumps({"id": f"doc-{n}", "text": f"text {n} of a record"}).encode() + b"\n"
                       for n in range(4))
    (tmp_path / "r.jsonl").write_bytes(b"null\n" + records)
    signed = dedup("sign", "r.jsonl", "--id-field", "id", "-o", "s", cwd=tmp_path)
    assert signed.returncode == 0, signed.stderr
    assert "/r.jsonl:1: expected a JSON object, found null" in signed.stderr
    assert read_store(tmp_path / "s").ids == [f"doc-{n}" for n in range(4)]


_READ_TRUTH = """
import sys
from dedup_cli.errors import InputError
from dedup_cli.inputs.truth import read_truth
try:
    truth = read_truth(sys.argv[1], ["a", "b"])
    print(truth.first.tolist(), truth.resemblance.tolist())
except InputError as error:
    print(error)
"""


def test_a_truth_file_opening_with_a_value_that_is_not_an_object(tmp_path: Path) -> None:
    good = b'{"id_a": "a", "id_b": "b", "resemblance": 0.5}\n'
    path = tmp_path / "truth.jsonl"
    refused = "truth.jsonl:{}: not a JSON object"
    for first, said in ((b"null", refused.format(1)), (b"\n  null", refused.format(2)), (b"[]", refused.format(1)),
                        (b" ", "[0] [0.5]")):
        path.write_bytes(first + b"\n" + good)
        read = subprocess.run([sys.executable, "-c", _READ_TRUTH, str(path)], capture_output=True, text=True,
                              timeout=120, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
        assert read.returncode == 0, read.stderr
        assert said in read.stdout
