"""Re-reading documents from their recorded locations, each file once, for exact checks.

A document is read again with the same decoding as when it was signed; one that is gone (stdin, a missing file or
object, a line that is gone), no longer decodes as it did, or whose content hash changed is None rather than
guessed. A document that is there but cannot be read now (an I/O error, permission denied, a server that still
fails after the retries of :mod:`dedup_cli.objectstore.objects`) is no change: it stops the run with one line naming
it, since deciding its pairs by their estimate would give another answer than a run that could read it.
"""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from typing import Any

import pyarrow.parquet as pq

from dedup_cli.atomic_files import open_input
from dedup_cli.errors import InputError
from dedup_cli.inputs.byte_streams import READ_ERRORS, Prefixed, compression, iter_lines, open_decompressed, read_capped
from dedup_cli.inputs.decoding import clean, decode, json_record, record_fields, whole_text
from dedup_cli.inputs.delimited import TABLE_FORMATS, reread_records
from dedup_cli.inputs.json_arrays import array_values
from dedup_cli.inputs.locations import STDIN, display_name, parse_location
from dedup_cli.inputs.parquet_inputs import column_values
from dedup_cli.inputs.records import text_hash
from dedup_cli.inputs.remote import fetch_documents


def reread_lines(path: str, numbers: set[int], field_name: str | None) -> dict[int, str]:
    """Texts of lines ``numbers`` of ``path``, one pass; a line that is blank or no longer a record is absent."""
    found: dict[int, str] = {}
    last = max(numbers)
    with open_decompressed(path, compression(path)) as (stream, _, _):
        reader = io.BufferedReader(Prefixed(b"", stream), buffer_size=1 << 16)
        for number, line, _ in iter_lines(reader, None):
            if number in numbers and line is not None:
                text, _ = decode(line)
                if field_name is None:
                    found[number] = text
                else:
                    try:
                        found[number] = clean(json_record(text, None, field_name)[1])[0]
                    except ValueError:
                        pass
            if number >= last:
                break
    return found


def reread_elements(path: str, numbers: set[int], field_name: str) -> dict[int, str]:
    """Texts of elements ``numbers`` of the JSON array file ``path``; an element that is no longer a record is
    absent."""
    found: dict[int, str] = {}
    for number, value in array_values(path, numbers).items():
        try:
            found[number] = clean(record_fields(value, None, field_name)[1])[0]
        except ValueError:
            pass
    return found


def reread_cells(path: str, numbers: set[int], columns: Sequence[str]) -> dict[int, list[Any]]:
    """The values of ``columns`` in rows ``numbers`` (from 0) of the Parquet file ``path``, strings as bytes;
    only the row groups holding those rows are read."""
    found: dict[int, list[Any]] = {}
    with open_input(path) as handle:
        parquet = pq.ParquetFile(handle)
        for column in columns:
            if column not in parquet.schema_arrow.names:
                raise InputError(f"{display_name(path)} has no column {column!r}")
        start = 0
        for group in range(parquet.metadata.num_row_groups):
            size = parquet.metadata.row_group(group).num_rows
            wanted = sorted(n - start for n in numbers if start <= n < start + size)
            if wanted:
                table = parquet.read_row_group(group, columns=list(dict.fromkeys(columns)))
                values = [column_values(table.column(column)) for column in columns]
                for offset in wanted:
                    found[start + offset] = [cells[offset] for cells in values]
            start += size
    return found


def reread_rows(path: str, numbers: set[int], column: str) -> dict[int, str]:
    """Texts of rows ``numbers`` (from 0) of column ``column`` of the Parquet file ``path``."""
    cells = reread_cells(path, numbers, [column])
    return {number: decode(row[0])[0] for number, row in cells.items() if row[0] is not None}


GONE_ERRORS = (FileNotFoundError, NotADirectoryError)
"""What opening a document that no longer exists raises (a missing object is a ``FileNotFoundError`` too)."""


def is_change(error: BaseException) -> bool:
    """Whether a failure to re-read says the document is no longer what was signed (gone, or bytes that no longer
    decode: a truncated or corrupt compressed file, a Parquet file that is no longer one) rather than that it cannot
    be read now.

    Errors of the operating system and of object storage carry an ``errno`` (``EIO``, ``EACCES``, ``EISDIR``…:
    the document may well be intact); a decoder's complaints (``EOFError``, ``zlib.error``, ``gzip.BadGzipFile``,
    Arrow's ``ArrowInvalid``) do not.
    """
    if isinstance(error, GONE_ERRORS):
        return True
    return not (isinstance(error, OSError) and error.errno is not None)


def unreadable(path: str, error: BaseException, purpose: str = "for the exact checks") -> InputError:
    """The one-line error of a document that is there but cannot be read now."""
    reason = getattr(error, "strerror", None) or " ".join(str(error).split()) or type(error).__name__
    return InputError(f"cannot re-read {display_name(path)} {purpose}: {reason}")


