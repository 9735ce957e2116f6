"""Nothing lost by a recipe: the default store, ids that never change, safe set input, prune and progress."""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from helpers import REPO, raises_worded

import dedup_cli as dedup
from dedup_cli.cli.main import cli
from dedup_cli.errors import UsageError
from dedup_cli.options.finding import FindOptions
from dedup_cli.options.input_options import InputOptions
from dedup_cli.options.signing import SignOptions
from dedup_cli.store.format import MANIFEST_NAME
from dedup_cli.store.store import open_store, read_store

ENV = {**os.environ, "PYTHONPATH": str(REPO)}
ENV.pop("DEDUP_STORE", None)


def run(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> tuple[int, str, str]:
    previous = Path.cwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        result = CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)
    finally:
        os.chdir(previous)
    return result.exit_code, result.stdout, result.stderr


def words(prefix: str, count: int = 150) -> str:
    return " ".join(f"{prefix}{i}" for i in range(count))


def dedup_command() -> list[str]:
    """The installed ``dedup`` script when there is one (as a user types it), else the module."""
    script = Path(sys.executable).parent / "dedup"
    return [str(script)] if script.exists() else [sys.executable, "-m", "dedup_cli"]


# --- 1. the design card's commands, exactly as typed ---------------------------------------------------------


def test_the_design_cards_two_commands_work_as_typed_in_a_fresh_directory(tmp_path: Path) -> None:
    shutil.copytree(REPO / "sample_corpora" / "bible-editions", tmp_path / "corpus")
    (tmp_path / "corpus" / "SOURCE").unlink()
    signed = subprocess.run([*dedup_command(), "sign", "corpus/"], cwd=tmp_path, env=ENV, capture_output=True,
                            text=True, check=False)
    assert signed.returncode == 0, signed.stderr
    assert "into dedup.parquet" in signed.stderr and (tmp_path / "dedup.parquet" / MANIFEST_NAME).exists()
    found = subprocess.run([*dedup_command(), "find", "--threshold", "0.5", "--bits", "2"], cwd=tmp_path, env=ENV,
                           capture_output=True, text=True, check=False)
    assert found.returncode == 0, found.stderr
    assert found.stderr.startswith("dedup.parquet: 48 documents")
    groups = [json.loads(line) for line in found.stdout.splitlines()]
    assert groups and {"group", "size", "members"} <= set(groups[0])


