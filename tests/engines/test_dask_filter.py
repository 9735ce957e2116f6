"""filter --engine dask writes what --engine local writes, byte for byte: the output (a directory, one file, a device,
a FIFO, stdout), --removed and the summary, for every input format, --annotate, --members, keep policies and
--against; with the decisions gathered from the cluster or streamed from it (--gather-limit).

Tasks are made small (a few kB of input) so that the corpus's JSON Lines and Parquet files are cut into pieces,
filtered on the workers and joined.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from distributed import Client

from dedup_cli.cli.main import cli
from dedup_cli.engine.dask import end_on_workers
from dedup_cli.engine.dask import filter as dask_filter
from dedup_cli.options.engine_choice import EngineOptions

WORDS = 120
TASK_BYTES = 8_000


def text(topic: int, variant: int = -1) -> str:
    """Texts of one topic are near-duplicates (one word of 120 replaced per variant); topics share nothing."""
    words = [f"t{topic}w{i}" for i in range(WORDS)]
    if variant >= 0:
        words[variant * 7 % WORDS] = f"v{variant}"
    return " ".join(words)


def _jsonl(records: list[dict], odd: bool = False) -> bytes:
    lines = [json.dumps(record).encode() + (b"\r\n" if odd and index % 3 == 0 else b"\n")
             for index, record in enumerate(records)]
    if odd:  # a byte-order mark, a blank and a malformed line (never documents: kept), no final newline
        lines[0] = b"\xef\xbb\xbf" + lines[0]
        lines[10:10] = [b"\n", b"{broken\n"]
        lines[-1] = lines[-1].rstrip(b"\r\n")
    return b"".join(lines)


def run(*args: str, **kwargs: object) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False, **kwargs)  # type: ignore[arg-type]
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def corpora(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``corpus/``: JSON Lines (ids FILE:LINE, one record changed since signing), gzip JSON Lines, Parquet in row
    groups and whole text files, signed into ``store``; ``keyed/``: JSON Lines with an id field and Parquet with an
    id column, of the same topics, signed into ``keyed.parquet``."""
    folder = tmp_path_factory.mktemp("filter")
    corpus = folder / "corpus"
    (corpus / "docs").mkdir(parents=True)
    # Groups of about three: 40 topics in a.jsonl (b.jsonl.gz adds a copy to 9 of them), 30 in c.parquet, 4 of
    # whole files; keyed/ shares 30 topics with a.jsonl and 20 with c.parquet.
    records = [{"text": text(n % 40, n // 40), "n": n} for n in range(120)]
    (corpus / "a.jsonl").write_bytes(_jsonl(records, odd=True))
    (corpus / "b.jsonl.gz").write_bytes(gzip.compress(_jsonl([{"text": text(n, 7)} for n in range(9)]), mtime=0))
    table = pa.table({"n": list(range(90)), "text": [text(n % 30 + 40, n // 30) for n in range(90)]},
                     metadata={b"owner": b"me"})
    pq.write_table(table, corpus / "c.parquet", row_group_size=10, compression="none")
    for n in range(12):
        (corpus / "docs" / f"d{n:02d}.txt").write_text(text(n % 4 + 70, n // 4))
    keyed = folder / "keyed"
    keyed.mkdir()
    (keyed / "k.jsonl").write_bytes(_jsonl([{"id": f"k{n:03d}", "text": text(n % 30, n // 30 + 5)}
                                            for n in range(60)]))
    pq.write_table(pa.table({"key": [1000 + n for n in range(60)], "text": [text(n % 20 + 40, n // 20 + 9)
                                                                            for n in range(60)]}),
                   keyed / "k.parquet", row_group_size=8, compression="none")
    for store, inputs, options in ((folder / "store.parquet", corpus, []),
                                   (folder / "keyed.parquet", keyed, ["--id-field", "id", "--id-column", "key"])):
        code, _, stderr = run("sign", str(inputs), "-o", str(store), "-k", "64", "-q", *options)
        assert code == 0, stderr
    changed = (corpus / "a.jsonl").read_bytes().replace(b"t3w0 ", b"t3w0 changed ", 1)
    (corpus / "a.jsonl").write_bytes(changed)
    return {"corpus": corpus, "keyed": keyed, "store": folder / "store.parquet", "keyed.parquet": folder /
            "keyed.parquet"}


@pytest.fixture
def cut_pieces(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Small tasks, and the number of pieces each input cut into pieces was cut into."""
    monkeypatch.setattr(dask_filter, "TASK_BYTES", TASK_BYTES)
    counts: list[int] = []
    real = dask_filter.cut

    def cut(*args: object) -> object:
        pieces = real(*args)  # type: ignore[arg-type]
        if pieces is not None:
            counts.append(len(pieces))
        return pieces

    monkeypatch.setattr(dask_filter, "cut", cut)
    return counts


def _without_time(text: str) -> str:
    return re.sub(r"\d+\.\d+ s", "T s", text)


def _tree(path: Path) -> dict[str, bytes]:
    if path.is_file():
        return {"": path.read_bytes()}
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def both(engine: EngineOptions, out: Path, *args: str, removed: str | None = None, **kwargs: object) -> str:
    """Run filter on each engine into OUT (and --removed); both write the same bytes and say the same; returns
    the summary."""
    written = {}
    for name in ("local", "dask"):
        target = out.with_name(f"{name}-{out.name}")
        extra = ["-o", str(target)]
        if removed is not None:
            extra += ["--removed", str(target.with_name(f"{name}-{removed}"))]
        if name == "dask":
            extra += ["--engine", "dask", "--scheduler", str(engine.scheduler)]
        code, stdout, stderr = run("filter", *args, *extra, **kwargs)
        assert code == 0, stderr
        said = _without_time(stderr).replace(str(target), "OUT")
        if removed is not None:  # the summary names the list of the dropped
            said = said.replace(str(target.with_name(f"{name}-{removed}")), "REMOVED")
        written[name] = (_tree(target), stdout, said,
                         None if removed is None else target.with_name(f"{name}-{removed}").read_bytes())
    assert written["dask"] == written["local"]
    assert written["local"][0] and (removed is None or written["local"][3])
    return written["local"][2]


CASES = [
    ("corpus", "store", "dir", ["--removed-format", "tsv"], "removed.tsv"),
    ("corpus", "store", "dir", ["--annotate", "--keep", "longest", "--ways", "3", "--bits", "2"], None),
    ("keyed/k.jsonl", "keyed.parquet", "k.jsonl", ["--annotate", "--keep", "newest"], "removed.jsonl"),
    ("keyed/k.parquet", "keyed.parquet", "k.parquet", ["--group", "strict", "--verify", "all", "-t", "0.8"],
     "removed.parquet"),
]


@pytest.mark.parametrize(("inputs", "store", "out", "options", "removed"), CASES,
                         ids=["directory", "annotate-triples", "jsonl-id-field", "parquet-id-column"])
def test_the_cluster_writes_the_local_bytes(corpora: dict[str, Path], engine: EngineOptions, cut_pieces: list[int],
                                            tmp_path: Path, inputs: str, store: str, out: str, options: list[str],
                                            removed: str | None) -> None:
    root = corpora["corpus"].parent
    summary = both(engine, tmp_path / out, str(root / inputs), "-s", str(corpora[store]), *options, removed=removed)
    assert cut_pieces and min(cut_pieces) > 2, "inputs were cut into pieces"
    assert re.search(r"from [1-9]\d* groups", summary), summary
    if inputs == "corpus":
        # The changed record is never dropped nor kept in place of another, and named, on either engine.
        assert "1 grouped document is gone or changed since it was signed" in summary


def test_decisions_streamed_from_the_cluster_against_a_reference(corpora: dict[str, Path], engine: EngineOptions,
                                                                  cut_pieces: list[int], tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Past --gather-limit the end of find runs per component on the workers and the decisions stream to this
    process chunk by chunk, here with --against: the same drops, representatives (of either store),
    similarities and bytes."""
    streamed = []
    real = end_on_workers.conclude_on_cluster
    monkeypatch.setattr(end_on_workers, "conclude_on_cluster", lambda *args: streamed.append(1) or real(*args))
    summary = both(engine, tmp_path / "clean.jsonl", str(corpora["corpus"] / "a.jsonl"), "-s",
                   str(corpora["store"]), "--against", str(corpora["keyed.parquet"]), "--gather-limit", "120",
                   "--keep", "shortest", "--verify", "all", "-t", "0.8", removed="removed.csv")
    assert streamed and cut_pieces and re.search(r"[1-9]\d* dropped", summary)
    assert b",reference" in (tmp_path / "dask-removed.csv").read_bytes()
    assert b",new" in (tmp_path / "dask-removed.csv").read_bytes()


@pytest.fixture(scope="module")
def members(corpora: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What find --output members says of the store: the decisions of the tests that are about writing."""
    path = tmp_path_factory.mktemp("members") / "members.tsv"
    code, _, stderr = run("find", str(corpora["store"]), "--output", "members", "--format", "tsv", "-o", str(path))
    assert code == 0, stderr
    return path


def test_a_members_file_is_applied_on_the_cluster(corpora: dict[str, Path], engine: EngineOptions,
                                                  cut_pieces: list[int], members: Path, tmp_path: Path) -> None:
    both(engine, tmp_path / "out", str(corpora["corpus"]), "-s", str(corpora["store"]), "--members", str(members),
         removed="removed.jsonl")
    assert len(cut_pieces) == 2


def test_outputs_written_in_place_and_to_stdout(corpora: dict[str, Path], engine: EngineOptions,
                                                cut_pieces: list[int], members: Path, tmp_path: Path) -> None:
    """One output file of an input cut into pieces: stdout, /dev/null and a FIFO are written in place, in order."""
    common = ["filter", str(corpora["corpus"] / "a.jsonl"), "-s", str(corpora["store"]), "--members", str(members),
              "-q"]
    on_cluster = ["--engine", "dask", "--scheduler", str(engine.scheduler)]
    local = CliRunner().invoke(cli, [*common, "-o", "-"])
    remote = CliRunner().invoke(cli, [*common, "-o", "-", *on_cluster])
    assert local.exit_code == remote.exit_code == 0, remote.stderr
    assert remote.stdout_bytes == local.stdout_bytes and local.stdout_bytes.count(b"\n") > 20
    code, _, stderr = run(*common, "-o", os.devnull, *on_cluster)
    assert code == 0, stderr
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    code, _, stderr = run(*common, "-o", str(fifo), *on_cluster)
    reader.join(timeout=60)
    assert code == 0, stderr
    assert received == [local.stdout_bytes] and stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert len(cut_pieces) == 3 and min(cut_pieces) > 2


def test_a_failed_task_leaves_the_output_as_it_was(engine: EngineOptions, cut_pieces: list[int],
                                                   tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.jsonl").write_bytes(_jsonl([{"text": text(n % 10, n // 10)} for n in range(60)]))
    (corpus / "b.jsonl.gz").write_bytes(gzip.compress(_jsonl([{"text": text(n % 10, 8)} for n in range(40)])))
    store, out, members = tmp_path / "s.parquet", tmp_path / "out", tmp_path / "m.tsv"
    assert run("sign", str(corpus), "-o", str(store), "-k", "64", "-q")[0] == 0
    assert run("find", str(store), "--output", "members", "--format", "tsv", "-o", str(members))[0] == 0
    common = ["filter", str(corpus), "-s", str(store), "-o", str(out), "--members", str(members)]
    on_cluster = ["--engine", "dask", "--scheduler", str(engine.scheduler)]
    assert run(*common, "-q", *on_cluster)[0] == 0
    before = _tree(out)
    (corpus / "b.jsonl.gz").write_bytes((corpus / "b.jsonl.gz").read_bytes()[:-30])  # truncated since signed
    results = [run(*common, *engine_args) for engine_args in ([], on_cluster)]
    assert results[0] == results[1]
    code, _, stderr = results[1]
    assert code == 1 and stderr.startswith(f"Error: cannot read {corpus / 'b.jsonl.gz'} to its end (")
    assert stderr.rstrip().endswith("nothing was written")
    assert _tree(out) == before and sorted(os.listdir(tmp_path)) == ["corpus", "m.tsv", "out", "s.parquet"]
    assert len(cut_pieces) == 2 and min(cut_pieces) > 2  # a.jsonl, in each run on the cluster


def test_stopped_tasks_write_nothing_once_stop_returns(client: Client, tmp_path: Path) -> None:
    """What a failed run relies on before it removes its scratch directory: once ``stop`` returns, no task of the
    run starts or writes any more; the running ones were waited for, the queued ones never start."""
    def started_then_ended(folder: str, name: str) -> None:  # nested: sent to the workers by value
        Path(folder, name).write_text("started")
        time.sleep(0.5)
        Path(folder, name + ".end").write_text("ended")

    # Two workers of one thread each: two tasks run, six wait behind them, and all eight are stopped at once.
    futures = [client.submit(started_then_ended, str(tmp_path), f"task-{n}", pure=False) for n in range(8)]
    deadline = time.monotonic() + 60
    while len(list(tmp_path.glob("task-?"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    dask_filter.stop(client, futures)
    at_return = sorted(path.name for path in tmp_path.iterdir())
    time.sleep(1.0)
    assert sorted(path.name for path in tmp_path.iterdir()) == at_return
    started = [name for name in at_return if not name.endswith(".end")]
    assert 2 <= len(started) < 8 and all(f"{name}.end" in at_return for name in started)
    held = client.run(dask_filter._unfinished)
    assert not {str(future.key) for future in futures} & {key for keys in held.values() for key in keys}


def test_stdin_is_refused_on_the_cluster(corpora: dict[str, Path], engine: EngineOptions) -> None:
    code, _, stderr = run("filter", "-", "-s", str(corpora["store"]), "-o", "-", "--engine", "dask", "--scheduler",
                          str(engine.scheduler), input=b"x\n")
    assert code == 2
    assert stderr == ("Error: - (stdin) cannot be read by Dask workers; save it to a file they can read, or filter it "
                      "with --engine local\n")


def test_a_real_process_filters_on_the_cluster_against_a_reference(corpora: dict[str, Path], engine: EngineOptions,
                                                                   tmp_path: Path) -> None:
    common = [sys.executable, "-m", "dedup_cli", "filter", str(corpora["corpus"]), "-s", str(corpora["store"]),
              "--against", str(corpora["keyed.parquet"]), "--only-across", "--keep", "longest", "--removed", "-"]
    local = subprocess.run([*common, "-o", str(tmp_path / "local")], capture_output=True, timeout=300)
    remote = subprocess.run([*common, "-o", str(tmp_path / "dask"), "--engine", "dask"], capture_output=True,
                            timeout=300, env={**os.environ, "DEDUP_SCHEDULER": str(engine.scheduler)})
    assert local.returncode == remote.returncode == 0, remote.stderr
    assert remote.stdout == local.stdout and local.stdout.count(b'"representative_store": "reference"') > 20
    shown = [_without_time(run.stderr.decode()).replace(str(tmp_path / name), "OUT")
             for run, name in ((local, "local"), (remote, "dask"))]
    assert shown[0] == shown[1] and "from 1 input" not in shown[0]
    assert _tree(tmp_path / "dask") == _tree(tmp_path / "local") and len(_tree(tmp_path / "local")) == 16


@pytest.mark.parametrize("gather_limit", [None, 0])
def test_a_gone_record_is_never_kept_on_the_cluster(engine: EngineOptions, tmp_path: Path,
                                                    gather_limit: int | None) -> None:
    """Records signed, then the last one, a near copy of the first, deleted without signing again: its id points
    past the end of the file. On the cluster, the end of find gathered or run per component on the workers, the
    live one is kept and the gone one marked, as the local engine does: nothing is dropped."""
    corpus = tmp_path / "d.jsonl"
    corpus.write_text("".join(json.dumps({"text": text(topic)}) + "\n" for topic in range(10)) +
                      json.dumps({"text": text(0, 1)}) + "\n")
    store = tmp_path / "dedup.parquet"
    assert run("sign", str(corpus), "-o", str(store), "-q")[0] == 0
    corpus.write_text("".join(corpus.read_text().splitlines(keepends=True)[:-1]))
    limit = [] if gather_limit is None else ["--gather-limit", str(gather_limit)]
    on_cluster = ["--engine", "dask", "--scheduler", str(engine.scheduler), *limit]
    code, members, stderr = run("find", str(store), "--output", "members", "--format", "tsv", *on_cluster)
    assert code == 0, stderr
    assert members == run("find", str(store), "--output", "members", "--format", "tsv")[1]
    assert "d.jsonl:1\t1\tkeep\t2\td.jsonl:1\nd.jsonl:11\t1\tgone\t2\td.jsonl:1\n" in members
    assert "e.g. d.jsonl:11" in stderr
    code, _, stderr = run("filter", str(corpus), "-s", str(store), "-o", str(tmp_path / "clean.jsonl"), *on_cluster)
    assert code == 0, stderr
    assert (tmp_path / "clean.jsonl").read_bytes() == corpus.read_bytes()


@pytest.mark.parametrize("keep", ["first", "longest"])
def test_a_renamed_file_is_never_kept_on_the_cluster(engine: EngineOptions, tmp_path: Path, keep: str) -> None:
    """A file renamed without --prune: its old name, gone, sorts first and is as long as the new one. The members
    the cluster writes are the local engine's: the old name gone, the new one kept; the rm recipe run on them
    leaves the live copy. (The end of find on the workers is tested with records above.)"""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name, content in {"a.txt": text(0), "m.txt": text(0, 1), "b.txt": text(1)}.items():
        (corpus / name).write_text(content)
    store = tmp_path / "dedup.parquet"
    assert run("sign", str(corpus), "-o", str(store), "-q")[0] == 0
    os.rename(corpus / "a.txt", corpus / "z.txt")
    assert run("sign", str(corpus), "-o", str(store), "-q")[0] == 0
    common = ["find", str(store), "--keep", keep, "--output", "members", "--format", "tsv", "-q"]
    local = run(*common)[1]
    assert "a.txt\t1\tgone\t3\t" in local
    code, members, stderr = run(*common, "--engine", "dask", "--scheduler", str(engine.scheduler))
    assert code == 0, stderr
    assert members == local
    dropped = [line.split("\t")[0] for line in local.splitlines()[1:] if line.split("\t")[2] == "drop"]
    for name in dropped:
        (corpus / name).unlink()
    assert {path.read_text() for path in corpus.iterdir()} & {text(0), text(0, 1)}


@pytest.mark.parametrize("out", ["dir", "one.jsonl"])
def test_ids_repeated_across_pieces_are_written_once(engine: EngineOptions, cut_pieces: list[int], tmp_path: Path,
                                                     out: str) -> None:
    """Records whose id an earlier record had, the two in different pieces of an input cut for the cluster: each
    is written once, its first time, as filtering the input whole writes it (a directory, and one stream)."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    records = [{"id": f"u{n % 25}", "text": text(n % 25 + 100, n // 25)} for n in range(100)]
    (corpus / "r.jsonl").write_bytes(_jsonl(records))
    table = pa.table({"key": [f"k{n % 30}" for n in range(90)], "text": [text(n % 30 + 200) for n in range(90)]})
    pq.write_table(table, corpus / "r.parquet", row_group_size=10, compression="none")
    store = tmp_path / "s.parquet"
    code, _, stderr = run("sign", str(corpus), "-o", str(store), "-k", "64", "-q", "--id-field", "id", "--id-column",
                          "key")
    assert code == 0, stderr
    inputs = str(corpus) if out == "dir" else str(corpus / "r.jsonl")
    summary = both(engine, tmp_path / out, inputs, "-s", str(store))
    assert cut_pieces and min(cut_pieces) > 2, "inputs were cut into pieces"
    assert "with an id already read skipped" in summary
    written = (tmp_path / f"local-{out}" / "r.jsonl") if out == "dir" else tmp_path / f"local-{out}"
    assert sorted(json.loads(line)["id"] for line in written.read_text().splitlines()) == sorted(
        {f"u{n}" for n in range(25)})


def test_json_arrays_are_filtered_on_the_cluster_as_locally(engine: EngineOptions, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.json").write_text(json.dumps([{"text": text(n % 5, n // 5), "n": n} for n in range(15)], indent=2))
    (corpus / "b.json.gz").write_bytes(gzip.compress(json.dumps([{"text": text(n, 9)} for n in range(3)]).encode(),
                                                     mtime=0))
    (corpus / "c.json").write_text(json.dumps({"text": text(1, 11)}))
    store = tmp_path / "s.parquet"
    assert run("sign", str(corpus), "-o", str(store), "-k", "64", "-q")[0] == 0
    for options in ([], ["--annotate"]):
        summary = both(engine, tmp_path / "clean", str(corpus), "-s", str(store), *options)
        assert "filtered 19 records from 3 inputs" in summary
    local = json.loads((tmp_path / "local-clean" / "a.json").read_text())
    assert len(local) == 15 and {"dedup_group", "dedup_keep"} <= set(local[0])


def test_a_csv_filtered_on_the_cluster_again_and_again_with_the_profiler_sampling(engine: EngineOptions,
                                                                                  client: Client,
                                                                                  tmp_path: Path) -> None:
    """The workers' profiler samples their stacks while they cut and read CSV records (on by default): run after
    run, the filter on the cluster writes what the local engine writes, and never ends in a traceback. It once did
    now and then (a reader's buffer resized while a sampled frame still viewed it: tests/inputs/test_held_views.py
    holds the views on purpose)."""
    import dask

    assert all(client.run(lambda: dask.config.get("distributed.worker.profile.enabled")).values())
    rows = []
    for n in range(1500):
        words = [f"w{(n // 2) * 7 + i}" for i in range(150)]
        if n % 2:
            words[n % 150] = "changed"
        rows.append(f'{n},"{" ".join(words)}, said ""{n}"""\n')
    corpus = tmp_path / "corpus.csv"
    corpus.write_text("id,text\n" + "".join(rows))
    store = tmp_path / "s.parquet"
    assert run("sign", str(corpus), "--id-field", "id", "-o", str(store), "-q")[0] == 0
    local = tmp_path / "local.csv"
    assert run("filter", str(corpus), "-s", str(store), "-o", str(local), "-q")[0] == 0
    for attempt in range(6):
        out = tmp_path / f"dask-{attempt}.csv"
        code, _, stderr = run("filter", str(corpus), "-s", str(store), "-o", str(out), "-q", "--engine", "dask",
                              "--scheduler", str(engine.scheduler))
        assert code == 0 and "Traceback" not in stderr, stderr
        assert out.read_bytes() == local.read_bytes()
