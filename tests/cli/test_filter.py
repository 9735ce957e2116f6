"""dedup filter, end to end: every input format, byte identity and order of kept records, the drops find (or a
members file) decides, --removed, --annotate, changed documents, and where the output may go."""

from __future__ import annotations

import bz2
import csv
import gzip
import json
import lzma
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import dedup_cli as dedup
from dedup_cli.cli.main import cli
from dedup_cli.options.vocabulary import KEEP_CHOICES

WORDS = 120


def text(topic: int, variant: int = -1) -> str:
    """Texts of one topic are near-duplicates (R ≈ 0.92 between variants); topics share nothing."""
    words = [f"t{topic}w{i}" for i in range(WORDS)]
    if variant >= 0:
        words[variant * 7 % WORDS] = f"v{variant}"
    return " ".join(words)


def run(*args: str, stdin: bytes | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), input=stdin, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def ok(*args: str, stdin: bytes | None = None) -> tuple[str, str]:
    code, stdout, stderr = run(*args, stdin=stdin)
    assert code == 0, stderr
    return stdout, stderr


def sign(*args: str) -> None:
    ok("sign", *args, "-k", "64", "-q")


def dropped_by_find(store: Path, *options: str) -> set[str]:
    stdout, _ = ok("find", str(store), "--output", "members", "-q", *options)
    return {record["id"] for record in map(json.loads, stdout.splitlines()) if record["action"] == "drop"}


# A JSON Lines corpus whose lines test byte identity: a byte-order mark, CRLF and LF ends, odd spacing and field
# order, non-ASCII text, blank and malformed lines (never documents: kept), no newline at the end.
RECORDS = [
    {"text": text(0), "id": "a", "meta": {"x": [1, 2]}},
    {"id": "b", "text": text(0, 1), "score": 0.5},
    {"id": "c", "text": text(1) + " café ☃"},
    {"id": "d", "text": text(1, 2) + " café ☃", "score": 3},
    {"id": "e", "text": text(2)},
    {"id": "f", "text": text(0, 3)},
    {"id": "g", "text": text(3)},
]


def jsonl_lines() -> list[bytes]:
    lines = [json.dumps(record, ensure_ascii=index % 2 == 0).encode() for index, record in enumerate(RECORDS)]
    lines[0] = b"\xef\xbb\xbf" + lines[0] + b"\r\n"
    lines[1] = lines[1].replace(b": ", b":") + b"  \n"
    lines = [line if line.endswith(b"\n") else line + b"\n" for line in lines]
    lines.insert(3, b"\n")
    lines.insert(5, b"{not json\n")
    lines[-1] = lines[-1].rstrip(b"\n")
    return lines


@pytest.fixture
def jsonl_corpus(tmp_path: Path) -> tuple[Path, Path, list[bytes]]:
    lines = jsonl_lines()
    corpus = tmp_path / "c.jsonl"
    corpus.write_bytes(b"".join(lines))
    store = tmp_path / "s.parquet"
    sign(str(corpus), "--id-field", "id", "-o", str(store))
    return corpus, store, lines


def kept_lines(lines: list[bytes], dropped: set[str]) -> bytes:
    """The lines that do not hold a dropped record, as they were."""
    def record_id(line: bytes) -> str | None:
        try:
            return json.loads(line.removeprefix(b"\xef\xbb\xbf"))["id"]
        except ValueError:
            return None
    return b"".join(line for line in lines if record_id(line) not in dropped)


def test_jsonl_kept_lines_are_byte_identical_and_in_order(jsonl_corpus: tuple[Path, Path, list[bytes]]) -> None:
    corpus, store, lines = jsonl_corpus
    before = corpus.read_bytes()
    out = corpus.parent / "out.jsonl"
    _, stderr = ok("filter", str(corpus), "-o", str(out), "-s", str(store), "--threshold", "0.5")
    dropped = dropped_by_find(store, "--threshold", "0.5")
    assert dropped == {"b", "d", "f"}
    assert out.read_bytes() == kept_lines(lines, dropped)
    assert corpus.read_bytes() == before  # inputs are never modified
    assert "8 records from 1 input" in stderr and "5 kept, 3 dropped from 2 groups, 0 changed" in stderr


