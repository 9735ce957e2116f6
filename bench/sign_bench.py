"""Signing, measured against reading: the kernels per core, start-up, wall time on every core, peak memory.

Usage: python bench/sign_bench.py [--corpus bench/data/corpus-10000 ...] [--out bench/RESULTS-sign.md]
                                  [--repeat 3] [--baseline REV] [--skip-compile]

For each corpus built by ``bench/make_corpus.py`` (a folder of files, ``docs/``) this also writes the same
documents as one JSON Lines file (``corpus.jsonl``, ``{"id": …, "text": …}`` per line, next to ``docs/``), then:

* kernels per core: the corpus's documents in 1 MB batches signed in this process by the numpy kernel and
  the compiled one (``dedup_cli.kernel.compiled``: normalising and encoding in Python, then the kernel), CPU
  seconds of this thread (``time.thread_time``, so other processes do not inflate it), best of ``--repeat``;
  every batch is checked to give the same bytes both ways;
* start-up, each in a fresh process: ``dedup --version``, ``dedup --help``, ``dedup sign`` of one small file,
  numba's import, the compiled kernel's load from numba's cache, and (unless ``--skip-compile``) its
  compilation into an empty cache;
* wall time on every core: ``dedup sign`` (``-k 128``, all cores; ``auto`` and each kernel forced) of the folder
  and of the JSON Lines file, beside a Python process that reads the same files (open, read, decode) or
  parses the same JSON Lines (``json.loads`` per line), and ``cat``; the target is (sign − sign of one small
  file) ≤ 3 × that Python process. Commands run in turn, ``--repeat`` times; the fastest of each is kept;
* peak memory of each ``dedup sign`` run: of its whole process tree (it and its workers: the sum of their
  proportional set sizes, so pages the forked workers share count once; sampled every 10 ms from /proc) and the
  resident set of its largest process;
* with ``--baseline REV``, the same start-up, wall-time and memory rows for dedup at git revision REV
  (``git archive`` into a temporary folder, run with this interpreter), so before and after share one run.

Run it alone on a shared machine (``make bench`` takes ``flock /tmp/dedup-bench.lock``); compare ratios within
one run. Writes a markdown report.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SMALL_TEXT = "A small document of a dozen words, to time what signing costs before any work.\n"
READ_FILES = """import os, sys
total = 0
for directory, subdirectories, files in os.walk(sys.argv[1]):
    subdirectories.sort()
    for name in sorted(files):
        with open(os.path.join(directory, name), "rb") as handle:
            total += len(handle.read().decode("utf-8"))
"""
PARSE_JSONL = """import json, sys
with open(sys.argv[1], "rb") as handle:
    total = sum(len(json.loads(line)["text"]) for line in handle)
"""


def jsonl_of(corpus: Path) -> Path:
    """``corpus.jsonl``: the folder's documents as JSON Lines records, in id order (built once)."""
    out = corpus / "corpus.jsonl"
    docs = corpus / "docs"
    if out.exists() and out.stat().st_mtime >= (corpus / "manifest.json").stat().st_mtime:
        return out
    with open(out.with_suffix(".tmp"), "w", encoding="utf-8") as handle:
        for directory, subdirectories, files in os.walk(docs):
            subdirectories.sort()
            for name in sorted(files):
                path = Path(directory) / name
                handle.write(json.dumps({"id": str(path.relative_to(docs)), "text": path.read_text("utf-8")}) + "\n")
    os.replace(out.with_suffix(".tmp"), out)
    return out


# --- measuring processes ----------------------------------------------------------------------------------


def _memory(pid: int) -> tuple[int, int]:
    """(proportional set size, resident set size) of a process in bytes: PSS shares each page among the
    processes mapping it, so the PSS of a process tree adds up to its memory (forked workers share pages)."""
    with open(f"/proc/{pid}/smaps_rollup") as rollup:
        fields = dict(line.split(":", 1) for line in rollup if ":" in line and not line.startswith(" "))
    return int(fields["Pss"].split()[0]) * 1024, int(fields["Rss"].split()[0]) * 1024


