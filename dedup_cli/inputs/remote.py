"""Inputs in object storage: ``s3://bucket/crawl/`` walked like a directory, ``s3://bucket/x.jsonl.zst`` read
like a file.

A URL names an object (a file) or a prefix (a directory: every object whose key continues it after a ``/``).
Objects are found by listing, a thousand keys a request, and described by the listing (size, modification time),
so that planning a run opens nothing and an incremental run skips unchanged objects unread, as it skips unchanged
files. The rules are those of local directories: keys sorted, a key with a part starting with ``.`` skipped,
``--include``/``--exclude`` matched against the key relative to the id root or its last part, ids relative to the
id root, a URL prefix. Whole-file documents are fetched many at a time (:func:`fetch_documents`), since a GET costs
a round trip however small the object.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable, Sequence

from dedup_cli.errors import InputError, UsageError
from dedup_cli.inputs.locations import display_name
from dedup_cli.inputs.report import ReadReport
from dedup_cli.inputs.store_folders import STORE_MARKERS
from dedup_cli.objectstore.urls import is_url, normalised


def _relative(path: str, root: str) -> str:
    return posixpath.relpath(path.partition("://")[2], root.partition("://")[2])


def object_id_root(paths: Sequence[str], directories: set[str], id_root: str | None) -> str:
    """The prefix ids are relative to: ``id_root`` (every path must lie under it), else the deepest prefix holding
    every path (a named directory's own, or a named object's parent)."""
    if id_root is None:
        scheme = paths[0].partition("://")[0]
        keys = [p.partition("://")[2] if p in directories else posixpath.dirname(p.partition("://")[2])
                for p in paths]
        return f"{scheme}://{posixpath.commonpath(keys)}"
    if not is_url(id_root):
        raise UsageError(f"--id-root {display_name(id_root)} is a local directory, and the inputs are in object "
                         "storage; name an s3:// prefix, or leave it out")
    root = normalised(id_root)
    for path in paths:
        if path != root and not path.startswith(root + "/"):
            raise UsageError(f"input {path} lies outside {root}, the directory the store's ids are relative to; sign "
                             "it into another store, or name inputs under that directory")
    return root


def find_objects(named: Sequence[str], listed: Sequence[str], include: Sequence[str], exclude: Sequence[str],
                 report: ReadReport, id_root: str | None,
                 matches: Callable[[str, Sequence[str]], bool]) -> list[tuple[str, str, os.stat_result]]:
    """(id, URL, status) of the objects under ``named`` and ``listed`` URLs, sorted by id, as
    :func:`dedup_cli.inputs.discovery.walk_files` finds local files.

    ``matches(relative, patterns)`` is the glob test local files use.
    """
    from dedup_cli.objectstore import objects

    objects.require_s3(next(name for name in [*named, *listed] if is_url(name)))
    local = [name for name in [*named, *listed] if not is_url(name)]
    if local:
        raise UsageError(f"input {display_name(local[0])} is a local path and other inputs are in object storage; "
                         "sign each kind into its own store, or copy them to one place")
    directories: set[str] = set()
    files: dict[str, objects.ObjectInfo] = {}
    present: list[tuple[str, bool]] = []
    for name, always in [(n, True) for n in named] + [(n, False) for n in listed]:
        url = normalised(name)
        described = objects.info(url) if url.partition("://")[2].count("/") else None
        if described is not None:
            files[url] = described
            present.append((url, always))
        elif objects.kind(url) == "directory":
            directories.add(url)
            present.append((url, always))
        elif always:
            raise InputError(f"input {name} does not exist; check the path")
        else:
            report.note("unreadable", (name, "does not exist (listed in --files-from)"))
    if not present:
        return []
    root = object_id_root([url for url, _ in present], directories, id_root)
    report.id_root = root

    def wanted(relative: str) -> bool:
        return not (include and not matches(relative, include)) and not (exclude and matches(relative, exclude))

    found: dict[str, tuple[str, objects.ObjectInfo]] = {}
    for url, always in present:
        if url not in directories:
            relative = _relative(url, root)
            if always or wanted(relative):
                found[relative] = (url, files[url])
            continue
        listed_items = list(objects.listing(url))
        stores = _store_prefixes([item.url for item in listed_items], report)
        for item in listed_items:
            inside = item.url[len(url) + 1:]
            if not inside or any(part.startswith(".") for part in inside.split("/")) or item.url.endswith("/"):
                continue
            if stores and any(item.url.startswith(store) for store in stores):
                continue
            relative = _relative(item.url, root)
            if wanted(relative):
                found[relative] = (item.url, item)
    return [(relative, found[relative][0], objects.status_of(found[relative][1])) for relative in sorted(found)]


def _store_prefixes(urls: Sequence[str], report: ReadReport) -> list[str]:
    """The prefixes (each ending in ``/``) of the dedup stores among the objects ``urls`` (the directory listed may
    be one), noted in ``report`` as left out (:mod:`dedup_cli.inputs.store_folders`)."""
    stores = sorted({url.rpartition("/")[0] for url in urls if url.rpartition("/")[2] in STORE_MARKERS})
    for store in stores:
        report.leave_out_store(store)
    return [store + "/" for store in stores]


def fetch_documents(paths: Sequence[str]) -> dict[str, tuple[bytes, os.stat_result] | OSError]:
    """The bytes and status of every object among ``paths``, fetched many at a time; local paths are not read
    here."""
    from dedup_cli.objectstore import object_streams, objects

    urls = [path for path in paths if is_url(path)]
    if not urls:
        return {}
    fetched = object_streams.fetch(urls)
    return {url: value if isinstance(value, OSError) else (value[0], objects.status_of(value[1]))
            for url, value in fetched.items()}
