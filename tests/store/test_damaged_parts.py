"""A store part that is not what dedup wrote: valid Parquet of another schema, or a part with one flipped bit.

Every command that reads the store (find, info, estimate, eval, sign into it, filter) fails with one line naming
the part and exit code 1, never a traceback and never an answer computed from other bytes. A flipped bit is found
by the pages' checksums (data and dictionary pages), by the footer's decoding, or by the check of the columns (a
flip in a column's name); where it lands on bytes no command reads (the leading magic bytes, statistics, the
part's own copy of the parameters, which the manifest's override), the command's output is the clean store's.
"""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner, Result
from helpers import REPO, SAMPLE_CORPORA

from dedup_cli.cli.main import cli
from dedup_cli.store.store import read_store

CORPUS = SAMPLE_CORPORA / "licenses"
PART = "part-000001.parquet"


def commands(store: Path, ids: list[str], out: Path) -> dict[str, list[str]]:
    """Each command that reads the store, with what it needs."""
    return {
        "find": ["find", str(store), "--format", "tsv"],
        "info": ["info", str(store)],
        "estimate": ["estimate", str(store), ids[0], ids[1]],
        "eval": ["eval", str(store)],
        "sign": ["sign", str(CORPUS), "-o", str(store), "-q"],
        "filter": ["filter", str(CORPUS), "--store", str(store), "-o", str(out / "kept"), "-q"],
    }


def run(arguments: list[str]) -> Result:
    return CliRunner().invoke(cli, arguments)


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("clean") / "store"
    signed = run(["sign", str(CORPUS), "-o", str(store), "-q"])
    assert signed.exit_code == 0, signed.output
    assert [name for name in sorted(p.name for p in store.iterdir()) if name.startswith("part-")] == [PART]
    return store


@pytest.fixture(scope="module")
def clean_outputs(clean: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Each command's stdout on a copy of the clean store (sign and filter change what they are given)."""
    outputs = {}
    ids = read_store(clean).ids
    for name in ("find", "info", "estimate", "eval"):
        copy = tmp_path_factory.mktemp(name) / "store"
        shutil.copytree(clean, copy)
        result = run(commands(copy, ids, copy.parent)[name])
        assert result.exit_code == 0, result.output
        outputs[name] = result.stdout.replace(str(copy), "STORE")
    return outputs


def assert_refused(result: Result, store: Path, name: str) -> str:
    """One line on stderr naming the store and the file, exit code 1, no traceback."""
    assert result.exit_code == 1, (result.exit_code, result.output)
    assert isinstance(result.exception, SystemExit), result.exception
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"Error: {store} is damaged ({name}: "), lines[0]
    assert lines[0].endswith("; sign the corpus again into a new store"), lines[0]
    return lines[0]


def damaged_copy(clean: Path, folder: Path, name: str, content: bytes) -> Path:
    store = folder / "store"
    shutil.copytree(clean, store)
    (store / name).write_bytes(content)
    return store


def parquet_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


def foreign_tables(clean: Path) -> dict[str, pa.Table]:
    part = pq.read_table(clean / PART)
    return {
        "other columns": pa.table({"a": [1, 2], "b": ["x", "y"]}),
        "a column missing": part.drop_columns(["content_hash"]),
        "a column of another type": part.set_column(part.schema.get_field_index("size"), "size",
                                                    part.column("size").cast(pa.string())),
        "signatures as variable-width binary": part.set_column(part.schema.get_field_index("signature"), "signature",
                                                               part.column("signature").cast(pa.binary())),
    }


@pytest.mark.parametrize("kind", ["other columns", "a column missing", "a column of another type",
                                  "signatures as variable-width binary"])
