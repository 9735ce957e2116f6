"""find --engine dask writes what --engine local writes, byte for byte, for every output, format and option.

Stores: the bundled corpora signed in one run (ids in order: the pieces are numbered where they lie), the same
grown by incremental runs with changes and removals (parts interleave ids: the rows are sorted on the cluster), and
a format 1 file. Each option set runs once per engine; every output kind is then written in every format from
both results and compared.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from helpers import StoreWriter
from same_answers import assert_same_answers

import dedup_cli as dedup
from dedup_cli.cli import cli
from dedup_cli.engine import extras
from dedup_cli.engine.results import find_records
from dedup_cli.options.engines import EngineOptions
from dedup_cli.output.summaries import find_store_line, find_summary
from dedup_cli.store.format import DocumentBatch
from dedup_cli.store.store import read_store

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "sample_corpora"


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``sample``: the corpora in one run; ``grown``: three runs with a change, additions and a prune;
    ``legacy``: the sample's rows as a format 1 file; ``reference``: three Bible editions and the declarations,
    a reference store for the others."""
    folder = tmp_path_factory.mktemp("stores")
    reading = dedup.InputOptions(exclude=("SOURCE",))
    sample = folder / "sample.parquet"
    dedup.sign([str(SAMPLES)], sample, dedup.SignOptions(input=reading))
    corpus = folder / "corpus"
    shutil.copytree(SAMPLES / "bible-editions", corpus / "bible")
    shutil.copytree(SAMPLES / "licenses", corpus / "licenses")
    grown = folder / "grown.parquet"
    dedup.sign([str(corpus / "bible" / "KJV"), str(corpus / "licenses")], grown,
               dedup.SignOptions(input=dedup.InputOptions(exclude=("SOURCE",), id_root=str(corpus))))
    dedup.sign([str(corpus)], grown, dedup.SignOptions(input=reading))
    shutil.rmtree(corpus / "bible" / "ASV")
    (corpus / "bible" / "WEB" / "ruth-02.txt").write_text((corpus / "bible" / "KJV" / "ruth-02.txt").read_text())
    dedup.sign([str(corpus)], grown, dedup.SignOptions(input=reading, prune=True))
    legacy = folder / "legacy.parquet"
    rows = read_store(sample)
    with StoreWriter(legacy, rows.params) as writer:
        writer.write(DocumentBatch(rows.ids, rows.paths, np.zeros(len(rows), np.int64), np.zeros(len(rows), np.int64),
                                   rows.content_hashes, rows.shingle_counts, rows.packed))
    reference = folder / "reference.parquet"
    dedup.sign([str(SAMPLES / "bible-editions" / name) for name in ("ASV", "UKJV", "RWEBSTER")] +
               [str(SAMPLES / "udhr")], reference,
               dedup.SignOptions(input=dedup.InputOptions(exclude=("SOURCE",), id_root=str(SAMPLES))))
    return {"sample": sample, "grown": grown, "legacy": legacy, "reference": reference}


CASES = [
    ("sample", {}),
    ("sample", {"threshold": 0.8, "bits": 2}),
    ("sample", {"ways": 3, "bits": 2}),
    ("sample", {"ways": 3, "bits": 4, "group": "strict", "keep": "longest"}),
    ("sample", {"group": "strict", "keep": "shortest", "bits": 1, "threshold": 0.6}),
    ("sample", {"verify": "all", "threshold": 0.3}),
    ("sample", {"verify": "none", "bits": 2, "bands": 20, "rows": 4}),
    ("sample", {"max_bucket": 2, "threshold": 0.4}),
    ("grown", {}),
    ("grown", {"new_since": 1, "threshold": 0.4}),
    ("grown", {"new_since": 2, "ways": 3, "group": "strict", "bits": 2}),
    ("grown", {"verify": "all", "ways": 3, "keep": "longest"}),
    ("grown", {"keep": "newest", "threshold": 0.4}),
    ("grown", {"keep": "oldest", "group": "strict", "bits": 2}),
    ("legacy", {"threshold": 0.5, "bits": 2}),
]


