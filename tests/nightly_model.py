"""A model of a corpus edited night after night, and the exact truth about it, for the nightly-store simulation.

The corpus is one folder of every input format dedup reads with record ids (``--id-field id``): plain-text files
in ``docs/`` (one document each, named by its path), JSON Lines, gzipped JSON Lines, CSV, TSV and Parquet files of
``{id, text}`` records. Each night applies seeded random edits of every kind a user makes between two runs: a text
edited; a file renamed; a record or file deleted; a record inserted above others; a file's records reordered; a
record moved to another file; an id reused for other text; a record delivered again in another file; exact and
near copies added; a file rewritten with the same size and modification time; a new file.

The truth is computed here, independently of dedup: the live documents are the distinct ids the files hold (a
record delivered twice is one document), and the exact resemblance of two texts is the Jaccard index of their sets
of word 5-shingles, computed in plain Python. Texts are drawn from families with vocabularies of their own, so two
texts of different families share no shingle, and only pairs inside a family need computing.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import random
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

SHINGLE = 5
RECORD_FILES = {"a.jsonl": "jsonl", "b.jsonl": "jsonl", "c.jsonl.gz": "jsonl.gz", "d.csv": "csv", "e.tsv": "tsv",
                "f.parquet": "parquet"}
EDITS = ("edit", "rename", "delete", "insert_above", "reorder", "move", "reuse_id", "redeliver", "exact_copy",
         "near_copy", "same_size_and_time", "new_file")


def shingles(text: str) -> frozenset[tuple[str, ...]]:
    """The word 5-shingles of ``text`` (a text of fewer words is one shingle, itself), as dedup defines them for
    texts of lowercase ASCII words separated by single spaces."""
    words = text.split()
    if len(words) < SHINGLE:
        return frozenset([tuple(words)]) if words else frozenset()
    return frozenset(tuple(words[i:i + SHINGLE]) for i in range(len(words) - SHINGLE + 1))


def jaccard(a: str, b: str) -> float:
    first, second = shingles(a), shingles(b)
    union = len(first | second)
    return len(first & second) / union if union else 0.0


@dataclass
class Record:
    id: str
    text: str
    family: int


@dataclass
class Corpus:
    """The corpus as the model knows it: each file's records in order (a text file holds one), and which files
    were changed since they were last written to disk."""

    root: Path
    rng: random.Random
    files: dict[str, list[Record]] = field(default_factory=dict)  # name (relative to root) → records, in order
    dirty: set[str] = field(default_factory=set)
    removed: set[str] = field(default_factory=set)
    families: int = 0
    ids: int = 0
    retired: list[str] = field(default_factory=list)  # ids no file holds any more, which may come back
    same_size_and_time: int = 0  # files rewritten so: only sign --checksum sees them

    # --- texts -----------------------------------------------------------------------------------------------

    def family_text(self, family: int, words: int | None = None) -> str:
        count = words if words is not None else self.rng.randint(25, 70)
        return " ".join(f"f{family}w{self.rng.randrange(400)}" for _ in range(count))

    def new_text(self) -> tuple[str, int]:
        self.families += 1
        return self.family_text(self.families), self.families

    def variant(self, record: Record) -> str:
        """A near copy of a record's text: a few of its words replaced, inserted or removed, in its family."""
        words = record.text.split()
        for _ in range(self.rng.choice((1, 1, 2, 3, 5, 8))):
            place = self.rng.randrange(len(words))
            kind = self.rng.random()
            if kind < 0.6:
                words[place] = f"f{record.family}w{self.rng.randrange(400)}"
            elif kind < 0.8 or len(words) < 20:
                words.insert(place, f"f{record.family}w{self.rng.randrange(400)}")
            else:
                del words[place]
        return " ".join(words)

    def new_id(self) -> str:
        self.ids += 1
        return f"r{self.ids}"

    # --- the files ---------------------------------------------------------------------------------------------

    def build(self, documents: int) -> None:
        """A first corpus of about ``documents`` documents: a tenth as text files, the rest records."""
        for name in RECORD_FILES:
            self.files[name] = []
        for _ in range(documents):
            text, family = self.new_text()
            base = self.add(Record(self.new_id(), text, family))
            if self.rng.random() < 0.35:  # a near-duplicate family: copies and variants
                for _ in range(self.rng.randint(1, 3)):
                    copy = self.variant(base) if self.rng.random() < 0.8 else base.text
                    self.add(Record(self.new_id(), copy, family))

    def add(self, record: Record, name: str | None = None) -> Record:
        """Add ``record`` at a random place of a record file, or (one in ten) as a new text file; the record as
        added (a text file's id is its path)."""
        if name is None and self.rng.random() < 0.1:
            name = f"docs/{record.id}.txt"
            record = Record(name, record.text, record.family)  # a text file's id is its path
            self.files[name] = [record]
        else:
            name = name or self.rng.choice(self.record_files())
            records = self.files[name]
            records.insert(self.rng.randint(0, len(records)), record)
        self.dirty.add(name)
        return record

    def record_files(self) -> list[str]:
        return sorted(name for name in self.files if not name.startswith("docs/"))

    def text_files(self) -> list[str]:
        return sorted(name for name in self.files if name.startswith("docs/"))

    def all_records(self) -> list[tuple[str, int, Record]]:
        return [(name, place, record) for name in sorted(self.files) for place, record in
                enumerate(self.files[name])]

    def live(self) -> dict[str, Record]:
        """The live documents: each id the files hold, once (a record delivered twice has one text)."""
        found: dict[str, Record] = {}
        for _, _, record in self.all_records():
            found.setdefault(record.id, record)
        return found

    def write(self) -> None:
        """Write the changed files (the others keep their bytes and modification times) and delete removed ones."""
        for name in sorted(self.removed):
            (self.root / name).unlink(missing_ok=True)
        self.removed.clear()
        for name in sorted(self.dirty):
            if name not in self.files:
                continue
            path = self.root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(encoded(name, self.files[name]))
        self.dirty.clear()


