"""Inputs, stores and outputs in object storage, against a real S3 server on 127.0.0.1 (moto in server mode).

The same commands give the same bytes as with local paths; a store in a bucket commits completely or not at all
(two concurrent runs, runs killed at random moments, a server that drops connections and answers 500 and 503);
what cannot be done is one line naming the URL. The server is shared by the session (tests/conftest.py); each test
has its own bucket.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import REPO, bible_jsonl
from s3_server import ACCESS_KEY, FaultProxy, Faults, S3Server

from dedup_cli.cli.main import cli
from dedup_cli.objectstore.urls import ObjectPath

pytest.importorskip("s3fs", reason="object storage needs the s3 extra: pip install 'dedup-cli[s3]'")

BIBLE = REPO / "sample_corpora" / "bible-editions"


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env={"DEDUP_STORE": None})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def dedup(*args: str, environment: dict[str, str] | None = None, **options: object) -> subprocess.Popen[bytes]:
    variables = {key: value for key, value in os.environ.items() if not key.startswith("DEDUP_")}
    variables.update(environment or {})
    return subprocess.Popen([sys.executable, "-m", "dedup_cli", *args], env=variables,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **options)  # type: ignore[call-overload]


def upload(local: Path, url: str) -> None:
    from dedup_cli.objectstore import objects

    fs = objects.client(url)
    for path in sorted(local.rglob("*")):
        if path.is_file():
            fs.pipe_file(f"{url.removeprefix('s3://')}/{path.relative_to(local).as_posix()}", path.read_bytes())


def read(url: str) -> bytes:
    from dedup_cli.objectstore import objects

    return objects.read_bytes(url)


def keys(url: str) -> list[str]:
    from dedup_cli.objectstore import objects

    return [item.url[len(url) + 1:] for item in objects.listing(url)]


# --- the same bytes as with local paths ---------------------------------------------------------------------------


def test_sign_find_filter_eval_give_the_local_bytes(bucket: str, tmp_path: Path) -> None:
    upload(BIBLE, f"{bucket}/bible")
    local_store, remote_store = str(tmp_path / "sigs"), f"{bucket}/sigs"
    for inputs, store in ((str(BIBLE), local_store), (f"{bucket}/bible/", remote_store)):
        code, _, stderr = invoke("sign", inputs, "--exclude", "SOURCE", "-o", store, "-q")
        assert code == 0, stderr
    from dedup_cli import read_store

    local, remote = read_store(local_store), read_store(remote_store)
    assert local.ids == remote.ids and (local.packed == remote.packed).all()
    assert remote.paths[0].startswith(f"{bucket}/bible/")
    for options in (["-t", "0.5", "-b", "2"], ["-t", "0.5", "--output", "pairs", "--format", "parquet"]):
        suffix = "parquet" if "parquet" in options else "jsonl"
        code, _, stderr = invoke("find", local_store, *options, "-q", "-o", str(tmp_path / f"out.{suffix}"))
        assert code == 0, stderr
        code, _, stderr = invoke("find", remote_store, *options, "-q", "-o", f"{bucket}/out/find.{suffix}")
        assert code == 0, stderr
        assert read(f"{bucket}/out/find.{suffix}") == (tmp_path / f"out.{suffix}").read_bytes()
    reports = []
    for store in (local_store, remote_store):
        code, stdout, stderr = invoke("eval", store, "-t", "0.5", "-b", "2", "--sample", "200", "--format", "json",
                                      "-q")
        assert code == 0, stderr
        report = json.loads(stdout)
        reports.append({key: value for key, value in report.items() if key not in ("store", "seconds")})
    assert reports[0] == reports[1]
    code, _, stderr = invoke("find", remote_store, "--against", f"{remote_store}/", "-q")
    assert code == 2 and "is the store itself" in stderr
    info = [json.loads(invoke("info", store)[1]) for store in (local_store, remote_store)]
    assert info[0]["params"] == info[1]["params"] and info[1]["store"] == remote_store


def test_every_kind_of_input_is_read_from_objects_as_from_files(bucket: str, tmp_path: Path) -> None:
    """Objects go through the readers files go through (whole files as columns, fetched together; JSON Lines a
    block at a time; Parquet; compressed inputs): the same documents, signatures and reports, an incremental run
    skips the same unchanged inputs unread, and a Parquet object without its column stops the run."""
    import gzip

    import pyarrow as pa
    import pyarrow.parquet as pq

    from dedup_cli import SignOptions, read_store, sign
    from dedup_cli.errors import InputError
    from dedup_cli.inputs.discovery import plan_sources
    from dedup_cli.inputs.report import ReadReport
    from dedup_cli.options.input_options import InputOptions

    corpus = tmp_path / "corpus"
    (corpus / "texts").mkdir(parents=True)
    words = "the quick brown fox jumps over the lazy dog and keeps on running "
    for index in range(30):
        (corpus / "texts" / f"a{index:02d}.txt").write_text(f"{words}{index} " * 3)
    (corpus / "texts" / "bom.txt").write_bytes(b"\xef\xbb\xbf" + "caf\u00e9 na\u00efve r\u00e9sum\u00e9 ".encode() * 5)
    (corpus / "texts" / "invalid.txt").write_bytes(b"bad \xff bytes in a file " * 5)
    (corpus / "texts" / "binary.txt").write_bytes(b"\0\1\2" * 10)
    (corpus / "texts" / "large.txt").write_text(words * 20)
    (corpus / "texts" / "empty.txt").write_bytes(b"")
    (corpus / "texts" / "packed.txt.gz").write_bytes(gzip.compress(f"{words}gzip ".encode() * 3))
    records = [json.dumps({"id": f"r{i}", "text": f"{words}record {i}"}) for i in range(40)]
    records[7], records[9] = "not json", json.dumps({"id": "long", "text": words * 20})
    (corpus / "records.jsonl").write_text("\n".join([*records, "", records[0].replace("r0", "r99")]) + "\n")
    (corpus / "more.jsonl.gz").write_bytes(gzip.compress(
        "".join(json.dumps({"id": f"g{i}", "text": f"{words}gzipped {i}"}) + "\n" for i in range(20)).encode()))
    # --id-field names the id column of every format, Parquet's included.
    pq.write_table(pa.table({"text": [f"{words}row {i}" for i in range(25)], "id": [f"p{i}" for i in range(25)]}),
                   corpus / "rows.parquet")
    upload(corpus, f"{bucket}/corpus")
    options = SignOptions(input=InputOptions(id_field="id", max_document_bytes=600), jobs=2)
    stores = {"local": str(tmp_path / "sigs"), "remote": f"{bucket}/sigs"}
    inputs = {"local": str(corpus), "remote": f"{bucket}/corpus"}
    found = {}
    for where in stores:
        runs = [sign([inputs[where]], stores[where], options) for _ in range(2)]  # the second one incremental
        shown = json.dumps([dataclasses.asdict(run.read) for run in runs]).replace(inputs[where], "CORPUS")
        found[where] = ([(run.documents, run.empty, run.unchanged) for run in runs], json.loads(shown))
    assert found["local"] == found["remote"]
    counts, reports = found["remote"]
    assert counts[0][0] == 30 + 4 + 39 + 20 + 25 and counts[1] == (0, 0, counts[0][0])
    assert reports[0]["binary"] == ["CORPUS/texts/binary.txt"] and reports[0]["invalid_utf8"] == [
        "CORPUS/texts/invalid.txt"]
    assert [item[0] for item in reports[0]["oversized"]] == ["CORPUS/records.jsonl:10", "CORPUS/texts/large.txt"]
    assert reports[0]["malformed"][0][0] == "CORPUS/records.jsonl:8"
    local, remote = read_store(stores["local"]), read_store(stores["remote"])
    assert local.ids == remote.ids and (local.packed == remote.packed).all()
    assert (local.shingle_counts == remote.shingle_counts).all()
    assert local.content_hashes is not None and remote.content_hashes is not None
    assert (local.content_hashes == remote.content_hashes).all()
    assert [path.replace(str(corpus), f"{bucket}/corpus") for path in local.paths] == remote.paths

    (tmp_path / "bad").mkdir()
    pq.write_table(pa.table({"body": ["x"]}), tmp_path / "bad" / "zz.parquet")
    upload(tmp_path / "bad", f"{bucket}/corpus")
    message = f"{bucket}/corpus/zz.parquet has no column 'text' (its columns: body); name the column with "
    with pytest.raises(InputError, match=re.escape(message)):  # found by the walk, before any task is planned
        plan_sources([f"{bucket}/corpus"], InputOptions(), ReadReport(), io.BytesIO())
    code, _, stderr = invoke("sign", f"{bucket}/corpus", "-o", stores["remote"], "--id-field", "id")
    assert code == 1 and "Traceback" not in stderr
    assert stderr.strip().splitlines()[-1] == f"Error: {message}--text-field"


def test_filter_reads_and_writes_objects_as_it_does_files(bucket: str, tmp_path: Path) -> None:
    crawl = bible_jsonl(tmp_path / "crawl.jsonl")
    upload(tmp_path, f"{bucket}/in")
    written = {}
    for source, store, out, removed in ((str(crawl), str(tmp_path / "sigs"), str(tmp_path / "clean.jsonl"),
                                         str(tmp_path / "removed.tsv")),
                                        (f"{bucket}/in/crawl.jsonl", f"{bucket}/sigs", f"{bucket}/out/clean.jsonl",
                                         f"{bucket}/out/removed.tsv")):
        code, _, stderr = invoke("filter", source, "--sign", "--id-field", "id", "-s", store, "-o", out,
                                 "--removed", removed, "-t", "0.5", "-b", "2", "-q")
        assert code == 0, stderr
        written[store] = [Path(out).read_bytes() if not out.startswith("s3://") else read(out) for out in
                          (out, removed)]
    local, remote = written.values()
    assert local == remote and local[0].count(b"\n") < crawl.read_bytes().count(b"\n")


def test_filter_mirrors_a_prefix_into_another_as_it_mirrors_a_folder(bucket: str, tmp_path: Path) -> None:
    upload(BIBLE / "KJV", f"{bucket}/corpus")
    for inputs, store, out in ((str(BIBLE / "KJV"), str(tmp_path / "sigs"), str(tmp_path / "clean")),
                               (f"{bucket}/corpus/", f"{bucket}/sigs", f"{bucket}/clean/")):
        code, _, stderr = invoke("filter", inputs, "--sign", "-s", store, "-o", out, "-t", "0.3", "-q")
        assert code == 0, stderr
    local = {path.relative_to(tmp_path / "clean").as_posix(): path.read_bytes()
             for path in (tmp_path / "clean").rglob("*") if path.is_file() and path.name != ".dedup-filter.json"}
    remote = {key: read(f"{bucket}/clean/{key}") for key in keys(f"{bucket}/clean") if key != ".dedup-filter.json"}
    assert remote == local and len(local) == 8
    assert ".dedup-filter.json" in keys(f"{bucket}/clean")
    from dedup_cli.objectstore import objects

    objects.put(f"{bucket}/clean/stale.txt", b"left by an earlier output")
    code, _, stderr = invoke("filter", f"{bucket}/corpus/", "-s", f"{bucket}/sigs", "-o", f"{bucket}/clean/", "-t",
                             "0.3", "-q")
    assert code == 0, stderr
    assert "stale.txt" not in keys(f"{bucket}/clean")
    objects.put(f"{bucket}/foreign/mine.txt", b"not dedup's")
    code, _, stderr = invoke("filter", f"{bucket}/corpus/", "-s", f"{bucket}/sigs", "-o", f"{bucket}/foreign", "-q")
    assert code == 1 and "refusing to overwrite" in stderr
    assert read(f"{bucket}/foreign/mine.txt") == b"not dedup's"


def test_an_output_object_is_replaced_whole_or_not_at_all(bucket: str) -> None:
    from dedup_cli.atomic_files import open_output
    from dedup_cli.objectstore import objects

    url = f"{bucket}/out/groups.jsonl"
    with open_output(url, binary=False) as stream:
        stream.write("old\n")
    with pytest.raises(RuntimeError), open_output(url) as stream:
        stream.write(b"x" * (20 << 20))  # past one piece of a multipart upload
        raise RuntimeError("killed half-way")
    assert read(url) == b"old\n"
    assert objects.unfinished_uploads(bucket) == []


# --- one writer at a time, and every run commits completely or not at all ---------------------------------------


def test_a_second_sign_fails_at_once_naming_the_first_or_waits_for_it(bucket: str, tmp_path: Path) -> None:
    store = f"{bucket}/sigs"
    assert invoke("sign", str(BIBLE / "KJV"), "-o", store, "-q", "--id-root", str(BIBLE))[0] == 0
    # stdin read whole, as the store's other runs read files (its id scheme): one document.
    holder = dedup("sign", "-", "-o", store, "-q", stdin=subprocess.PIPE)
    try:
        lock = f"{store}/_dedup.lock"
        for _ in range(600):  # the holder has the lock once the object names it
            try:
                if json.loads(read(lock))["pid"] == holder.pid:
                    break
            except (OSError, ValueError, KeyError):
                pass
            assert holder.poll() is None, holder.communicate()[1]
            time.sleep(0.05)
        code, _, stderr = invoke("sign", str(BIBLE / "ASV"), "-o", store, "-q")
        assert code == 1
        assert stderr == (f"Error: store {store} is being written by another dedup run (pid {holder.pid}); try "
                          "again later\n")
        waiting = dedup("sign", str(BIBLE / "ASV"), "-o", store, "-q", "--wait", "120")
        assert holder.stdin is not None
        holder.stdin.write(b"a line from the first run\n")
        holder.stdin.close()
        assert holder.wait(timeout=120) == 0, holder.communicate()[1]
        assert waiting.wait(timeout=120) == 0, waiting.communicate()[1]
    finally:
        for process in (holder,):
            if process.poll() is None:
                process.kill()
    from dedup_cli import open_store

    runs = open_store(store).runs
    assert [run.added for run in runs] == [8, 1, 8]
    assert "_dedup.lock" not in keys(store)


def _corpus(path: Path, documents: int, seed: int) -> Path:
    generator = random.Random(seed)
    words = [f"w{index}" for index in range(3000)]
    path.mkdir(parents=True, exist_ok=True)
    for index in range(documents):
        (path / f"d{index:05d}.txt").write_text(" ".join(generator.choices(words, k=300)))
    return path


def test_sign_killed_at_random_moments_leaves_the_store_old_or_new(bucket: str, tmp_path: Path) -> None:
    """SIGKILL at random moments of sign runs into a bucket: every state a reader sees is a committed one, and the
    next run deletes what the killed ones left."""
    from dedup_cli import open_store

    store = f"{bucket}/sigs"
    corpus = _corpus(tmp_path / "corpus", 3000, seed=5)
    first = _corpus(tmp_path / "first", 8, seed=6)
    assert invoke("sign", str(first), "-o", store, "-q", "--id-root", str(tmp_path))[0] == 0
    generator = random.Random(11)
    old = open_store(store)
    assert old.documents == 8
    killed = 0
    # Runs until two were killed mid-run (six at most): a run that finishes first, on a fast machine, is a
    # committed state as well, but it tests nothing of the kill.
    for attempt in range(6):
        if killed >= 2:
            break
        _corpus(corpus, 3000, seed=20 + attempt)  # every document changed: the run has all of them to write
        run = dedup("sign", str(corpus), "-o", store, "-q", "-j", "1", "--kernel", "numpy")  # one speed all along
        time.sleep(generator.uniform(0.2, 1.2))
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=60)
        assert run.returncode in (0, -signal.SIGKILL), run.communicate()[1]
        killed += run.returncode == -signal.SIGKILL
        now = open_store(store)
        assert now.documents in (8, 3008)
        assert len(now.read().ids) == now.documents  # every listed part is there, whole
    assert killed
    code, _, stderr = invoke("sign", str(corpus), "-o", store, "-q")
    assert code == 0, stderr
    after = open_store(store)
    assert after.documents == 3008
    listed = {part.file for part in after.manifest.parts} | {"_dedup_manifest.json"}
    assert set(keys(store)) == listed  # nothing of the killed runs is left
    from dedup_cli.objectstore import objects

    assert objects.unfinished_uploads(store) == []


def test_a_dead_holder_on_this_host_is_taken_over_and_a_live_one_on_another_is_not(bucket: str) -> None:
    from dedup_cli.objectstore import objects

    store = f"{bucket}/sigs"
    assert invoke("sign", str(BIBLE / "KJV"), "-o", store, "-q")[0] == 0
    lock = f"{store}/_dedup.lock"
    objects.put(lock, json.dumps({"token": "ab" * 8, "pid": 2 ** 22 + 1, "host": os.uname().nodename}).encode())
    assert invoke("sign", str(BIBLE / "KJV"), "-o", store, "-q")[0] == 0  # the pid is gone: taken over
    objects.put(lock, json.dumps({"token": "cd" * 8, "pid": 1, "host": "elsewhere"}).encode())
    code, _, stderr = invoke("sign", str(BIBLE / "KJV"), "-o", store, "-q")
    assert code == 1 and "(pid 1 on elsewhere); try again later" in stderr


# --- a server that fails ------------------------------------------------------------------------------------------


def test_dropped_connections_and_server_errors_are_retried(bucket: str, tmp_path: Path, proxy: FaultProxy,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    upload(BIBLE / "KJV", f"{bucket}/kjv")
    expected = invoke("sign", str(BIBLE / "KJV"), "-o", str(tmp_path / "sigs"), "-q")
    assert expected[0] == 0
    proxy.faults = Faults(rate=0.25, kinds=("500", "503", "drop", "drop-after"), limit=8, seed=3)
    code, _, stderr = invoke("sign", f"{bucket}/kjv", "-o", f"{bucket}/sigs", "-q")
    assert code == 0, stderr
    code, stdout, stderr = invoke("find", f"{bucket}/sigs", "-t", "0.3", "-q")
    assert code == 0, stderr
    assert stdout == invoke("find", str(tmp_path / "sigs"), "-t", "0.3", "-q")[1]
    assert sum(proxy.faults.injected.values()) >= 4  # the faults did happen, and were retried


def test_a_server_that_keeps_failing_is_one_line_and_commits_nothing(bucket: str, proxy: FaultProxy,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    store = f"{bucket}/sigs"
    assert invoke("sign", str(BIBLE / "KJV"), "-o", store, "-q", "--id-root", str(BIBLE))[0] == 0
    before = read(f"{store}/_dedup_manifest.json")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "2")
    proxy.faults = Faults(rate=1.0, kinds=("503",), methods=("PUT", "POST"))
    code, _, stderr = invoke("sign", str(BIBLE / "ASV"), "-o", store, "-q")
    assert code == 1
    assert stderr.startswith(f"Error: store {store}: ") or stderr.startswith(f"Error: cannot lock store {store}: ")
    assert "answered SlowDown (HTTP 503) after 2 attempts; try again later" in stderr
    assert stderr.count("\n") == 1 and "Traceback" not in stderr
    proxy.faults = Faults()
    assert read(f"{store}/_dedup_manifest.json") == before


def test_refused_credentials_are_one_line(bucket: str, proxy: FaultProxy, monkeypatch: pytest.MonkeyPatch) -> None:
    proxy.faults = Faults(access_key=ACCESS_KEY)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "not-the-key")
    code, _, stderr = invoke("find", f"{bucket}/sigs", "-q")
    assert code == 1
    assert stderr == (f"Error: {bucket}/sigs/_dedup_manifest.json: access denied by {proxy.endpoint} "
                      "(InvalidAccessKeyId); check the credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or "
                      "AWS_PROFILE)\n")


def test_a_missing_bucket_is_one_line(s3_server: S3Server, tmp_path: Path) -> None:
    for command in (["sign", str(BIBLE / "KJV"), "-o", "s3://no-such-bucket/sigs"],
                    ["find", "s3://no-such-bucket/sigs"], ["sign", "s3://no-such-bucket/corpus/", "-o",
                                                            str(tmp_path / "sigs")]):
        code, _, stderr = invoke(*command, "-q")
        assert code == 1, command
        assert stderr.startswith("Error: s3://no-such-bucket/") and stderr.count("\n") == 1, stderr
        assert (f"bucket no-such-bucket does not exist at {s3_server.endpoint}; create it, or check the URL and "
                "AWS_ENDPOINT_URL\n") in stderr
    code, _, stderr = invoke("find", "s3://" + ObjectPath("s3://x/y").bucket + "/y")
    assert code == 1


def test_without_the_s3_extra_a_url_is_one_line_naming_it(tmp_path: Path) -> None:
    hide = ("import sys; sys.modules['s3fs'] = None; from dedup_cli.cli.main import cli; "
            "cli(['find', 's3://bucket/sigs'], prog_name='dedup')")
    result = subprocess.run([sys.executable, "-c", hide], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert result.stderr == ("Error: s3://bucket/sigs is in object storage, which needs the s3 extra (s3fs is not "
                             "installed); install it with: pip install 'dedup-cli[s3]'\n")


# --- requests -----------------------------------------------------------------------------------------------------


def test_find_makes_requests_in_proportion_to_parts_not_rows(bucket: str, tmp_path: Path, proxy: FaultProxy) -> None:
    counts = {}
    for name, documents in (("small", 50), ("large", 3000)):
        corpus = _corpus(tmp_path / name, documents, seed=7)
        store = f"{bucket}/{name}"
        for part in range(3):  # three sign runs, so three parts
            inputs = sorted(corpus.iterdir())[part::3]
            code, _, stderr = invoke("sign", *map(str, inputs), "-o", store, "-q", "--id-root", str(corpus))
            assert code == 0, stderr
        proxy.reset()
        code, _, stderr = invoke("find", store, "-t", "0.5", "--verify", "none", "-q")
        assert code == 0, stderr
        counts[name] = dict(proxy.requests)
    assert counts["small"] == counts["large"]
    assert counts["large"] == {"GET": 1 + 3, "HEAD": 3}  # the manifest, then per part its size and its bytes
