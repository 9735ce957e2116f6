"""A real S3 server on the loopback interface for the tests and benchmarks, and a proxy that breaks it on purpose.

:class:`S3Server` runs ``moto_server`` (moto in server mode: an S3-speaking HTTP server, with the conditional
writes ``If-None-Match: *`` and ``If-Match`` of PutObject, and ``If-Match`` of DeleteObject) in a child process on
127.0.0.1 and stops it after. :class:`FaultProxy` sits between a client and that server, on 127.0.0.1 too: it
forwards every request, counts them by method, and, when told to, answers some with 500 or 503, closes the
connection before answering, closes it after the server has acted but before the client hears back (the hard case
for a conditional write), closes it halfway through an answer's body, or refuses every access key but one with 403
``InvalidAccessKeyId`` (moto itself accepts any key). Faults are drawn from a seeded generator, and every loop here is
bounded, so a test is repeatable and stops by itself.
"""

from __future__ import annotations

import http.client
import os
import random
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HOST = "127.0.0.1"
ACCESS_KEY = "dedup-tests"
SECRET_KEY = "dedup-tests-secret"
START_SECONDS = 60
NO_FILE = "/nonexistent/dedup-tests-use-no-aws-configuration"
"""Where the AWS configuration and credentials files are said to be: nowhere, so the user's are never read."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def aws_environment(endpoint: str, access_key: str = ACCESS_KEY) -> dict[str, str]:
    """The standard AWS variables that point a client at ``endpoint`` and nowhere else (no profile, no instance
    metadata, no configuration file of the machine's user)."""
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": access_key,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": NO_FILE,
        "AWS_SHARED_CREDENTIALS_FILE": NO_FILE,
    }


def make_bucket(url: str) -> None:
    """Create the bucket of ``url`` (an ``s3://`` URL) with dedup's own client, as the AWS variables in the environment
    configure it: dedup never creates buckets itself."""
    from dedup_cli.objectstore.objects import client, translated
    from dedup_cli.objectstore.urls import split

    with translated(url):
        client(url).call_s3("create_bucket", Bucket=split(url)[0])