@pytest.mark.parametrize("keep", [*KEEP_CHOICES, "field"])
def test_every_keep_policy_drops_what_find_members_drops(jsonl_corpus: tuple[Path, Path, list[bytes]],
                                                         keep: str) -> None:
    corpus, store, lines = jsonl_corpus
    policy = ["--keep-field", "score"] if keep == "field" else ["--keep", keep]
    out = corpus.parent / "out.jsonl"
    ok("filter", str(corpus), "-o", str(out), "-s", str(store), "-q", *policy)
    dropped = dropped_by_find(store, *policy)
    assert len(dropped) == 3
    assert out.read_bytes() == kept_lines(lines, dropped)
    if keep == "field":
        assert dropped == {"a", "c", "f"}  # b (0.5) and d (3) have scores; a, f have none


def test_removed_lists_each_dropped_document(jsonl_corpus: tuple[Path, Path, list[bytes]]) -> None:
    corpus, store, _ = jsonl_corpus
    tmp = corpus.parent
    ok("filter", str(corpus), "-o", str(tmp / "o.jsonl"), "-s", str(store), "--verify", "all", "-q",
       "--removed", str(tmp / "removed.jsonl"))
    removed = [json.loads(line) for line in (tmp / "removed.jsonl").read_text().splitlines()]
    assert [(r["id"], r["group"], r["representative"]) for r in removed] == [("b", 1, "a"), ("f", 1, "a"),
                                                                              ("d", 2, "c")]
    assert all(r["verified"] and 0.8 < r["similarity"] < 1 for r in removed)
    ok("filter", str(corpus), "-o", str(tmp / "o.jsonl"), "-s", str(store), "--verify", "none", "-q",
       "--removed", str(tmp / "removed.tsv"))
    rows = list(csv.DictReader((tmp / "removed.tsv").open(), delimiter="\t"))
    assert rows[0].keys() == {"id", "group", "representative", "similarity", "verified"}
    assert [row["verified"] for row in rows] == ["False"] * 3
    ok("filter", str(corpus), "-o", str(tmp / "o.jsonl"), "-s", str(store), "-q", "--removed",
       str(tmp / "removed.out"), "--removed-format", "parquet")
    assert pq.read_table(tmp / "removed.out").column("id").to_pylist() == ["b", "f", "d"]


def test_annotate_keeps_every_line_and_adds_the_fields(jsonl_corpus: tuple[Path, Path, list[bytes]]) -> None:
    corpus, store, lines = jsonl_corpus
    out = corpus.parent / "out.jsonl"
    ok("filter", str(corpus), "-o", str(out), "-s", str(store), "--annotate", "-q")
    written = out.read_bytes().split(b"\n")
    assert len(written) == len(b"".join(lines).split(b"\n"))
    assert written[0].startswith(b"\xef\xbb\xbf") and written[0].endswith(b"\r")  # BOM and CRLF kept
    assert written[3] == b"" and written[5] == b"{not json"
    records = {}
    for line in written:
        try:
            record = json.loads(line.removeprefix(b"\xef\xbb\xbf"))
        except ValueError:
            continue
        records[record["id"]] = record
        original = next(r for r in RECORDS if r["id"] == record["id"])
        assert list(record)[: len(original)] == list(original)  # fields untouched and in order
    assert {i: (r["dedup_group"], r["dedup_keep"], r["dedup_representative"]) for i, r in records.items()} == {
        "a": (1, True, "a"), "b": (1, False, "a"), "f": (1, False, "a"), "c": (2, True, "c"),
        "d": (2, False, "c"), "e": (None, True, None), "g": (None, True, None)}
    assert b'"score":0.5  , "dedup_group"' not in written[1]  # the fields go inside the object
    assert written[1].endswith(b', "dedup_group": 1, "dedup_keep": false, "dedup_representative": "a"}  ')