class DocumentGone(InputError):
    """A file to re-read is gone or no longer what was signed (stdin, a missing file or object, bytes that no longer
    decode, a Parquet column that is gone): its documents keep their estimates, with a warning."""


def reread_group(path: str, kind: str, name: str | None, numbers: set[int],
                 fetched: tuple[bytes, object] | OSError | None = None) -> dict[int, str]:
    """The texts of documents ``numbers`` of one file (``{0: text}`` for a whole file), by number.

    Raises:
        DocumentGone: the file is gone, was stdin, or no longer decodes as it did.
        InputError: the file is there but cannot be read now (:func:`is_change` is false).
    """
    if path == STDIN:
        raise DocumentGone("the document was read from stdin and cannot be re-read; sign files to verify exactly")
    try:
        if isinstance(fetched, OSError):
            raise fetched
        if fetched is not None:  # an object fetched with the others
            return {0: whole_text(fetched[0])[0]}
        if kind == "file":
            with open_decompressed(path, compression(path)) as (stream, _, _):
                raw = read_capped(stream, b"", None)
            assert raw is not None
            return {0: whole_text(raw)[0]}
        if kind == "line":
            return reread_lines(path, numbers, name)
        if kind == "json":
            return reread_elements(path, numbers, name or "")
        if kind in TABLE_FORMATS:
            with open_decompressed(path, compression(path)) as (stream, _, _):
                records = reread_records(stream, kind, numbers, [name or ""])
            return {number: values[0] for number, values in records.items() if values[0] is not None}
        return reread_rows(path, numbers, name or "")
    except DocumentGone:
        raise
    except (InputError, ValueError) as error:  # a Parquet file without the column any more, a CSV header broken
        raise DocumentGone(str(error)) from error
    except READ_ERRORS as error:
        if not is_change(error):
            raise unreadable(path, error) from error
        reason = getattr(error, "strerror", None) or " ".join(str(error).split())
        raise DocumentGone(f"cannot read {display_name(path)}: {reason}") from error


def file_identity(location: str) -> tuple[int, int] | None:
    """(device, inode) of the file a whole-file location names, or None (a record, stdin, a file not found, or
    no location: a document signed from memory)."""
    if not location:
        return None
    where = parse_location(location)
    if where.kind != "file" or where.path == STDIN:
        return None
    try:
        status = os.stat(where.path)
    except OSError:
        return None
    return status.st_dev, status.st_ino


def reread_documents(locations: Sequence[str], content_hashes: Sequence[int] | None = None) -> list[str | None]:
    """The texts at ``locations`` (``Document.path`` values), reading each file once; None where one is gone.

    With ``content_hashes`` (``Document.content_hash``, aligned with ``locations``) a text that changed since
    it was read is None too. Stdin documents are always None.

    Raises:
        InputError: a document is there but cannot be read now (one line naming it).
    """
    return [text for text, _ in reread_each(locations, content_hashes)]


def reread_each(locations: Sequence[str], content_hashes: Sequence[int] | None = None,
                keep_going: bool = False) -> list[tuple[str | None, str | None]]:
    """(text, None) for each document of ``locations`` read again as :func:`reread_documents` reads it, or
    (None, why not): gone, changed since it was signed (``content_hashes``), read from stdin, signed from memory
    (no location), or, with ``keep_going``, there but unreadable now (else that raises :class:`InputError`).

    Each file is read once, whatever the number of its documents asked for.
    """
    parsed = [parse_location(location) if location else None for location in locations]
    groups: dict[tuple[str, str, str | None], set[int]] = {}
    for where in parsed:
        if where is not None:
            groups.setdefault((where.path, where.kind, where.name), set()).add(where.number)
    texts: dict[tuple[str, str, str | None], dict[int, str]] = {}
    failed: dict[tuple[str, str, str | None], str] = {}
    # Whole objects in object storage are fetched together: one GET each, many in flight.
    fetched = fetch_documents([path for path, kind, _ in groups if kind == "file" and compression(path) is None])
    for key, numbers in groups.items():
        try:
            texts[key] = reread_group(*key, numbers, fetched.get(key[0]) if key[1] == "file" else None)
        except DocumentGone as error:
            gone = ("read from stdin when it was signed: nothing can read it again" if key[0] == STDIN
                    else f"gone since it was signed ({error})")
            texts[key], failed[key] = {}, gone
        except InputError as error:
            if not keep_going:
                raise
            texts[key], failed[key] = {}, str(error)
    result: list[tuple[str | None, str | None]] = []
    for index, where in enumerate(parsed):
        if where is None:
            result.append((None, "signed from memory: no location to read it from"))
            continue
        key = (where.path, where.kind, where.name)
        text = texts[key].get(where.number)
        if text is None:
            result.append((None, failed.get(key) or f"gone: {display_name(where.path)} no longer holds it"))
        elif content_hashes is not None and text_hash(text) != int(content_hashes[index]):
            result.append((None, "changed since it was signed: its text is not the one grouped"))
        else:
            result.append((text, None))
    return result