class S3Server:
    """``moto_server`` on 127.0.0.1:``port`` in a child process (:meth:`start`, :meth:`stop`)."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.endpoint = f"http://{HOST}:{self.port}"
        self._process: subprocess.Popen[bytes] | None = None
        self._log = None

    def start(self) -> S3Server:
        log = Path(os.environ.get("TMPDIR", "/tmp")) / f"dedup-moto-{self.port}.log"
        self._log = open(log, "wb")  # noqa: SIM115 - closed by stop()
        self._process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", HOST, "-p", str(self.port)],
            stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"moto_server exited with {self._process.returncode}; see {log}")
            try:
                with socket.create_connection((HOST, self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"moto_server did not start on {self.endpoint} in {START_SECONDS} s; see {log}")

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None
        if self._log is not None:
            self._log.close()
            self._log = None


@dataclass
class Faults:
    """What the proxy does to requests: each request matching ``methods`` (and, if given, whose path starts with one of
    ``paths``, e.g. ``/bucket/corpus/``) fails with probability ``rate``, as one of ``kinds`` (``500``, ``503``,
    ``drop``: closed before the server sees it, ``drop-after``: closed after the server acted, ``cut``: closed
    halfway through the body of a GET's answer), at most ``limit`` times; ``access_key``: refuse every other key
    with 403."""

    rate: float = 0.0
    kinds: tuple[str, ...] = ("500", "503", "drop")
    methods: tuple[str, ...] = ("GET", "PUT", "POST", "DELETE", "HEAD")
    seed: int = 1
    limit: int = 1_000_000
    access_key: str | None = None
    paths: tuple[str, ...] = ()
    injected: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self._random = random.Random(self.seed)
        self._lock = threading.Lock()

    def draw(self, method: str, path: str = "/") -> str | None:
        with self._lock:
            if method not in self.methods or sum(self.injected.values()) >= self.limit:
                return None
            if self.paths and not path.startswith(self.paths):
                return None
            if self._random.random() >= self.rate:
                return None
            kind = self._random.choice(self.kinds)
            self.injected[kind] += 1
            return kind


_ERROR_BODY = ('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}</Message>'
               '<RequestId>dedup-proxy</RequestId></Error>')
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "te", "upgrade", "trailer"}


class FaultProxy:
    """An HTTP proxy on 127.0.0.1 in front of ``upstream`` (``http://host:port``), counting and breaking requests
    (:class:`Faults`); started by :meth:`start`, stopped by :meth:`stop`."""

    def __init__(self, upstream: str, faults: Faults | None = None) -> None:
        self.upstream = upstream.removeprefix("http://")
        self.faults = faults or Faults()
        self.requests: Counter[str] = Counter()
        self.listed = 0
        self._counter_lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
                pass

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    chunks = []
                    while True:
                        size = int(self.rfile.readline().split(b";")[0], 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass
                            break
                        chunks.append(self.rfile.read(size))
                        self.rfile.readline()
                    return b"".join(chunks)
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _answer(self, status: int, code: str, message: str) -> None:
                body = _ERROR_BODY.format(code=code, message=message).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def _drop(self) -> None:
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

            def _handle(self) -> None:
                body = self._body()
                proxy.count(self.command, self.path)
                expected = proxy.faults.access_key
                authorization = self.headers.get("Authorization", "")
                if expected is not None and f"Credential={expected}/" not in authorization:
                    self._answer(403, "InvalidAccessKeyId",
                                 "The AWS Access Key Id you provided does not exist in our records.")
                    return
                fault = proxy.faults.draw(self.command, self.path)
                if fault == "drop":
                    self._drop()
                    return
                if fault in ("500", "503"):
                    code = "InternalError" if fault == "500" else "SlowDown"
                    self._answer(int(fault), code, "injected by the test proxy")
                    return
                connection = http.client.HTTPConnection(proxy.upstream, timeout=120)
                try:
                    headers = {name: value for name, value in self.headers.items()
                               if name.lower() not in _HOP_BY_HOP}
                    headers["Content-Length"] = str(len(body))
                    connection.request(self.command, self.path, body=body, headers=headers)
                    response = connection.getresponse()
                    payload = response.read()
                finally:
                    connection.close()
                if fault == "drop-after":
                    self._drop()
                    return
                self.send_response(response.status)
                for name, value in response.getheaders():
                    if name.lower() not in _HOP_BY_HOP and (name.lower() != "content-length" or self.command == "HEAD"):
                        self.send_header(name, value)
                if self.command != "HEAD":  # a HEAD answer keeps the object's length
                    self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if fault == "cut" and self.command == "GET" and len(payload) > 1:
                    self.wfile.write(payload[: len(payload) // 2])
                    self._drop()
                    return
                if self.command != "HEAD":
                    self.wfile.write(payload)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        self._server = ThreadingHTTPServer((HOST, 0), Handler)
        self._server.daemon_threads = True
        self.endpoint = f"http://{HOST}:{self._server.server_address[1]}"
        self._thread: threading.Thread | None = None

    def count(self, method: str, path: str) -> None:
        with self._counter_lock:
            self.requests[method] += 1
            query = path.partition("?")[2]
            if method == "GET" and ("list-type=" in query or "delimiter=" in query or "prefix=" in query):
                self.listed += 1

    def reset(self) -> None:
        with self._counter_lock:
            self.requests.clear()
            self.listed = 0

    @property
    def total(self) -> int:
        return sum(self.requests.values())

    def start(self) -> FaultProxy:
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1},
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)


def main() -> None:
    """``python tests/s3_server.py [--proxy]``: run a server (and a counting proxy) until interrupted, printing the
    environment that points a client at it."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--port", type=int, default=None)
    arguments = parser.parse_args()
    server = S3Server(arguments.port).start()
    try:
        for name, value in aws_environment(server.endpoint).items():
            print(f"export {name}={value}")
        sys.stdout.flush()
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main()