def encoded(name: str, records: list[Record]) -> bytes:
    """The bytes of a file of ``records`` in the format its name says."""
    if name.startswith("docs/"):
        return records[0].text.encode()
    kind = RECORD_FILES.get(name) or RECORD_FILES[_template(name)]
    if kind in ("jsonl", "jsonl.gz"):
        data = "".join(json.dumps({"id": r.id, "text": r.text}) + "\n" for r in records).encode()
        return gzip.compress(data, mtime=0) if kind == "jsonl.gz" else data
    if kind in ("csv", "tsv"):
        buffer = io.StringIO()
        writer = csv.writer(buffer, delimiter="," if kind == "csv" else "\t", lineterminator="\n")
        writer.writerow(["id", "text"])
        writer.writerows([r.id, r.text] for r in records)
        return buffer.getvalue().encode()
    sink = io.BytesIO()
    pq.write_table(pa.table({"id": [r.id for r in records], "text": [r.text for r in records]}), sink,
                   row_group_size=50)
    return sink.getvalue()


def _template(name: str) -> str:
    """The record file a renamed or new file takes its format from: ``x-b.jsonl`` → ``b.jsonl``."""
    return name.rsplit("-", 1)[-1]


# --- the edits of a night ---------------------------------------------------------------------------------------


def night(corpus: Corpus, edits: int, kinds: tuple[str, ...] = EDITS) -> list[str]:
    """Apply ``edits`` seeded random edits of ``kinds``; the corpus is then written. Returns what was done."""
    done = []
    for _ in range(edits):
        kind = corpus.rng.choice(kinds)
        if EDIT_FUNCTIONS[kind](corpus):
            done.append(kind)
    corpus.write()
    return done


def _pick(corpus: Corpus, records_only: bool = False) -> tuple[str, int, Record] | None:
    candidates = [entry for entry in corpus.all_records() if not records_only or not entry[0].startswith("docs/")]
    return corpus.rng.choice(candidates) if candidates else None


def _edit(corpus: Corpus) -> bool:
    picked = _pick(corpus)
    if picked is None:
        return False
    _, _, record = picked
    text = corpus.variant(record) if corpus.rng.random() < 0.7 else corpus.new_text()[0]
    # Every copy of the id takes the new text: one id, one text.
    for name, records in corpus.files.items():
        for place, other in enumerate(records):
            if other.id == record.id:
                records[place] = Record(other.id, text, other.family)
                corpus.dirty.add(name)
    return True


def _rename(corpus: Corpus) -> bool:
    names = sorted(corpus.files)
    name = corpus.rng.choice(names)
    records = corpus.files.pop(name)
    corpus.removed.add(name)
    corpus.dirty.discard(name)
    if name.startswith("docs/"):
        new = f"docs/renamed-{corpus.new_id()}.txt"
        records = [Record(new, records[0].text, records[0].family)]
        corpus.retired.append(name)
    else:
        new = f"x{corpus.new_id()}-{_template(name)}"
    corpus.files[new] = records
    corpus.dirty.add(new)
    return True


def _delete(corpus: Corpus) -> bool:
    picked = _pick(corpus)
    if picked is None:
        return False
    name, place, record = picked
    if name.startswith("docs/"):
        del corpus.files[name]
        corpus.removed.add(name)
        corpus.dirty.discard(name)
    else:
        del corpus.files[name][place]
        corpus.dirty.add(name)
    if record.id not in corpus.live():
        corpus.retired.append(record.id)
    return True


def _insert_above(corpus: Corpus) -> bool:
    name = corpus.rng.choice(corpus.record_files())
    text, family = corpus.new_text()
    corpus.files[name].insert(0, Record(corpus.new_id(), text, family))
    corpus.dirty.add(name)
    return True