def test_a_part_of_another_schema(clean: Path, tmp_path: Path, kind: str) -> None:
    ids = read_store(clean).ids
    reasons = {"other columns": "it has no column 'id' (its columns: a, b)",
               "a column missing": "it has no column 'content_hash'",
               "a column of another type": "its column 'size' is string, not int64",
               "signatures as variable-width binary": "its column 'signature' is binary, not fixed-size binary"}
    for command in ("find", "info", "estimate", "eval", "sign", "filter"):
        store = damaged_copy(clean, tmp_path / command, PART, parquet_bytes(foreign_tables(clean)[kind]))
        line = assert_refused(run(commands(store, ids, store.parent)[command]), store, PART)
        assert f"not a file dedup wrote: {reasons[kind]}" in line, line


def test_a_removal_file_of_another_schema(clean: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    shutil.copytree(CORPUS, corpus)
    store = tmp_path / "store"
    assert run(["sign", str(corpus), "-o", str(store), "-q"]).exit_code == 0
    next(iter(sorted(corpus.iterdir()))).unlink()
    assert run(["sign", str(corpus), "-o", str(store), "--prune", "-q"]).exit_code == 0
    removal = next(p.name for p in store.iterdir() if p.name.startswith("_removed-"))
    (store / removal).write_bytes(parquet_bytes(pa.table({"id": [1], "run": ["two"]})))
    for arguments in (["find", str(store)], ["info", str(store)], ["eval", str(store)],
                      ["sign", str(corpus), "-o", str(store)], ["filter", str(corpus), "--store", str(store), "-o",
                                                                str(tmp_path / "kept")]):
        line = assert_refused(run(arguments), store, removal)
        assert "not a file dedup wrote: its column 'id' is int64, not string" in line


def flipped(data: bytes, position: int, bit: int) -> bytes:
    changed = bytearray(data)
    changed[position] ^= 1 << bit
    return bytes(changed)


def page_regions(path: Path) -> dict[str, tuple[int, int]]:
    """Byte ranges of the part: a dictionary page and the data pages of the signatures, the ids' column chunk,
    and the footer."""
    metadata = pq.ParquetFile(path).metadata
    columns = {metadata.row_group(0).column(c).path_in_schema: metadata.row_group(0).column(c)
               for c in range(metadata.num_columns)}
    signature, identifier = columns["signature"], columns["id"]
    assert signature.has_dictionary_page
    size = path.stat().st_size
    footer = int.from_bytes(path.read_bytes()[-8:-4], "little")
    return {
        "signature dictionary page": (signature.dictionary_page_offset, signature.data_page_offset),
        "signature data pages": (signature.data_page_offset,
                                 signature.dictionary_page_offset + signature.total_compressed_size),
        "id column chunk": (identifier.dictionary_page_offset,
                            identifier.dictionary_page_offset + identifier.total_compressed_size),
        "footer": (size - 8 - footer, size - 8),
    }


def test_a_flipped_bit_in_the_pages_of_signatures_is_an_error_naming_the_part(clean: Path, tmp_path: Path) -> None:
    data = (clean / PART).read_bytes()
    regions = page_regions(clean / PART)
    rng = random.Random(20260601)
    ids = read_store(clean).ids
    for region in ("signature dictionary page", "signature data pages"):
        start, end = regions[region]
        for sample in range(2):
            # A page's bytes follow its header: the chunk's last bytes are its last page's, the dictionary page's
            # bytes start a few dozen bytes in.
            low = start + 40 if region == "signature dictionary page" else end - 24
            position, bit = rng.randrange(low, end), rng.randrange(8)
            store = damaged_copy(clean, tmp_path / f"{region}-{sample}", PART, flipped(data, position, bit))
            for command in ("find", "estimate", "eval"):
                line = assert_refused(run(commands(store, ids, store.parent)[command]), store, PART)
                assert "checksum" in line.lower() or "corrupt" in line.lower(), line


def test_a_flipped_bit_anywhere_is_an_error_naming_the_part_or_changes_nothing(
        clean: Path, clean_outputs: dict[str, str], tmp_path: Path) -> None:
    data = (clean / PART).read_bytes()
    regions = page_regions(clean / PART)
    rng = random.Random(7)
    ids = read_store(clean).ids
    positions = [rng.randrange(len(data)) for _ in range(6)] + [0]  # the leading magic bytes, unchecked
    positions += [rng.randrange(*regions[region]) for region in ("id column chunk", "footer", "footer")]
    # A flip in a column's name (in the footer's schema) is a part of another schema.
    positions.append(data.rindex(b"shingle_count") + 3)
    outcomes = {"refused": 0, "unchanged": 0}
    for number, position in enumerate(positions):
        bit = rng.randrange(8)
        for command in ("find", "info", "estimate", "eval"):
            store = damaged_copy(clean, tmp_path / f"{number}-{command}", PART, flipped(data, position, bit))
            result = run(commands(store, ids, store.parent)[command])
            if result.exit_code == 0:
                assert result.stdout.replace(str(store), "STORE") == clean_outputs[command], (position, command)
                outcomes["unchanged"] += 1
            else:
                assert_refused(result, store, PART)
                outcomes["refused"] += 1
    assert outcomes["refused"] >= 20  # most bytes are pages, each checked


def test_every_command_refuses_a_part_with_a_bad_page_in_a_real_process(clean: Path, tmp_path: Path) -> None:
    data = (clean / PART).read_bytes()
    end = page_regions(clean / PART)["signature data pages"][1]
    ids = read_store(clean).ids
    for command in ("find", "estimate", "eval", "filter"):
        store = damaged_copy(clean, tmp_path / command, PART, flipped(data, end - 10, 3))
        done = subprocess.run([sys.executable, "-m", "dedup_cli", *commands(store, ids, store.parent)[command]],
                              capture_output=True, text=True, timeout=300, cwd=tmp_path,
                              env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
        assert done.returncode == 1, done.stderr
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
        assert done.stderr.startswith(f"Error: {store} is damaged ({PART}: ")


def test_parts_are_written_with_page_checksums(clean: Path) -> None:
    """Verified, a clean part reads; with the checksum of a page wrong the same read fails (so they are there)."""
    data = (clean / PART).read_bytes()
    end = page_regions(clean / PART)["signature data pages"][1]
    damaged = pa.BufferReader(flipped(data, end - 10, 0))
    with pytest.raises(OSError, match="(?i)checksum|crc"):
        pq.ParquetFile(damaged, page_checksum_verification=True).read()
    pq.ParquetFile(pa.BufferReader(data), page_checksum_verification=True).read()


def test_each_column_of_a_row_group_is_verified_the_first_time_it_is_read(clean: Path, tmp_path: Path) -> None:
    """A local part is verified once per open (find reads the signatures once per round of bands): the first read
    of every column of a row group is verified, whatever was read before, and a read again gives the same table."""
    from dedup_cli.errors import StoreError
    from dedup_cli.store.snapshot import open_part

    data = (clean / PART).read_bytes()
    end = page_regions(clean / PART)["signature data pages"][1]
    (tmp_path / PART).write_bytes(flipped(data, end - 10, 2))
    part = open_part(tmp_path, PART)
    try:
        first = part.read_row_group(0, columns=["id", "run"])
        assert part.read_row_group(0, columns=["id", "run"]).equals(first)
        with pytest.raises(StoreError, match="CRC checksum verification failed"):
            part.read_row_group(0, columns=["id", "signature"])
    finally:
        part.close()
    (tmp_path / PART).write_bytes(data)
    part = open_part(tmp_path, PART)
    try:
        once = part.read_row_group(0, columns=["signature"])
        assert part.read_row_group(0, columns=["signature"]).equals(once)
        assert once.equals(pq.read_table(clean / PART, columns=["signature"]))
    finally:
        part.close()


@pytest.fixture(scope="module")
def grown(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(corpus, store): the licenses signed, then one of them removed by a prune and another edited: two parts and
    a removal file."""
    folder = tmp_path_factory.mktemp("grown")
    corpus, store = folder / "corpus", folder / "store"
    shutil.copytree(CORPUS, corpus)
    assert run(["sign", str(corpus), "-o", str(store), "-q"]).exit_code == 0
    files = sorted(corpus.iterdir())
    files[0].unlink()
    files[1].write_text(files[1].read_text() + " edited")
    assert run(["sign", str(corpus), "-o", str(store), "--prune", "-q"]).exit_code == 0
    return corpus, store


def _missing(grown: tuple[Path, Path], folder: Path, name: str) -> tuple[Path, Path, list[list[str]]]:
    """A copy of the grown store without ``name``, its corpus, and each command that reads it."""
    corpus, clean = grown
    store = folder / "store"
    shutil.copytree(clean, store)
    (store / name).unlink()
    ids = sorted(read_store(clean).ids)
    reference = folder / "reference"
    assert run(["sign", str(CORPUS), "-o", str(reference), "-q"]).exit_code == 0
    return corpus, store, [
        ["find", str(store)], ["find", str(store), "-j", "2"], ["find", str(store), "--ways", "3"],
        ["find", str(store), "--new-since", "1"], ["find", str(store), "--against", str(reference)],
        ["find", str(reference), "--against", str(store)], ["info", str(store)],
        ["estimate", str(store), ids[0], ids[1]], ["eval", str(store)],
        ["sign", str(corpus), "-o", str(store), "-q"], ["sign", str(corpus), "-o", str(store), "--prune", "-q"],
        ["filter", str(corpus), "--store", str(store), "-o", str(folder / "kept"), "-q"],
    ]


@pytest.mark.parametrize("name", ["part-000001.parquet", "part-000002.parquet", "_removed-000003.parquet"])
def test_a_listed_file_missing_is_damage_for_every_command(grown: tuple[Path, Path], tmp_path: Path,
                                                           name: str) -> None:
    """Not "the store kept changing; try again": the manifest did not change, so no retry would help."""
    _, store, arguments = _missing(grown, tmp_path, name)
    assert (grown[1] / name).exists()
    for command in arguments:
        result = run(command)
        assert result.exit_code == 1 and isinstance(result.exception, SystemExit), (command, result.output)
        assert result.stderr.splitlines() == [
            f"Error: {store} is damaged ({name} is listed in its manifest but missing); sign the corpus again "
            "into a new store"], command
    assert sorted(p.name for p in store.iterdir()) == sorted(p.name for p in grown[1].iterdir() if p.name != name)


def test_a_listed_file_missing_in_a_real_process(grown: tuple[Path, Path], tmp_path: Path) -> None:
    _, store, _ = _missing(grown, tmp_path, "part-000001.parquet")
    done = subprocess.run([sys.executable, "-m", "dedup_cli", "find", str(store)], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert (done.returncode, done.stdout, done.stderr) == (1, "", (
        f"Error: {store} is damaged (part-000001.parquet is listed in its manifest but missing); sign the corpus "
        "again into a new store\n"))


def test_find_follows_a_compaction_but_not_a_missing_file(grown: tuple[Path, Path], tmp_path: Path) -> None:
    """find's reader, opened on a manifest whose part a compaction then deleted, reads the newer manifest; opened
    on one whose part is simply gone, it says the store is damaged at once."""
    from dedup_cli.errors import StoreError
    from dedup_cli.store.documents import NumberedDocuments
    from dedup_cli.store.store import open_store

    store = tmp_path / "store"
    shutil.copytree(grown[1], store)
    stale = open_store(store)
    assert open_store(store).compact()
    with NumberedDocuments([stale]) as documents:
        assert documents.documents == len(read_store(grown[1]))
    stale = open_store(store)
    assert stale.manifest is not None
    (store / stale.manifest.parts[0].file).unlink()
    with pytest.raises(StoreError, match="is listed in its manifest but missing"):
        NumberedDocuments([stale])
