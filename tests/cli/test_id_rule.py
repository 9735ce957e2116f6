"""One id rule across sign runs and within one: an id belongs to the source that gave it; the store pins how its
runs give ids; a second stdin batch numbered by line is refused; find says when stdin documents cannot be
verified. Through Click's CliRunner and a real subprocess, several runs into one store."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from dedup_cli.cli.main import cli
from dedup_cli.store.store import read_store

A = "the quick brown fox jumps over the lazy dog and then runs far away into the forest near the river bank today"
B = "completely different words about cooking pasta with tomato sauce garlic basil and olive oil for a family dinner"
C = "another unrelated text on astronomy stars galaxies telescopes nebulae planets orbit moons comets meteors space"


def run(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), input=stdin, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def process(*args: str, stdin: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dedup_cli", *args], input=stdin, capture_output=True, text=True,
                          cwd=cwd, timeout=300)


def jsonl(path: Path, *records: tuple[str, str]) -> Path:
    path.write_text("".join(json.dumps({"id": identifier, "text": text}) + "\n" for identifier, text in records))
    return path


def batches(folder: Path) -> tuple[Path, Path]:
    """b1: x (A), y (B); b2: x (C), z (A): z is a copy of b1's x, and b2's x reuses b1's id."""
    return jsonl(folder / "b1.jsonl", ("x", A), ("y", B)), jsonl(folder / "b2.jsonl", ("x", C), ("z", A))


def groups(store: Path) -> list[list[str]]:
    code, stdout, stderr = run("find", str(store), "-q")
    assert code == 0, stderr
    return [json.loads(line)["members"] for line in stdout.splitlines()]


def stored(store: Path) -> dict[str, str]:
    """id → the stored location of each live document."""
    signatures = read_store(store)
    return dict(zip(signatures.ids, signatures.paths, strict=True))


def test_an_id_from_another_file_in_a_later_run_is_skipped_naming_both_as_in_one_run(tmp_path: Path) -> None:
    b1, b2 = batches(tmp_path)
    together = tmp_path / "together.parquet"
    assert run("sign", str(b1), str(b2), "--id-field", "id", "-o", str(together), "-q")[0] == 0
    apart = tmp_path / "apart.parquet"
    assert run("sign", str(b1), "--id-field", "id", "-o", str(apart), "-q")[0] == 0
    code, _, stderr = run("sign", str(b2), "--id-field", "id", "-o", str(apart))
    assert code == 0
    assert f"skipped {b2}:1: id 'x' is stored from another source, {b1}:1, which keeps it" in stderr
    assert "(1 new, 0 changed, 0 unchanged, 0 moved, 0 removed;" in stderr and "1 input skipped" in stderr
    assert stored(apart) == stored(together)
    assert groups(apart) == groups(together) == [["x", "z"]]
    # From the file that gave it, the same id with other text is a change; the other file's is still skipped.
    jsonl(b1, ("y", B), ("x", C))  # x moved down a line and changed
    code, _, stderr = run("sign", str(b1), str(b2), "--id-field", "id", "-o", str(apart))
    assert code == 0 and "(0 new, 1 changed, 1 unchanged, 1 moved, 0 removed;" in stderr  # y moved up a line
    assert stderr.count("is stored from another source") == 1
    assert stored(apart)["x"] == f"{b1}#line=2&field=text"
    assert groups(apart) == []  # x is C now, z is A


