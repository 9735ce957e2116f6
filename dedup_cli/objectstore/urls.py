"""``s3://BUCKET/KEY`` URLs: recognising them and naming objects under them, without importing any client.

Any path dedup takes (an input, a store, an output) may be such a URL; everything else is a local path. Only the
scheme is looked at here, so a command that is given local paths pays nothing for object storage. An object
store has no directories, only keys: ``s3://b/sigs`` names the "directory" of every key that starts with
``sigs/``, and ``s3://b/sigs/`` the same one.
"""

from __future__ import annotations

import os
from typing import Any

SCHEMES = ("s3",)


def is_url(path: Any) -> bool:
    """Whether ``path`` names an object store location (``s3://…``) rather than a local file."""
    if isinstance(path, ObjectPath):
        return True
    if not isinstance(path, str):
        return False
    scheme, separator, _ = path.partition("://")
    return bool(separator) and scheme.lower() in SCHEMES


def split(url: str) -> tuple[str, str]:
    """(bucket, key) of ``s3://bucket/key``; the key has no leading slash (and may be empty)."""
    rest = url.partition("://")[2]
    bucket, _, key = rest.partition("/")
    return bucket, key.lstrip("/")


def split_prefix(url: str) -> tuple[str, str]:
    """(bucket, prefix) of a URL naming a directory: every key under it starts with the prefix (``""`` for a whole
    bucket, else the key and a ``/``, however many slashes the URL ends with)."""
    bucket, key = split(url)
    key = key.rstrip("/")
    return bucket, f"{key}/" if key else ""


def normalised(url: str) -> str:
    """``url`` with a lower-case scheme and no trailing slash: one spelling per location."""
    scheme, _, rest = str(url).partition("://")
    return f"{scheme.lower()}://{rest.rstrip('/')}"


class ObjectPath:
    """An object store location used where dedup uses a local ``Path``: ``/`` to name a key under it, ``name``,
    ``parent``, ``str()``. It is deliberately not a path-like (no ``__fspath__``), so that no local file
    operation can be applied to it by mistake."""

    __slots__ = ("url",)

    def __init__(self, url: str | ObjectPath) -> None:
        self.url = normalised(str(url))

    def __truediv__(self, name: str) -> ObjectPath:
        return ObjectPath(f"{self.url}/{name}")

    def __str__(self) -> str:
        return self.url

    def __repr__(self) -> str:
        return f"ObjectPath({self.url!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjectPath) and other.url == self.url

    def __hash__(self) -> int:
        return hash(self.url)

    @property
    def name(self) -> str:
        return self.url.rsplit("/", 1)[1] if split(self.url)[1] else ""

    @property
    def parent(self) -> ObjectPath:
        bucket, key = split(self.url)
        return ObjectPath(f"s3://{bucket}/{key.rpartition('/')[0]}" if "/" in key else f"s3://{bucket}")

    @property
    def bucket(self) -> str:
        return split(self.url)[0]

    @property
    def key(self) -> str:
        return split(self.url)[1]

    def resolve(self) -> ObjectPath:
        return self


def location(path: str | os.PathLike[str]) -> Any:
    """A ``Path`` for a local path, an :class:`ObjectPath` for a URL."""
    from pathlib import Path

    return ObjectPath(str(path)) if is_url(path) else Path(path)


def absolute(path: str) -> str:
    """``os.path.abspath`` for local paths; a URL normalised (it is absolute already)."""
    return normalised(path) if is_url(path) else os.path.abspath(path)