def _without_time(line: str) -> str:
    return re.sub(r"\d+\.\d+ s", "T s", line)


@pytest.mark.parametrize(("store", "options"), CASES, ids=[f"{s}-{'-'.join(map(str, o.values())) or 'default'}"
                                                           for s, o in CASES])
def test_both_engines_write_the_same_bytes(stores: dict[str, Path], engine: EngineOptions, store: str,
                                           options: dict) -> None:
    path = stores[store]
    local = dedup.find(path, dedup.FindOptions(**options))
    remote = dedup.find(path, dedup.FindOptions(engine=engine, **options))
    assert_same_answers(local, remote)
    assert _without_time(find_summary(str(path), remote)) == _without_time(find_summary(str(path), local))
    assert find_store_line(str(path), remote) == find_store_line(str(path), local)
    assert len(remote.store) < len(local.store) or store == "legacy"  # only the documents reported were gathered


def test_the_command_line_writes_the_same_file(stores: dict[str, Path], engine: EngineOptions,
                                               tmp_path: Path) -> None:
    runner = CliRunner()
    common = ["find", str(stores["grown"]), "--ways", "3", "--bits", "2", "--output", "triples", "--format", "tsv"]
    local = runner.invoke(cli, [*common, "-o", str(tmp_path / "local.tsv")])
    remote = runner.invoke(cli, [*common, "-o", str(tmp_path / "dask.tsv"), "--engine", "dask", "--scheduler",
                                 str(engine.scheduler)])
    assert local.exit_code == remote.exit_code == 0, remote.output
    assert (tmp_path / "dask.tsv").read_bytes() == (tmp_path / "local.tsv").read_bytes()
    assert (tmp_path / "local.tsv").read_text().count("\n") > 1
    assert _without_time(remote.stderr) == _without_time(local.stderr)


def test_the_scheduler_comes_from_the_environment(stores: dict[str, Path], engine: EngineOptions) -> None:
    runner = CliRunner()
    arguments = ["find", str(stores["sample"]), "--output", "pairs", "-q"]
    remote = runner.invoke(cli, [*arguments, "--engine", "dask"], env={"DEDUP_SCHEDULER": str(engine.scheduler)})
    assert remote.exit_code == 0, remote.output
    assert remote.stdout == runner.invoke(cli, arguments).stdout


def test_every_pair_is_refused_on_the_cluster(stores: dict[str, Path]) -> None:
    result = CliRunner().invoke(cli, ["find", str(stores["sample"]), "--candidates", "all", "--engine", "dask"])
    assert result.exit_code == 2
    assert result.stderr.strip() == ("Error: --candidates all compares every pair in one process; use --candidates "
                                     "lsh with --engine dask, or --engine local")


def test_against_a_reference_store_the_records_are_the_local_engines(stores: dict[str, Path],
                                                                     engine: EngineOptions) -> None:
    """The store's documents are numbered before the reference's, as the local engine numbers them: every record
    (with the store of each id), gathered or streamed from the cluster."""
    options = {"against": str(stores["reference"]), "only_across": True, "ways": 3, "bits": 2}
    local = dedup.find(stores["grown"], dedup.FindOptions(**options))
    assert local.pair_count > 40
    assert sum(record["store_b"] == "reference" for record in find_records("pairs", local)) > 10
    for gather_limit in (None, 40):
        limit = {} if gather_limit is None else {"gather_limit": gather_limit}
        remote = dedup.find(stores["grown"], dedup.FindOptions(engine=engine, **options, **limit))
        assert (remote.streamed is not None) == (gather_limit is not None)
        assert_same_answers(local, remote)
        assert remote.reference_documents == local.reference_documents


