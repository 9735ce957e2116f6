"""How sign and find scale with processes: wall time, speed-up over one, and the serial share at every -j.

Usage (the measurements hold the shared lock, so no two benchmarks overlap on a shared machine):

    python bench/scaling.py --prepare                       # build the corpora and stores (once)
    flock /tmp/dedup-bench.lock python bench/scaling.py --out bench/RESULTS-scaling.md
    python bench/scaling.py --short-sizes 10000 --long-sizes 1000 --find-sizes 10000 --out /tmp/scaling.md
    python bench/scaling.py --find-sizes 10000000 --cases find-local find-dask --append --out …

Four cases, each at ``-j`` (or ``--workers``) 1, 2 and every power of two up to the machine's cores:

* ``sign-long``: ``dedup sign DIR -o STORE -j N -q`` of a folder of long files (300–3000 words each);
* ``sign-short``: ``dedup sign corpus.jsonl --id-field id -o STORE -j N -q`` of short JSON Lines records (60–180
  words, ``bench/filter_scale.py``'s generator), one file;
* ``find-local``: ``dedup find STORE -t 0.55 -b 2 -q -o OUT`` with ``--jobs N`` where ``find`` has that option,
  else at one process only (the table says so);
* ``find-dask``: the same with ``--engine dask --workers N`` (a local cluster, started and closed in the run).

Every measured command runs as a child of this process: ``python -c`` of a small wrapper that calls dedup's
command line in-process and, at its exit (the last exit handler, after the Dask cluster and the worker pools are
closed and their processes reaped), writes its own CPU time (``getrusage(RUSAGE_SELF)``: the driver). This
process waits for the child with ``os.wait4``, whose resource usage covers the child and every descendant it
reaped: the sign workers and the Dask worker processes (children of the driver, started by its nannies). A thread
also samples the CPU time of every descendant from ``/proc`` while the command runs; what it saw of the children
is a lower bound of what ``wait4`` counted, printed beside it as a check.

The serial share is s = (D − D₁) ÷ T: D the driver's CPU time, D₁ the driver's CPU time of the same command on a
one-document input (its start-up: imports, planning, starting the workers), and T the CPU time of all processes
of the run. By Amdahl's law a run whose serial part is a share s of its work gains at most
1 ÷ (s + (1 − s) ÷ n) on n cores, never more than 1 ÷ s: so a serial share measured on two cores already says
what 64 would give. The per-core figures are T less the one-document run's total, per document and per MB.

Inputs (deterministic, built into the git-ignored ``bench/data/`` by ``--prepare`` or when missing): the short
records by ``bench/filter_scale.py``'s generator (``filter-jsonl-N/``), or above 2·10^6 records by 16
processes writing 16 parts of shorter records (``short-parts-N/``); the long files by ``--long-generator``
(a long-document corpus generator's ``make_corpus.py``, run as ``--docs N --seed 1 --out DIR --jsonl`` into
``long-N/``, as ``make bench`` does) or, without it, by the generator here (``long-synthetic-N/``: made-up words
of a Zipf-like vocabulary, 20 % of documents near-duplicates of another); the stores of ``find`` by
``bench/find_scale.py``'s generator (``synthetic-N.parquet``: k = 256, 8 bits, 1 % in planted families). Nothing
here needs the network. Writes a markdown report (``--append`` adds it to ``--out``); asserts nothing about time.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from dedup_cli.processes import descendants

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
DATA = BENCH / "data"
CASES = ("sign-long", "sign-short", "find-local", "find-dask")
THRESHOLD = 0.55
BITS = 2
PROJECTED_CORES = 64
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

# The measured command: dedup's command line in this process, and the driver's CPU time written at exit. The
# handler is registered before dedup (and multiprocessing, whose exit handler joins its children) is imported, so
# it runs last; a forked worker inherits it but never writes (another pid).
WRAPPER = """
import atexit, json, os, resource, sys
report, driver = sys.argv[1], os.getpid()
def _write_driver_cpu():
    if os.getpid() == driver:
        own, reaped = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        with open(report, "w") as handle:
            json.dump({"self": own.ru_utime + own.ru_stime, "children": reaped.ru_utime + reaped.ru_stime}, handle)