def test_a_changed_document_is_kept_and_reported(jsonl_corpus: tuple[Path, Path, list[bytes]]) -> None:
    corpus, store, lines = jsonl_corpus
    members = corpus.parent / "members.jsonl"
    ok("find", str(store), "--output", "members", "-q", "-o", str(members))  # written before the change
    changed = [line.replace(b"t0w0 ", b"edited ") if b'"id": "f"' in line else line for line in lines]
    assert changed != lines
    corpus.write_bytes(b"".join(changed))
    out = corpus.parent / "out.jsonl"
    # find sees that f no longer holds the text it signed: f is left out of its group, so kept, and named.
    code, _, stderr = run("filter", str(corpus), "-o", str(out), "-s", str(store))
    assert code == 0
    assert out.read_bytes() == kept_lines(changed, {"b", "d"})
    assert "gone or changed since it was signed" in stderr and "e.g. f)" in stderr
    # A members file written before the change still says drop f: the record is kept all the same, and said so.
    code, _, stderr = run("filter", str(corpus), "-o", str(out), "-s", str(store), "--members", str(members))
    assert code == 0
    assert out.read_bytes() == kept_lines(changed, {"b", "d"})
    assert "kept " in stderr and "(id 'f'): it changed since it was signed" in stderr
    assert "1 changed since signing and kept" in stderr


def test_members_file_in_every_format_gives_the_same_output(jsonl_corpus: tuple[Path, Path, list[bytes]]) -> None:
    corpus, store, _ = jsonl_corpus
    tmp = corpus.parent
    ok("filter", str(corpus), "-o", str(tmp / "expected.jsonl"), "-s", str(store), "--keep", "longest", "-q")
    for fmt, extra in (("jsonl", []), ("tsv", []), ("csv", ["--no-header"]), ("parquet", [])):
        members = tmp / f"members.{fmt}"
        ok("find", str(store), "--keep", "longest", "--output", "members", "--format", fmt, "-o", str(members), *extra)
        out = tmp / f"out-{fmt}.jsonl"
        ok("filter", str(corpus), "-o", str(out), "-s", str(store), "--members", str(members), "-q")
        assert out.read_bytes() == (tmp / "expected.jsonl").read_bytes(), fmt
    code, _, stderr = run("filter", str(corpus), "-o", str(tmp / "x.jsonl"), "-s", str(store), "--members",
                          str(tmp / "members.tsv"), "--threshold", "0.9")
    assert code == 2 and "--members FILE says what to drop, so --threshold does not apply" in stderr


def test_members_naming_documents_the_store_lacks_is_refused(jsonl_corpus: tuple[Path, Path, list[bytes]]) -> None:
    corpus, store, _ = jsonl_corpus
    members = corpus.parent / "m.tsv"
    members.write_text("id\tgroup\taction\tgroup_size\trepresentative\nzz\t1\tdrop\t2\ta\na\t1\tkeep\t2\ta\n")
    code, _, stderr = run("filter", str(corpus), "-o", str(corpus.parent / "o.jsonl"), "-s", str(store),
                          "--members", str(members))
    assert code == 1 and "names documents to drop that" in stderr and "(e.g. zz)" in stderr
    members.write_text("id\tgroup\taction\trepresentative\na\tone\tdrop\tb\n")
    code, _, stderr = run("filter", str(corpus), "-o", str(corpus.parent / "o.jsonl"), "-s", str(store),
                          "--members", str(members))
    assert code == 1 and "is not a members file (row 2: group 'one' is not a number)" in stderr
    assert not (corpus.parent / "o.jsonl").exists()


# --- formats -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".gz", ".bz2", ".xz", ".zst"])
def test_compressed_input_gives_output_compressed_the_same_way(tmp_path: Path, suffix: str) -> None:
    lines = jsonl_lines()
    raw = b"".join(lines)
    packed = {".gz": lambda b: gzip.compress(b, mtime=0), ".bz2": bz2.compress, ".xz": lzma.compress,
              ".zst": lambda b: pa.compress(b, "zstd", asbytes=True)}
    corpus = tmp_path / f"c.jsonl{suffix}"
    corpus.write_bytes(packed[suffix](raw) if suffix != ".zst" else _zstd_frame(raw))
    store = tmp_path / "s.parquet"
    sign(str(corpus), "--id-field", "id", "-o", str(store))
    out = tmp_path / f"out.jsonl{suffix}"
    ok("filter", str(corpus), "-o", str(out), "-s", str(store), "-q")
    opener = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}
    if suffix == ".zst":
        with pa.CompressedInputStream(str(out), "zstd") as stream:
            written = stream.read()
    else:
        with opener[suffix](out, "rb") as stream:
            written = stream.read()
    assert written == kept_lines(lines, dropped_by_find(store))


