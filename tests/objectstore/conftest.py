"""What the object storage tests share: a fault proxy in front of the S3 server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from s3_server import FaultProxy, S3Server


@pytest.fixture
def proxy(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultProxy]:
    """A proxy in front of the server, which this process's requests go through."""
    running = FaultProxy(s3_server.endpoint).start()
    monkeypatch.setenv("AWS_ENDPOINT_URL", running.endpoint)
    try:
        yield running
    finally:
        running.stop()
