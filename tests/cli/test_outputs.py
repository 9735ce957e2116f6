"""Outputs that respect what they write to: files replaced atomically, devices, FIFOs and descriptors written in
place, links kept, write errors reported, closed pipes a quiet stop, and the operating system's errors one line."""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import REPO

from dedup_cli.atomic_files import OutputError, open_output, output_target, rereadable
from dedup_cli.cli.main import cli

BIBLE = REPO / "sample_corpora" / "bible-editions"
LONG_NAME = "n" * 300
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env={"DEDUP_STORE": None})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def dedup(*args: str, **options: object) -> subprocess.CompletedProcess[bytes]:
    environment = {key: value for key, value in os.environ.items() if not key.startswith("DEDUP_")}
    return subprocess.run([sys.executable, "-m", "dedup_cli", *args], capture_output=True, env=environment,
                          timeout=120, **options)  # type: ignore[call-overload]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("outputs") / "sigs"
    code, _, stderr = invoke("sign", str(BIBLE), "--exclude", "SOURCE", "-o", str(path), "-q")
    assert code == 0, stderr
    return path


@pytest.fixture(scope="module")
def expected(store: Path) -> str:
    code, stdout, stderr = invoke("find", str(store), "-t", "0.5", "-b", "2", "-q")
    assert code == 0 and stdout.count("\n") == 9, stderr
    return stdout


def identity(path: str | Path) -> tuple[int, int, int]:
    status = os.lstat(path)
    return status.st_ino, status.st_mode, status.st_rdev


# --- what a path is decides how it is written --------------------------------------------------------------------


def test_a_regular_file_is_replaced_atomically_keeping_its_permissions(store: Path, expected: str,
                                                                        tmp_path: Path) -> None:
    out = tmp_path / "groups.jsonl"
    out.write_text("old\n")
    out.chmod(0o640)
    before = identity(out)
    assert invoke("find", str(store), "-t", "0.5", "-b", "2", "-q", "-o", str(out))[0] == 0
    assert out.read_text() == expected
    assert identity(out)[0] != before[0], "replaced by a rename, not rewritten in place"
    assert stat.S_IMODE(out.stat().st_mode) == 0o640
    assert sorted(os.listdir(tmp_path)) == ["groups.jsonl"]