def _zstd_frame(data: bytes) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.CompressedOutputStream(sink, "zstd") as stream:
        stream.write(data)
    return sink.getvalue().to_pybytes()


def test_parquet_rows_filtered_with_the_same_schema_and_codec(tmp_path: Path) -> None:
    texts = [text(0), text(5), text(0, 1), None, text(5, 2), text(6)]
    table = pa.table({"n": list(range(6)), "text": texts, "tags": [["x"], [], None, ["y"], ["z"], []]},
                     metadata={b"owner": b"me"})
    corpus = tmp_path / "c.parquet"
    pq.write_table(table, corpus, compression="snappy", row_group_size=2)
    store = tmp_path / "s.parquet"
    sign(str(corpus), "-o", str(store))
    out = tmp_path / "out.parquet"
    ok("filter", str(corpus), "-o", str(out), "-s", str(store), "-q")
    written = pq.read_table(out)
    assert written.schema.equals(pq.read_schema(corpus), check_metadata=True)
    assert written.schema.metadata[b"owner"] == b"me"
    assert written.column("n").to_pylist() == [0, 1, 3, 5]  # rows 2 and 4 dropped; the null text row kept
    assert pq.ParquetFile(out).metadata.row_group(0).column(0).compression == "SNAPPY"
    ok("filter", str(corpus), "-o", str(out), "-s", str(store), "-q", "--annotate")
    annotated = pq.read_table(out)
    assert annotated.column_names == ["n", "text", "tags", "dedup_group", "dedup_keep", "dedup_representative"]
    assert annotated.column("dedup_keep").to_pylist() == [True, True, False, True, False, True]
    assert annotated.column("dedup_representative").to_pylist()[:3] == ["c.parquet:0", "c.parquet:1", "c.parquet:0"]


def test_parquet_with_an_id_column(tmp_path: Path) -> None:
    table = pa.table({"key": [10, 20, 30], "body": [text(0), text(0, 4), text(1)]})
    corpus = tmp_path / "c.parquet"
    pq.write_table(table, corpus)
    store = tmp_path / "s.parquet"
    sign(str(corpus), "--id-column", "key", "--text-column", "body", "-o", str(store))
    out = tmp_path / "out.parquet"
    ok("filter", str(corpus), "-o", str(out), "-s", str(store), "-q")  # the reading options come from the store
    assert pq.read_table(out).column("key").to_pylist() == [10, 30]


def test_lines_format_and_stdin(tmp_path: Path) -> None:
    data = (text(0) + "\n" + text(1) + "\n\n" + text(0, 2) + "\n").encode()
    store = tmp_path / "s.parquet"
    ok("sign", "-", "--input-format", "lines", "-o", str(store), "-k", "64", "-q", stdin=data)
    stdout, stderr = ok("filter", "-", "-o", "-", "-s", str(store), stdin=data)
    assert stdout.encode() == (text(0) + "\n" + text(1) + "\n\n").encode()
    assert "into stdout" in stderr
    out = tmp_path / "out.txt"
    ok("filter", "-", "-o", str(out), "-s", str(store), "-q", stdin=data)
    assert out.read_text() == stdout


def test_integer_sets_are_filtered_like_lines(tmp_path: Path) -> None:
    lines = ["a\t" + " ".join(map(str, range(0, 200))), '{"id": "b", "elements": ' + str(list(range(1, 200))) + "}",
             "c\t" + " ".join(map(str, range(500, 700))), "a\t1 2 3"]  # a repeated id: skipped, as sign skipped it
    corpus = tmp_path / "sets.tsv"
    corpus.write_text("\n".join(lines) + "\n")
    store = tmp_path / "s.parquet"
    sign(str(corpus), "--input-format", "sets", "--universe", "1000", "-o", str(store))
    out = tmp_path / "out.tsv"
    ok("filter", str(corpus), "-o", str(out), "-s", str(store), "-q")  # reads the store's options: sets, D
    assert out.read_text() == "\n".join([lines[0], lines[2]]) + "\n"