def test_against_through_the_command_line(stores: dict[str, Path], engine: EngineOptions, tmp_path: Path) -> None:
    common = ["find", str(stores["sample"]), "--against", str(stores["reference"]), "--keep", "longest", "--output",
              "groups", "--format", "tsv"]
    local = CliRunner().invoke(cli, [*common, "-o", str(tmp_path / "local.tsv")])
    remote = CliRunner().invoke(cli, [*common, "-o", str(tmp_path / "dask.tsv"), "--engine", "dask", "--scheduler",
                                      str(engine.scheduler)])
    assert local.exit_code == remote.exit_code == 0, remote.stderr
    assert (tmp_path / "dask.tsv").read_bytes() == (tmp_path / "local.tsv").read_bytes()
    assert (tmp_path / "local.tsv").read_text().count("\treference") > 10
    assert _without_time(remote.stderr) == _without_time(local.stderr) and " against " in local.stderr


@pytest.mark.parametrize(("arguments", "message"), [
    (["--workers", "2"], "Error: --workers applies to --engine dask"),
    (["--engine", "dask", "--scheduler", "tcp://127.0.0.1:1", "--memory-limit", "1GiB"],
     "Error: --memory-limit sets up a local cluster; the cluster at --scheduler has its own workers"),
    (["--engine", "dask", "--memory-limit", "lots"],
     "Error: --memory-limit 'lots' is not an amount of memory; write e.g. 2GiB, 1.5GB or auto"),
])
def test_cluster_options_are_checked_before_any_work(stores: dict[str, Path], arguments: list[str],
                                                     message: str) -> None:
    result = CliRunner().invoke(cli, ["find", str(stores["sample"]), *arguments])
    assert result.exit_code == 2 and result.stderr.strip() == message