def _reorder(corpus: Corpus) -> bool:
    name = corpus.rng.choice(corpus.record_files())
    corpus.rng.shuffle(corpus.files[name])
    corpus.dirty.add(name)
    return True


def _move(corpus: Corpus) -> bool:
    picked = _pick(corpus, records_only=True)
    if picked is None:
        return False
    name, place, record = picked
    target = corpus.rng.choice([other for other in corpus.record_files() if other != name] or [name])
    del corpus.files[name][place]
    corpus.files[target].insert(corpus.rng.randint(0, len(corpus.files[target])), record)
    corpus.dirty |= {name, target}
    return True


def _reuse_id(corpus: Corpus) -> bool:
    live = corpus.live()
    reusable = [identifier for identifier in corpus.retired if identifier not in live and identifier.startswith("r")]
    if not reusable:
        return False
    identifier = corpus.rng.choice(reusable)
    corpus.retired.remove(identifier)
    text, family = corpus.new_text()
    corpus.add(Record(identifier, text, family), corpus.rng.choice(corpus.record_files()))
    return True


def _redeliver(corpus: Corpus) -> bool:
    picked = _pick(corpus, records_only=True)
    if picked is None:
        return False
    name, _, record = picked
    others = [other for other in corpus.record_files() if other != name]
    if not others:
        return False
    corpus.add(Record(record.id, record.text, record.family), corpus.rng.choice(others))
    return True


def _copy(corpus: Corpus, near: bool) -> bool:
    picked = _pick(corpus)
    if picked is None:
        return False
    _, _, record = picked
    corpus.add(Record(corpus.new_id(), corpus.variant(record) if near else record.text, record.family))
    return True


def _same_size_and_time(corpus: Corpus) -> bool:
    """A text file rewritten with another text of the same length, its modification time put back (``cp -p``,
    ``tar x``): only a sign that hashes unchanged-looking files sees it."""
    names = [name for name in corpus.text_files() if name not in corpus.dirty and (corpus.root / name).exists()]
    if not names:
        return False
    name = corpus.rng.choice(names)
    old = corpus.files[name][0]
    length = len(old.text)
    text, family = corpus.new_text()
    text = (text * (length // max(len(text), 1) + 2))[:length].rstrip()
    text = text + "x" * (length - len(text))
    path = corpus.root / name
    status = path.stat()
    path.write_text(text)
    os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns))
    corpus.files[name] = [Record(old.id, text, family)]
    corpus.same_size_and_time += 1
    return True


def _new_file(corpus: Corpus) -> bool:
    template = corpus.rng.choice(sorted(RECORD_FILES))
    name = f"n{corpus.new_id()}-{template}"
    corpus.files[name] = []
    for _ in range(corpus.rng.randint(1, 4)):
        text, family = corpus.new_text()
        corpus.files[name].append(Record(corpus.new_id(), text, family))
    corpus.dirty.add(name)
    return True


EDIT_FUNCTIONS = {
    "edit": _edit, "rename": _rename, "delete": _delete, "insert_above": _insert_above, "reorder": _reorder,
    "move": _move, "reuse_id": _reuse_id, "redeliver": _redeliver, "exact_copy": lambda c: _copy(c, False),
    "near_copy": lambda c: _copy(c, True), "same_size_and_time": _same_size_and_time, "new_file": _new_file,
}


# --- the truth ----------------------------------------------------------------------------------------------


def true_pairs(live: dict[str, Record], threshold: float) -> set[tuple[str, str]]:
    """The pairs of live documents (ids, ordered) whose exact resemblance is ≥ ``threshold``."""
    families: dict[int, list[Record]] = {}
    for record in live.values():
        families.setdefault(record.family, []).append(record)
    pairs = set()
    for members in families.values():
        for i, a in enumerate(members):
            for b in members[i + 1:]:
                if jaccard(a.text, b.text) >= threshold:
                    pairs.add((min(a.id, b.id), max(a.id, b.id)))
    return pairs


def read_output(folder: Path) -> list[Record]:
    """The records ``filter`` wrote into ``folder``, in any format: (id, text) each, family unknown (-1)."""
    found = []
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or path.name.startswith("."):
            continue
        name = path.relative_to(folder).as_posix()
        if name.startswith("docs/"):
            found.append(Record(name, path.read_text(), -1))
            continue
        data = path.read_bytes()
        if name.endswith(".gz"):
            data = gzip.decompress(data)
        if ".jsonl" in name:
            found += [Record(r["id"], r["text"], -1) for r in map(json.loads, data.decode().splitlines()) if r]
        elif name.endswith((".csv", ".tsv")):
            rows = list(csv.reader(io.StringIO(data.decode()), delimiter="," if name.endswith(".csv") else "\t"))
            found += [Record(row[0], row[1], -1) for row in rows[1:]]
        elif name.endswith(".parquet"):
            table = pq.read_table(path)
            found += [Record(i, t, -1) for i, t in zip(table["id"].to_pylist(), table["text"].to_pylist(), strict=True)]
    return found
