"""Objects in S3-compatible storage, through fsspec's ``s3fs`` (the ``s3`` extra): reading, writing, listing,
conditional writes, and every failure as one ``OSError`` naming the URL.

Why s3fs: it is the one client that gives dedup all it needs through one configuration. Its botocore core reads
the endpoint, region and credentials exactly as the AWS command line does (``AWS_ENDPOINT_URL``,
``AWS_REGION``/``AWS_DEFAULT_REGION``, ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_SESSION_TOKEN``,
``AWS_PROFILE`` and ``~/.aws/config``/``credentials``, instance roles); it passes the conditional headers of
``PutObject`` and ``DeleteObject`` (``If-None-Match: *``, ``If-Match: ETAG``) that the store's commit protocol is
built on, which pyarrow's own S3 filesystem does not offer; and Dask, which speaks fsspec, reads the same URLs on
its workers. pyarrow reads and writes Parquet through its file objects.

Requests are retried by botocore (``standard`` mode, :data:`MAX_ATTEMPTS` attempts with exponential backoff and
jitter, on 500, 503, throttling and dropped connections; ``AWS_RETRY_MODE`` and ``AWS_MAX_ATTEMPTS`` override);
what still fails becomes an ``OSError`` whose message says what happened in one line (a missing bucket, refused
credentials, an endpoint that cannot be reached, a server error after the retries).

Reads go through a block cache of :data:`READ_BLOCK` bytes, so that a Parquet reader's many small reads of column
chunks become a few large ranged GETs; writes are one PUT, or a multipart upload in :data:`WRITE_BLOCK` pieces,
which the server makes visible at once, complete, when it is completed
(:func:`dedup_cli.objectstore.object_streams.writing`).
"""

from __future__ import annotations

import errno
import importlib.util
import os
import random
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from dedup_cli.errors import DedupError
from dedup_cli.objectstore.urls import split, split_prefix

S3_EXTRA = "pip install 'dedup-cli[s3]'"
MAX_ATTEMPTS = 6
"""Attempts per request (botocore's standard retry mode: backoff with jitter, at most 20 s between attempts)."""
READ_BLOCK = 16 << 20
"""Bytes a read fetches at once: a Parquet part of a store is read in a few GETs, whatever its row groups."""
WRITE_BLOCK = 16 << 20
"""Bytes per piece of a multipart upload; smaller objects are written with one PUT."""
CONNECT_TIMEOUT = 10
READ_TIMEOUT = 60


class ConditionFailed(OSError):
    """A conditional write or delete was refused (HTTP 412, or 409 for a concurrent conditional write): the object
    exists (``If-None-Match: *``) or is no longer the version named (``If-Match``)."""


@dataclass(frozen=True)
class ObjectInfo:
    """One object: its URL, size in bytes, modification time (ns since the epoch) and ETag."""

    url: str
    size: int
    mtime_ns: int
    etag: str = ""


_CLIENTS: dict[tuple[str, ...], Any] = {}
_SETTINGS = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
             "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE",
             "AWS_RETRY_MODE", "AWS_MAX_ATTEMPTS")
"""The environment a client is made from: a process that changes it (a test, a library user) gets another."""
_LOCK = threading.Lock()


def require_s3(url: str) -> None:
    """Raise a one-line :class:`DedupError` naming the extra unless s3fs is importable (nothing is imported)."""
    try:
        installed = importlib.util.find_spec("s3fs") is not None
    except (ImportError, ValueError):  # hidden, or a module entry without a spec
        installed = False
    if not installed:
        raise DedupError(f"{url} is in object storage, which needs the s3 extra (s3fs is not installed); install it "
                         f"with: {S3_EXTRA}")


def _config() -> dict[str, Any]:
    """botocore settings: dedup's retry policy and timeouts unless the environment chooses its own."""
    config: dict[str, Any] = {"connect_timeout": CONNECT_TIMEOUT, "read_timeout": READ_TIMEOUT}
    if "AWS_RETRY_MODE" not in os.environ and "AWS_MAX_ATTEMPTS" not in os.environ:
        config["retries"] = {"mode": "standard", "max_attempts": MAX_ATTEMPTS}
    return config


