"""An object renamed or deleted since it was signed (without --prune) is gone, as a local file is: never kept in
place of the live copy. Objects are looked at by one listing of a prefix that holds many of them, else one by one."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from dedup_cli.cli.main import cli
from dedup_cli.inputs import liveness

pytest.importorskip("s3fs", reason="object storage needs the s3 extra: pip install 'dedup-cli[s3]'")


def text(topic: int) -> str:
    return " ".join(f"t{topic}w{i}" for i in range(120))


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env={"DEDUP_STORE": None})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("listed", [True, False])
def test_a_renamed_object_is_never_kept(bucket: str, monkeypatch: pytest.MonkeyPatch, listed: bool) -> None:
    from dedup_cli.objectstore import objects

    monkeypatch.setattr(liveness, "LISTED_OBJECTS", 1 if listed else 1000)  # the two grouped objects: listed?
    corpus = f"{bucket}/corpus"
    for topic in range(12):
        objects.put(f"{corpus}/d{topic:02d}.txt", text(topic).encode())
    objects.put(f"{corpus}/a.txt", text(99).encode())
    store = f"{bucket}/sigs"
    assert invoke("sign", f"{corpus}/", "-o", store, "-q")[0] == 0
    objects.put(f"{corpus}/z.txt", text(99).encode())  # a.txt renamed to z.txt
    objects.delete(f"{corpus}/a.txt")
    assert invoke("sign", f"{corpus}/", "-o", store, "-q")[0] == 0
    asked: list[str] = []
    real = liveness._object_mtime_ns

    def one_object(url: str) -> int:
        asked.append(url)
        return real(url)

    def reread(*args: object) -> object:
        raise AssertionError("an object that did not change since it was signed was read again")

    monkeypatch.setattr(liveness, "_object_mtime_ns", one_object)
    monkeypatch.setattr(liveness, "reread_documents", reread)
    code, stdout, stderr = invoke("find", store, "--output", "members")
    assert code == 0, stderr
    # Listed: only the object the listing does not show is asked for; else each grouped one.
    assert sorted(asked) == ([f"{corpus}/a.txt"] if listed else [f"{corpus}/a.txt", f"{corpus}/z.txt"])
    found = {record["id"]: record["action"] for record in map(json.loads, stdout.splitlines())}
    assert found == {"a.txt": "gone", "z.txt": "keep"}
    assert "e.g. a.txt" in stderr
