"""The inputs pipelines and cron jobs feed dedup: CSV and TSV with a header, compressed and JSON Lines stdin, and one
id option for every format; through the command line and a real process reading a pipe."""

from __future__ import annotations

import bz2
import gzip
import lzma
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from dedup_cli.cli.main import cli

SAME = "the quick brown fox jumps over the lazy dog again and again"
OTHER = "an entirely different sentence about signatures stores and bands"


def dedup(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "dedup_cli", *args], input=stdin, capture_output=True, check=False)


def _jsonl() -> bytes:
    return (f'{{"id": "a", "text": "{SAME}"}}\n{{"id": "b", "text": "{SAME}"}}\n'
            f'{{"id": "c", "text": "{OTHER}"}}\n').encode()


def _zstd(data: bytes) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.CompressedOutputStream(sink, "zstd") as stream:
        stream.write(data)
    return sink.getvalue().to_pybytes()


@pytest.mark.parametrize("pack", [gzip.compress, bz2.compress, lzma.compress, _zstd, lambda data: data],
                         ids=["gzip", "bz2", "xz", "zstd", "plain"])
def test_compressed_json_lines_on_stdin_are_records(tmp_path: Path, pack) -> None:  # type: ignore[no-untyped-def]
    store = tmp_path / "s"
    signed = dedup("sign", "-", "--id-field", "id", "-o", str(store), stdin=pack(_jsonl()))
    assert signed.returncode == 0, signed.stderr
    assert b"signed 3 documents" in signed.stderr
    found = dedup("find", str(store))
    assert found.stdout.count(b'"members": ["a", "b"]') == 1


def test_filter_reads_stdin_as_sign_did_and_writes_it_back_compressed(tmp_path: Path) -> None:
    store = tmp_path / "s"
    packed = gzip.compress(_jsonl())
    assert dedup("sign", "-", "-o", str(store), stdin=packed).returncode == 0
    filtered = dedup("filter", "-", "-s", str(store), "-o", "-", stdin=packed)
    assert filtered.returncode == 0, filtered.stderr
    assert gzip.decompress(filtered.stdout) == b"".join(_jsonl().splitlines(keepends=True)[i] for i in (0, 2))


def test_stdin_that_is_not_json_lines_is_refused_with_an_id_field(tmp_path: Path) -> None:
    refused = dedup("sign", "-", "--id-field", "id", "-o", str(tmp_path / "s"), stdin=b"plain words\n")
    assert refused.returncode == 2
    assert refused.stderr.decode().strip().splitlines() == [
        "Error: --id-field applies to records, but stdin is neither JSON Lines (its first line is not a JSON object) "
        "nor a JSON array; name its format with --input-format"]
    text = CliRunner().invoke(cli, ["sign", "-", "-o", str(tmp_path / "t")], input=b"{not json\n" + SAME.encode())
    assert text.exit_code == 0 and "signed 1 document" in text.output


CSV = (f'id,text,n\r\na,"{SAME}",1\r\nb,"{SAME}",2\r\nc,"multi\nline, ""quoted"" {OTHER}",3\r\n'
       f'd,"multi\nline, ""quoted"" {OTHER}",4\r\ne,"{OTHER} alone here",5\r\nbroken\r\n')
# TSV has no quoting: a quote is a plain character, and a field holds no tab or newline.
TSV = (f'id\ttext\tn\r\na\t{SAME}\t1\r\nb\t{SAME}\t2\r\nc\tone line, "quoted" {OTHER}\t3\r\n'
       f'd\tone line, "quoted" {OTHER}\t4\r\ne\t12" {OTHER} alone here\t5\r\nbroken\r\n')