def test_directory_of_files_becomes_the_same_tree_of_hard_links(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    (corpus / "sub").mkdir(parents=True)
    (corpus / "a.txt").write_text(text(0))
    (corpus / "sub" / "b.txt").write_text(text(0, 1))
    (corpus / "c.txt").write_text(text(1))
    (corpus / "sub" / "d.jsonl").write_text(json.dumps({"text": text(2)}) + "\n" + json.dumps({"text": text(2, 1)})
                                            + "\n")
    (corpus / "image.bin").write_bytes(b"\x89PNG\x00binary")
    store = tmp_path / "s.parquet"
    sign(str(corpus), "-o", str(store))
    (corpus / "late.txt").write_text("added after signing")
    out = tmp_path / "clean"
    _, stderr = ok("filter", str(corpus), "-o", str(out), "-s", str(store))
    found = sorted(str(path.relative_to(out)) for path in out.rglob("*") if path.is_file())
    assert found == [".dedup-filter.json", "a.txt", "c.txt", "image.bin", "late.txt", "sub/d.jsonl"]
    assert os.stat(out / "a.txt").st_ino == os.stat(corpus / "a.txt").st_ino  # a hard link
    assert (out / "sub" / "d.jsonl").read_text() == json.dumps({"text": text(2)}) + "\n"
    assert "copied " in stderr and "late.txt unread: the store holds none of its documents" in stderr
    assert "2 files not in the store copied" in stderr  # image.bin (binary, skipped by sign) and late.txt
    # A second run replaces the directory it wrote; a directory it did not write is refused.
    (corpus / "c.txt").write_text(text(1, 3))
    ok("filter", str(corpus), "-o", str(out), "-s", str(store), "-q")
    assert sorted(path.name for path in tmp_path.iterdir() if path.name.startswith(".clean")) == []
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "mine.txt").write_text("keep me")
    code, _, stderr = run("filter", str(corpus), "-o", str(foreign), "-s", str(store))
    assert code == 1 and "refusing to overwrite" in stderr and "dedup filter did not write" in stderr
    assert (foreign / "mine.txt").read_text() == "keep me"


def test_whole_files_are_never_touched_nor_dropped_when_annotating(tmp_path: Path) -> None:
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "a.txt").write_text(text(0))
    (corpus / "b.txt").write_text(text(0, 1))
    (corpus / "r.jsonl").write_text(json.dumps({"text": text(3)}) + "\n")
    os.utime(corpus / "a.txt", ns=(10**18, 10**18))
    store = tmp_path / "s.parquet"
    sign(str(corpus), "-o", str(store))
    ok("filter", str(corpus / "a.txt"), "-o", str(tmp_path / "a.out"), "-s", str(store), "-q")
    assert (tmp_path / "a.out").read_text() == text(0)
    assert os.stat(corpus / "a.txt").st_mtime_ns == 10**18
    ok("filter", str(corpus / "b.txt"), "-o", str(tmp_path / "b.out"), "-s", str(store), "-q")
    assert (tmp_path / "b.out").read_bytes() == b""  # dropped: the output is empty, but complete
    _, stderr = ok("filter", str(corpus), "-o", str(tmp_path / "all"), "-s", str(store), "--annotate")
    assert sorted(p.name for p in (tmp_path / "all").iterdir()) == [".dedup-filter.json", "a.txt", "b.txt", "r.jsonl"]
    assert "3 kept, 1 marked dedup_keep false (annotated, kept) from 1 group" in stderr


