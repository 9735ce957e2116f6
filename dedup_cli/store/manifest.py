"""The manifest, ``_dedup_manifest.json``: the whole state of a format 2 store, and the commit point.

It lists the live parts and removal files, every committed run, the parameters, the id root and the live-row
rule (docs/store-format.md). A run commits by replacing it atomically; files it does not list are garbage.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from dedup_cli.atomic_files import atomic_write, unlink_quietly
from dedup_cli.errors import StoreError
from dedup_cli.objectstore.urls import ObjectPath
from dedup_cli.options.checks import literal
from dedup_cli.params import SignatureParams
from dedup_cli.store.format import (
    FORMAT_VERSION,
    LIVE_ROW_RULE,
    LOCK_NAME,
    MANIFEST_NAME,
    PART_NAME,
    REMOVAL_NAME,
    TEMPORARY_NAME,
    one_line,
)
from dedup_cli.store.places import Folder
from dedup_cli.version import __version__


@dataclass(frozen=True)
class PartFile:
    """A live part: its file name in the store directory and its row count."""

    file: str
    rows: int
    compacted: bool = False  # written by a compaction or a replacing run, not counted as a delta
    run: int | None = None  # the run that wrote it (None in manifests from before it was recorded)


@dataclass(frozen=True)
class RemovalFile:
    """Ids removed by one run: a Parquet file with columns ``id`` and ``run``."""

    file: str
    rows: int
    run: int


@dataclass(frozen=True)
class RunRecord:
    """One committed sign run."""

    run: int
    time: str  # UTC, ISO 8601, e.g. 2024-05-01T03:00:00Z
    added: int  # ids not live before the run
    changed: int  # live ids written again
    removed: int  # live ids removed (and not written again)
    documents: int  # live documents after the run
    compacted: bool = False
    replaced: bool = False  # the run replaced every row (a whole-store rewrite)


# The input formats ``auto`` picks by a file's name: an explicit one of these reads such a file as ``auto`` does.
AUTO_FORMATS = frozenset({"auto", "text", "jsonl", "json", "csv", "tsv", "parquet"})


@dataclass(frozen=True)
class RunInput:
    """How one sign run read its inputs: the options that decide documents' ids and texts (``READING_OPTIONS``),
    so that ``filter`` can read the inputs again the same way."""

    run: int
    input_format: str = "auto"
    id_field: str | None = None
    text_field: str = "text"
    id_column: str | None = None
    text_column: str = "text"
    # Whether the run read records (JSON Lines, CSV, TSV, Parquet, stdin), whose ids the id field gives: a run of
    # plain-text files only names documents by their paths whatever the options say, and pins no id scheme.
    # Runs recorded before this was are taken to have read records.
    records: bool = True

    def reading(self) -> dict[str, str | None]:
        """The options, without the run."""
        return {name: value for name, value in vars(self).items() if name not in ("run", "records")}

    def id_scheme(self) -> tuple[str, str | None]:
        """How the run gave documents their ids: the input format and the id field or column (None: ids from file
        names and line or row numbers). A store keeps one scheme, as it keeps its hash parameters: an id given
        one way names nothing an id given another way names, so a run that differs would store every document
        twice."""
        return self.input_format, self.id_field if self.id_field is not None else self.id_column

    def gives_ids_as(self, other: RunInput) -> bool:
        """Whether this run names documents as ``other`` did: the same id field, and the same input format, where
        ``auto`` is the same as each format it tells by a file's name (``lines`` and ``sets`` it never picks)."""
        (own_format, own_id), (other_format, other_id) = self.id_scheme(), other.id_scheme()
        formats = {own_format, other_format}
        return own_id == other_id and (len(formats) == 1 or ("auto" in formats and formats <= AUTO_FORMATS))

    def id_options(self) -> str:
        """The id scheme as options, e.g. ``{input_format} jsonl, {id_field} 'url'`` (an error template)."""
        input_format, name = self.id_scheme()
        option = "{id_column}" if self.id_field is None and self.id_column is not None else "{id_field}"
        named = f"{option} {literal(repr(name))}" if name is not None else "no {id_field}"
        return f"{{input_format}} {input_format}, {named}"