def client(url: str = "s3://") -> Any:
    """The process's ``s3fs.S3FileSystem`` (one per process and environment: a forked worker makes its own)."""
    pid = (str(os.getpid()), *(os.environ.get(name, "") for name in _SETTINGS))
    found = _CLIENTS.get(pid)
    if found is not None:
        return found
    require_s3(url)
    with _LOCK:
        if pid not in _CLIENTS:
            import s3fs

            # s3fs retries some errors itself on top of botocore's retries; botocore's are enough.
            created = s3fs.S3FileSystem(skip_instance_cache=True, config_kwargs=_config(),
                                        default_block_size=READ_BLOCK, default_cache_type="readahead")
            created.retries = 2
            _CLIENTS[pid] = created
    return _CLIENTS[pid]


def attempts() -> int:
    """Attempts per request: ``AWS_MAX_ATTEMPTS``, else :data:`MAX_ATTEMPTS`."""
    try:
        return int(os.environ.get("AWS_MAX_ATTEMPTS", MAX_ATTEMPTS))
    except ValueError:
        return MAX_ATTEMPTS


MAX_BACKOFF = 20.0
"""Seconds at most between two attempts (botocore's standard retry mode)."""
STREAM_ERRORS = ("ResponseStreamingError", "IncompleteReadError", "IncompleteRead", "ClientPayloadError",
                 "ReadTimeoutError", "AioReadTimeoutError", "ServerDisconnectedError", "ClientOSError")
"""Failures while a response's body is read: after botocore has returned the response, so not retried by it."""


def backoff_seconds(attempt: int) -> float:
    """The wait before attempt ``attempt + 1`` (from 0): botocore's standard mode, exponential with full jitter,
    uniform in [0, 2^attempt) seconds, at most :data:`MAX_BACKOFF`."""
    return min(MAX_BACKOFF, random.random() * 2.0**attempt)


def is_stream_error(error: BaseException) -> bool:
    """Whether ``error`` broke off reading a response's body (a dropped connection, a short body, a timeout)."""
    return type(error).__name__ in STREAM_ERRORS


def endpoint() -> str:
    """The endpoint requests go to, for messages."""
    try:
        return str(client().s3.meta.endpoint_url)
    except (AttributeError, DedupError, OSError):
        return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or "the S3 endpoint"


def _client_error(error: BaseException) -> tuple[str, int] | None:
    """(error code, HTTP status) of the botocore ClientError in ``error``'s chain, if any."""
    seen: BaseException | None = error
    while seen is not None:
        response = getattr(seen, "response", None)
        if isinstance(response, dict) and "Error" in response:
            code = str(response["Error"].get("Code", ""))
            status = int(response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
            return code, status
        seen = seen.__cause__ or seen.__context__
    return None


def translate(error: BaseException, url: str) -> OSError:
    """``error`` (from s3fs, botocore or aiohttp) as one ``OSError`` naming ``url`` with a one-line cause."""
    if isinstance(error, ConditionFailed):
        return error
    found = _client_error(error)
    code, status = found if found is not None else ("", 0)
    bucket = split(url)[0]
    if status in (409, 412) or code in ("PreconditionFailed", "ConditionalRequestConflict"):
        return ConditionFailed(errno.EEXIST, f"changed by someone else ({code or status})", url)
    if code in ("NoSuchBucket",) or (isinstance(error, FileNotFoundError) and "bucket" in str(error).lower()):
        return FileNotFoundError(errno.ENOENT, f"bucket {bucket} does not exist at {endpoint()}; create it, or check "
                                               "the URL and AWS_ENDPOINT_URL", url)
    if isinstance(error, FileNotFoundError) or code in ("NoSuchKey", "404", "NotFound"):
        return FileNotFoundError(errno.ENOENT, "no such object", url)
    name = type(error).__name__
    if code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken", "AccessDenied",
                "AllAccessDisabled", "403") or isinstance(error, PermissionError) or name in (
            "NoCredentialsError", "PartialCredentialsError"):
        reason = code or ("no credentials found" if name == "NoCredentialsError" else str(error))
        return PermissionError(errno.EACCES, f"access denied by {endpoint()} ({reason}); check the credentials "
                                             "(AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE)", url)
    if status >= 500 or code in ("InternalError", "ServiceUnavailable", "SlowDown", "503", "500"):
        return OSError(errno.EIO, f"{endpoint()} answered {code or status} (HTTP {status or '5xx'}) after "
                                  f"{attempts()} attempts; try again later", url)
    if name in ("EndpointConnectionError", "ConnectionClosedError", "ClientConnectorError", "ServerDisconnectedError",
                "ConnectTimeoutError", "ReadTimeoutError", "ClientOSError", "ConnectionError",
                "ResponseStreamingError", "IncompleteRead") or isinstance(error, (ConnectionError, TimeoutError)):
        return OSError(errno.EIO, f"cannot reach {endpoint()} ({' '.join(str(error).split()) or name}) after "
                                  f"{attempts()} attempts; check AWS_ENDPOINT_URL and the network", url)
    if isinstance(error, OSError) and error.errno is not None:
        return OSError(error.errno, " ".join((error.strerror or str(error)).split()), url)
    return OSError(errno.EIO, f"{name}: {' '.join(str(error).split())}", url)


