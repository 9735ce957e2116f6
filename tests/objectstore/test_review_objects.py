"""``review`` of a corpus in object storage: the shown texts are read again from their objects (one per document,
or one JSON Lines object), and the page itself may be written to an ``s3://`` URL, whole or not at all."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import REPO, bible_jsonl, review_data

import dedup_cli as dedup
from dedup_cli.options.input_options import InputOptions

pytest.importorskip("s3fs", reason="object storage needs the s3 extra: pip install 'dedup-cli[s3]'")

BIBLE = REPO / "sample_corpora" / "bible-editions"


def _upload(local: Path, url: str, pattern: str) -> None:
    from dedup_cli.objectstore import objects

    fs = objects.client(url)
    for path in sorted(local.rglob(pattern)):
        fs.pipe_file(f"{url.removeprefix('s3://')}/{path.relative_to(local).as_posix()}", path.read_bytes())


@pytest.mark.parametrize("kind", ["files", "jsonl"])
def test_texts_are_read_from_objects_and_the_page_written_to_one(bucket: str, tmp_path: Path, kind: str) -> None:
    corpus = f"{bucket}/corpus"
    if kind == "files":
        _upload(BIBLE, corpus, "*.txt")
        reading = InputOptions()
    else:
        bible_jsonl(tmp_path / "bible.jsonl")
        _upload(tmp_path, corpus, "bible.jsonl")
        reading = InputOptions(id_field="id")
    store = tmp_path / "sigs"
    dedup.sign([corpus], store, dedup.SignOptions(input=reading))
    page = f"{bucket}/pages/review.html"
    report = dedup.review(store, page, dedup.ReviewOptions(dedup.FindOptions(threshold=0.5, bits=2), members=3))
    assert report.unread == 0 and report.shown == 9
    from dedup_cli.objectstore import objects

    data = review_data(objects.client(page).cat_file(page.removeprefix("s3://")).decode("utf-8"))
    group = next(group for group in data["groups"] if group["kept"] == "AKJV/jonah-01.txt")
    assert group["members"][0]["view"]["text"] == (BIBLE / "AKJV" / "jonah-01.txt").read_text("utf-8")
    assert all(member["view"]["kind"] in ("diff", "same-bytes") for member in group["members"][1:])