@pytest.mark.parametrize("name", ["corpus.csv", "corpus.tsv", "corpus.csv.gz"])
def test_sign_find_filter_round_trip(tmp_path: Path, name: str) -> None:
    data = CSV if ".csv" in name else TSV
    raw = data.encode()
    (tmp_path / "in").mkdir()
    path = tmp_path / "in" / name
    path.write_bytes(gzip.compress(raw) if name.endswith(".gz") else raw)
    store, out = tmp_path / "store", tmp_path / "out"
    runner = CliRunner()
    signed = runner.invoke(cli, ["sign", str(path), "--id-field", "id", "-o", str(store)])
    assert signed.exit_code == 0, signed.output
    assert "signed 5 documents" in signed.output and "record 6: no 'text' column" in signed.output
    found = runner.invoke(cli, ["find", str(store), "--verify", "all", "-t", "0.9"])
    assert '"members": ["a", "b"]' in found.output and '"members": ["c", "d"]' in found.output
    assert "2 pairs verified exactly" in found.output  # re-read from the file, quoted newlines and all
    filtered = runner.invoke(cli, ["filter", str(tmp_path / "in"), "-s", str(store), "-o", str(out), "-t", "0.9"])
    assert filtered.exit_code == 0, filtered.output
    written = (out / name).read_bytes()
    written = gzip.decompress(written) if name.endswith(".gz") else written
    kept = raw.split(b"\r\n")
    assert written == b"\r\n".join([kept[0], kept[1], kept[3], kept[5], kept[6], b""])  # b and d dropped


def test_csv_on_stdin_compressed(tmp_path: Path) -> None:
    signed = dedup("sign", "-", "--input-format", "csv", "--id-field", "id", "-o", str(tmp_path / "s"),
                   stdin=bz2.compress(CSV.encode()))
    assert signed.returncode == 0 and b"signed 5 documents" in signed.stderr, signed.stderr
    assert b"<stdin> record 6: no 'text' column" in signed.stderr
    found = dedup("find", str(tmp_path / "s"), "-t", "0.9")
    assert b'"members": ["c", "d"]' in found.stdout


def test_a_header_without_the_text_column_stops_the_run(tmp_path: Path) -> None:
    (tmp_path / "c.csv").write_text("id,body\na,words\n")
    refused = dedup("sign", str(tmp_path / "c.csv"), "-o", str(tmp_path / "s"))
    assert refused.returncode == 1
    assert refused.stderr.decode().splitlines()[-1] == (
        f"Error: {tmp_path / 'c.csv'} has no column 'text' in its header (its columns: 'id', 'body'); name the "
        "column with --text-field")


def test_one_id_option_for_every_format(tmp_path: Path) -> None:
    pq.write_table(pa.table({"id": ["p", "q"], "text": [SAME, SAME]}), tmp_path / "c.parquet")
    (tmp_path / "c.csv").write_text(f"key,body\nk,{SAME}\n")
    runner = CliRunner()
    signed = runner.invoke(cli, ["sign", str(tmp_path / "c.parquet"), "--id-field", "id", "-o", str(tmp_path / "s")])
    assert signed.exit_code == 0, signed.output
    found = runner.invoke(cli, ["find", str(tmp_path / "s")])
    assert '"members": ["p", "q"]' in found.output
    signed = runner.invoke(cli, ["sign", str(tmp_path / "c.csv"), "--id-column", "key", "--text-column", "body",
                                 "-o", str(tmp_path / "t")])
    assert signed.exit_code == 0 and "signed 1 document" in signed.output
    info = runner.invoke(cli, ["find", str(tmp_path / "t"), "-o", "-", "--output", "members", "-t", "0.1"])
    assert info.exit_code == 0


def test_jobs_sign_a_large_csv_into_the_same_bytes(tmp_path: Path) -> None:
    """More records than a chunk holds, each text with quoted newlines, so every cut is beside one."""
    rows = ["id,text"] + [f'r{n},"{SAME.replace(" ", chr(10), 3)} ""{n % 97}"", {n % 13}\n{OTHER[n % 11:]}"'
                           for n in range(9000)]
    (tmp_path / "big.csv").write_text("\r\n".join(rows) + "\r\n")
    parts = []
    for jobs in ("1", "2"):
        store = tmp_path / f"store-{jobs}"
        signed = dedup("sign", str(tmp_path / "big.csv"), "--id-field", "id", "-o", str(store), "-j", jobs)
        assert signed.returncode == 0 and b"signed 9000 documents" in signed.stderr, signed.stderr
        parts.append({path.name: path.read_bytes() for path in sorted(store.glob("part-*.parquet"))})
    assert parts[0] == parts[1] and parts[0]