@contextmanager
def translated(url: str) -> Iterator[None]:
    """Within: any failure of a request is an ``OSError`` naming ``url`` (:func:`translate`)."""
    try:
        yield
    except DedupError:
        raise
    except (Exception) as error:  # botocore, aiohttp and s3fs raise many kinds
        raise translate(error, url) from error


def fs_path(url: str) -> str:
    bucket, key = split(url)
    return f"{bucket}/{key}" if key else bucket


def _etag(response: dict[str, Any]) -> str:
    return str(response.get("ETag", ""))


def read_bytes(url: str) -> bytes:
    """The whole object (one GET)."""
    return read_versioned(url)[0]


def read_versioned(url: str) -> tuple[bytes, str]:
    """The whole object and its ETag, read in one GET (so that the two belong together)."""
    data, described, _ = read_described(url)
    return data, described.etag


def read_described(url: str) -> tuple[bytes, ObjectInfo, float]:
    """The whole object, its description and the server's clock (seconds since the epoch), from one GET."""
    bucket, key = split(url)
    with translated(url):
        response = client(url).call_s3("get_object", Bucket=bucket, Key=key)
        body = response["Body"]
        try:
            data = _sync(body.read())
        finally:
            body.close()
        return data, describe(url, response), _date(response)


def _sync(awaitable: Any) -> Any:
    from fsspec.asyn import sync

    return sync(client().loop, _await, awaitable)


async def _await(awaitable: Any) -> Any:
    return await awaitable


def put(url: str, data: bytes, if_none_match: bool = False, if_match: str | None = None) -> str:
    """Write the object in one PUT and return its ETag; with ``if_none_match`` only if no object has that name,
    with ``if_match`` only if the object's ETag is still that (:class:`ConditionFailed` otherwise)."""
    return put_dated(url, data, if_none_match, if_match)[0]


def put_dated(url: str, data: bytes, if_none_match: bool = False, if_match: str | None = None) -> tuple[str, float]:
    """:func:`put`, and the server's clock when it answered (seconds since the epoch)."""
    bucket, key = split(url)
    condition: dict[str, str] = {}
    if if_none_match:
        condition["IfNoneMatch"] = "*"
    if if_match is not None:
        condition["IfMatch"] = if_match
    with translated(url):
        response = client(url).call_s3("put_object", Bucket=bucket, Key=key, Body=data, **condition)
        return _etag(response), _date(response)


def delete(url: str, if_match: str | None = None) -> None:
    """Delete the object (a missing one is no error); with ``if_match`` only while its ETag is that."""
    bucket, key = split(url)
    condition = {} if if_match is None else {"IfMatch": if_match}
    try:
        with translated(url):
            client(url).call_s3("delete_object", Bucket=bucket, Key=key, **condition)
    except FileNotFoundError:
        pass


def delete_many(urls: list[str]) -> None:
    """Delete objects (of one bucket or several), 1000 per request."""
    if not urls:
        return
    with translated(urls[0]):
        client(urls[0]).rm([fs_path(url) for url in urls])