atexit.register(_write_driver_cpu)
patch = os.environ.get("DEDUP_BENCH_PATCH")  # "MODULE:NAME=INTEGER": a limit a case forces, e.g. the general path
if patch:
    import importlib
    module, _, assignment = patch.partition(":")
    name, _, value = assignment.partition("=")
    setattr(importlib.import_module(module), name, int(value))
sys.argv = ["dedup", *sys.argv[2:]]
from dedup_cli.cli.main import cli
cli(prog_name="dedup")
"""


# --- corpora and stores -------------------------------------------------------------------------------------


SHORT_PARTS_ABOVE = 2_000_000  # more short records than this are written as parts, by one process each
SHORT_PARTS = 16


def _write_short_part(task: tuple[Path, int, int, int]) -> None:
    """One part of the large short corpus: records ``start`` … ``start + count − 1``, 30–60 words each."""
    path, start, count, seed = task
    rng = np.random.default_rng([seed, start])
    vocabulary = 50_000
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words_rng = np.random.default_rng(seed)  # the same made-up words in every part
    words = ["".join(letters[words_rng.integers(0, 26, n)]) for n in words_rng.integers(3, 10, vocabulary).tolist()]
    cumulative = np.cumsum(1.0 / np.arange(1, vocabulary + 1) ** 0.9)
    cumulative /= cumulative[-1]
    lengths = rng.integers(30, 61, count)
    tokens = np.minimum(np.searchsorted(cumulative, rng.random(int(lengths.sum()))), vocabulary - 1)
    ends = np.cumsum(lengths)
    copied = rng.random(count) < 0.04  # a near-duplicate of the record before it, a few words replaced
    copied[0] = False
    with open(path, "w", encoding="utf-8") as handle:
        previous: list[int] = []
        for index, (end, length) in enumerate(zip(ends.tolist(), lengths.tolist(), strict=True)):
            record = tokens[end - length:end].tolist()
            if copied[index]:
                record = [t if rng.random() > 0.03 else int(rng.integers(vocabulary)) for t in previous]
            previous = record
            handle.write(json.dumps({"id": f"r{start + index:09d}", "text": " ".join(words[t] for t in record)}) + "\n")


def build_short_parts(records: int, folder: Path, seed: int = 7) -> None:
    """``part-NN.jsonl``: ``records`` short records in :data:`SHORT_PARTS` files, written by as many processes.

    ``bench/filter_scale.py``'s generator writes 60–180 words a record in one process: 10^7 of its records are
    9 GB and ten minutes of writing. These are 30–60 words (about 300 bytes a record, JSON included), from a
    Zipf-like law over the same kind of made-up words, 4 % of them near-duplicates of the record before.
    """
    from multiprocessing import Pool

    staging = folder.with_name(folder.name + ".staging")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    per_part = -(-records // SHORT_PARTS)
    tasks = [(staging / f"part-{part:02d}.jsonl", start, min(per_part, records - start), seed)
             for part, start in enumerate(range(0, records, per_part))]
    with Pool(min(len(tasks), os.cpu_count() or 1)) as pool:
        pool.map(_write_short_part, tasks)
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(staging, folder)


def short_corpus(records: int, data: Path) -> Path:
    """``corpus.jsonl`` of ``records`` short records (``bench/filter_scale.py``'s corpus, shared with it); above
    :data:`SHORT_PARTS_ABOVE` records, a folder of parts (:func:`build_short_parts`)."""
    if records > SHORT_PARTS_ABOVE:
        folder = data / f"short-parts-{records}"
        if not folder.exists():
            data.mkdir(parents=True, exist_ok=True)
            build_short_parts(records, folder)
        return folder
    folder = data / f"filter-jsonl-{records}"
    if not (folder / "corpus.jsonl").exists():
        sys.path.insert(0, str(BENCH))
        from filter_scale import build_corpus

        data.mkdir(parents=True, exist_ok=True)
        build_corpus(records, folder)
    return folder / "corpus.jsonl"


def build_long_corpus(documents: int, folder: Path, seed: int = 1) -> None:
    """``docs/NNN/NNNNNNN.txt``: ``documents`` files of 300–3000 words (log-uniform), written atomically.

    Words are made up (3–9 letters) and drawn from a Zipf-like law over 50,000 of them, in lines of 8–20 words;
    20 % of the documents copy another one with a share U[0.002, 0.3] of its words replaced. Only what signing
    costs matters here (bytes, words, lines), not the truth of the pairs.
    """
    staging = folder.with_name(folder.name + ".staging")
    shutil.rmtree(staging, ignore_errors=True)
    rng = np.random.default_rng(seed)
    vocabulary_size = 50_000
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocabulary = np.array(["".join(letters[rng.integers(0, 26, n)]) for n in rng.integers(3, 10, vocabulary_size)])
    weights = 1.0 / np.arange(1, vocabulary_size + 1) ** 0.9
    cumulative = np.cumsum(weights / weights.sum())
    lengths = np.exp(rng.uniform(np.log(300), np.log(3000), documents)).astype(np.int64)
    copied = rng.random(documents) < 0.2
    copied[0] = False
    kept: list[np.ndarray] = []
    for index in range(documents):
        if copied[index]:
            tokens = kept[int(rng.integers(len(kept)))].copy()
            edits = rng.random(tokens.size) < rng.uniform(0.002, 0.3)
            tokens[edits] = np.searchsorted(cumulative, rng.random(int(edits.sum())))
        else:
            tokens = np.minimum(np.searchsorted(cumulative, rng.random(int(lengths[index]))), vocabulary_size - 1)
            if len(kept) < 20_000:
                kept.append(tokens)
            else:
                kept[int(rng.integers(len(kept)))] = tokens
        tokens = np.minimum(tokens, vocabulary_size - 1)
        words = vocabulary[tokens].astype(object)
        line_ends = np.cumsum(rng.integers(8, 21, tokens.size // 8 + 1))
        words[line_ends[line_ends < tokens.size] - 1] += "\n"
        path = staging / "docs" / f"{index // 1000:03d}" / f"{index:07d}.txt"
        if index % 1000 == 0:
            path.parent.mkdir(parents=True)
        path.write_text(" ".join(words.tolist()) + "\n", encoding="utf-8")
    (staging / "meta.json").write_text(json.dumps({"docs": documents, "seed": seed, "generator": "bench/scaling.py"}))
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(staging, folder)


def long_corpus(documents: int, data: Path, generator: Path | None) -> Path:
    """The folder of ``documents`` long files: the external generator's when given, else this script's."""
    if generator is not None:
        folder = data / f"long-{documents}"
        if not (folder / "meta.json").exists():
            data.mkdir(parents=True, exist_ok=True)
            subprocess.run([sys.executable, str(generator), "--docs", str(documents), "--seed", "1", "--out",
                            str(folder), "--jsonl"], check=True)
        return folder / "docs"
    folder = data / f"long-synthetic-{documents}"
    if not (folder / "meta.json").exists():
        data.mkdir(parents=True, exist_ok=True)
        build_long_corpus(documents, folder)
    return folder / "docs"


def find_store(documents: int, data: Path) -> Path:
    path = data / f"synthetic-{documents}.parquet"
    if not path.exists():
        sys.path.insert(0, str(BENCH))
        from find_scale import build_store

        data.mkdir(parents=True, exist_ok=True)
        staging = path.with_name(path.name + ".staging")
        shutil.rmtree(staging, ignore_errors=True)
        build_store(documents, staging)
        os.replace(staging, path)
    return path


def one_document_inputs(data: Path, long_docs: Path | None, short_jsonl: Path | None) -> dict[str, Path]:
    """The start-up inputs: one long file in a folder, one JSON Lines record, a store of one document."""
    folder = data / "scaling-one-document"
    folder.mkdir(parents=True, exist_ok=True)
    found = {"find": find_store(1, data)}
    if long_docs is not None:
        first = min(path for path in long_docs.rglob("*.txt"))
        (folder / "long").mkdir(exist_ok=True)
        shutil.copyfile(first, folder / "long" / first.name)
        found["sign-long"] = folder / "long"
    if short_jsonl is not None:
        if short_jsonl.is_dir():
            short_jsonl = min(short_jsonl.glob("*.jsonl"))
        with open(short_jsonl, encoding="utf-8") as handle:
            (folder / "short.jsonl").write_text(handle.readline(), encoding="utf-8")
        found["sign-short"] = folder / "short.jsonl"
    return found


def compile_kernel() -> None:
    """Load the compiled signing kernel into numba's cache now, so that no measured run compiles it."""
    subprocess.run([sys.executable, "-c", "from dedup_cli.kernel.compiled import compile_kernel; compile_kernel()"],
                   check=True)


# --- one measured command -----------------------------------------------------------------------------------


def _cpu_seconds(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime (fields 14 and 15 of stat)


class ChildrenSeen:
    """The latest CPU time of every descendant of ``pid`` (not ``pid`` itself), sampled until stopped."""

    def __init__(self, pid: int, every: float = 0.25) -> None:
        self.cpu: dict[int, float] = {}
        self._pid = pid
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(every,), daemon=True)
        self._thread.start()

    def _run(self, every: float) -> None:
        while not self._stop.wait(every):
            for child in descendants(self._pid):
                seconds = _cpu_seconds(child)
                if seconds is not None:
                    self.cpu[child] = max(self.cpu.get(child, 0.0), seconds)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return sum(self.cpu.values())


@dataclass
class Run:
    """One command: its wall time, the driver's CPU time and that of every process it reaped."""

    wall: float
    driver_cpu: float
    total_cpu: float
    children_seen: float
    output_digest: str = ""


class Stopped(RuntimeError):
    """A command stopped at its time limit: its wall time and the CPU of the processes it had reaped."""

    def __init__(self, wall: float, cpu: float) -> None:
        super().__init__(f"stopped after {wall:.0f} s")
        self.wall, self.cpu = wall, cpu


def run_command(arguments: list[str], scratch: Path, output: Path | None = None, limit: float | None = None) -> Run:
    """``dedup ARGUMENTS`` as a child of this process, through the wrapper; raises on a non-zero exit, and
    :class:`Stopped` when it runs past ``limit`` seconds (it and its children are killed)."""
    report = scratch / "driver-cpu.json"
    report.unlink(missing_ok=True)
    with open(scratch / "stderr.txt", "wb") as stderr:
        started = time.perf_counter()
        child = subprocess.Popen([sys.executable, "-c", WRAPPER, str(report), *arguments], stdout=subprocess.DEVNULL,
                                 stderr=stderr, start_new_session=limit is not None)
        seen = ChildrenSeen(child.pid)
        if limit is not None:
            while True:
                pid, status, usage = os.wait4(child.pid, os.WNOHANG)
                if pid:
                    break
                if time.perf_counter() - started > limit:
                    os.killpg(child.pid, signal.SIGKILL)
                    _, status, usage = os.wait4(child.pid, 0)
                    seen.stop()
                    raise Stopped(time.perf_counter() - started, usage.ru_utime + usage.ru_stime)
                time.sleep(0.5)
        else:
            _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    children_seen = seen.stop()
    if child.returncode != 0 or not report.exists():
        raise RuntimeError(f"dedup {' '.join(arguments)}: exit {child.returncode}\n"
                           f"{(scratch / 'stderr.txt').read_text(errors='replace')[-3000:]}")
    driver = json.loads(report.read_text())
    digest = hashlib.sha256(output.read_bytes()).hexdigest()[:12] if output is not None else ""
    return Run(wall, driver["self"], usage.ru_utime + usage.ru_stime, children_seen, digest)


# --- the cases ----------------------------------------------------------------------------------------------


def find_has_jobs() -> bool:
    """Whether this dedup's ``find`` takes ``--jobs`` (from its help)."""
    found = subprocess.run([sys.executable, "-m", "dedup_cli", "find", "--help"], capture_output=True, text=True,
                           check=True)
    return "--jobs" in found.stdout


def command_for(case: str, inputs: Path, jobs: int, scratch: Path) -> tuple[list[str], Path | None]:
    """The command line of ``case`` on ``inputs`` at ``jobs`` processes, and the file it writes to compare."""
    store = scratch / "store.parquet"
    shutil.rmtree(store, ignore_errors=True)
    if case == "sign-long":
        return ["sign", str(inputs), "-o", str(store), "-j", str(jobs), "-q"], None
    if case == "sign-short":
        return ["sign", str(inputs), "--id-field", "id", "-o", str(store), "-j", str(jobs), "-q"], None
    out = scratch / "found.jsonl"
    command = ["find", str(inputs), "-t", str(THRESHOLD), "-b", str(BITS), "-q", "-o", str(out)]
    if case == "find-dask":
        return [*command, "--engine", "dask", "--workers", str(jobs)], out
    return ([*command, "--jobs", str(jobs)] if jobs else command), out


def input_megabytes(case: str, inputs: Path) -> float:
    if case == "sign-long":
        return sum(path.stat().st_size for path in inputs.rglob("*") if path.is_file()) / 1e6
    if case == "sign-short":
        return sum(path.stat().st_size for path in ([inputs] if inputs.is_file() else inputs.glob("*.jsonl"))) / 1e6
    return 0.0


def warm(inputs: Path) -> None:
    """Read the input once, so that the timed commands find it in the page cache."""
    for path in [inputs] if inputs.is_file() else sorted(inputs.rglob("*")):
        if path.is_file():
            with open(path, "rb") as handle:
                while handle.read(1 << 22):
                    pass


@dataclass
class Row:
    case: str
    documents: int
    megabytes: float
    jobs: int
    jobs_option: bool  # False: find without --jobs, one process
    run: Run
    startup: Run
    runs: list[float] = field(default_factory=list)

    @property
    def serial_share(self) -> float:
        return max(0.0, self.run.driver_cpu - self.startup.driver_cpu) / self.run.total_cpu

    @property
    def work_cpu(self) -> float:
        """CPU time of all processes beyond the one-document run's: the work that grows with the input."""
        return max(1e-9, self.run.total_cpu - self.startup.total_cpu)


def measure_case(case: str, documents: int, inputs: Path, startup_input: Path, jobs_list: list[int],
                 jobs_option: bool, repeat: int, scratch: Path, rows: list[Row]) -> None:
    """Append a row to ``rows`` for each -j, as it is measured (a failure keeps the rows before it)."""
    warm(inputs)
    for jobs in jobs_list if jobs_option or case != "find-local" else [0]:
        command, _ = command_for(case, startup_input, jobs, scratch)
        startup = min((run_command(command, scratch) for _ in range(2)), key=lambda run: run.driver_cpu)
        runs = []
        for _ in range(repeat):
            command, output = command_for(case, inputs, jobs, scratch)
            runs.append(run_command(command, scratch, output))
        best = min(runs, key=lambda run: run.wall)
        row = Row(case, documents, input_megabytes(case, inputs), jobs or 1, jobs_option, best, startup,
                  [run.wall for run in runs])
        rows.append(row)
        print(json.dumps({**asdict(row), "serial_share": row.serial_share}), flush=True)
    shutil.rmtree(scratch / "store.parquet", ignore_errors=True)


# --- the report ---------------------------------------------------------------------------------------------


def amdahl(share: float, cores: int) -> float:
    """Speed-up on ``cores`` cores of work whose serial share is ``share``: 1 ÷ (s + (1 − s) ÷ n)."""
    return 1.0 / (share + (1.0 - share) / cores)


CASE_NAMES = {"sign-long": "sign, long files", "sign-short": "sign, short JSON Lines records",
              "find-local": "find, local engine", "find-dask": "find, Dask engine"}


def table(rows: list[Row]) -> list[str]:
    lines = ["| case | documents | -j / workers | wall s | speed-up over 1 | driver CPU s (start-up) | "
             "all CPU s (children: counted / seen in /proc) | serial share s | cap 1/s | "
             f"Amdahl at {PROJECTED_CORES} cores | CPU µs per document | MB/s per core | output as at 1 |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    first: dict[tuple[str, int], Row] = {}
    for row in rows:
        base = first.setdefault((row.case, row.documents), row)
        jobs = f"{row.jobs}" if row.case != "find-local" or row.jobs_option else "1 (no `--jobs` in this find)"
        share = row.serial_share
        children = row.run.total_cpu - row.run.driver_cpu
        speed = row.megabytes / row.work_cpu if row.megabytes else None
        same = "" if not row.run.output_digest else ("yes" if row.run.output_digest == base.run.output_digest
                                                      else "**no**")
        lines.append(
            f"| {CASE_NAMES[row.case]} | {row.documents:,}{f' ({row.megabytes:,.0f} MB)' if row.megabytes else ''} | "
            f"{jobs} | {row.run.wall:.2f} | {base.run.wall / row.run.wall:.2f}× | "
            f"{row.run.driver_cpu:.2f} ({row.startup.driver_cpu:.2f}) | "
            f"{row.run.total_cpu:.2f} ({children:.2f} / {row.run.children_seen:.2f}) | {share:.3f} | "
            f"{'∞' if share == 0 else f'{1 / share:.1f}×'} | {amdahl(share, PROJECTED_CORES):.1f}× | "
            f"{row.work_cpu / row.documents * 1e6:,.1f} | {f'{speed:.1f}' if speed else ''} | {same} |")
    return lines


def targets(rows: list[Row]) -> list[str]:
    """The scaling targets this run can speak to, each with what it measured."""
    def row(case: str, jobs: int, documents: int | None = None) -> Row | None:
        return next((r for r in rows if r.case == case and r.jobs == jobs
                     and (documents is None or r.documents == documents)
                     and (case != "find-local" or jobs == 1 or r.jobs_option)), None)

    def speedup(case: str, documents: int, jobs: int) -> str:
        one, many = row(case, 1, documents), row(case, jobs, documents)
        return f"{one.run.wall / many.run.wall:.2f}×" if one and many else "not measured"

    lines = ["| what | measured | target |", "|---|---|---|"]
    cases = {r.case for r in rows}
    for case, documents, target in (("sign-short", 1_000_000, "≤ 0.03"), ("sign-long", 100_000, "≤ 0.03")):
        found = row(case, 2, documents)
        if case in cases:
            lines.append(f"| serial share, {CASE_NAMES[case]}, {documents:,}, -j 2 | "
                         f"{f'{found.serial_share:.3f}' if found else 'not measured'} | {target} |")
    if "sign-short" in cases:
        lines.append(f"| sign -j 2 ÷ -j 1 speed-up, 1,000,000 short records | {speedup('sign-short', 1_000_000, 2)} "
                     "| ≥ 1.85× |")
    for documents in sorted({r.documents for r in rows if r.case == "find-local"}):
        measured = speedup("find-local", documents, 2) if row("find-local", 2, documents) else "no `--jobs`"
        lines.append(f"| find {documents:,}, -j 2 ÷ -j 1 | {measured} | ≥ 1.7× |")
    for documents in sorted({r.documents for r in rows if r.case.startswith("find")}):
        local = row("find-local", 2, documents) or row("find-local", 1, documents)
        dask = row("find-dask", 2, documents)
        shares = [f"local -j {local.jobs if local.jobs_option else '1 (no --jobs)'}: {local.serial_share:.3f}"
                  if local else "", f"Dask 2 workers: {dask.serial_share:.3f}" if dask else ""]
        lines.append(f"| serial share, find {documents:,} | {'; '.join(s for s in shares if s)} | ≤ 0.10 |")
        if local and dask:
            lines.append(f"| Dask, 2 workers, {documents:,}: wall and CPU ÷ local engine "
                         f"(-j {local.jobs if local.jobs_option else '1, no --jobs'}) | "
                         f"{dask.run.wall / local.run.wall:.2f}× wall, {dask.run.total_cpu / local.run.total_cpu:.2f}× "
                         "CPU | ≤ 1.5× wall, ≤ 1.5× CPU |")
    if (os.cpu_count() or 1) >= 16:
        if "sign-long" in cases:
            largest = max(r.documents for r in rows if r.case == "sign-long")
            lines.append(f"| 16 cores: sign long files, -j 16 ÷ -j 1 | {speedup('sign-long', largest, 16)} | ≥ 11× |")
        for case, target in (("sign-short", "≤ 6 s"), ("find-local", "≤ 8 s"), ("find-dask", "≤ 12 s")):
            for r in rows:
                if r.case == case and r.jobs == 16:
                    lines.append(f"| 16 cores: {CASE_NAMES[case]} {r.documents:,}, -j 16 | {r.run.wall:.1f} s | "
                                 f"{target} |")
    return lines


def measured_code() -> str:
    """The git commit of the dedup the children import (not its folder: the report may be read elsewhere)."""
    found = subprocess.run([sys.executable, "-c", "import dedup_cli, os; print(os.path.dirname(dedup_cli.__file__))"],
                           capture_output=True, text=True, check=True).stdout.strip()
    folder = Path(found).parent
    commit = subprocess.run(["git", "-C", str(folder), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    changed = subprocess.run(["git", "-C", str(folder), "status", "--porcelain", "--untracked-files=no", "--",
                              "dedup_cli"],
                             capture_output=True, text=True).stdout.strip()
    return (f"commit {commit or 'unknown'}"
            f"{' with uncommitted changes to dedup_cli/' if changed else ''}")


INTRO = """# Scaling: sign and find at -j 1, 2, … the cores

Written by `make bench-scaling` (`bench/scaling.py`). How to read a table:

* **wall s** and **speed-up over 1**: the run's wall time, and the one-process run's divided by it.
* **driver CPU s (start-up)**: the CPU time of the process that runs the command (it walks, plans, receives,
  writes, commits), and in brackets the same command's on a one-document input: its start-up, which does not grow
  with the input.
* **all CPU s**: the CPU time of every process of the run, the driver and each worker it reaped
  (`os.wait4` of the command); in brackets the workers' part, and what sampling `/proc` saw of them (a lower
  bound, a check that every worker is counted).
* **serial share s** = (driver CPU − its start-up) ÷ all CPU: the share of the work only one process can do.
  By Amdahl's law n cores speed the run up at most 1 ÷ (s + (1 − s) ÷ n), never beyond the cap 1 ÷ s; the
  table gives both, the bound at 64 cores from the share measured here. On 2 cores the measured speed-up shows
  little; the serial share shows what many cores would give. At -j 1 the driver does all the work, so s is 1
  less the start-up's share of the run there; read it at -j 2 and beyond.
* **CPU µs per document** and **MB/s per core**: all CPU less the one-document run's, per document and per MB
  of input: what one core does, the figure a projection to another machine starts from.
* **output as at 1**: find's output has the same bytes as at one process (sign's stores are checked by the
  tests, not here).

Timings on a shared machine are noisy: compare ratios within one table.
"""


def topology() -> str:
    """How the logical CPUs sit on physical cores, from Linux's ``/sys``: where two or more share a core
    (hyperthreads), n processes do not get n cores' worth of work, and CPU per document grows with -j."""
    cpus = sorted(Path("/sys/devices/system/cpu").glob("cpu[0-9]*/topology/core_id"))
    if not cpus:
        return "topology unknown"
    cores = {(path.parent.joinpath("physical_package_id").read_text().strip(), path.read_text().strip())
             for path in cpus}
    return f"{len(cpus)} logical CPUs on {len(cores)} physical cores"


def report(rows: list[Row], label: str, command: str, jobs_option: bool, long_source: str, load: float) -> str:
    cores = os.cpu_count() or 1
    long_files = f"Long files: {long_source}. " if any(r.case == "sign-long" for r in rows) else ""
    model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
                 platform.machine()) if os.path.exists("/proc/cpuinfo") else platform.machine()
    return "\n".join([
        f"## {label}", "",
        f"Command: `{command}` (`bench/scaling.py`), on {cores} cores ({model}; {topology()}), Python "
        f"{platform.python_version()}, load average {load:.2f} at the start; measured code: {measured_code()}. "
        f"{long_files}`find`: `-t {THRESHOLD} -b {BITS}` on synthetic stores (k = 256, 8 bits); "
        f"{'local with `--jobs N`' if jobs_option else 'this find has no `--jobs`: one local process'}"
        "; Dask with `--workers N` on a local cluster started and closed inside the run. Each command is a fresh "
        "process with a fresh store; the fastest wall time of the runs is shown with its CPU times; start-up is "
        "the smaller driver CPU of two runs of the same command on one document.", "",
        *table(rows), "", "Targets:", "", *targets(rows), ""])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cores = os.cpu_count() or 1
    powers = [1, *[2 ** p for p in range(1, cores.bit_length()) if 2 ** p <= cores]]
    parser.add_argument("--prepare", action="store_true", help="build the corpora and stores, measure nothing")
    parser.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    parser.add_argument("--jobs", nargs="+", type=int, default=powers,
                        help=f"-j / --workers to measure (default: 1, 2, … up to the {cores} cores)")
    parser.add_argument("--short-sizes", nargs="+", type=int, default=[1_000_000], help="short JSON Lines records")
    parser.add_argument("--long-sizes", nargs="+", type=int, default=[100_000], help="long files")
    parser.add_argument("--find-sizes", nargs="+", type=int, default=[1_000_000], help="documents in find's stores")
    parser.add_argument("--long-generator", type=Path,
                        help="a long-document corpus generator's make_corpus.py (default: this script's own)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each command; the fastest is shown")
    parser.add_argument("--data", type=Path, default=DATA, help="where the corpora and stores are built")
    parser.add_argument("--label", default="Scaling", help="the report's heading")
    parser.add_argument("--out", type=Path, help="write the markdown report here")
    parser.add_argument("--append", action="store_true", help="add the report to --out instead of replacing it")
    arguments = parser.parse_args()
    generator = arguments.long_generator.resolve() if arguments.long_generator else None
    long_source = (f"the long-document generator `make_corpus.py --seed 1` ({generator.parent.name}/)" if generator
                   else "`bench/scaling.py`'s generator (made-up words, 300–3000 a file)")

    inputs: dict[tuple[str, int], Path] = {}
    for size in arguments.long_sizes if "sign-long" in arguments.cases else []:
        inputs["sign-long", size] = long_corpus(size, arguments.data, generator)
    for size in arguments.short_sizes if "sign-short" in arguments.cases else []:
        inputs["sign-short", size] = short_corpus(size, arguments.data)
    for case in ("find-local", "find-dask"):
        for size in arguments.find_sizes if case in arguments.cases else []:
            inputs[case, size] = find_store(size, arguments.data)
    startup = one_document_inputs(arguments.data, next((p for (c, _), p in inputs.items() if c == "sign-long"), None),
                                  next((p for (c, _), p in inputs.items() if c == "sign-short"), None))
    compile_kernel()
    if arguments.prepare:
        print("prepared:", *sorted(str(path) for path in inputs.values()))
        return

    jobs_option = find_has_jobs()
    load = os.getloadavg()[0]
    rows: list[Row] = []
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="dedup-scaling-") as folder:
        for (case, size), path in inputs.items():
            try:
                measure_case(case, size, path, startup["find" if case.startswith("find") else case],
                             arguments.jobs, jobs_option, arguments.repeat, Path(folder), rows)
            except RuntimeError as error:  # the other cases still run; the report says what failed
                print(error, file=sys.stderr, flush=True)
                failures.append(f"{CASE_NAMES[case]}, {size:,}: {str(error).splitlines()[0]}")
    # The generator is named by the Makefile's variable, not by where it lies on this machine.
    command = "python bench/scaling.py " + " ".join(
        "$BENCH_LONG_GENERATOR" if generator and Path(word).resolve() == generator else shlex.quote(word)
        for word in sys.argv[1:])
    text = report(rows, arguments.label, command, jobs_option, long_source, load)
    if failures:
        text += "\nFailed (the rows after a failure are missing):\n\n" + "".join(f"- `{f}`\n" for f in failures)
    print(text)
    if arguments.out:
        previous = arguments.out.read_text() if arguments.append and arguments.out.exists() else INTRO
        arguments.out.write_text(previous + "\n" + text)


if __name__ == "__main__":
    main()
