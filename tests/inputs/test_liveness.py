"""Which stored documents are gone: a stat per file, a re-read only of documents whose file changed since."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from dedup_cli.inputs.liveness import gone_documents
from dedup_cli.inputs.locations import record_location
from dedup_cli.inputs.records import text_hash


def test_a_missing_file_is_gone_and_an_unchanged_one_is_not_read(tmp_path: Path) -> None:
    """The recorded modification time is trusted: a file that still has it is live without being read (here its
    bytes differ, which only a read would see), a missing one is gone without a read."""
    kept, missing = tmp_path / "kept.txt", tmp_path / "missing.txt"
    kept.write_text("other text than was signed")
    recorded = os.stat(kept).st_mtime_ns
    gone = gone_documents([str(kept), str(missing)], np.array([recorded, recorded]),
                          np.array([text_hash("signed text"), text_hash("signed text")], np.uint64))
    assert gone.tolist() == [False, True]


def test_documents_of_a_changed_file_are_gone_unless_their_text_is_still_there(tmp_path: Path) -> None:
    corpus = tmp_path / "d.jsonl"
    texts = ["first record", "second record", "third record"]
    corpus.write_text("".join(json.dumps({"text": text}) + "\n" for text in texts[1:]))  # the first line deleted
    locations = [record_location(str(corpus), "line", number, "text") for number in (1, 2, 3)]
    hashes = np.array([text_hash(text) for text in texts], np.uint64)
    gone = gone_documents(locations, np.zeros(3, np.int64), hashes)  # recorded before the file changed
    assert gone.tolist() == [True, True, True]  # line 1 and 2 hold other records now, line 3 is past the end
    moved = [record_location(str(corpus), "line", number, "text") for number in (1, 2)]
    assert gone_documents(moved, np.zeros(2, np.int64), hashes[1:]).tolist() == [False, False]


def test_a_whole_file_touched_but_not_changed_is_live(tmp_path: Path) -> None:
    document = tmp_path / "a.txt"
    document.write_text("the same text")
    assert gone_documents([str(document)], np.array([1], np.int64),
                          np.array([text_hash("the same text")], np.uint64)).tolist() == [False]


def test_what_cannot_be_looked_at_counts_as_live(tmp_path: Path) -> None:
    """Stdin, a document signed from memory, a directory where a file was, and a FIFO (which only the reader that
    opens it first can read: opening it here would block, or take its bytes from that reader)."""
    unreadable = tmp_path / "folder"
    unreadable.mkdir()
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    locations = ["-#line=1", "", str(unreadable), record_location(str(fifo), "line", 1, "text")]
    gone = gone_documents(locations, np.zeros(4, np.int64), np.zeros(4, np.uint64))
    assert gone.tolist() == [False, False, False, False]
