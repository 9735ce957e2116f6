r"""Writing ``find``'s records in each ``--format``: JSON Lines, TSV and CSV with a header row, or one Parquet table.

Groups in TSV/CSV become one row per member (JSON Lines and Parquet keep the member list in one record).
pyarrow is imported only when Parquet is written.

CSV (RFC 4180, rows ending in ``\n``): a field holding a comma, a double quote, ``\r`` or ``\n`` is quoted, its
quotes doubled, so every CSV parser reads the same rows. (``csv.writer`` with ``lineterminator="\n"`` would leave
a field with a lone ``\r`` unquoted, which parsers take for the end of a row; and Python 3.10's refuses a NUL
character in a field, which an id may hold: so the rows are written here, the bytes Python 3.11's ``csv.writer``
writes with ``lineterminator="\r\n"``, ``\n`` at the end.)

TSV, as PostgreSQL's text format writes it: one row a line, fields split on tabs, never quoted; a backslash, tab,
line feed or carriage return inside a field is written ``\\``, ``\t``, ``\n``, ``\r``
(:func:`~dedup_cli.inputs.decoding.tsv_field`), so ``cut -f1`` and ``awk -F'\t'`` see every row whole, and
:func:`~dedup_cli.inputs.decoding.tsv_unescape` gives the field back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TextIO

from dedup_cli.engine.stages.results import FIELDS
from dedup_cli.inputs.decoding import tsv_field


def csv_field(field: str) -> str:
    """A CSV field as RFC 4180 writes it: quoted, its quotes doubled, when it holds a comma, a quote, ``\r`` or
    ``\n``; else as it is."""
    if "," in field or '"' in field or "\r" in field or "\n" in field:
        return '"' + field.replace('"', '""') + '"'
    return field


def _strings(row: Sequence[Any]) -> list[str]:
    """A row's fields as text, as ``csv.writer`` takes them: None empty, a number as ``str`` writes it."""
    return ["" if value is None else value if isinstance(value, str) else str(value) for value in row]


class RowWriter:
    """``csv.writer``'s ``writerow``/``writerows`` for rows of one line each: the fields joined by
    :attr:`separator`, each through :meth:`field` when the row holds a separator within a field or a character of
    :attr:`needs`. Nearly every row needs neither: one scan of the joined row tells, rather than a call per field."""

    separator: str
    needs: re.Pattern[str]
    lone_empty_field = ""  # a row of one empty field

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def field(self, value: str) -> str:
        raise NotImplementedError

    def writerow(self, row: Sequence[Any]) -> None:
        fields = _strings(row)
        line = self.separator.join(fields)
        if self.needs.search(line) or line.count(self.separator) >= len(fields):
            line = self.separator.join(map(self.field, fields))
        elif line == "" and len(fields) == 1:
            line = self.lone_empty_field
        self._stream.write(line + "\n")

    def writerows(self, rows: Iterable[Sequence[Any]]) -> None:
        for row in rows:
            self.writerow(row)


class CsvWriter(RowWriter):
    """CSV rows (:func:`csv_field`)."""

    separator = ","
    needs = re.compile('["\r\n]')
    lone_empty_field = '""'  # quoted, or the row would be an empty line

    def field(self, value: str) -> str:
        return csv_field(value)


class TsvWriter(RowWriter):
    """TSV rows (:func:`tsv_field`)."""

    separator = "\t"
    needs = re.compile(r"[\\\r\n]")

    def field(self, value: str) -> str:
        return tsv_field(value)


def write_records(records: Iterator[dict[str, Any]], kind: str, fmt: str, stream: TextIO, header: bool = True,
                  fields: Sequence[str] | None = None) -> int:
    """Write records in ``fmt``; groups in TSV/CSV become one row per member. Returns rows written.

    ``fields``: the TSV/CSV columns (default: those of ``kind``; groups with a ``stores`` list add ``store``).
    """
    if fmt == "jsonl":
        count = 0
        for record in records:
            stream.write(json.dumps(record, ensure_ascii=False) + "\n")
            count += 1
        return count
    fields = FIELDS[kind] if fields is None else fields
    writer: RowWriter = TsvWriter(stream) if fmt == "tsv" else CsvWriter(stream)
    if header:
        writer.writerow(fields)
    count = 0
    for record in records:
        if kind == "groups":
            stores = record.get("stores") or [None] * len(record["members"])
            rows = [[record["group"], record["size"], member, *([store] if store else [])]
                    for member, store in zip(record["members"], stores, strict=True)]
        else:
            rows = [["" if record[name] is None else record[name] for name in fields]]
        writer.writerows(rows)
        count += len(rows)
    return count


def write_records_parquet(records: Iterable[dict[str, Any]], fields: Sequence[str], destination: Any) -> int:
    """Write ``find`` records as one Parquet table to a path or a binary stream; returns the row count.

    ``fields`` fixes the column order (and the columns of an empty result, all strings then).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = list(records)
    if rows:
        table = pa.Table.from_pylist(rows).select(list(fields))
    else:
        table = pa.table({name: pa.array([], pa.string()) for name in fields})
    pq.write_table(table, destination, compression="zstd")
    return len(rows)