def head(url: str) -> tuple[ObjectInfo | None, float]:
    """The object's description (None when there is none) and the server's clock (seconds since the epoch, from
    the response's ``Date``), so that ages are measured on one clock."""
    bucket, key = split(url)
    try:
        with translated(url):
            response = client(url).call_s3("head_object", Bucket=bucket, Key=key)
    except FileNotFoundError:
        return None, time.time()
    return describe(url, response), _date(response)


def _date(response: dict[str, Any]) -> float:
    header = response.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
    if header:
        from email.utils import parsedate_to_datetime  # 2-3 ms of email.*: only s3:// stores reach here

        return parsedate_to_datetime(header).timestamp()
    return time.time()


def describe(url: str, response: dict[str, Any]) -> ObjectInfo:
    modified = response.get("LastModified")
    mtime_ns = int(modified.timestamp() * 1e9) if modified is not None else 0
    size = response.get("ContentLength", response.get("Size", response.get("size", 0)))
    return ObjectInfo(url, int(size or 0), mtime_ns, _etag(response))


def info(url: str) -> ObjectInfo | None:
    """The object at ``url``, or None when there is none."""
    return head(url)[0]


def kind(url: str) -> str | None:
    """``file`` for an object, ``directory`` for a prefix that holds objects (or a bucket), None otherwise.

    Raises:
        OSError: the bucket does not exist, the credentials are refused, the endpoint cannot be reached.
    """
    bucket, prefix = split_prefix(url)
    if prefix and not url.endswith("/") and info(url) is not None:
        return "file"
    with translated(url):
        response = client(url).call_s3("list_objects_v2", Bucket=bucket, Prefix=prefix, MaxKeys=1)
    return "directory" if response.get("KeyCount", 0) or not prefix else None


def listing(url: str, recursive: bool = True) -> list[ObjectInfo]:
    """Every object under the prefix ``url`` (``url/…``), sorted by key; with ``recursive`` False only those
    directly under it."""
    bucket, prefix = split_prefix(url)
    found: list[ObjectInfo] = []
    options: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
    if not recursive:
        options["Delimiter"] = "/"
    with translated(url):
        while True:
            response = client(url).call_s3("list_objects_v2", **options)
            for item in response.get("Contents", ()):
                found.append(describe(f"s3://{bucket}/{item['Key']}", item))
            if not response.get("IsTruncated"):
                break
            options["ContinuationToken"] = response["NextContinuationToken"]
    found.sort(key=lambda item: item.url)
    return found


def names(url: str) -> list[str]:
    """The names of the objects directly under the prefix ``url``."""
    return [item.url.rsplit("/", 1)[1] for item in listing(url, recursive=False)]


def unfinished_uploads(url: str) -> list[tuple[str, str, float]]:
    """(object URL, upload id, when it began in seconds since the epoch) of the multipart uploads begun and never
    completed under the prefix ``url``."""
    bucket, prefix = split_prefix(url)
    found: list[tuple[str, str, float]] = []
    options: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
    with translated(url):
        while True:
            response = client(url).call_s3("list_multipart_uploads", **options)
            for upload in response.get("Uploads", ()):
                initiated = upload.get("Initiated")
                found.append((f"s3://{bucket}/{upload['Key']}", upload["UploadId"],
                               initiated.timestamp() if initiated is not None else 0.0))
            if not response.get("IsTruncated"):
                break
            options["KeyMarker"] = response.get("NextKeyMarker")
            options["UploadIdMarker"] = response.get("NextUploadIdMarker")
    return found


def abort_upload(url: str, upload: str) -> None:
    bucket, key = split(url)
    try:
        with translated(url):
            client(url).call_s3("abort_multipart_upload", Bucket=bucket, Key=key, UploadId=upload)
    except FileNotFoundError:
        pass


FETCH_CONCURRENCY = 32
"""GETs in flight at once when many small objects are read together (a task's whole-file documents)."""


def status_of(described: ObjectInfo) -> os.stat_result:
    """An object as ``os.stat`` describes a regular file: its size and modification time (the rest is 0)."""
    import stat

    seconds = described.mtime_ns // 1_000_000_000
    return os.stat_result((stat.S_IFREG | 0o444, 0, 0, 1, 0, 0, described.size, seconds, seconds, seconds),
                          {"st_mtime_ns": described.mtime_ns, "st_atime_ns": described.mtime_ns,
                           "st_ctime_ns": described.mtime_ns})