def test_an_unreachable_scheduler_is_one_line(stores: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    from dedup_cli.engine.dask import cluster

    monkeypatch.setattr(cluster, "CONNECT_SECONDS", 1)
    result = CliRunner().invoke(cli, ["find", str(stores["sample"]), "--engine", "dask", "--scheduler",
                                      "tcp://127.0.0.1:9"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.stderr.startswith("Error: cannot connect to the Dask scheduler at tcp://127.0.0.1:9 (")
    assert result.stderr.rstrip().endswith("start one with: dask scheduler, or leave --scheduler out for a local "
                                           "cluster")


def test_without_the_extra_the_engine_says_how_to_install_it(stores: dict[str, Path], tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    real = extras.importlib.util.find_spec
    monkeypatch.setattr(extras.importlib.util, "find_spec",
                        lambda name, *rest: None if name == "distributed" else real(name, *rest))
    new = tmp_path / "new.parquet"
    for command in (["find", str(stores["sample"])], ["sign", str(SAMPLES / "licenses"), "-o", str(new)]):
        result = CliRunner().invoke(cli, [*command, "--engine", "dask"])
        assert result.exit_code == 1
        assert result.stderr == ("Error: --engine dask needs the dask extra (distributed not installed); install it "
                                 "with: pip install 'dedup-cli[dask]'\n")
    assert not new.exists()


@pytest.mark.parametrize(("store", "options"), [
    ("sample", {"ways": 3, "bits": 2}),
    ("sample", {"group": "strict", "verify": "all", "threshold": 0.3}),
    ("grown", {"new_since": 1, "ways": 3, "group": "strict", "threshold": 0.4}),
], ids=["triples", "strict", "new-since"])
def test_many_edges_end_per_component_on_the_workers(stores: dict[str, Path], engine: EngineOptions, store: str,
                                                     options: dict) -> None:
    # Nothing is gathered: components on the cluster, then output sorted there in chunks of 15 rows.
    local = dedup.find(stores[store], dedup.FindOptions(**options))
    remote = dedup.find(stores[store], dedup.FindOptions(engine=engine, gather_limit=15, **options))
    assert remote.streamed is not None and len(list(remote.streamed.chunks("pairs"))) > 2
    assert_same_answers(local, remote)
    assert (remote.pair_count, remote.group_count, remote.triple_count) == (local.pair_count, local.group_count,
                                                                           local.triple_count)


# --- the command line writes what the result holds, gathered or streamed ------------------------------------------

KINDS = ("groups", "pairs", "triples", "members")


@pytest.fixture(scope="module")
def three_results(stores: dict[str, Path], engine: EngineOptions) -> dict[str, dedup.FindResult]:
    """One find of the sample store (triples too) by the local engine, and by the Dask engine gathered and
    streamed in chunks of 10 pairs."""
    options = {"ways": 3, "bits": 2, "threshold": 0.5}
    results = {"local": dedup.find(stores["sample"], dedup.FindOptions(**options)),
               "gathered": dedup.find(stores["sample"], dedup.FindOptions(engine=engine, **options)),
               "streamed": dedup.find(stores["sample"], dedup.FindOptions(engine=engine, gather_limit=10, **options))}
    assert results["gathered"].streamed is None and results["streamed"].streamed is not None
    assert len(list(results["streamed"].streamed.chunks("pairs"))) > 2
    return results


@pytest.mark.parametrize("fail", [False, True], ids=["exit-0", "fail-on-duplicates"])
@pytest.mark.parametrize("kind", KINDS)
def test_every_output_and_format_is_written_from_streamed_results(
        three_results: dict[str, dedup.FindResult], stores: dict[str, Path], kind: str, fail: bool, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The command line's writing, for a result of each path (find itself is run once per path, by the fixture).
    for fmt in ("jsonl", "tsv", "csv", "parquet"):
        written = {}
        for path, result in three_results.items():
            monkeypatch.setattr(dedup, "find", lambda *_, result=result: result)
            out = tmp_path / f"{path}.{fmt}"
            got = CliRunner().invoke(cli, ["find", str(stores["sample"]), "--ways", "3", "--output", kind, "--format",
                                           fmt, "-o", str(out), *(["--fail-on-duplicates"] if fail else [])])
            assert got.exit_code == (3 if fail else 0), got.stderr
            written[path] = out.read_bytes()
        assert written["streamed"] == written["gathered"] == written["local"], (kind, fmt)
        assert len(written["local"]) > 200


def test_the_results_in_ids_are_the_same_on_every_path(three_results: dict[str, dedup.FindResult]) -> None:
    # groups(), pairs(), triples(), members() read a streamed result chunk by chunk, as the command line does.
    for kind in KINDS:
        got = {path: [tuple(item) for item in getattr(result, kind)()] for path, result in three_results.items()}
        assert got["streamed"] == got["gathered"] == got["local"], kind
        assert got["local"], kind
    assert three_results["streamed"].to_arrow("pairs").equals(three_results["local"].to_arrow("pairs"))


def test_the_streamed_output_reaches_the_command_line(stores: dict[str, Path], engine: EngineOptions,
                                                      tmp_path: Path) -> None:
    """End to end: --gather-limit sends the end of find to the workers; the file, the summary and the exit code are
    the local engine's."""
    common = ["find", str(stores["grown"]), "--output", "members", "--format", "tsv", "--fail-on-duplicates"]
    local = CliRunner().invoke(cli, [*common, "-o", str(tmp_path / "local.tsv")])
    remote = CliRunner().invoke(cli, [*common, "-o", str(tmp_path / "dask.tsv"), "--engine", "dask", "--scheduler",
                                      str(engine.scheduler), "--gather-limit", "5"])
    assert local.exit_code == remote.exit_code == 3, remote.stderr
    assert (tmp_path / "dask.tsv").read_bytes() == (tmp_path / "local.tsv").read_bytes()
    assert (tmp_path / "local.tsv").read_text().count("\n") > 10
    assert _without_time(remote.stderr) == _without_time(local.stderr)


@pytest.mark.parametrize("gather_limit", ["5", "20000000"], ids=["streamed", "gathered"])
def test_a_real_process_writes_the_local_engines_bytes(stores: dict[str, Path], engine: EngineOptions,
                                                       gather_limit: str, tmp_path: Path) -> None:
    common = [sys.executable, "-m", "dedup_cli", "find", str(stores["sample"]), "--output", "pairs",
              "--fail-on-duplicates", "-q"]
    local = subprocess.run(common, capture_output=True, timeout=300)
    remote = subprocess.run([*common, "--engine", "dask", "--scheduler", str(engine.scheduler)], capture_output=True,
                            timeout=300, env={**os.environ, "DEDUP_FIND_GATHER_LIMIT": gather_limit})
    assert local.returncode == remote.returncode == 3, remote.stderr
    assert remote.stdout == local.stdout and local.stdout.count(b"\n") > 10


def test_rounds_of_bands_and_progress_through_the_command_line(stores: dict[str, Path], engine: EngineOptions,
                                                               tmp_path: Path) -> None:
    """--band-memory forces several rounds on the workers: the same file as the local engine's; and on a terminal
    the driver shows the stages."""
    from test_progress import on_a_terminal

    common = ["find", str(stores["grown"]), "--output", "pairs", "--format", "csv", "--ways", "3", "--bits", "2"]
    local = CliRunner().invoke(cli, [*common, "-o", str(tmp_path / "local.csv")])
    remote = CliRunner().invoke(cli, [*common, "-o", str(tmp_path / "dask.csv"), "--engine", "dask", "--scheduler",
                                      str(engine.scheduler), "--band-memory", "8KiB"])
    assert local.exit_code == remote.exit_code == 0, remote.stderr
    assert (tmp_path / "dask.csv").read_bytes() == (tmp_path / "local.csv").read_bytes()
    code, shown = on_a_terminal(*common, "--engine", "dask", "--scheduler", str(engine.scheduler), "--band-memory",
                                "8KiB", "-o", str(tmp_path / "shown.csv"))
    assert code == 0
    assert "round 3 of" in shown and "round 9 of" not in shown, shown[-2000:]  # a few rounds: the stages show
    for stage in ("reading the store's pieces", "candidates, bands 1–", "round 2 of", "scoring the candidate pairs",
                  "exact checks and decisions", "groups", "writing"):
        assert stage in shown, shown[-2000:]


def test_a_killed_dask_find_resumes_from_its_work_dir(engine: EngineOptions, tmp_path: Path) -> None:
    """The driver SIGKILLed during the candidate stage (a band a round), then run again: the local engine's bytes,
    the rounds kept by the killed run reused, and the same again from the kept scores and decisions."""
    import signal
    import time

    from test_resume import reused_bands

    from dedup_cli.params import SignatureParams
    from dedup_cli.store.store import create_store

    store = tmp_path / "sigs"
    params = SignatureParams(num_perm=64, bits=8)
    rng = np.random.default_rng(9)
    values = rng.integers(0, 256, size=(40_000, 64), dtype=np.uint8)
    values[1::50] = values[::50]
    with create_store(store, params).begin_run(params) as run:
        run.write(DocumentBatch([f"d{i:06d}" for i in range(40_000)], [""] * 40_000, np.zeros(40_000, np.int64),
                                np.zeros(40_000, np.int64), np.zeros(40_000, np.uint64),
                                np.full(40_000, 100, np.int64), values))
    common = ["find", str(store), "-t", "0.6", "--output", "pairs", "--verify", "none", "--band-memory", "1KiB"]
    local = CliRunner().invoke(cli, common)
    assert local.exit_code == 0 and local.stdout.count("\n") > 500
    work = tmp_path / "work"
    remote = [sys.executable, "-m", "dedup_cli", *common, "--engine", "dask", "--scheduler", str(engine.scheduler),
              "--work-dir", str(work)]
    child = subprocess.Popen(remote, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while len(list(work.glob("candidates-*.npz"))) < 2 and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert child.poll() is None
    child.send_signal(signal.SIGKILL)
    child.wait()
    kept = len(list(work.glob("candidates-*.npz")))
    resumed = subprocess.run([*remote, "--keep-work"], capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout == local.stdout
    assert resumed.stderr.startswith("resuming: candidates for bands 1–") and reused_bands(resumed.stderr) >= kept
    again = subprocess.run(remote, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and again.stdout == local.stdout
    assert again.stderr.splitlines()[:2] == [f"resuming: scored candidate pairs from {work}",
                                             f"resuming: exact checks and decisions from {work}"]
    assert not work.exists()