def test_several_inputs_mirror_their_common_directory(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "y").mkdir()
    (tmp_path / "x" / "one.jsonl").write_text(json.dumps({"text": text(0)}) + "\n")
    (tmp_path / "y" / "two.jsonl").write_text(json.dumps({"text": text(0, 1)}) + "\n" + json.dumps({"text": text(4)})
                                              + "\n")
    store = tmp_path / "s.parquet"
    sign(str(tmp_path / "x"), str(tmp_path / "y"), "-o", str(store))
    listing = tmp_path / "list.txt"
    listing.write_text(f"{tmp_path / 'x' / 'one.jsonl'}\n{tmp_path / 'y' / 'two.jsonl'}\n")
    for args in ([str(tmp_path / "x" / "one.jsonl"), str(tmp_path / "y")], ["--files-from", str(listing)]):
        out = tmp_path / "out"
        ok("filter", *args, "-o", str(out), "-s", str(store), "-q")
        assert (out / "x" / "one.jsonl").read_text() == json.dumps({"text": text(0)}) + "\n"
        assert (out / "y" / "two.jsonl").read_text() == json.dumps({"text": text(4)}) + "\n"


# --- against a reference ------------------------------------------------------------------------------------


def test_against_removes_contamination_and_never_writes_the_reference(tmp_path: Path) -> None:
    train = tmp_path / "train.jsonl"
    test = tmp_path / "test.jsonl"
    train.write_text("".join(json.dumps({"id": f"tr{i}", "text": t}) + "\n" for i, t in
                             enumerate([text(0), text(1), text(1, 1), text(2), text(3, 2)])))
    test.write_text("".join(json.dumps({"id": f"te{i}", "text": t}) + "\n" for i, t in
                            enumerate([text(0, 5), text(3), text(9)])))
    sign(str(train), "--id-field", "id", "-o", str(tmp_path / "train.parquet"))
    sign(str(test), "--id-field", "id", "-o", str(tmp_path / "test.parquet"))
    before = test.read_bytes()
    out = tmp_path / "clean.jsonl"
    ok("filter", str(train), "-s", str(tmp_path / "train.parquet"), "--against", str(tmp_path / "test.parquet"),
       "--only-across", "-o", str(out), "-q", "--removed", str(tmp_path / "r.jsonl"))
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == ["tr1", "tr2", "tr3"]
    removed = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert {(r["id"], r["representative"], r["representative_store"]) for r in removed} == {
        ("tr0", "te0", "reference"), ("tr4", "te1", "reference")}
    assert test.read_bytes() == before
    # Without --only-across, duplicates inside the new store go too.
    ok("filter", str(train), "-s", str(tmp_path / "train.parquet"), "--against", str(tmp_path / "test.parquet"),
       "-o", str(out), "-q")
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == ["tr1", "tr3"]
    code, _, stderr = run("filter", str(test), "-s", str(tmp_path / "train.parquet"), "-o", str(out))
    assert code == 1 and f"input {test} was never signed into {tmp_path / 'train.parquet'}" in stderr


# --- reading options recorded by sign ------------------------------------------------------------------------


def test_filter_reads_inputs_as_sign_did_and_older_stores_still_work(tmp_path: Path) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"url": u, "body": t}) + "\n" for u, t in
                              [("u1", text(0)), ("u2", text(0, 1)), ("u3", text(1))]))
    store = tmp_path / "s.parquet"
    sign(str(corpus), "--id-field", "url", "--text-field", "body", "-o", str(store))
    out = tmp_path / "o.jsonl"
    ok("filter", str(corpus), "-o", str(out), "-s", str(store), "-q")
    assert [json.loads(line)["url"] for line in out.read_text().splitlines()] == ["u1", "u3"]
    # A store from before the reading options were recorded: they must be given, as for sign.
    manifest = store / "_dedup_manifest.json"
    document = json.loads(manifest.read_text())
    del document["inputs"]
    manifest.write_text(json.dumps(document))
    _, stderr = ok("filter", str(corpus), "-o", str(out), "-s", str(store))
    assert "3 kept" in stderr and "2 documents to drop are in none of these inputs" not in stderr
    assert "no \"body\"" not in stderr
    ok("filter", str(corpus), "-o", str(out), "-s", str(store), "--id-field", "url", "--text-field", "body", "-q")
    assert [json.loads(line)["url"] for line in out.read_text().splitlines()] == ["u1", "u3"]