def test_dedup_store_names_the_store_for_every_command(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text(words("w"))
    (corpus / "b.txt").write_text(words("w") + " tail")
    env = {"DEDUP_STORE": str(tmp_path / "named.parquet")}
    code, _, stderr = run("sign", str(corpus), env=env, cwd=tmp_path)
    assert code == 0 and f"into {tmp_path / 'named.parquet'}" in stderr
    assert not (tmp_path / "dedup.parquet").exists()
    code, stdout, stderr = run("find", "--output", "pairs", env=env, cwd=tmp_path)
    assert code == 0 and stderr.startswith(f"{tmp_path / 'named.parquet'}: 2 documents")
    assert [(r["id_a"], r["id_b"]) for r in map(json.loads, stdout.splitlines())] == [("a.txt", "b.txt")]
    code, stdout, _ = run("info", env=env, cwd=tmp_path)
    assert code == 0 and json.loads(stdout)["documents"] == 2
    code, stdout, _ = run("estimate", "a.txt", "b.txt", "--format", "json", env=env, cwd=tmp_path)
    assert code == 0 and json.loads(stdout)["ids"] == ["a.txt", "b.txt"]
    # A command's own variable and an explicit store win over DEDUP_STORE.
    other = tmp_path / "other.parquet"
    assert run("sign", str(corpus), "-o", str(other), "-q", env=env)[0] == 0
    code, stdout, _ = run("info", str(other), env=env)
    assert json.loads(stdout)["store"] == str(other)
    code, stdout, _ = run("estimate", str(other), "a.txt", "b.txt", "--format", "json", env=env)
    assert code == 0
    code, stdout, _ = run("estimate", "--store", str(other), "a.txt", "b.txt", "--format", "json", env=env)
    assert code == 0


def test_without_any_store_the_message_names_the_default(tmp_path: Path) -> None:
    code, _, stderr = run("find", cwd=tmp_path)
    assert code == 1 and "store dedup.parquet does not exist" in stderr and "Traceback" not in stderr


# --- 2. ids that do not depend on the other inputs -----------------------------------------------------------


@pytest.fixture
def two_folders(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    (data / "a").mkdir(parents=True)
    (data / "b").mkdir()
    (data / "a" / "x1.txt").write_text(words("x"))
    (data / "a" / "x2.txt").write_text(words("y"))
    (data / "b" / "y1.txt").write_text(words("x") + " and a tail")
    return data


def test_a_later_run_keeps_the_ids_and_refuses_an_input_outside_the_root(tmp_path: Path, two_folders: Path) -> None:
    store = tmp_path / "s"
    assert run("sign", str(two_folders / "a"), "-o", str(store), "-q")[0] == 0
    assert read_store(store).ids == ["x1.txt", "x2.txt"]
    assert open_store(store).id_root == str(two_folders / "a")
    manifest_before = (store / MANIFEST_NAME).read_bytes()
    # Before: the second run stored x1.txt again as a/x1.txt, and find paired the file with itself.
    code, _, stderr = run("sign", str(two_folders / "a"), str(two_folders / "b"), "-o", str(store))
    assert code == 2
    assert f"input {two_folders / 'b'} lies outside {two_folders / 'a'}" in stderr
    assert (store / MANIFEST_NAME).read_bytes() == manifest_before
    # A file inside the root named alone keeps its id.
    code, _, stderr = run("sign", str(two_folders / "a" / "x1.txt"), "-o", str(store))
    assert code == 0 and "(0 new, 0 changed, 1 unchanged" in stderr
    assert read_store(store).ids == ["x1.txt", "x2.txt"]


def test_id_root_fixes_the_root_for_later_siblings(tmp_path: Path, two_folders: Path) -> None:
    store = tmp_path / "s"
    assert run("sign", str(two_folders / "a"), "--id-root", str(two_folders), "-o", str(store), "-q")[0] == 0
    assert run("sign", str(two_folders / "b"), "-o", str(store), "-q")[0] == 0
    assert read_store(store).ids == ["a/x1.txt", "a/x2.txt", "b/y1.txt"]
    code, _, stderr = run("sign", str(two_folders / "b"), "--id-root", str(two_folders / "b"), "-o", str(store))
    assert code == 2 and f"differs from {two_folders}" in stderr


def test_a_store_from_before_roots_were_recorded_keeps_its_ids(tmp_path: Path, two_folders: Path) -> None:
    store = tmp_path / "s"
    assert run("sign", str(two_folders), "-o", str(store), "-q")[0] == 0
    manifest = json.loads((store / MANIFEST_NAME).read_text())
    manifest.pop("id_root")
    (store / MANIFEST_NAME).write_text(json.dumps(manifest))
    code, _, stderr = run("sign", str(two_folders / "a"), "-o", str(store))
    assert code == 0 and "(0 new, 0 changed, 2 unchanged" in stderr
    assert read_store(store).ids == ["a/x1.txt", "a/x2.txt", "b/y1.txt"]
    assert open_store(store).id_root == str(two_folders)


def test_the_deletion_recipe_after_two_runs_with_different_inputs_keeps_a_copy_of_everything(
        tmp_path: Path, two_folders: Path) -> None:
    store = tmp_path / "sigs.parquet"
    (two_folders / "a" / "x3.txt").write_text(words("x") + " a different tail")
    contents = {path.relative_to(two_folders).as_posix(): path.read_text() for path in two_folders.rglob("*.txt")}
    assert run("sign", str(two_folders), "-o", str(store), "-q")[0] == 0
    # The second run names only one folder; before, its ids changed and every file became its own duplicate.
    code, _, stderr = run("sign", str(two_folders / "a"), "-o", str(store))
    assert code == 0 and "0 new" in stderr
    recipe = (f"{' '.join(dedup_command())} find {store} --group strict --keep longest --output members --format tsv "
              "-q | awk -F'\\t' '$3==\"drop\"' | cut -f1 | xargs -d '\\n' rm --")
    subprocess.run(["sh", "-c", recipe], cwd=two_folders, env=ENV, check=True)
    remaining = {path.relative_to(two_folders).as_posix(): path.read_text() for path in two_folders.rglob("*.txt")}
    deleted = set(contents) - set(remaining)
    assert deleted, "the corpus has near-duplicates; the recipe should delete some"
    assert "a/x2.txt" in remaining  # unrelated to everything
    base = words("x")
    for name in deleted:
        assert contents[name].startswith(base)
        assert any(text.startswith(base) for text in remaining.values()), f"{name} has no kept near-duplicate"


def test_one_file_under_two_names_is_never_its_own_duplicate(tmp_path: Path) -> None:
    corpus, store = tmp_path / "corpus", tmp_path / "s"
    corpus.mkdir()
    (corpus / "real.txt").write_text(words("r"))
    (corpus / "alias.txt").symlink_to(corpus / "real.txt")  # sorts before real.txt: kept first by id
    os.link(corpus / "real.txt", corpus / "hard.txt")
    (corpus / "unrelated.txt").write_text(words("u"))
    assert run("sign", str(corpus), "-o", str(store), "-q")[0] == 0
    assert len(read_store(store)) == 4
    code, stdout, stderr = run("find", str(store), "--output", "pairs")
    assert code == 0 and stdout == ""
    assert "2 documents are the same file on disk as another document" in stderr
    # With a real near-duplicate beside it, a group holds the file once, so deleting the drops keeps it.
    (corpus / "zcopy.txt").write_text(words("r") + " tail")
    assert run("sign", str(corpus), "-o", str(store), "-q")[0] == 0
    code, stdout, _ = run("find", str(store), "--output", "members", "--keep", "longest")
    members = [json.loads(line) for line in stdout.splitlines()]
    assert {m["id"] for m in members} == {"alias.txt", "zcopy.txt"}


# --- 3. integer sets never wipe a store -----------------------------------------------------------------------


@pytest.fixture
def set_files(tmp_path: Path) -> Path:
    folder = tmp_path / "sets"
    folder.mkdir()
    (folder / "one.tsv").write_text("a\t" + " ".join(map(str, range(0, 600))) + "\n"
                                    "b\t" + " ".join(map(str, range(100, 700))) + "\n")
    (folder / "two.jsonl").write_text(json.dumps({"id": "c", "elements": list(range(300, 900))}) + "\n")
    (folder / "skip.txt").write_text("d\t1 2 3\n")
    return folder


def test_set_input_needs_an_input_and_never_removes_without_prune(tmp_path: Path, set_files: Path) -> None:
    store = tmp_path / "sets.parquet"
    base = ["sign", "--input-format", "sets", "--universe", "4096", "-o", str(store), "-q"]
    assert run(*base, str(set_files / "one.tsv"), str(set_files / "two.jsonl"))[0] == 0
    assert read_store(store).ids == ["a", "b", "c"]
    manifest_before = (store / MANIFEST_NAME).read_bytes()
    code, _, stderr = run(*base)  # before: an empty run that removed every stored set
    assert code == 1 and "no input given" in stderr
    assert (store / MANIFEST_NAME).read_bytes() == manifest_before
    # A run over one file adds nothing and removes nothing; only --prune removes.
    code, _, stderr = run(*base[:-1], str(set_files / "one.tsv"))
    assert code == 0 and "(0 new, 0 changed, 2 unchanged, 0 moved, 0 removed" in stderr
    assert read_store(store).ids == ["a", "b", "c"]
    code, _, stderr = run(*base[:-1], str(set_files / "one.tsv"), "--prune")
    assert code == 0 and "1 removed" in stderr and read_store(store).ids == ["a", "b"]


def test_set_input_honours_files_from_include_exclude_and_jobs(tmp_path: Path, set_files: Path) -> None:
    listing = tmp_path / "list"
    listing.write_text(f"{set_files / 'one.tsv'}\n")
    base = ["sign", "--input-format", "sets", "--universe", "4096", "-q"]
    assert run(*base, "--files-from", str(listing), "-o", str(tmp_path / "listed"))[0] == 0
    assert read_store(tmp_path / "listed").ids == ["a", "b"]
    assert run(*base, str(set_files), "--exclude", "*.txt", "-o", str(tmp_path / "walked"))[0] == 0
    assert read_store(tmp_path / "walked").ids == ["a", "b", "c"]
    assert run(*base, str(set_files), "--include", "*.jsonl", "-o", str(tmp_path / "some"))[0] == 0
    assert read_store(tmp_path / "some").ids == ["c"]
    many = tmp_path / "many.tsv"
    many.write_text("".join(f"s{i}\t{' '.join(str(j) for j in range(i, i + 300))}\n" for i in range(3000)))
    for jobs in ("1", "2"):
        assert run(*base, str(many), "--jobs", jobs, "-o", str(tmp_path / f"jobs{jobs}"))[0] == 0
    one, two = read_store(tmp_path / "jobs1"), read_store(tmp_path / "jobs2")
    assert one.ids == two.ids and (one.packed == two.packed).all() and len(one) == 3000


@pytest.mark.parametrize("option", [["--shingle-size", "3"], ["--shingle-unit", "char"], ["--scheme", "oph"],
                                    ["--text-field", "body"], ["--id-field", "key"]])
def test_text_options_are_refused_for_sets(tmp_path: Path, set_files: Path, option: list[str]) -> None:
    code, _, stderr = run("sign", "--input-format", "sets", "--universe", "4096", str(set_files / "one.tsv"),
                          "-o", str(tmp_path / "s"), *option)
    assert code == 2 and option[0] in stderr and not (tmp_path / "s").exists()


def test_set_rows_have_absolute_locations_and_content_hashes(tmp_path: Path, set_files: Path) -> None:
    store = tmp_path / "sets.parquet"
    relative = os.path.relpath(set_files / "one.tsv", tmp_path)
    assert run("sign", "--input-format", "sets", "--universe", "4096", relative, "-o", str(store), "-q",
               cwd=tmp_path)[0] == 0
    stored = read_store(store)
    assert stored.paths == [f"{set_files / 'one.tsv'}#line=1", f"{set_files / 'one.tsv'}#line=2"]
    assert stored.content_hashes is not None and all(stored.content_hashes != 0)
    # From another directory the exact resemblance is still found: |a ∩ b| = 500, |a ∪ b| = 700.
    code, stdout, _ = run("estimate", str(store), "a", "b", "--exact", "--format", "json", cwd=REPO)
    assert code == 0 and json.loads(stdout)["exact"] == pytest.approx(500 / 700)
    # An edited set is noticed rather than verified against its new elements.
    (set_files / "one.tsv").write_text("a\t1 2 3\n" + (set_files / "one.tsv").read_text().split("\n")[1] + "\n")
    code, _, stderr = run("estimate", str(store), "a", "b", "--exact")
    assert code == 1 and "changed since it was signed" in stderr


# --- 4. smaller surprises --------------------------------------------------------------------------------------


@pytest.mark.parametrize("compressed", [False, True])
def test_prune_does_not_depend_on_modification_times(tmp_path: Path, compressed: bool) -> None:
    corpus, store = tmp_path / "corpus", tmp_path / "s"
    corpus.mkdir()
    suffix = ".txt.gz" if compressed else ".txt"
    for name in ("touched", "untouched"):
        data = words(name).encode()
        (corpus / f"{name}{suffix}").write_bytes(gzip.compress(data, mtime=0) if compressed else data)
    (corpus / "short.txt").write_text("a short document under the limit")
    assert run("sign", str(corpus), "-o", str(store), "-q")[0] == 0
    os.utime(corpus / f"touched{suffix}", ns=(10**18, 10**18))
    # Both long documents are now over the limit: both are skipped, so --prune treats them alike (removing 2 of
    # the 3 stored documents takes --force-prune).
    code, _, stderr = run("sign", str(corpus), "-o", str(store), "--force-prune", "--max-document-bytes", "100")
    assert code == 0 and "2 removed" in stderr
    assert read_store(store).ids == ["short.txt"]


@pytest.mark.parametrize("kind", ["jsonl", "jsonl.gz", "files"])
def test_progress_counts_input_bytes_and_reaches_the_total(tmp_path: Path, kind: str) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    if kind == "files":
        for index in range(30):
            (corpus / f"d{index}.txt").write_text(words(f"d{index}w"))
        inputs = [str(corpus)]
    else:
        lines = "".join(json.dumps({"text": words(f"r{i}w"), "extra": i}) + "\n" for i in range(300)).encode()
        path = corpus / f"records.{kind}"
        path.write_bytes(gzip.compress(lines) if kind.endswith(".gz") else lines)
        inputs = [str(path)]
    for run_number in (1, 2):  # the second run finds everything unchanged
        totals: list[int | None] = []
        advanced: list[int] = []
        dedup.sign(inputs, tmp_path / "s", SignOptions(num_perm=16), progress=advanced.append,
                   on_start=totals.append)
        on_disk = sum(path.stat().st_size for path in corpus.iterdir())
        assert totals == [on_disk], run_number
        assert sum(advanced) == on_disk, run_number


def test_the_library_and_the_cli_share_their_defaults() -> None:
    command = cli.commands["find"]
    library = {field.name: field.default for field in dataclasses.fields(FindOptions)}
    names = {"group_method": "group", "candidates": "candidates", "verify": "verify", "keep": "keep",
             "ways": "ways", "bits": "bits", "bands": "bands", "rows": "rows", "new_since": "new_since"}
    for parameter in command.params:
        if isinstance(parameter, click.Option) and parameter.name in names:
            assert library[names[parameter.name]] == parameter.default, parameter.name


def test_options_are_checked_before_the_store_is_read(tmp_path: Path, small_corpus: Path) -> None:
    store = tmp_path / "s"
    assert run("sign", str(small_corpus), "-o", str(store), "-q")[0] == 0
    for part in store.glob("part-*.parquet"):
        part.write_bytes(b"damaged")  # reading the store would fail; the options are wrong first
    code, _, stderr = run("find", str(store), "--bits", "17")
    assert code == 2 and "--bits 17 exceeds the 16 bits stored" in stderr
    code, _, stderr = run("find", str(store), "--bands", "300", "--rows", "1")
    assert code == 2 and "needs 300 values" in stderr
    code, _, stderr = run("estimate", str(store), "a.txt", "b.txt", "c.txt", "--bits", "1")
    assert code == 2 and "needs --bits 2 or more" in stderr
    with raises_worded(UsageError, "--group 'nope'"):
        dedup.find(store, FindOptions(threshold=0.5, group="nope"))
    with raises_worded(UsageError, "--keep 'nope'"):
        dedup.find(store, FindOptions(threshold=0.5, keep="nope"))
    with raises_worded(UsageError, "--verify 'nope'"):
        dedup.find(store, FindOptions(threshold=0.5, verify="nope"))
    code, _, stderr = run("find", str(store))
    assert code == 1 and "damaged" in stderr


def test_input_options_refuse_contradictions() -> None:
    with raises_worded(UsageError, "needs --universe"):
        InputOptions(input_format="sets")
    with raises_worded(UsageError, "--universe applies only"):
        InputOptions(universe=10)