def test_a_real_process_skips_an_id_another_file_keeps(tmp_path: Path) -> None:
    b1, b2 = batches(tmp_path)
    first = process("sign", "b1.jsonl", "--id-field", "id", "-o", "inc.parquet", "-q", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    second = process("sign", "b2.jsonl", "--id-field", "id", "-o", "inc.parquet", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert f"id 'x' is stored from another source, {b1}:1" in second.stderr
    found = process("find", "inc.parquet", "-q", cwd=tmp_path)
    assert [json.loads(line)["members"] for line in found.stdout.splitlines()] == [["x", "z"]]


def test_a_renamed_file_hands_its_ids_on_and_records_where_they_are_now(tmp_path: Path) -> None:
    b1, _ = batches(tmp_path)
    store = tmp_path / "s.parquet"
    assert run("sign", str(b1), "--id-field", "id", "-o", str(store), "-q")[0] == 0
    renamed = b1.rename(tmp_path / "renamed.jsonl")
    code, _, stderr = run("sign", str(renamed), "--id-field", "id", "-o", str(store))
    assert code == 0 and "warning" not in stderr
    assert "(0 new, 0 changed, 0 unchanged, 2 moved, 0 removed;" in stderr  # unchanged text, a new place: not signed
    assert stored(store) == {"x": f"{renamed}#line=1&field=text", "y": f"{renamed}#line=2&field=text"}
    code, _, stderr = run("sign", str(renamed), "--id-field", "id", "-o", str(store))
    assert "(0 new, 0 changed, 2 unchanged, 0 moved, 0 removed;" in stderr


def test_prune_hands_on_the_ids_of_a_file_left_out_of_the_inputs(tmp_path: Path) -> None:
    b1, _ = batches(tmp_path)
    store = tmp_path / "s.parquet"
    assert run("sign", str(b1), "--id-field", "id", "-o", str(store), "-q")[0] == 0
    copy = jsonl(tmp_path / "copy.jsonl", ("x", A), ("y", B))
    code, _, stderr = run("sign", str(copy), "--id-field", "id", "-o", str(store))
    assert code == 0 and stderr.count("is stored from another source") == 2  # b1.jsonl is there: it keeps them
    code, _, stderr = run("sign", str(copy), "--id-field", "id", "-o", str(store), "--prune")
    assert code == 0 and "warning" not in stderr  # the inputs are the whole corpus: b1.jsonl's documents go
    assert "(0 new, 0 changed, 0 unchanged, 2 moved, 0 removed;" in stderr
    assert set(stored(store).values()) == {f"{copy}#line=1&field=text", f"{copy}#line=2&field=text"}


def test_a_second_stdin_batch_without_ids_is_refused_and_the_store_kept(tmp_path: Path) -> None:
    store = tmp_path / "s.parquet"
    assert run("sign", "-", "--input-format", "lines", "-o", str(store), "-q", stdin=f"{A}\n{B}\n")[0] == 0
    manifest = (store / "_dedup_manifest.json").read_bytes()
    code, _, stderr = run("sign", "-", "--input-format", "lines", "-o", str(store), stdin=f"{C}\n")
    assert code == 2 and len(stderr.splitlines()) == 1
    assert "holds 2 documents of an earlier stdin batch" in stderr and "--id-field" in stderr
    assert (store / "_dedup_manifest.json").read_bytes() == manifest
    # The same stream again, as the whole corpus: its lines keep their ids.
    code, _, stderr = run("sign", "-", "--input-format", "lines", "-o", str(store), "--prune", stdin=f"{A}\n{B}\n")
    assert code == 0 and "(0 new, 0 changed, 2 unchanged, 0 moved, 0 removed;" in stderr


def test_stdin_batches_with_ids_add_and_change_documents_from_one_source(tmp_path: Path) -> None:
    store = tmp_path / "s.parquet"
    first = "".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in (("x", A), ("y", B)))
    second = "".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in (("x", C), ("z", A)))
    options = ("--input-format", "jsonl", "--id-field", "id", "-o", str(store))
    assert process("sign", "-", *options, "-q", stdin=first).returncode == 0
    again = process("sign", "-", *options, stdin=second)
    assert again.returncode == 0, again.stderr
    assert "(1 new, 1 changed, 0 unchanged, 0 moved, 0 removed;" in again.stderr  # one source, stdin: x changed
    assert sorted(stored(store)) == ["x", "y", "z"]
    # A batch without ids would name its documents by their positions in the stream: the store gives ids by the
    # field, and says so.
    refused = process("sign", "-", "--input-format", "jsonl", "-o", str(store), stdin=second)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "earlier stdin batch" in refused.stderr
    assert "--id-field" in refused.stderr


