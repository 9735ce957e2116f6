"""Objects read and written as streams, and many small objects fetched at once (the ``s3`` extra).

Reads go through a block cache of :data:`~dedup_cli.objectstore.objects.READ_BLOCK` bytes, so that a Parquet reader's
many small reads of column chunks become a few large ranged GETs; writes are one PUT, or a multipart upload in
:data:`~dedup_cli.objectstore.objects.WRITE_BLOCK` pieces, which the server makes visible at once, complete, when it is
completed (:func:`writing`): an object is replaced atomically by nature.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from dedup_cli.objectstore.objects import (
    FETCH_CONCURRENCY,
    READ_BLOCK,
    WRITE_BLOCK,
    ObjectInfo,
    attempts,
    backoff_seconds,
    client,
    describe,
    fs_path,
    is_stream_error,
    status_of,
    translate,
    translated,
)
from dedup_cli.objectstore.urls import split


def open_read(url: str, block_size: int = READ_BLOCK) -> Any:
    """A seekable binary file reading the object: one HEAD for its size, then one GET for the whole of an object of
    at most ``block_size`` bytes, else ranged GETs of ``block_size`` bytes as it is read, the next one fetched in
    the background while the current one is read."""
    with translated(url):
        # One HEAD; then blocks read ahead in the background, so that the next GET overlaps parsing this block.
        handle = client(url).open(fs_path(url), "rb", block_size=block_size, cache_type="background",
                                  cache_options={"maxblocks": 2})
        if handle.size <= block_size:
            from fsspec.caching import caches

            handle.cache = caches["all"](handle.blocksize, handle._fetch_range, handle.size)  # one GET, now
        return _Reading(handle, url, describe(url, handle.details))


class _Reading:
    """An s3fs file whose failures are ``OSError`` s naming the URL."""

    def __init__(self, handle: Any, url: str, described: ObjectInfo) -> None:
        self._handle = handle
        self.name = url
        self._described = described

    def read(self, size: int = -1) -> bytes:
        with translated(self.name):
            return bytes(self._handle.read(size))

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def seek(self, offset: int, whence: int = 0) -> int:
        return int(self._handle.seek(offset, whence))

    def tell(self) -> int:
        return int(self._handle.tell())

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False

    @property
    def closed(self) -> bool:
        return bool(self._handle.closed)

    @property
    def size(self) -> int:
        return int(self._handle.size)

    def status(self) -> os.stat_result:
        """The object as ``os.stat`` describes a file (from the description fetched when it was opened)."""
        return status_of(self._described)

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> _Reading:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextmanager
def writing(url: str) -> Iterator[Any]:
    """A binary stream to write the object ``url`` through: it appears, complete, only if the block ends without
    an exception (the one PUT or the multipart upload is completed then); otherwise the upload is aborted and an
    object already at ``url`` is left as it was."""
    with translated(url):
        handle = client(url).open(fs_path(url), "wb", block_size=WRITE_BLOCK, autocommit=False)
    stream = _Writing(handle, url)
    try:
        yield stream
        with translated(url):
            handle.close()
            handle.commit()
    except BaseException:
        try:
            handle.discard()
        except Exception:  # the upload is abandoned either way; the next writer removes it
            pass
        handle.closed = True  # so that closing it (when it is collected) uploads nothing
        raise


class _Writing:
    """An s3fs file being written; failures are ``OSError`` s naming the URL."""

    def __init__(self, handle: Any, url: str) -> None:
        self._handle = handle
        self.name = url

    def write(self, data: Any) -> int:
        with translated(self.name):
            return int(self._handle.write(data))

    def flush(self) -> None:
        pass  # a part is sent when a block is full; flushing early would only make pieces smaller

    def tell(self) -> int:
        return int(self._handle.tell())

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    def seekable(self) -> bool:
        return False

    @property
    def closed(self) -> bool:
        return False

    def close(self) -> None:
        pass  # :func:`writing` completes or aborts the upload


async def _get_once(fs: Any, url: str) -> tuple[bytes, ObjectInfo]:
    bucket, key = split(url)
    response = await fs._call_s3("get_object", Bucket=bucket, Key=key)
    body = response["Body"]
    try:
        data = await body.read()
    finally:
        body.close()
    return data, describe(url, response)


async def _get(fs: Any, url: str) -> tuple[bytes, ObjectInfo]:
    """One object's bytes and description. botocore retries the request (5xx, a connection dropped before the
    answer); a body broken off after the answer began is retried here, with the same attempts and backoff."""
    import asyncio

    for attempt in range(attempts() - 1):
        try:
            return await _get_once(fs, url)
        except Exception as error:
            if not is_stream_error(error):
                raise
            await asyncio.sleep(backoff_seconds(attempt))
    return await _get_once(fs, url)


def fetch(urls: list[str]) -> dict[str, tuple[bytes, ObjectInfo] | OSError]:
    """Many whole objects, :data:`FETCH_CONCURRENCY` GETs at a time: each URL's bytes and description, or the error
    reading it (one request an object, however small, so reading many is bound by their count)."""
    if not urls:
        return {}
    import asyncio

    from fsspec.asyn import sync

    fs = client(urls[0])

    async def fetch_all() -> list[Any]:
        semaphore = asyncio.Semaphore(FETCH_CONCURRENCY)

        async def one(url: str) -> Any:
            async with semaphore:
                try:
                    return await _get(fs, url)
                except Exception as error:
                    return translate(error, url)

        return await asyncio.gather(*(one(url) for url in urls))

    with translated(urls[0]):
        results = sync(fs.loop, fetch_all)
    return dict(zip(urls, results, strict=True))