@dataclass(frozen=True)
class Manifest:
    """What ``_dedup_manifest.json`` holds: the whole state of a format 2 store."""

    params: SignatureParams
    parts: tuple[PartFile, ...] = ()
    removals: tuple[RemovalFile, ...] = ()
    runs: tuple[RunRecord, ...] = ()
    next_file: int = 1  # file numbers are never reused by committed files
    documents: int = 0  # live documents
    id_root: str | None = None  # the directory file ids are relative to, fixed by the first run that named files
    inputs: tuple[RunInput, ...] = ()  # how each run read its inputs (none in stores from before they were recorded)
    writer: str | None = None  # in object storage: the token of the run that wrote this manifest (its fence)

    @property
    def rows(self) -> int:
        return sum(part.rows for part in self.parts)

    @property
    def last_run(self) -> int:
        return self.runs[-1].run if self.runs else 0

    def to_json(self) -> bytes:
        document = {
            "format_version": FORMAT_VERSION,
            "dedup_version": __version__,
            "params": self.params.to_dict(),
            "live_row_rule": LIVE_ROW_RULE,
            "id_root": self.id_root,
            "documents": self.documents,
            "next_file": self.next_file,
            "parts": [vars(part) for part in self.parts],
            "removals": [vars(removal) for removal in self.removals],
            "runs": [vars(run) for run in self.runs],
            "inputs": [vars(run_input) for run_input in self.inputs],
        }
        if self.writer is not None:
            document["writer"] = self.writer
        # One line per part, removal and run, so that the file stays readable and diffs stay small.
        lines = []
        for key, value in document.items():
            if isinstance(value, list) and value:
                items = ",\n".join(f"  {json.dumps(item)}" for item in value)
                lines.append(f' "{key}": [\n{items}\n ]')
            else:
                lines.append(f" {json.dumps(key)}: {json.dumps(value)}")
        return ("{\n" + ",\n".join(lines) + "\n}\n").encode()

    @classmethod
    def from_json(cls, path: Folder, data: bytes) -> Manifest:
        damaged = f"{path} has a damaged manifest ({MANIFEST_NAME}: {{}}); sign the corpus again into a new store"
        try:
            document = json.loads(data)
            version = int(document["format_version"])
        except (ValueError, KeyError, TypeError) as error:
            raise StoreError(damaged.format(one_line(error))) from error
        if version > FORMAT_VERSION:
            raise StoreError(
                f"{path} uses store format {version}, newer than this dedup ({__version__}) reads "
                f"(format {FORMAT_VERSION}); upgrade dedup"
            )
        try:
            if version != FORMAT_VERSION:
                raise ValueError(f"format_version {version} is not a directory store format")
            manifest = cls(
                params=SignatureParams.from_dict(document["params"]),
                parts=tuple(PartFile(str(p["file"]), int(p["rows"]), bool(p["compacted"]),
                                     None if p.get("run") is None else int(p["run"])) for p in document["parts"]),
                removals=tuple(
                    RemovalFile(str(r["file"]), int(r["rows"]), int(r["run"])) for r in document["removals"]
                ),
                runs=tuple(RunRecord(**run) for run in document["runs"]),
                next_file=int(document["next_file"]),
                documents=int(document["documents"]),
                id_root=None if document.get("id_root") is None else str(document["id_root"]),
                inputs=tuple(RunInput(**run_input) for run_input in document.get("inputs", ())),
                writer=None if document.get("writer") is None else str(document["writer"]),
            )
            for part in manifest.parts:
                if not PART_NAME.fullmatch(part.file) or part.rows < 0:
                    raise ValueError(f"bad part {part.file!r}")
            for removal in manifest.removals:
                if not REMOVAL_NAME.fullmatch(removal.file) or removal.rows < 0:
                    raise ValueError(f"bad removal file {removal.file!r}")
        except (ValueError, KeyError, TypeError) as error:
            raise StoreError(damaged.format(one_line(error))) from error
        return manifest


def read_manifest_version(path: Folder) -> tuple[bytes, str | None]:
    """The manifest's bytes and, in object storage, its version (the ETag a conditional commit names)."""
    try:
        if isinstance(path, ObjectPath):
            from dedup_cli.objectstore import objects

            return objects.read_versioned(str(path / MANIFEST_NAME))
        return (path / MANIFEST_NAME).read_bytes(), None
    except FileNotFoundError:
        raise StoreError(
            f"store {path} is a directory without a dedup manifest ({MANIFEST_NAME}); "
            "pass a store written by dedup sign"
        ) from None
    except OSError as error:
        if isinstance(path, ObjectPath):
            raise  # already one line naming the object: refused credentials, an endpoint out of reach
        raise StoreError(f"cannot read store {path}: {error.strerror or error}") from error


def write_manifest(path: Folder, manifest: Manifest, version: str | None = None) -> str | None:
    """The commit point. Locally: temporary file, fsync, atomic replace, fsync of the directory. In object
    storage: one conditional PUT, made only if the manifest is still at ``version`` (its ETag when this run read
    it; None: only if there is no manifest yet), so that of two runs that read one version only one commits.
    Returns the new version (None locally).

    Raises:
        dedup_cli.objectstore.objects.ConditionFailed: another run committed first (object storage).
    """
    if isinstance(path, ObjectPath):
        from dedup_cli.objectstore import objects

        return objects.put(str(path / MANIFEST_NAME), manifest.to_json(), if_none_match=version is None,
                           if_match=version)
    with atomic_write(path / MANIFEST_NAME, temporary=path / f".{MANIFEST_NAME}.tmp") as handle:
        handle.write(manifest.to_json())
    return None


def is_ours(name: str) -> bool:
    return (
        name in (MANIFEST_NAME, LOCK_NAME)
        or bool(PART_NAME.fullmatch(name) or REMOVAL_NAME.fullmatch(name) or TEMPORARY_NAME.fullmatch(name))
    )


def listed_files(manifest: Manifest | None) -> set[str]:
    return set() if manifest is None else {p.file for p in manifest.parts} | {r.file for r in manifest.removals}


def clean_garbage(path: Path, manifest: Manifest | None) -> list[str]:
    """Delete parts, removal files and temporary files that ``manifest`` does not list; under the lock (local
    stores; object storage: :func:`dedup_cli.store.leases.fence_and_clean`)."""
    listed = listed_files(manifest)
    deleted = []
    for name in sorted(os.listdir(path)):
        if name in listed or name in (MANIFEST_NAME, LOCK_NAME) or not is_ours(name):
            continue
        unlink_quietly(path / name)
        deleted.append(name)
    return deleted