def test_a_run_that_gives_ids_another_way_is_refused_naming_both(tmp_path: Path) -> None:
    b1, _ = batches(tmp_path)
    store = tmp_path / "s.parquet"
    assert run("sign", str(b1), "--id-field", "id", "-o", str(store), "-q")[0] == 0
    manifest = (store / "_dedup_manifest.json").read_bytes()
    code, _, stderr = run("sign", str(b1), "-o", str(store))
    assert code == 2 and len(stderr.splitlines()) == 1
    assert "--input-format auto, no --id-field" in stderr and "--input-format auto, --id-field 'id'" in stderr
    assert (store / "_dedup_manifest.json").read_bytes() == manifest
    # auto reads a .jsonl file as JSON Lines: naming the format gives the same ids; reading it by lines does not.
    assert run("sign", str(b1), "--input-format", "jsonl", "--id-field", "id", "-o", str(store), "-q")[0] == 0
    done = process("sign", str(b1), "--input-format", "lines", "-o", str(store))
    assert done.returncode == 2 and "--input-format lines, no --id-field" in done.stderr
    assert "Traceback" not in done.stderr
    assert groups(store) == [] and sorted(stored(store)) == ["x", "y"]


def test_a_store_that_recorded_no_id_scheme_takes_the_next_runs(tmp_path: Path) -> None:
    b1, _ = batches(tmp_path)
    store = tmp_path / "s.parquet"
    assert run("sign", str(b1), "--id-field", "id", "-o", str(store), "-q")[0] == 0
    path = store / "_dedup_manifest.json"
    older = json.loads(path.read_text())
    del older["inputs"]  # as stores signed before runs recorded how they read their inputs
    path.write_text(json.dumps(older))
    assert run("sign", str(b1), "--id-field", "id", "-o", str(store), "-q")[0] == 0
    assert run("sign", str(b1), "-o", str(store), "-q")[0] == 2  # pinned by the run before


def test_find_says_once_even_quiet_that_stdin_documents_cannot_be_verified(tmp_path: Path) -> None:
    store = tmp_path / "s.parquet"
    lines = f"{A}\n{A} and more\n{B}\n"
    assert process("sign", "-", "--input-format", "lines", "-o", str(store), "-q", stdin=lines).returncode == 0
    found = process("find", str(store), "-q")
    assert found.returncode == 0
    assert found.stderr.splitlines() == [
        "warning: 3 documents were signed from stdin and cannot be re-read: their pairs near the threshold are "
        "decided from the estimate alone; sign from files to verify them (docs/inputs.md)"]
    found = process("find", str(store))
    assert "gone or changed" not in found.stderr and found.stderr.count("signed from stdin") == 1
    # Nothing to verify, nothing to say; and a store signed from files says nothing.
    assert "stdin" not in process("find", str(store), "-q", "--verify", "none").stderr
    (tmp_path / "corpus.txt").write_text(lines)
    assert run("sign", str(tmp_path / "corpus.txt"), "--input-format", "lines", "-o", str(tmp_path / "f.parquet"),
               "-q")[0] == 0
    assert "stdin" not in process("find", str(tmp_path / "f.parquet"), "-q").stderr


def test_plain_text_files_join_a_store_of_records_without_its_id_field_and_pin_nothing(tmp_path: Path) -> None:
    # Text files are named by their paths whatever the options: --id-field does not apply to them (and is refused
    # there), so the store's id field for its records neither asks for it nor is changed by such a run.
    b1, _ = batches(tmp_path)
    store = tmp_path / "s.parquet"
    texts = tmp_path / "texts"
    texts.mkdir()
    (texts / "a.txt").write_text(A)
    assert run("sign", str(b1), "--id-field", "id", "-o", str(store), "-q")[0] == 0
    code, _, stderr = run("sign", str(texts), "-o", str(store))
    assert code == 0 and "(1 new, 0 changed" in stderr, stderr
    code, _, stderr = run("sign", str(texts), "--id-field", "id", "-o", str(store))
    assert code == 2 and "plain text" in stderr
    later = jsonl(tmp_path / "later.jsonl", ("z", C))
    assert run("sign", str(later), "--id-field", "id", "-o", str(store), "-q")[0] == 0
    code, _, stderr = run("sign", str(later), "-o", str(store))
    assert code == 2 and "--id-field 'id'" in stderr
    assert sorted(stored(store)) == ["texts/a.txt", "x", "y", "z"]
