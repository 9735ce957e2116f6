"""End-to-end: the dedup command through Click's CliRunner and a real subprocess."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import REPO, SAMPLE_CORPORA, exact_resemblances

from dedup_cli.cli.main import cli

GOLDEN = REPO / "tests" / "golden"


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def bible_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("bible") / "sigs.parquet"
    corpus = SAMPLE_CORPORA / "bible-editions"
    code, _, stderr = run("sign", str(corpus), "--exclude", "SOURCE", "-o", str(store))
    assert code == 0, stderr
    assert "signed 48 documents" in stderr
    return store


def test_bible_editions_found_and_no_cross_chapter_pair(bible_store: Path, bible_dir: Path) -> None:
    code, stdout, _ = run("find", str(bible_store), "--threshold", "0.5", "--bits", "2", "--output", "pairs")
    assert code == 0
    reported = {(r["id_a"], r["id_b"]) for r in map(json.loads, stdout.splitlines())}
    truth = exact_resemblances(bible_dir)
    chapter = lambda doc_id: doc_id.split("/")[1]  # noqa: E731 - "KJV/ruth-01.txt" → "ruth-01.txt"
    must_find = {pair for pair, r in truth.items() if r >= 0.6}
    assert must_find and must_find <= reported
    assert all(chapter(a) == chapter(b) for a, b in reported)


def test_groups_match_golden_output(bible_store: Path) -> None:
    code, stdout, _ = run("find", str(bible_store), "--threshold", "0.5", "--bits", "2", "--quiet")
    assert code == 0
    assert stdout == (GOLDEN / "bible-groups-t0.5-b2.jsonl").read_text()
    # Verified pairs count by their exact resemblance, so no group's weakest link is below R0.
    assert all(json.loads(line)["weakest"] >= 0.5 for line in stdout.splitlines())


def test_pairs_tsv_and_csv_are_parseable(bible_store: Path) -> None:
    _, tsv, _ = run("find", str(bible_store), "--output", "pairs", "--format", "tsv", "-q")
    rows = list(csv.DictReader(io.StringIO(tsv), delimiter="\t"))
    assert rows and list(rows[0]) == ["id_a", "id_b", "estimate", "stderr", "ci_low", "ci_high", "matches", "exact"]
    estimates = [float(r["estimate"]) for r in rows]
    assert estimates == sorted(estimates, reverse=True)
    for row in rows:
        assert float(row["ci_low"]) <= float(row["estimate"]) <= float(row["ci_high"]) + 1e-9
    _, groups_csv, _ = run("find", str(bible_store), "--format", "csv", "-q", "--no-header")
    first = next(csv.reader(io.StringIO(groups_csv)))
    assert first[0] == "1" and first[2].endswith(".txt")


def test_output_file_and_environment_variables(bible_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "pairs.jsonl"
    code, stdout, _ = run("find", str(bible_store), "-o", str(out), "--output", "pairs", "-q",
                          env={"DEDUP_FIND_THRESHOLD": "0.9"})
    assert code == 0 and stdout == ""
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert records and all(r["estimate"] >= 0.9 for r in records)
    assert not list(tmp_path.glob(".*tmp*"))


def test_small_corpus_skips_binary_and_never_groups_empty_documents(small_corpus: Path, tmp_path: Path) -> None:
    store = tmp_path / "s.parquet"
    code, _, stderr = run("sign", str(small_corpus), "-o", str(store), "--num-perm", "128")
    assert code == 0
    assert "skipped binary file" in stderr and "image.bin" in stderr
    # the empty document has no shingle; "too short" (fewer words than a shingle) has one, itself
    assert ("signed 6 documents (6 new, 0 changed, 0 unchanged, 0 moved, 0 removed; 1 with no shingle; "
            "1 input skipped)") in stderr
    code, stdout, _ = run("find", str(store), "--threshold", "0.8", "-q")
    groups = [json.loads(line) for line in stdout.splitlines()]
    assert [(g["group"], g["size"], g["members"], g["representative"]) for g in groups] == [
        (1, 3, ["a.txt", "b.txt", "sub/c.txt"], "a.txt")
    ]
    assert 0.8 <= groups[0]["weakest"] <= 1.0
    code, stdout, _ = run("info", str(store))
    info = json.loads(stdout)
    assert info["documents"] == 6 and info["empty"] == 1 and info["params"]["num_perm"] == 128


def test_ids_are_relative_to_the_common_root_of_several_inputs(tmp_path: Path, small_corpus: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "a.txt").write_text((small_corpus / "a.txt").read_text())
    store = tmp_path / "s.parquet"
    assert run("sign", str(small_corpus), str(other), "-o", str(store), "-q")[0] == 0
    _, stdout, _ = run("find", str(store), "--threshold", "0.9", "--output", "pairs", "-q")
    pairs = {(r["id_a"], r["id_b"]) for r in map(json.loads, stdout.splitlines())}
    assert ("corpus/a.txt", "other/a.txt") in pairs


def test_include_and_exclude_globs(small_corpus: Path, tmp_path: Path) -> None:
    store = tmp_path / "s.parquet"
    _, _, stderr = run("sign", str(small_corpus), "-o", str(store), "--include", "*.txt", "--exclude", "sub/*")
    assert "signed 5 documents" in stderr and "binary" not in stderr and "0 inputs skipped" in stderr


# --- errors: one line, the right exit code, nothing damaged -------------------------------------------


def test_missing_input(tmp_path: Path) -> None:
    code, _, stderr = run("sign", str(tmp_path / "nope"), "-o", str(tmp_path / "s.parquet"))
    assert code == 1
    assert stderr.strip().splitlines() == [f"Error: input {tmp_path / 'nope'} does not exist; check the path"]
    assert not (tmp_path / "s.parquet").exists()


def test_bits_above_stored_bits_is_a_usage_error(bible_store: Path) -> None:
    code, _, stderr = run("find", str(bible_store), "--bits", "17")
    assert code == 2
    assert "--bits 17 exceeds the 16 bits stored in" in stderr and "re-sign with --bits 17" in stderr
    assert len(stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("argument", [["--threshold", "0"], ["--threshold", "1.5"], ["--bits", "0"]])
def test_out_of_range_options(bible_store: Path, argument: list[str]) -> None:
    code, _, stderr = run("find", str(bible_store), *argument)
    assert code == 2 and "Traceback" not in stderr


def test_not_a_store(tmp_path: Path) -> None:
    bogus = tmp_path / "notes.parquet"
    bogus.write_text("hello")
    code, _, stderr = run("find", str(bogus))
    assert code == 1 and "not a readable Parquet file" in stderr and "Traceback" not in stderr


def test_signing_over_a_foreign_file_or_other_parameters_damages_nothing(small_corpus: Path, tmp_path: Path) -> None:
    precious = tmp_path / "precious.parquet"
    precious.write_bytes(b"not mine")
    code, _, stderr = run("sign", str(small_corpus), "-o", str(precious))
    assert code == 1 and "refusing to overwrite" in stderr
    assert precious.read_bytes() == b"not mine"

    store = tmp_path / "s.parquet"
    assert run("sign", str(small_corpus), "-o", str(store), "-q")[0] == 0
    before = {path.name: path.read_bytes() for path in store.iterdir()}
    code, _, stderr = run("sign", str(small_corpus), "-o", str(store), "--num-perm", "64")
    assert code == 2 and "num_perm: 128 vs 64" in stderr  # a new store's default k against the one asked for
    assert {path.name: path.read_bytes() for path in store.iterdir()} == before


def test_unreadable_file_is_reported_and_the_rest_is_signed(small_corpus: Path, tmp_path: Path) -> None:
    (small_corpus / "dangling.txt").symlink_to(small_corpus / "does-not-exist")
    store = tmp_path / "s.parquet"
    code, _, stderr = run("sign", str(small_corpus), "-o", str(store))
    assert code == 1
    assert "cannot read" in stderr and "dangling.txt" in stderr
    assert "1 input could not be read" in stderr
    assert run("info", str(store))[0] == 0


def test_real_subprocess_and_python_dash_m(small_corpus: Path, tmp_path: Path) -> None:
    store = tmp_path / "s.parquet"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    signed = subprocess.run([sys.executable, "-m", "dedup_cli", "sign", str(small_corpus), "-o", str(store)],
                            capture_output=True, text=True, env=env, check=False)
    assert signed.returncode == 0, signed.stderr
    found = subprocess.run([sys.executable, "-m", "dedup_cli", "find", str(store), "--threshold", "0.8",
                            "--format", "tsv", "-q"], capture_output=True, text=True, env=env, check=False)
    assert found.returncode == 0
    assert found.stdout.splitlines() == ["group\tsize\tid", "1\t3\ta.txt", "1\t3\tb.txt", "1\t3\tsub/c.txt"]
    missing = subprocess.run([sys.executable, "-m", "dedup_cli", "find", str(tmp_path / "none.parquet")],
                             capture_output=True, text=True, env=env, check=False)
    assert missing.returncode == 1 and missing.stderr.startswith("Error: store ") and "Traceback" not in missing.stderr


def test_help_and_version() -> None:
    for command in ([], ["sign"], ["find"], ["info"]):
        code, stdout, _ = run(*command, "--help")
        assert code == 0 and "Example" in stdout
    assert run("--version")[1].startswith("dedup, version ")


def test_every_option_reads_the_variable_spelt_like_its_flag(tmp_path: Path) -> None:
    # DEDUP_<COMMAND>_<FLAG>, whatever the parameter is called inside (--format is fmt, --output is kind).
    import click

    for name, command in cli.commands.items():  # type: ignore[attr-defined]
        for parameter in command.params:
            longs = [option for option in parameter.opts if option.startswith("--")]
            if not isinstance(parameter, click.Option) or not longs or parameter.name in ("help", "version"):
                continue
            expected = f"DEDUP_{name.upper()}_{longs[0][2:].replace('-', '_').upper()}"
            automatic = f"DEDUP_{name.upper()}_{str(parameter.name).upper()}"  # what Click reads without envvar
            read = parameter.envvar if parameter.envvar else [automatic]
            assert expected in read, (name, longs[0], read)
    root = REPO
    store = tmp_path / "sigs.parquet"
    assert CliRunner().invoke(cli, ["sign", str(root / "sample_corpora" / "licenses"), "-o", str(store), "-q"]
                              ).exit_code == 0
    got = CliRunner().invoke(cli, ["find", str(store), "-q"], env={"DEDUP_FIND_FORMAT": "tsv",
                                                                   "DEDUP_FIND_OUTPUT": "pairs"})
    assert got.exit_code == 0 and got.stdout.startswith("id_a\tid_b\testimate"), got.output