def tree_rss(root: int) -> tuple[int, int]:
    """Memory of ``root`` and all its descendants, from /proc: (their summed PSS, the largest RSS)."""
    total, largest, pending = 0, 0, [root]
    while pending:
        pid = pending.pop()
        try:
            pss, rss = _memory(pid)
            total, largest = total + pss, max(largest, rss)
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as children:
                    pending += [int(child) for child in children.read().split()]
        except (OSError, ValueError):
            continue
    return total, largest


def timed(command: Sequence[str], env: dict[str, str] | None = None, memory: bool = False) -> dict[str, float]:
    """Wall seconds of one process (and with ``memory``, the peaks of its process tree's summed PSS and of its
    largest process's RSS, in MB, sampled every 10 ms)."""
    started = time.perf_counter()
    # Not from this checkout's folder: Python puts the working directory first on sys.path, before PYTHONPATH,
    # so a run of the baseline would import this checkout's dedup_cli.
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               cwd=tempfile.gettempdir())
    peaks = [0, 0]

    def watch() -> None:
        while process.poll() is None:
            total, largest = tree_rss(process.pid)
            peaks[0], peaks[1] = max(peaks[0], total), max(peaks[1], largest)
            time.sleep(0.01)  # reading smaps_rollup walks page tables: not too often

    watcher = threading.Thread(target=watch, daemon=True)
    if memory:
        watcher.start()
    _, error = process.communicate()
    wall = time.perf_counter() - started
    if process.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {error.decode()[-2000:]}")
    if not memory:
        return {"wall": wall}
    watcher.join()
    return {"wall": wall, "tree_mb": peaks[0] / 1e6, "largest_mb": peaks[1] / 1e6}


def best(runs: list[dict[str, float]]) -> dict[str, float]:
    fastest = min(runs, key=lambda run: run["wall"])
    summary = dict(fastest, median=statistics.median(run["wall"] for run in runs))
    for key in ("tree_mb", "largest_mb"):
        if key in fastest:
            summary[key] = max(run[key] for run in runs)
    return summary


# --- kernels per core -------------------------------------------------------------------------------------


def kernel_rows(docs: Path, repeat: int) -> list[str]:
    from dedup_cli.engine.sign_stage import sign_texts
    from dedup_cli.inputs.planning import TASK_BYTES
    from dedup_cli.kernel import compiled
    from dedup_cli.params import SignatureParams

    paths = sorted(glob.glob(str(docs / "**" / "*"), recursive=True))
    texts = [Path(path).read_bytes().decode("utf-8") for path in paths if os.path.isfile(path)]
    batches: list[list[str]] = [[]]
    size = 0
    for text in texts:
        batches[-1].append(text)
        size += len(text)
        if size >= TASK_BYTES:
            batches.append([])
            size = 0
    total = sum(len(text.encode("utf-8")) for text in texts)

    def cpu(run: Callable[[], object]) -> float:
        times = []
        for _ in range(repeat):
            started = time.thread_time()
            run()
            times.append(time.thread_time() - started)
        return min(times)

    lines = [f"{total / 1e6:.1f} MB in {len(texts):,} documents, {len(batches)} batches.", "",
             "| unit | scheme | k | numpy MB/s | numba MB/s (normalise + kernel) | kernel alone | normalising share | "
             "numba ÷ numpy |", "|---|---|---|---|---|---|---|---|"]
    for unit, scheme, num_perm in (("word", "oph", 128), ("word", "oph", 256), ("word", "kperm", 128),
                                   ("char", "oph", 128)):
        params = SignatureParams(num_perm=num_perm, shingle_unit=unit, scheme=scheme)
        for batch in batches:  # the same bytes both ways (also compiles or loads the kernel first)
            expected, actual = sign_texts(batch, params, kernel="numpy"), compiled.sign_texts(batch, params)
            assert all(np.array_equal(e, a) for e, a in zip(expected, actual, strict=True)), "the kernels disagree"
        numpy_seconds = cpu(lambda: [sign_texts(b, params, kernel="numpy") for b in batches])  # noqa: B023
        encoded = [compiled.encode_texts(batch) for batch in batches]
        numba_seconds = cpu(lambda: [compiled.sign_texts(b, params) for b in batches])  # noqa: B023
        kernel_seconds = cpu(lambda: [compiled.sign_encoded(*e[:2], params, e[2]) for e in encoded])  # noqa: B023
        encode_seconds = cpu(lambda: [compiled.encode_texts(b) for b in batches])
        lines.append(f"| {unit} | {scheme} | {num_perm} | {total / numpy_seconds / 1e6:.1f} | "
                     f"{total / numba_seconds / 1e6:.1f} | {total / kernel_seconds / 1e6:.1f} | "
                     f"{encode_seconds / numba_seconds:.0%} | {numpy_seconds / numba_seconds:.1f}× |")
    return lines


