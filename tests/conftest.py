"""Shared fixtures: paths to the bundled corpora and small hand-made corpora; a time limit on every test."""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import settings

from dedup_cli.processes import descendants

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


# --- a test that hangs fails, saying where it and the processes it started were --------------------------------

TEST_SECONDS = int(os.environ.get("DEDUP_TEST_SECONDS", "420"))
"""The most one test may take, its fixtures' set-up included: the slowest take about 15 s on two cores. Without a
limit a test waiting forever (on a worker that will never answer, say) would hold the whole run until CI's own
time ran out, and say nothing of where it waited."""


class TestTimedOut(Exception):
    """A test ran past :data:`TEST_SECONDS`."""


def _same_program(pid: int) -> bool:
    """Whether ``pid`` runs this Python program: a worker forked from this process, or the CLI run by a test."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as command:
            line = command.read()
        with open(f"/proc/{os.getpid()}/cmdline", "rb") as command:
            own = command.read()
    except OSError:
        return False
    return line == own or b"dedup_cli" in line


def _running(pid: int) -> bool:
    """Whether ``pid`` is still running (not ended, nor a zombie waiting to be reaped)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as status:
            return status.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def _time_is_up(signum: int, frame: object) -> None:
    # Where every thread of this process is, then where each of its Python children is: they inherit the fault
    # handler, so SIGABRT makes each write its threads' stacks to this run's stderr before it dies.
    print(f"\n--- a test ran past {TEST_SECONDS} s: the threads of process {os.getpid()} ---", file=sys.stderr,
          flush=True)
    faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
    for child in descendants(os.getpid()):
        if not _same_program(child):
            continue
        try:
            os.kill(child, signal.SIGABRT)
        except OSError:
            continue
        deadline = time.monotonic() + 5  # one at a time, so that their stacks do not interleave
        while time.monotonic() < deadline and _running(child):
            time.sleep(0.02)
    raise TestTimedOut(f"the test ran past {TEST_SECONDS} s (its stacks, and its children's, are on stderr)")


@contextmanager
def _time_limit() -> Iterator[None]:
    if not hasattr(signal, "SIGALRM"):
        yield
        return
    previous = signal.signal(signal.SIGALRM, _time_is_up)
    signal.alarm(TEST_SECONDS)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    with _time_limit():  # set-up, the test and tear-down (where a directory's clusters and servers close)
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_sessionfinish(session: pytest.Session) -> Iterator[None]:
    with _time_limit():  # what is closed at the end of the session is bounded too
        yield  # the other hooks: the Dask tests' cluster closes
        while _S3:
            _S3.pop().stop()


# --- object storage: one S3 server (moto in server mode) on 127.0.0.1 for the whole session -------------------

import secrets  # noqa: E402 - the object storage fixtures' own imports

from s3_server import S3Server, aws_environment, free_port, make_bucket  # noqa: E402

_S3_PORT = free_port()
_S3: list[S3Server] = []


def pytest_configure(config: pytest.Config) -> None:
    # Every process of the session (this one, the CLI's subprocesses, a Dask cluster's workers) points at the test
    # server and at nothing else, from the start: the server itself starts only when a test asks for it.
    os.environ.update(aws_environment(f"http://127.0.0.1:{_S3_PORT}"))


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
