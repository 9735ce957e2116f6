"""Reading a truth file for ``eval --truth``: pairs of document ids with their exact resemblance.

CSV or TSV with a header row, or JSON Lines, holding the fields ``id_a``, ``id_b`` and ``resemblance`` (``jaccard``
is read as the same thing, which is what ``bench/make_corpus.py`` writes in its ``truth.tsv``); other fields are
ignored. The format comes from the name (``.tsv``, ``.csv``, ``.jsonl``/``.ndjson``), else from the first line.
The file is parsed by Arrow in one pass, and ids are looked up in the store all at once.
"""

from __future__ import annotations

import contextlib
import io
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.json as pa_json

from dedup_cli.atomic_files import open_input, path_kind, rereadable
from dedup_cli.errors import InputError

ID_FIELDS = ("id_a", "id_b")
RESEMBLANCE_FIELDS = ("resemblance", "jaccard")


@dataclass(frozen=True)
class Truth:
    """The pairs a truth file lists, as rows of a store (first < second), with their exact resemblance."""

    path: str
    first: np.ndarray  # int64[m]
    second: np.ndarray  # int64[m]
    resemblance: np.ndarray  # float64[m]
    ignored: int  # listed pairs naming a document the store does not hold, or one document twice

    @property
    def floor(self) -> float:
        """The lowest resemblance listed: below it, the file cannot say which pairs are true ones."""
        return float(self.resemblance.min()) if self.resemblance.size else 0.0


def _kind(path: Path, source: str | io.BytesIO) -> str:
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix in (".tsv", ".csv"):
        return suffix[1:]
    if isinstance(source, str):
        with open_input(source) as handle:
            first = handle.readline().decode("utf-8", "replace")
    else:
        first = source.readline().decode("utf-8", "replace")
        source.seek(0)
    return "jsonl" if first.lstrip().startswith("{") else "tsv" if "\t" in first else "csv"


def _first_value(source: str | io.BytesIO) -> tuple[int, int]:
    """(line, byte) where the first JSON value of ``source`` starts, after JSON white space; (line, -1) if none."""
    line = 1
    with open_input(source) if isinstance(source, str) else contextlib.nullcontext(source) as handle:
        while block := handle.read(1 << 16):
            stripped = block.lstrip(b" \t\r\n")
            line += block.count(b"\n", 0, len(block) - len(stripped))
            if stripped:
                break
        else:
            stripped = b""
    if isinstance(source, io.BytesIO):
        source.seek(0)
    return line, stripped[0] if stripped else -1


def _table(path: Path, source: str | io.BytesIO, kind: str) -> pa.Table:
    if kind == "jsonl":
        # Arrow reads only lines that are objects, and its parser crashes the process on a first value ``null``
        # (pyarrow 26 and earlier at least): anything but an object first is refused here.
        line, first = _first_value(source)
        if first not in (-1, ord("{")):
            raise InputError(f"{path}:{line}: not a JSON object; every line needs id_a, id_b and a resemblance "
                             "in [0, 1]")
        return pa_json.read_json(source)
    parsing = pa_csv.ParseOptions(delimiter="\t" if kind == "tsv" else ",")
    converting = pa_csv.ConvertOptions(column_types={name: pa.string() for name in ID_FIELDS})
    return pa_csv.read_csv(source, parse_options=parsing, convert_options=converting)


def read_truth(path: str | os.PathLike[str], ids: list[str]) -> Truth:
    """The pairs listed in the truth file ``path``, as rows of a store whose ids (ascending) are ``ids``.

    Raises:
        InputError: the file is missing or unreadable, lacks a field, or holds an id or resemblance that is missing,
            or a resemblance outside [0, 1] (naming the line).
    """
    where = Path(path)
    kind = path_kind(where)
    if kind in (None, "directory"):
        problem = "does not exist" if kind is None else "is a directory"
        raise InputError(f"truth file {where} {problem}; give a CSV, TSV or JSON Lines file of id_a, id_b, "
                         "resemblance")
    try:
        source = rereadable(where)  # a pipe is read whole: the format is sniffed from its first line
        form = _kind(where, source)
        table = _table(where, source, form)
    except (pa.ArrowException, OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else " ".join(str(error).split())
        raise InputError(f"cannot read truth file {where}: {reason}") from error
    names = table.column_names
    value_field = next((name for name in RESEMBLANCE_FIELDS if name in names), None)
    missing = [name for name in ID_FIELDS if name not in names] + ([] if value_field else ["resemblance"])
    if missing:
        raise InputError(f"truth file {where} has no field {missing[0]!r} (its fields: {', '.join(names)}); it needs "
                         "id_a, id_b and resemblance")
    header = 0 if form == "jsonl" else 1  # the line number of a row is its index + 1 + header
    try:
        columns = [table.column(name).cast(pa.string()) for name in ID_FIELDS]
        resemblance = table.column(value_field).cast(pa.float64())
    except pa.ArrowException as error:
        raise InputError(f"truth file {where}: {' '.join(str(error).split())}") from error
    values = resemblance.to_numpy(zero_copy_only=False).astype(np.float64)
    bad = np.flatnonzero(~((values >= 0.0) & (values <= 1.0)))  # NaN (a missing value) fails too
    nulls = [np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False)) for column in columns]
    for wrong, what in ((nulls[0], "no id_a"), (nulls[1], "no id_b"), (bad, f"a {value_field} outside [0, 1]")):
        if wrong.size:
            raise InputError(f"{where}:{int(wrong[0]) + 1 + header}: {what}; every line needs id_a, id_b and a "
                             "resemblance in [0, 1]")
    known = pa.array(ids, pa.string())
    rows = [pc.fill_null(pc.index_in(column, value_set=known), -1).to_numpy(zero_copy_only=False).astype(np.int64)
            for column in columns]
    usable = (rows[0] >= 0) & (rows[1] >= 0) & (rows[0] != rows[1])
    first, second = np.minimum(rows[0], rows[1])[usable], np.maximum(rows[0], rows[1])[usable]
    return Truth(str(where), first, second, values[usable], int(np.count_nonzero(~usable)))