# --- the report -------------------------------------------------------------------------------------------


def export(revision: str, into: Path) -> Path:
    """The package at ``revision``, extracted into ``into`` (for ``PYTHONPATH``)."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", revision, "dedup_cli"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", type=Path, nargs="+", default=[HERE / "data" / "corpus-10000"])
    parser.add_argument("--out", type=Path, default=HERE / "RESULTS-sign.md")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--baseline", help="a git revision to measure beside this checkout (e.g. main)")
    parser.add_argument("--skip-compile", action="store_true", help="do not time the kernel's first compile")
    arguments = parser.parse_args()
    started = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="dedup-sign-bench-"))
    python = sys.executable
    ours = {**os.environ, "PYTHONPATH": str(REPO)}
    versions = {"this checkout": ours}
    if arguments.baseline:
        versions[f"at {arguments.baseline}"] = {**os.environ, "PYTHONPATH": str(export(arguments.baseline,
                                                                                        work))}
    small = work / "small.txt"
    small.write_text(SMALL_TEXT)
    store = work / "s.parquet"

    def dedup(*args: str) -> list[str]:
        return [python, "-m", "dedup_cli", *args]

    def sign_run(env: dict[str, str], *args: str, memory: bool = False) -> dict[str, float]:
        shutil.rmtree(store, ignore_errors=True)
        return timed(dedup("sign", *args, "-o", str(store), "-q"), env, memory)

    load = os.getloadavg()
    lines = ["# Signing: the kernels, start-up, every core, memory", "",
             f"Generated by `make bench` (`python bench/sign_bench.py`) on {platform.machine()} with "
             f"{os.cpu_count()} cores, Python {platform.python_version()}; load average "
             f"{load[0]:.2f} at the start. Wall times are the fastest of {arguments.repeat}; commands ran in "
             "turn under `flock /tmp/dedup-bench.lock`.", ""]

    # Start-up.
    lines += ["## Start-up (fresh processes; fastest and median of 7)", "", "| what | version | s | median s |",
              "|---|---|---|---|"]
    for label, env in versions.items():
        for name, command, before in (("dedup --version", dedup("--version"), None),
                                      ("dedup --help", dedup("--help"), None),
                                      ("dedup sign of one small file", None, True)):
            runs = [sign_run(env, str(small)) if before else timed(command or [], env) for _ in range(7)]
            summary = best(runs)
            lines.append(f"| {name} | {label} | {summary['wall']:.3f} | {summary['median']:.3f} |")
    probes = {"import numba": "import numba",
              "load the compiled kernel from numba's cache (import and first call)":
                  "from dedup_cli.kernel.compiled import compile_kernel; compile_kernel()"}
    for name, code in probes.items():
        summary = best([timed([python, "-c", code], ours) for _ in range(5)])
        lines.append(f"| {name} | this checkout | {summary['wall']:.3f} | {summary['median']:.3f} |")
    if not arguments.skip_compile:
        cache = {**ours, "NUMBA_CACHE_DIR": str(work / "numba-cache")}
        compile_run = timed([python, "-c", probes[list(probes)[1]]], cache)
        lines.append(f"| compile the kernel into an empty cache (once per install) | this checkout | "
                     f"{compile_run['wall']:.2f} | |")

    # Per corpus: kernels per core, then wall time and memory on every core.
    for corpus in arguments.corpus:
        corpus = corpus.resolve()
        docs, jsonl = corpus / "docs", jsonl_of(corpus)
        documents = json.loads((corpus / "manifest.json").read_text())["documents"]
        where = corpus.relative_to(REPO) if corpus.is_relative_to(REPO) else corpus
        lines += ["", f"## {documents:,} documents (`{where}`)", "",
                  "### Kernels per core (CPU seconds of the signing thread; 5-shingles)", ""]
        lines += kernel_rows(docs, arguments.repeat)
        # (name, the dedup version's environment or None for a plain command, arguments, record memory)
        commands: list[tuple[str, dict[str, str] | None, list[str], bool]] = [
            ("python reads the files", None, [python, "-c", READ_FILES, str(docs)], False),
            ("python parses the JSON Lines", None, [python, "-c", PARSE_JSONL, str(jsonl)], False),
            ("cat of the files", None, ["sh", "-c", f"find '{docs}' -type f -print0 | xargs -0 cat"], False),
        ]
        for label, env in versions.items():
            commands.append((f"sign one small file ({label})", env, [str(small)], False))
            for kernel in ["auto", "numpy", "numba"] if env is ours else ["auto"]:
                flags = ["-k", "128"] + ([] if kernel == "auto" else ["--kernel", kernel])
                commands.append((f"sign the folder ({label}, kernel {kernel})", env, [str(docs), *flags], True))
                commands.append((f"sign the JSON Lines ({label}, kernel {kernel})", env,
                                 [str(jsonl), "--id-field", "id", *flags], True))
        rows: dict[str, list[dict[str, float]]] = {}
        for _ in range(arguments.repeat):
            for name, env, command, memory in commands:
                rows.setdefault(name, []).append(timed(command) if env is None else sign_run(env, *command,
                                                                                             memory=memory))
        summary = {name: best(runs) for name, runs in rows.items()}
        size = sum(f.stat().st_size for f in docs.rglob("*") if f.is_file()) / 1e6
        lines += ["", f"### Wall time on all {os.cpu_count()} cores ({size:.1f} MB; `-k 128`, other options the "
                  "defaults)", "",
                  "| command | s | median s | MB/s | (s − one small file) ÷ Python's | peak MB, process tree (PSS) "
                  "| peak MB, largest process (RSS) |", "|---|---|---|---|---|---|---|"]
        for name, result in summary.items():
            base = name.split("(")[-1].split(",")[0].rstrip(")")
            small_run = summary.get(f"sign one small file ({base})")
            reference = summary["python parses the JSON Lines" if "JSON" in name else "python reads the files"]
            ratio = (f"{(result['wall'] - small_run['wall']) / reference['wall']:.2f}"
                     if small_run is not None and name.startswith("sign the") else "")
            memory = (f"{result['tree_mb']:.0f} | {result['largest_mb']:.0f}" if "tree_mb" in result else " | ")
            lines.append(f"| {name} | {result['wall']:.3f} | {result['median']:.3f} | {size / result['wall']:.0f} | "
                         f"{ratio} | {memory} |")
    load = os.getloadavg()
    lines += ["", f"Load average at the end: {load[0]:.2f}. Total time: {time.perf_counter() - started:.0f} s."]
    arguments.out.write_text("\n".join(lines) + "\n")
    shutil.rmtree(work, ignore_errors=True)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