def test_a_link_to_a_file_keeps_being_a_link_and_its_target_is_replaced(store: Path, expected: str,
                                                                         tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "groups.jsonl"
    target.write_text("old\n")
    link = tmp_path / "latest.jsonl"
    link.symlink_to(target)
    dangling = tmp_path / "dangling.jsonl"
    dangling.symlink_to(tmp_path / "real" / "new.jsonl")
    for path, written in ((link, target), (dangling, tmp_path / "real" / "new.jsonl")):
        assert invoke("find", str(store), "-t", "0.5", "-b", "2", "-q", "-o", str(path))[0] == 0
        assert path.is_symlink() and written.read_text() == expected


def test_the_null_device_is_written_in_place_never_replaced(store: Path) -> None:
    before = identity("/dev/null")
    for args in (["find", str(store), "-o", "/dev/null"], ["find", str(store), "--format", "parquet", "-o",
                                                            "/dev/null"],
                 ["plan", "-o", "/dev/null"], ["info", str(store), "-o", "/dev/null"],
                 ["filter", str(BIBLE / "KJV" / "jonah-01.txt"), "-s", str(store), "-o", "/dev/null",
                  "--removed", "/dev/null"]):
        code, _, stderr = invoke(*args, "-q") if args[0] in ("find", "filter") else invoke(*args)
        assert code == 0, (args, stderr)
        assert identity("/dev/null") == before, args


@pytest.mark.skipif(not IS_ROOT, reason="making a device node needs root")
def test_a_device_made_like_dev_null_stays_a_device(store: Path, tmp_path: Path) -> None:
    device = tmp_path / "null"
    try:
        os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("this container may not make device nodes")
    before = identity(device)
    assert invoke("find", str(store), "-q", "-o", str(device))[0] == 0
    assert invoke("eval", str(store), "-t", "0.5", "-b", "2", "--sample", "50", "-q", "--plot", str(device))[0] == 0
    assert identity(device) == before


def test_a_full_device_is_an_error_naming_it(store: Path) -> None:
    before = identity("/dev/full")
    for args in (["find", str(store), "-q", "-o", "/dev/full"], ["plan", "-o", "/dev/full"],
                 ["find", str(store), "-q", "--format", "parquet", "-o", "/dev/full"],
                 ["eval", str(store), "-t", "0.5", "-b", "2", "--sample", "50", "-q", "--plot", "/dev/full"]):
        code, _, stderr = invoke(*args)
        assert (code, stderr) == (1, "Error: cannot write /dev/full: No space left on device\n"), args
    assert identity("/dev/full") == before


def test_a_fifo_is_written_in_place(store: Path, expected: str, tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    code, _, stderr = invoke("find", str(store), "-t", "0.5", "-b", "2", "-q", "-o", str(fifo))
    reader.join(60)
    assert code == 0, stderr
    assert received == [expected.encode()]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_unix_socket_is_connected_to_and_written(store: Path, expected: str, tmp_path: Path) -> None:
    import socket

    address = tmp_path / "socket"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(address))
    server.listen(1)
    received = bytearray()

    def serve() -> None:
        connection, _ = server.accept()
        with connection:
            while chunk := connection.recv(1 << 16):
                received.extend(chunk)

    thread = threading.Thread(target=serve)
    thread.start()
    code, _, stderr = invoke("find", str(store), "-t", "0.5", "-b", "2", "-q", "-o", str(address))
    thread.join(60)
    server.close()
    assert code == 0, stderr
    assert bytes(received) == expected.encode() and stat.S_ISSOCK(os.lstat(address).st_mode)


def test_descriptors_and_process_substitution_are_written_where_they_point(store: Path, expected: str,
                                                                           tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    command = f"{sys.executable} -m dedup_cli find {store} -t 0.5 -b 2 -q"
    script = (f"echo first > {out}; {command} -o /dev/stdout >> {out}; "
              f"{command} -o >(gzip > {tmp_path}/x.gz); sleep 0.5; {command} -o /proc/self/fd/2 2> {tmp_path}/err")
    done = subprocess.run(["bash", "-c", script], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert out.read_text() == "first\n" + expected, "appended where the shell's >> points"
    assert subprocess.run(["gzip", "-dc", str(tmp_path / "x.gz")], capture_output=True).stdout == expected.encode()
    assert (tmp_path / "err").read_text() == expected


def test_output_target_follows_links_one_at_a_time(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    with pytest.raises(OSError) as loop:
        output_target(tmp_path / "a")
    assert loop.value.errno == errno.ELOOP
    with pytest.raises(IsADirectoryError):
        output_target(tmp_path)
    (tmp_path / "stdout").symlink_to("/dev/stdout")
    assert output_target(tmp_path / "stdout").in_place
    assert output_target(tmp_path / "new").kind == "absent"


# --- failures leave the old output and say what happened ---------------------------------------------------------


def test_a_failed_write_leaves_the_old_file(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    out.write_text("old\n")

    class Full:
        def write(self, data: bytes) -> int:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with pytest.raises(OutputError) as caught, open_output(out) as stream:
        stream.write(b"new, partly")
        stream._stream = Full()  # the disk fills up half-way
        stream.write(b"more")
    assert caught.value.filename == str(out) and caught.value.errno == errno.ENOSPC
    assert out.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["out.txt"]


def test_a_full_disk_under_find_is_one_line_and_the_old_output_stays(store: Path, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text("old\n")
    import dedup_cli.cli.record_writers as delimited

    class Full:
        def write(self, data: object) -> int:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def full(records: object, kind: str, fmt: str, stream: object, **_: object) -> int:
        stream.write("half a record")  # type: ignore[attr-defined]
        stream._stream = Full()  # type: ignore[attr-defined]  # the disk fills up half-way
        stream.write("the other half")  # type: ignore[attr-defined]
        return 1

    monkeypatch.setattr(delimited, "write_records", full)
    code, _, stderr = invoke("find", str(store), "-q", "-o", str(out))
    assert (code, stderr) == (1, f"Error: cannot write {out}: No space left on device\n")
    assert out.read_text() == "old\n" and os.listdir(tmp_path) == ["out.jsonl"]


@pytest.mark.parametrize("args", [
    ["find", LONG_NAME], ["find", "{store}", "--against", LONG_NAME], ["eval", "{store}", "--truth", LONG_NAME],
    ["find", "{store}", "-o", f"{LONG_NAME}/x"], ["info", LONG_NAME], ["sign", str(BIBLE), "-o", LONG_NAME],
    ["filter", str(BIBLE / "KJV" / "jonah-01.txt"), "-s", "{store}", "-o", LONG_NAME],
])
def test_names_too_long_are_one_line_errors(store: Path, args: list[str]) -> None:
    code, _, stderr = invoke(*[arg.format(store=store) for arg in args])
    assert code == 1, stderr
    assert stderr.count("\n") == 1 and stderr.startswith("Error: ") and "File name too long" in stderr, stderr


def test_verbose_adds_the_traceback(store: Path, tmp_path: Path) -> None:
    (tmp_path / "loop").symlink_to("loop")
    code, _, stderr = invoke("find", str(tmp_path / "loop"), "-v")
    assert code == 1 and "Traceback" in stderr and stderr.splitlines()[-1].endswith("Too many levels of symbolic links")
    code, _, stderr = invoke("find", str(tmp_path / "loop"))
    assert code == 1 and stderr == f"Error: {tmp_path / 'loop'}: Too many levels of symbolic links\n"


# --- inputs that are not files -----------------------------------------------------------------------------------


def test_a_fifo_or_device_where_a_store_belongs_is_refused_at_once(store: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for args in (["find", str(fifo)], ["find", str(store), "--against", str(fifo)], ["info", str(fifo)],
                 ["find", "/dev/zero"], ["sign", str(BIBLE / "KJV"), "-o", str(fifo)],
                 ["sign", str(BIBLE / "KJV"), "-o", "/dev/null"]):
        done = dedup(*args, "-q") if args[0] == "sign" else dedup(*args)  # a hang fails by the timeout
        assert done.returncode == 1 and done.stderr.count(b"\n") == 1, (args, done.stderr)
        assert b"not a store" in done.stderr, done.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_truth_and_members_files_may_be_pipes(store: Path, tmp_path: Path) -> None:
    truth = tmp_path / "truth.tsv"
    truth.write_text("id_a\tid_b\tresemblance\nKJV/jonah-01.txt\tAKJV/jonah-01.txt\t0.9\n")
    members = tmp_path / "members.tsv"
    assert invoke("find", str(store), "--output", "members", "--format", "tsv", "-o", str(members), "-q")[0] == 0
    command = f"{sys.executable} -m dedup_cli"
    script = (f"{command} eval {store} --truth <(cat {truth}) --format json -q > {tmp_path}/from-pipe.json && "
              f"{command} eval {store} --truth {truth} --format json -q > {tmp_path}/from-file.json && "
              f"{command} filter {BIBLE}/KJV/jonah-01.txt -s {store} --members <(cat {members}) -o {tmp_path}/a -q &&"
              f" {command} filter {BIBLE}/KJV/jonah-01.txt -s {store} --members {members} -o {tmp_path}/b -q")
    done = subprocess.run(["bash", "-c", script], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    import json

    def measured(name: str) -> dict[str, object]:
        record = json.loads((tmp_path / name).read_text())
        record.pop("seconds")
        record["accuracy"]["truth"].pop("path")
        return record

    assert measured("from-pipe.json") == measured("from-file.json")
    assert measured("from-pipe.json")["accuracy"]["truth"]["pairs"] == 1  # type: ignore[index]
    assert (tmp_path / "a").read_bytes() == (tmp_path / "b").read_bytes()


def test_rereadable_refuses_devices_that_never_end(tmp_path: Path) -> None:
    with pytest.raises(OSError, match="not read as a file"):
        rereadable("/dev/zero")
    assert rereadable(tmp_path / "x") == str(tmp_path / "x")


# --- pipes -------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def many_pairs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store whose pairs output (about 2 MB) is far more than a pipe holds."""
    root = tmp_path_factory.mktemp("pipes")
    corpus = root / "corpus"
    corpus.mkdir()
    text = (BIBLE / "KJV" / "jonah-01.txt").read_text()
    for number in range(150):
        (corpus / f"copy-{number:03d}.txt").write_text(text + f" copy {number}")
    assert invoke("sign", str(corpus), "-o", str(root / "sigs"), "-q")[0] == 0
    return root / "sigs"


@pytest.mark.parametrize(("flags", "code"), [((), 0), (("--fail-on-duplicates",), 3)])
def test_a_closed_pipe_stops_quietly(many_pairs: Path, flags: tuple[str, ...], code: int, tmp_path: Path) -> None:
    command = f"{sys.executable} -m dedup_cli find {many_pairs} --output pairs --verify none {' '.join(flags)}"
    done = subprocess.run(["bash", "-c", f"set -o pipefail; {command} | head -1; echo status=${{PIPESTATUS[0]}}"],
                          capture_output=True, timeout=120, cwd=tmp_path)
    lines = done.stdout.decode().splitlines()
    assert lines[0].startswith('{"id_a"') and lines[-1] == f"status={code}", done.stdout[-300:]
    assert done.stderr == b"", done.stderr
    assert os.listdir(tmp_path) == []


# --- a summary line names every file the run wrote ---------------------------------------------------------------


def test_each_summary_line_names_the_files_written(store: Path, tmp_path: Path) -> None:
    code, _, stderr = invoke("find", str(store), "-t", "0.5", "-b", "2", "--output", "members", "-o",
                             str(tmp_path / "members.jsonl"))
    assert code == 0 and stderr.rstrip().endswith(f"; wrote 37 members to {tmp_path / 'members.jsonl'}"), stderr
    code, _, stderr = invoke("find", str(store), "-t", "0.5", "-b", "2")  # to stdout: no file named
    assert code == 0 and "wrote" not in stderr, stderr
    code, _, stderr = invoke("filter", str(BIBLE), "-s", str(store), "-t", "0.5", "-b", "2", "--exclude", "SOURCE",
                             "-o", str(tmp_path / "clean"), "--removed", str(tmp_path / "removed.tsv"))
    assert code == 0 and f"into {tmp_path / 'clean'} (store" in stderr, stderr
    # filter's witness groups drop 20 of find's 28: a chapter linked to the kept one only through another is kept
    assert stderr.rstrip().endswith(f"; wrote the 20 documents dropped to {tmp_path / 'removed.tsv'}"), stderr
    code, _, stderr = invoke("eval", str(store), "-t", "0.5", "-b", "2", "--sample", "50", "--plot",
                             str(tmp_path / "eval.png"), "-o", str(tmp_path / "eval.txt"))
    assert code == 0, stderr
    assert stderr.splitlines()[1].endswith(f"; wrote the pictures to {tmp_path / 'eval.png'} and the report to "
                                           f"{tmp_path / 'eval.txt'}"), stderr


def test_an_output_in_a_missing_folder_is_named_not_its_scratch_file(store: Path, tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such"
    for args in (["find", str(store), "-q", "-o", str(missing / "out.jsonl")],
                 ["eval", str(store), "-q", "--sample", "50", "--plot", str(missing / "eval.png")]):
        code, _, stderr = invoke(*args)
        assert (code, stderr) == (1, f"Error: cannot write {args[-1]}: No such file or directory\n"), args
