"""Shared fixtures: paths to the bundled corpora and small hand-made corpora."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import settings

# Property tests are deterministic (the same examples on every run and machine) and have no per-example
# deadline: CI machines are shared, and a slow example is not a failure.
settings.register_profile("deterministic", derandomize=True, deadline=None)
settings.load_profile("deterministic")

REPO = Path(__file__).resolve().parent.parent
SAMPLE_CORPORA = REPO / "sample_corpora"


@pytest.fixture
def bible_dir() -> Path:
    return SAMPLE_CORPORA / "bible-editions"


@pytest.fixture
def small_corpus(tmp_path: Path) -> Path:
    """Three near-identical documents, one unrelated, one empty, one shorter than a shingle, one binary."""
    base = " ".join(f"word{i}" for i in range(200))
    corpus = tmp_path / "corpus"
    (corpus / "sub").mkdir(parents=True)
    (corpus / "a.txt").write_text(base)
    (corpus / "b.txt").write_text(base.replace("word10 ", "changed "))
    (corpus / "sub" / "c.txt").write_text(base + " extra words at the end")
    (corpus / "unrelated.txt").write_text(" ".join(f"other{i}" for i in range(200)))
    (corpus / "empty.txt").write_text("")
    (corpus / "short.txt").write_text("too short")
    (corpus / "image.bin").write_bytes(b"\x89PNG\x00\x00binary")
    return corpus


# --- object storage: one S3 server (moto in server mode) on 127.0.0.1 for the whole session -------------------

import os  # noqa: E402 - the object storage fixtures' own imports
import secrets  # noqa: E402
from collections.abc import Iterator  # noqa: E402

from s3_server import S3Server, aws_environment, free_port, make_bucket  # noqa: E402

_S3_PORT = free_port()
_S3: list[S3Server] = []


def pytest_configure(config: pytest.Config) -> None:
    # Every process of the session (this one, the CLI's subprocesses, a Dask cluster's workers) points at the test
    # server and at nothing else, from the start: the server itself starts only when a test asks for it.
    os.environ.update(aws_environment(f"http://127.0.0.1:{_S3_PORT}"))


def pytest_sessionfinish(session: pytest.Session) -> None:
    while _S3:
        _S3.pop().stop()


@pytest.fixture(scope="session")
def s3_server() -> S3Server:
    """The session's S3 server on 127.0.0.1 (started on first use, stopped at the end of the session)."""
    pytest.importorskip("moto.server", reason="the object storage tests need moto[server] (the test extra)")
    pytest.importorskip("s3fs", reason="object storage needs the s3 extra: pip install 'dedup-cli[s3]'")
    if not _S3:
        _S3.append(S3Server(_S3_PORT).start())
    return _S3[0]


@pytest.fixture
def bucket(s3_server: S3Server) -> Iterator[str]:
    """``s3://NAME``: a new, empty bucket of the test server."""
    name = f"s3://test-{secrets.token_hex(6)}"
    make_bucket(name)
    yield name