def test_one_command_signs_and_filters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DEDUP_STORE", raising=False)
    Path("crawl.jsonl").write_text("".join(json.dumps({"url": u, "text": t}) + "\n" for u, t in
                                           [("u1", text(0)), ("u2", text(0, 1)), ("u3", text(1))]))
    _, stderr = ok("filter", "crawl.jsonl", "--sign", "--id-field", "url", "-o", "clean.jsonl")
    assert Path("dedup.parquet").is_dir() and "signed 3 documents (3 new" in stderr
    assert [json.loads(line)["url"] for line in Path("clean.jsonl").read_text().splitlines()] == ["u1", "u3"]
    _, stderr = ok("filter", "crawl.jsonl", "--sign", "--id-field", "url", "-o", "clean.jsonl")
    assert "signed 0 documents (0 new, 0 changed, 3 unchanged" in stderr and "2 kept, 1 dropped" in stderr
    code, _, stderr = run("filter", "-", "--sign", "-o", "x.txt", stdin=b"text")
    assert code == 2 and "--sign cannot read stdin twice" in stderr


def test_a_repeated_record_is_written_once_and_named_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """sign skips a record whose id an earlier one had, and so does filter: the first is written, the others are
    named as sign names them (once, though both sign and filter met them) and counted."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DEDUP_STORE", raising=False)
    records = [("u1", text(0)), ("u1", text(0)), ("u3", text(1)), ("u1", text(0))]
    Path("crawl.jsonl").write_text("".join(json.dumps({"url": u, "text": t}) + "\n" for u, t in records))
    _, stderr = ok("filter", "crawl.jsonl", "--sign", "--id-field", "url", "-o", "clean.jsonl")
    lines = Path("crawl.jsonl").read_text().splitlines(keepends=True)
    assert Path("clean.jsonl").read_text() == lines[0] + lines[2]
    where = tmp_path / "crawl.jsonl"
    assert stderr.count(f"skipped {where}:2: id 'u1' was already read") == 1
    assert stderr.count(f"skipped {where}:4: id 'u1' was already read") == 1
    assert ("2 kept, 0 dropped from 0 groups, 0 changed since signing and kept, 2 with an id already read skipped"
            in stderr)


def test_a_repeated_id_with_other_text_is_a_repeat_not_a_change(tmp_path: Path) -> None:
    """u2 is a near-duplicate of u1 and dropped; a later record repeating the id u2 with another text is the same
    id read again (skipped, as sign skipped it), not u2 changed since it was signed."""
    corpus = tmp_path / "c.jsonl"
    records = [("u1", text(0)), ("u2", text(0, 1)), ("u3", text(1)), ("u2", text(2))]
    corpus.write_text("".join(json.dumps({"url": u, "text": t}) + "\n" for u, t in records))
    store = tmp_path / "s.parquet"
    sign(str(corpus), "--id-field", "url", "-o", str(store))
    out = tmp_path / "o.jsonl"
    _, stderr = ok("filter", str(corpus), "-o", str(out), "-s", str(store))
    assert [json.loads(line)["url"] for line in out.read_text().splitlines()] == ["u1", "u3"]
    assert "changed since it was signed" not in stderr
    assert f"skipped {corpus}:4: id 'u2' was already read" in stderr
    assert "2 kept, 1 dropped from 1 group, 0 changed since signing and kept, 1 with an id already read" in stderr
    ok("filter", str(corpus), "-o", str(out), "-s", str(store), "--annotate", "-q")
    assert [(r["url"], r["dedup_keep"]) for r in map(json.loads, out.read_text().splitlines())] == [
        ("u1", True), ("u2", False), ("u3", True), ("u2", False)]


def test_a_repeated_id_in_a_parquet_column_is_written_once(tmp_path: Path) -> None:
    corpus = tmp_path / "c.parquet"
    pq.write_table(pa.table({"key": ["k1", "k2", "k1"], "text": [text(0), text(1), text(0)]}), corpus)
    store = tmp_path / "s.parquet"
    sign(str(corpus), "--id-column", "key", "-o", str(store))
    out = tmp_path / "o.parquet"
    _, stderr = ok("filter", str(corpus), "-o", str(out), "-s", str(store))
    assert pq.read_table(out).column("key").to_pylist() == ["k1", "k2"]
    assert f"skipped {corpus} row 2: id 'k1' was already read" in stderr


def test_filter_sign_says_what_sign_skipped(tmp_path: Path) -> None:
    """filter --sign warns of the records sign skipped as sign warns of them (the filtering pass keeps what is not
    a document, and would say nothing); -v lists them all and the kernel sign used."""
    corpus = tmp_path / "c.jsonl"
    lines = [json.dumps({"id": "a", "text": text(0)}), "{broken", json.dumps({"id": "b"})]
    lines += [json.dumps({"id": f"x{i}", "body": "no text field"}) for i in range(20)]
    corpus.write_text("\n".join(lines) + "\n")
    store, out = tmp_path / "s.parquet", tmp_path / "o.jsonl"
    _, stderr = ok("filter", str(corpus), "--sign", "--id-field", "id", "-s", str(store), "-o", str(out))
    assert f"warning: skipped {corpus}:2: invalid JSON" in stderr
    assert f'warning: skipped {corpus}:3: no "text" field' in stderr
    assert "(-v lists them all)" in stderr
    _, verbose = ok("filter", str(corpus), "--sign", "--id-field", "id", "-s", str(store), "-o", str(out), "-v")
    assert f'warning: skipped {corpus}:23: no "text" field' in verbose and "kernel: " in verbose
    assert out.read_text() == corpus.read_text()


def test_api_returns_the_report_and_names_parameters(jsonl_corpus: tuple[Path, Path, list[bytes]]) -> None:
    corpus, store, _ = jsonl_corpus
    report = dedup.filter([str(corpus)], corpus.parent / "o.jsonl", store,
                          dedup.FilterOptions(find=dedup.FindOptions(keep="longest")))
    assert (report.records, report.kept, report.dropped, report.groups) == (8, 5, 3, 2)  # a malformed line is kept
    assert report.removed is not None and sorted(report.removed.ids) == ["b", "d", "f"]
    assert np.all(np.isfinite(report.removed.similarity))
    with pytest.raises(dedup.OptionError, match="members FILE says what to drop, so keep does not apply"):
        dedup.FilterOptions(members="m.tsv", find=dedup.FindOptions(keep="longest"))


# --- refusals ------------------------------------------------------------------------------------------------


def test_outputs_that_would_harm_something_are_refused(jsonl_corpus: tuple[Path, Path, list[bytes]]) -> None:
    corpus, store, _ = jsonl_corpus
    tmp = corpus.parent
    (tmp / "d").mkdir()
    (tmp / "d" / "c.jsonl").write_bytes(corpus.read_bytes())
    cases = [
        ([str(corpus), "-o", str(corpus)], 2, "is, or holds, the input"),
        ([str(tmp / "d"), "-o", str(tmp / "d" / "inside")], 2, "lies inside the input"),
        ([str(corpus), "-o", str(store)], 2, "is the store"),
        ([str(corpus), "-o", str(tmp)], 2, "is, or holds, the input"),
        ([str(corpus), "-o", str(tmp / "d")], 1, "refusing to overwrite"),
        ([str(corpus), str(corpus), "-o", "-"], 2, "-o - (stdout) takes the output of one input file"),
        ([str(tmp / "nope.jsonl"), "-o", str(tmp / "o")], 1, "does not exist"),
        ([str(corpus), "-o", str(tmp / "o"), "--members", str(tmp / "none.tsv")], 1, "does not exist"),
        ([str(corpus), "-o", str(tmp / "o"), "--bits", "17"], 2, "--bits 17 exceeds the 16 bits stored"),
    ]
    for args, code, text_ in cases:
        got, _, stderr = run("filter", *args, "-s", str(store))
        assert (got, stderr.count("\n")) == (code, 1), (args, stderr)
        assert text_ in stderr, (args, stderr)
    assert not (tmp / "o").exists() and not (tmp / "d" / "inside").exists()
    plain = tmp / "plain.txt"
    plain.write_text(text(0))
    sign(str(plain), "-o", str(tmp / "p.parquet"))
    code, _, stderr = run("filter", str(plain), "-o", str(tmp / "o.txt"), "-s", str(tmp / "p.parquet"), "--annotate")
    assert code == 2
    assert "--annotate adds fields to JSON Lines, JSON array, CSV and TSV records and Parquet rows" in stderr
