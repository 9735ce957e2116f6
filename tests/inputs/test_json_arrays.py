"""A JSON file holding an array of records is read as records, as JSON Lines is: ids ``FILE:N`` (or the id field),
texts from the text field, locations re-read by verification and ``--keep-field``, elements that are not records
skipped and named; a ``.json`` file that holds no array stays one text document; stdin that is an array is read
as one."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path
from typing import Any

import pytest

from dedup_cli.inputs.fields import field_values
from dedup_cli.inputs.json_arrays import Damage, Element, array_elements, array_text, starts_an_array, text_bytes
from dedup_cli.inputs.reading import read_inputs
from dedup_cli.inputs.records import Document
from dedup_cli.inputs.report import ReadReport
from dedup_cli.inputs.reread import reread_documents
from dedup_cli.options.input_options import InputOptions


def read(inputs: list[Any], stdin: bytes = b"", **options: Any) -> tuple[list[Document], ReadReport]:
    report = ReadReport()
    documents = list(read_inputs([str(i) for i in inputs], InputOptions(**options), report,
                                 stdin=io.BytesIO(stdin)))
    return documents, report  # type: ignore[return-value]


def spans(data: bytes) -> list[tuple[int, str] | tuple[int, int, str]]:
    text = array_text(data)
    return [(item.number, text[item.start:item.end]) if isinstance(item, Element) else
            (item.number, item.start, item.reason) for item in array_elements(text)]


def test_elements_are_found_with_their_spans_and_the_place_an_array_stops_parsing() -> None:
    assert spans(b'\xef\xbb\xbf [ {"a": [1, "]"]} ,\n 2,"x" ]\n') == [(1, '{"a": [1, "]"]}'), (2, "2"), (3, '"x"')]
    assert spans(b"[]") == [] and spans(b" [ \n ] \n") == []
    assert spans(b'[{"a": 1}, {"b": "cut') == [(1, '{"a": 1}'), (2, 11, "invalid JSON (Unterminated string starting "
                                                                          "at: character 18 of the file)")]
    assert spans(b'[1 2]') == [(1, "1"), (2, 3, "expected ',' or ']' after element 1")]
    assert spans(b'[1] [2]') == [(1, "1"), (2, 4, "text after the end of the array")]
    assert spans(b'[1,]')[-1][0] == 2 and isinstance(list(array_elements("[1,]"))[-1], Damage)
    assert starts_an_array(b"\xef\xbb\xbf\n\t[") and not starts_an_array(b'{"a": 1}') and not starts_an_array(b"")
    assert spans(b'{"a": 1}') == [(1, 0, "not a JSON array (it does not start with '[')")]
    raw = b'["caf\xe9", "\xff"]'  # not UTF-8: every byte is kept for writing back
    assert text_bytes(array_text(raw)) == raw


def test_an_array_of_objects_is_read_as_records(tmp_path: Path) -> None:
    records = [{"id": f"r{n}", "text": f"record number {n} of the array", "score": n} for n in range(3)]
    (tmp_path / "a.json").write_text(json.dumps(records, indent=2))
    documents, report = read([tmp_path / "a.json"])
    assert [(d.id, d.text) for d in documents] == [(f"a.json:{n + 1}", r["text"]) for n, r in enumerate(records)]
    assert [d.path for d in documents] == [f"{tmp_path / 'a.json'}#json={n}&field=text" for n in (1, 2, 3)]
    assert report.documents == 3 and report.skipped == 0 and report.formats == {"json": 1}
    documents, _ = read([tmp_path / "a.json"], id_field="id")
    assert [d.id for d in documents] == ["r0", "r1", "r2"]
    # Verification and --keep-field re-read them; a changed element is no longer the one signed.
    locations = [d.path for d in documents]
    hashes = [d.content_hash for d in documents]
    assert reread_documents(locations, hashes) == [r["text"] for r in records]
    values, problems = field_values(locations, hashes, "score")
    assert values.tolist() == [0.0, 1.0, 2.0] and problems == []
    records[1]["text"] = "another text now"
    (tmp_path / "a.json").write_text(json.dumps(records))
    assert reread_documents(locations, hashes) == [records[0]["text"], None, records[2]["text"]]


def test_elements_that_are_not_records_are_skipped_and_named(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    path.write_text(json.dumps([{"text": "a good record here"}, {"body": "x"}, 3, {"text": 4}]))
    documents, report = read([path])
    assert [d.id for d in documents] == ["b.json:1"]
    assert report.malformed == [
        (f"{path} element 2", 'no "text" field; name the text field with --text-field'),
        (f"{path} element 3", "expected a JSON object, found a number"),
        (f"{path} element 4", '"text" is a number, not a string')]
    path.write_text('[{"text": "before the damage"}, {"text": "cut sho')
    documents, report = read([path])
    assert [d.text for d in documents] == ["before the damage"]
    assert report.malformed[0][0] == f"{path} element 2"
    assert report.malformed[0][1].endswith("; the rest of the array is not read")
    documents, report = read([path], max_document_bytes=10)
    assert documents == [] and report.oversized == [(f"{path} element 1", 29)]


def test_a_json_file_without_an_array_is_one_text_document_unless_json_is_named(tmp_path: Path) -> None:
    (tmp_path / "c.json").write_text('{"text": "an object, as it always was"}')
    documents, report = read([tmp_path / "c.json"])
    assert [(d.id, d.path) for d in documents] == [("c.json", str(tmp_path / "c.json"))]
    assert documents[0].text == '{"text": "an object, as it always was"}' and report.skipped == 0
    documents, report = read([tmp_path / "c.json"], input_format="json")
    assert documents == [] and report.malformed[0][0] == str(tmp_path / "c.json")
    assert report.wholly_skipped == [str(tmp_path / "c.json")]


def test_compressed_arrays_and_stdin(tmp_path: Path) -> None:
    data = json.dumps([{"text": "one compressed record"}, {"text": "and a second"}]).encode()
    (tmp_path / "d.json.gz").write_bytes(gzip.compress(data))
    documents, _ = read([tmp_path / "d.json.gz"])
    assert [d.id for d in documents] == ["d.json.gz:1", "d.json.gz:2"]
    assert reread_documents([d.path for d in documents]) == ["one compressed record", "and a second"]
    for stdin in (data, gzip.compress(data)):
        documents, _ = read(["-"], stdin=stdin)
        assert [(d.id, d.path) for d in documents] == [("-:1", "-#json=1&field=text"), ("-:2", "-#json=2&field=text")]
    documents, _ = read(["-"], stdin=b"[Verse 1] a song that starts with a bracket")
    assert [(d.id, d.text) for d in documents] == [("-", "[Verse 1] a song that starts with a bracket")]
    documents, _ = read(["-"], stdin=b'[{"text": "a record"}, {"text": "cut')  # not one array: a text
    assert [d.id for d in documents] == ["-"]
    documents, _ = read(["-"], stdin=data, input_format="json", id_field="text")
    assert [d.id for d in documents] == ["one compressed record", "and a second"]


@pytest.mark.parametrize("content", [b"[]", b"[\n]\n"])
def test_an_empty_array_holds_no_record(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "e.json").write_bytes(content)
    documents, report = read([tmp_path / "e.json"])
    assert documents == [] and report.records_by_input == {str(tmp_path / "e.json"): [0, 0]}
