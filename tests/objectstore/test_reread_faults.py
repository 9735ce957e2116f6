"""Exact checks that re-read documents from a server that fails: never another answer with exit code 0.

A store signed from ``s3://`` inputs, then ``find``, ``filter`` and ``eval`` with a proxy between them and the
server (tests/s3_server.py) that answers 500 and 503, drops connections and cuts answers halfway through their
body while the documents are re-read. What is retried and then succeeds gives the clean run's records; what keeps
failing is one line naming the object and exit code 1. Only a document that is really gone (or changed) keeps its
estimate, with the warning.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import REPO, bible_jsonl
from s3_server import FaultProxy, Faults

from dedup_cli.cli.main import cli

pytest.importorskip("s3fs", reason="object storage needs the s3 extra: pip install 'dedup-cli[s3]'")

BIBLE = REPO / "sample_corpora" / "bible-editions"
FIND = ("-t", "0.3", "-b", "2", "--verify", "all", "--output", "pairs")
"""Every reported pair checked exactly, so that every document of a pair is re-read."""


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env={"DEDUP_STORE": None})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def upload(local: Path, url: str, pattern: str = "*.txt") -> None:
    from dedup_cli.objectstore import objects

    fs = objects.client(url)
    for path in sorted(local.rglob(pattern)):
        fs.pipe_file(f"{url.removeprefix('s3://')}/{path.relative_to(local).as_posix()}", path.read_bytes())


@pytest.fixture(params=["files", "jsonl"])
def signed(request: pytest.FixtureRequest, bucket: str, tmp_path: Path) -> tuple[str, str, str]:
    """(store, corpus prefix, the proxy's path prefix of the corpus): the bible editions in the bucket, as one object
    per document (re-read many at a time, whole) or as one JSON Lines object (re-read as a stream of ranged GETs),
    signed into a local store."""
    corpus = f"{bucket}/corpus"
    if request.param == "files":
        upload(BIBLE, corpus)
    else:
        bible_jsonl(tmp_path / "bible.jsonl")
        upload(tmp_path, corpus, "bible.jsonl")
    store = str(tmp_path / "sigs")
    options = ["--id-field", "id"] if request.param == "jsonl" else []
    code, _, stderr = invoke("sign", corpus, "-o", store, *options, "-q")
    assert code == 0, stderr
    return store, corpus, "/" + corpus.removeprefix("s3://") + "/"


def one_line_naming(stderr: str, corpus: str) -> bool:
    return (stderr.count("\n") == 1 and stderr.startswith(f"Error: cannot re-read {corpus}/")
            and "for the exact checks: " in stderr and "Traceback" not in stderr)


def test_faults_while_re_reading_give_the_clean_answer_or_one_line(signed: tuple[str, str, str],
                                                                    proxy: FaultProxy) -> None:
    store, corpus, prefix = signed
    code, clean, stderr = invoke("find", store, *FIND, "-q")
    assert code == 0 and stderr == ""
    assert any(json.loads(line)["exact"] is not None for line in clean.splitlines())
    requests = proxy.requests["GET"]
    injected = 0
    for seed in range(3):
        proxy.faults = Faults(rate=0.3, kinds=("500", "503", "drop", "cut"), methods=("GET",), paths=(prefix,),
                              seed=seed)
        code, stdout, stderr = invoke("find", store, *FIND, "-q")
        assert (code, stdout, stderr) == (0, clean, "") or (code == 1 and one_line_naming(stderr, corpus)), stderr
        assert code == 0  # with six attempts a request, a fault in three requests is always overcome
        injected += sum(proxy.faults.injected.values())
    assert injected >= min(3, requests)  # the faults did happen


@pytest.mark.parametrize("kind", ["503", "drop", "cut"])
def test_a_server_that_keeps_failing_is_one_line_naming_the_object(signed: tuple[str, str, str], proxy: FaultProxy,
                                                                   monkeypatch: pytest.MonkeyPatch,
                                                                   kind: str) -> None:
    store, corpus, prefix = signed
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "2")
    proxy.faults = Faults(rate=1.0, kinds=(kind,), methods=("GET",), paths=(prefix,))
    for command in (["find", store, *FIND, "-q"], ["eval", store, "-t", "0.3", "--sample", "50", "-q"],
                    ["filter", corpus, "--store", store, "-o", f"{corpus}-kept", "-t", "0.3",
                     "--verify", "all", "-q"]):
        code, stdout, stderr = invoke(*command)
        assert code == 1 and stdout == "", command
        assert one_line_naming(stderr, corpus), stderr
        if kind == "503":
            assert stderr.endswith("answered SlowDown (HTTP 503) after 2 attempts; try again later\n")


def test_only_a_document_that_is_gone_keeps_its_estimate(bucket: str, tmp_path: Path, proxy: FaultProxy) -> None:
    from dedup_cli.objectstore import objects

    upload(BIBLE, f"{bucket}/corpus")
    store = str(tmp_path / "sigs")
    assert invoke("sign", f"{bucket}/corpus", "-o", store, "-q")[0] == 0
    code, clean, _ = invoke("find", store, *FIND, "-q")
    pair = json.loads(clean.splitlines()[0])
    objects.delete(f"{bucket}/corpus/{pair['id_a']}")
    code, stdout, stderr = invoke("find", store, *FIND)
    assert code == 0
    assert "1 document is gone or changed since signing" in stderr
    unchecked = [record for record in map(json.loads, stdout.splitlines()) if record["exact"] is None]
    assert unchecked and all(pair["id_a"] in (record["id_a"], record["id_b"]) for record in unchecked)
