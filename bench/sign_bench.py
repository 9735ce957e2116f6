"""Signing, measured: the kernel auto chooses at every size, the first run after an install, signing against
reading, end to end against the peers, start-up, memory, and the kernels per core.

Usage: python bench/sign_bench.py [--corpus bench/data/corpus-10000 bench/data/corpus-100000]
                                  [--long-corpus bench/data/long-10000 bench/data/long-100000]
                                  [--out bench/RESULTS-sign.md] [--repeat 3] [--baseline REV] [--skip-compile]
                                  [--skip-peers]

Corpora: ``--corpus`` folders built by ``bench/make_corpus.py`` (short documents: ``docs/``, ``manifest.json``)
and ``--long-corpus`` folders of long documents (``docs/``, ``meta.json``, ``corpus.jsonl``). Each corpus is also
read as one JSON Lines file (``corpus.jsonl``, ``{"id": …, "text": …}`` per line, written next to ``docs/`` when
missing). A 1 MB corpus is made of the first documents of the first ``--corpus``.

* targets: the table of the signing targets, each row with its number and the section that measured it;
* ``auto`` against each kernel forced: ``dedup sign -k 128`` on every core with ``--kernel numpy``, ``numba`` and
  ``auto`` (which says what it chose, ``-v``), on every corpus, as a folder and as JSON Lines, fastest of
  ``--repeat``;
* the first run after an install: ``dedup sign`` then ``dedup find`` of the first ``--long-corpus`` of fewer
  than 10^5 documents (74 MB), each a fresh process, with an empty numba cache (``NUMBA_CACHE_DIR``): the compiled
  kernel is not there, ``auto`` signs with numpy and compiles it in the background; then, once that is done, the
  same commands again (a later run); ``--repeat`` such pairs, each with an empty cache of its own;
* signing against reading, for the corpora of 10^5 documents: ``dedup sign`` (``auto``) of the folder and of the
  JSON Lines file beside a Python process that reads the files (open, read, decode) or parses the JSON Lines
  (``json.loads`` per line), and ``dedup sign`` of one small file (start-up); the ratio is (sign − start-up) ÷
  that Python process; peak memory of the whole process tree (PSS) and of its largest process (RSS);
* end to end against the peers, for the corpora of 10^5 documents: ``bench/compare.py``'s processes, each tool's
  signing and finding (k = 128, R0 = 0.5; dedup with b = 2, oph, every core, ``--verify none``; datasketch and
  rensa with their LSH and estimate filter), times without interpreter start-up as compare.py measures them;
* start-up: ``dedup --version``, ``--help``, ``sign`` of one small file, numba's import, loading the compiled
  kernel from numba's cache, and (unless ``--skip-compile``) compiling it into an empty cache;
* kernels per core: each kernel's CPU seconds per MB signing the first corpus in this process;
* with ``--baseline REV``, start-up and signing-against-reading rows for dedup at git revision REV (``git
  archive`` into a temporary folder), so before and after share one run.

The page cache is warmed before each group of timed commands. Run it alone on a shared machine (``make bench``
takes ``flock /tmp/dedup-bench.lock``); compare ratios within one run. Writes a markdown report.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

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
SMALL_MB = 1.0  # the smallest corpus: this many MB of the first corpus's documents


# --- corpora ------------------------------------------------------------------------------------------------


class Corpus:
    """A folder of documents (``docs/``) and the same documents as one JSON Lines file."""

    def __init__(self, folder: Path, name: str) -> None:
        self.folder = folder
        self.docs = folder / "docs"
        self.name = name
        self.jsonl = folder / "corpus.jsonl"
        files = [path for path in self.docs.rglob("*") if path.is_file()]
        self.documents = len(files)
        self.megabytes = sum(path.stat().st_size for path in files) / 1e6

    def label(self) -> str:
        return f"{self.name}: {self.documents:,} documents, {self.megabytes:.0f} MB"

    def warm(self) -> None:
        """Read the files and the JSON Lines once, so that timed commands find them in the page cache."""
        for path in [*self.docs.rglob("*"), self.jsonl]:
            if path.is_file():
                with open(path, "rb") as handle:
                    while handle.read(1 << 22):
                        pass


def jsonl_of(folder: Path) -> Path:
    """``corpus.jsonl``: the folder's documents as JSON Lines records, in id order (built once)."""
    out = folder / "corpus.jsonl"
    docs = folder / "docs"
    marker = folder / "manifest.json"
    if out.exists() and (not marker.exists() or out.stat().st_mtime >= marker.stat().st_mtime):
        return out
    with open(out.with_suffix(".tmp"), "w", encoding="utf-8") as handle:
        for directory, subdirectories, files in os.walk(docs):
            subdirectories.sort()
            for name in sorted(files):
                path = Path(directory) / name
                handle.write(json.dumps({"id": str(path.relative_to(docs)), "text": path.read_text("utf-8")}) + "\n")
    os.replace(out.with_suffix(".tmp"), out)
    return out


def small_corpus(source: Path, work: Path) -> Path:
    """The first :data:`SMALL_MB` MB of ``source``'s documents, as a corpus of its own in ``work``."""
    folder = work / "corpus-1mb"
    docs = folder / "docs"
    docs.mkdir(parents=True)
    size = 0
    for path in sorted(source.glob("docs/**/*")):
        if path.is_file() and size < SMALL_MB * 1e6:
            target = docs / path.relative_to(source / "docs")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
            size += path.stat().st_size
    jsonl_of(folder)
    return folder


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


def timed(command: Sequence[str], env: dict[str, str] | None = None, memory: bool = False) -> dict[str, Any]:
    """Wall seconds of one process and its stderr (and with ``memory``, the peaks of its process tree's summed PSS
    and of its largest process's RSS, in MB, sampled every 10 ms)."""
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
    result: dict[str, Any] = {"wall": wall, "stderr": error.decode()}
    if memory:
        watcher.join()
        result.update(tree_mb=peaks[0] / 1e6, largest_mb=peaks[1] / 1e6)
    return result


def best(runs: list[dict[str, Any]]) -> dict[str, Any]:
    fastest = min(runs, key=lambda run: run["wall"])
    summary = dict(fastest, median=statistics.median(run["wall"] for run in runs))
    for key in ("tree_mb", "largest_mb"):
        if key in fastest:
            summary[key] = max(run[key] for run in runs)
    return summary


def kernel_said(stderr: str) -> str:
    """What ``sign -v`` said of the kernel, shortened for a table cell."""
    found = re.search(r"^kernel: (.*)$", stderr, re.MULTILINE)
    if found is None:
        return "?"
    line = found.group(1)
    if line.startswith("numpy, then numba"):
        return "numpy, then numba"
    if "not in numba's cache" in line:
        return "numpy (not compiled yet)"
    return line.split()[0]


# --- kernels per core -------------------------------------------------------------------------------------


def kernel_rows(docs: Path, repeat: int) -> list[str]:
    from dedup_cli.engine.stages.sign import sign_texts
    from dedup_cli.inputs.task_planning import TASK_BYTES
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
        run()  # warm: the first pass allocates what later ones reuse
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


class Bench:
    """The measurements of one run, and the commands they time."""

    def __init__(self, arguments: argparse.Namespace, work: Path) -> None:
        self.arguments = arguments
        self.repeat = arguments.repeat
        self.work = work
        self.python = sys.executable
        self.ours = {**os.environ, "PYTHONPATH": str(REPO)}
        self.versions = {"this checkout": self.ours}
        if arguments.baseline:
            self.versions[f"at {arguments.baseline}"] = {**os.environ,
                                                         "PYTHONPATH": str(export(arguments.baseline, work))}
        self.small = work / "small.txt"
        self.small.write_text(SMALL_TEXT)
        self.store = work / "s.parquet"
        self.targets: dict[str, str] = {}

    def dedup(self, *args: str) -> list[str]:
        return [self.python, "-m", "dedup_cli", *args]

    def sign(self, env: dict[str, str], *args: str, memory: bool = False) -> dict[str, Any]:
        shutil.rmtree(self.store, ignore_errors=True)
        return timed(self.dedup("sign", *args, "-o", str(self.store), "-v"), env, memory)

    def startup(self) -> list[str]:
        lines = ["## Start-up (fresh processes; fastest and median of 7)", "", "| what | version | s | median s |",
                 "|---|---|---|---|"]
        self.startups: dict[str, float] = {}
        for label, env in self.versions.items():
            for name, command in (("dedup --version", self.dedup("--version")), ("dedup --help", self.dedup("--help")),
                                  ("dedup sign of one small file", None)):
                runs = [self.sign(env, str(self.small)) if command is None else timed(command, env) for _ in range(7)]
                summary = best(runs)
                if command is None:
                    self.startups[label] = summary["wall"]
                lines.append(f"| {name} | {label} | {summary['wall']:.3f} | {summary['median']:.3f} |")
        probes = {"import numba": "import numba",
                  "load the compiled kernel from numba's cache (import and first call)":
                      "from dedup_cli.kernel.compiled import compile_kernel; compile_kernel()"}
        for name, code in probes.items():
            summary = best([timed([self.python, "-c", code], self.ours) for _ in range(5)])
            lines.append(f"| {name} | this checkout | {summary['wall']:.3f} | {summary['median']:.3f} |")
        if not self.arguments.skip_compile:
            cache = {**self.ours, "NUMBA_CACHE_DIR": str(self.work / "numba-cache-startup")}
            compile_run = timed([self.python, "-c", probes[list(probes)[1]]], cache)
            lines.append(f"| compile the kernel into an empty cache (once per install) | this checkout | "
                         f"{compile_run['wall']:.2f} | |")
        return lines

    def kernels(self, corpora: list[Corpus]) -> list[str]:
        """auto against numpy and numba forced, every corpus, folder and JSON Lines."""
        lines = ["## `--kernel auto` against each kernel forced", "",
                 f"`dedup sign -k 128 --kernel K` on all {os.cpu_count()} cores, a fresh store each time, fastest of "
                 f"{self.repeat} (median in brackets); \"auto chose\" is what `sign -v` said.", "",
                 "| corpus | input | numpy s | numba s | auto s | auto ÷ numpy | auto chose |",
                 "|---|---|---|---|---|---|---|"]
        worst = 0.0
        for corpus in corpora:
            corpus.warm()
            for form, args in (("folder", [str(corpus.docs)]), ("JSON Lines", [str(corpus.jsonl), "--id-field", "id"])):
                runs: dict[str, list[dict[str, Any]]] = {}
                for _ in range(self.repeat):
                    for kernel in ("numpy", "numba", "auto"):
                        runs.setdefault(kernel, []).append(self.sign(self.ours, *args, "-k", "128", "--kernel", kernel))
                summary = {kernel: best(found) for kernel, found in runs.items()}
                share = summary["auto"]["wall"] / summary["numpy"]["wall"]
                worst = max(worst, share)
                cells = " | ".join(f"{summary[k]['wall']:.2f} ({summary[k]['median']:.2f})"
                                   for k in ("numpy", "numba", "auto"))
                lines.append(f"| {corpus.label()} | {form} | {cells} | {share:.3f} | "
                             f"{kernel_said(summary['auto']['stderr'])} |")
        self.targets["auto"] = f"{worst:.3f}× at worst"
        return lines

    def first_run(self, corpus: Corpus) -> list[str]:
        """sign + find with an empty numba cache, then after the background compilation has finished; each pair
        with a cache folder of its own, ``--repeat`` times."""
        rows = []
        compiled = "no background compilation logged"
        for attempt in range(self.repeat):
            env = {**self.ours, "NUMBA_CACHE_DIR": str(self.work / f"numba-cache-first-run-{attempt}")}
            found = subprocess.run([self.python, "-c", "from dedup_cli.kernel import cache; "
                                    "print(cache.record_paths()['log'])"], env=env, capture_output=True, text=True,
                                   check=True)
            log = Path(found.stdout.strip())
            corpus.warm()

            def sign_and_find(env: dict[str, str] = env) -> tuple[float, float, str]:
                signed = self.sign(env, str(corpus.docs), "-k", "128")
                done = timed(self.dedup("find", str(self.store), "-q", "-o", os.devnull), env)
                return signed["wall"], done["wall"], kernel_said(signed["stderr"])

            first = sign_and_find()
            deadline = time.monotonic() + 900
            while time.monotonic() < deadline and not (
                    log.exists() and re.search("compiled the kernel in|failed", log.read_text())):
                time.sleep(0.5)
            if log.exists():
                compiled = log.read_text().strip().splitlines()[-1].split(": ", 1)[-1]
            corpus.warm()
            rows.append((first, sign_and_find()))
        ratios = sorted((f[0] + f[1]) / (later[0] + later[1]) for f, later in rows)
        median = statistics.median(ratios)
        self.targets["first"] = f"{median:.2f}× (median of {len(rows)} pairs; {ratios[0]:.2f}-{ratios[-1]:.2f}×)"
        lines = ["## The first run after an install (an empty numba cache)", "",
                 f"`dedup sign {corpus.name}/docs -k 128` then `dedup find` (defaults, `-q`), each a fresh process, "
                 "with `NUMBA_CACHE_DIR` an empty folder (the first run), then the same commands once the background "
                 f"compilation had ended (a later run; its log: `{compiled}`); {self.repeat} such pairs, each with a "
                 "cache folder of its own.", "",
                 "| pair | first: sign s | find s | kernel | later: sign s | find s | kernel | first ÷ later |",
                 "|---|---|---|---|---|---|---|---|"]
        for number, (first, later) in enumerate(rows, 1):
            lines.append(f"| {number} | {first[0]:.2f} | {first[1]:.2f} | {first[2]} | {later[0]:.2f} | "
                         f"{later[1]:.2f} | {later[2]} | {(first[0] + first[1]) / (later[0] + later[1]):.2f}× |")
        lines += ["", f"First ÷ later, sign + find: {median:.2f}× (median)."]
        return lines

    def against_reading(self, corpora: list[Corpus]) -> list[str]:
        """sign of the 10^5-document corpora beside Python reading or parsing them."""
        lines = ["## Signing against reading (10^5 documents)", "",
                 f"`dedup sign -k 128` (`--kernel auto`) on all {os.cpu_count()} cores, fastest of {self.repeat} "
                 "(median); the ratio is (sign − sign of one small file) ÷ the Python process on the same input.", ""]
        for corpus in corpora:
            corpus.warm()
            commands: list[tuple[str, dict[str, str] | None, list[str], bool]] = [
                ("python reads the files", None, [self.python, "-c", READ_FILES, str(corpus.docs)], False),
                ("python parses the JSON Lines", None, [self.python, "-c", PARSE_JSONL, str(corpus.jsonl)], False),
            ]
            for label, env in self.versions.items():
                commands.append((f"sign one small file ({label})", env, [str(self.small)], False))
                commands.append((f"sign the folder ({label})", env, [str(corpus.docs), "-k", "128"], True))
                commands.append((f"sign the JSON Lines ({label})", env,
                                 [str(corpus.jsonl), "--id-field", "id", "-k", "128"], True))
            rows: dict[str, list[dict[str, Any]]] = {}
            for _ in range(self.repeat):
                for name, env, command, memory in commands:
                    rows.setdefault(name, []).append(timed(command) if env is None else self.sign(env, *command,
                                                                                                 memory=memory))
            summary = {name: best(runs) for name, runs in rows.items()}
            lines += [f"### {corpus.label()}", "",
                      "| command | s | median s | MB/s | (s − one small file) ÷ Python's | kernel | peak MB, process "
                      "tree (PSS) | peak MB, largest process (RSS) |", "|---|---|---|---|---|---|---|---|"]
            for name, result in summary.items():
                base = name.split("(")[-1].rstrip(")")
                small_run = summary.get(f"sign one small file ({base})")
                json_lines = "JSON" in name
                reference = summary["python parses the JSON Lines" if json_lines else "python reads the files"]
                ratio = ""
                if small_run is not None and name.startswith("sign the"):
                    value = (result["wall"] - small_run["wall"]) / reference["wall"]
                    ratio = f"{value:.2f}"
                    if base == "this checkout":
                        self.targets[f"{'jsonl' if json_lines else 'files'} {corpus.name}"] = f"{value:.2f}×"
                        if not json_lines and corpus.megabytes > 500:
                            self.targets["sign741"] = f"{result['wall']:.2f} s"
                memory = (f"{result['tree_mb']:.0f} | {result['largest_mb']:.0f}" if "tree_mb" in result else " | ")
                kernel = kernel_said(result["stderr"]) if name.startswith("sign the") else ""
                lines.append(f"| {name} | {result['wall']:.3f} | {result['median']:.3f} | "
                             f"{corpus.megabytes / result['wall']:.0f} | {ratio} | {kernel} | {memory} |")
            lines.append("")
        return lines

    def peers(self, corpora: list[Corpus]) -> list[str]:
        """End to end against datasketch and rensa, through bench/compare.py's child processes."""
        lines = ["## End to end against the peers (10^5 documents)", "",
                 "`bench/compare.py`'s processes, one per tool (times without interpreter start-up and imports): "
                 "dedup `sign` (oph, k = 128, every core) then `find` (R0 = 0.5, b = 2, `--verify none`), fastest of "
                 f"{self.repeat}; rensa (fastest of 2) and datasketch (once) MinHash k = 128 of the same word "
                 "5-shingles, then their LSH and an estimate filter at R0 = 0.5.", "",
                 "| corpus | tool | sign s | find s | sign + find s | ÷ dedup |", "|---|---|---|---|---|---|"]
        compare = HERE / "compare.py"
        for corpus in corpora:
            corpus.warm()
            scratch = self.work / f"compare-{corpus.name}"
            scratch.mkdir(exist_ok=True)
            base = {"corpus": str(corpus.folder), "work": str(scratch), "num_perm": 128, "thresholds": [0.5]}
            specs = {
                "dedup": ({**base, "tool": "dedup", "scheme": "oph", "jobs": os.cpu_count() or 1,
                           "jobs_supported": True, "finds": True, "bits": [2], "verify": ["none"], "keep_store": False},
                          self.repeat),
                "rensa": ({**base, "tool": "rensa"}, 2),
                "datasketch": ({**base, "tool": "datasketch"}, 1),
            }
            totals: dict[str, tuple[float, float]] = {}
            for tool, (spec, repeat) in specs.items():
                results = []
                for _ in range(repeat):
                    done = subprocess.run([self.python, str(compare), "--child", json.dumps(spec)], capture_output=True,
                                          text=True, env=self.ours, cwd=tempfile.gettempdir(), check=True)
                    result = json.loads(done.stdout.strip().splitlines()[-1])
                    results.append((result["sign"]["wall"], result["finds"][0]["wall"]))
                totals[tool] = min(results, key=lambda pair: pair[0] + pair[1])
            ours = sum(totals["dedup"])
            for tool, (signed, found) in totals.items():
                share = (signed + found) / ours
                lines.append(f"| {corpus.label()} | {tool} | {signed:.2f} | {found:.2f} | {signed + found:.2f} | "
                             f"{share:.1f}× |")
                if tool != "dedup":
                    self.targets[f"{tool} {corpus.name}"] = f"{share:.1f}×"
        return lines

    def target_table(self, short: Corpus | None, long: Corpus | None) -> list[str]:
        names = (short.name if short else "?", long.name if long else "?")

        def cell(key: str) -> str:
            return self.targets.get(key, "not measured")

        rows = [
            ("first sign + find after a fresh install (empty numba cache), 74 MB folder", cell("first"),
             "≤ 1.15× a later run"),
            ("`auto` against `--kernel numpy`, every size", cell("auto"), "≤ 1.03×"),
            (f"10^5 JSON Lines records: (sign − start-up) ÷ Python `json.loads` of the file ({names[0]}; {names[1]})",
             f"{cell('jsonl ' + names[0])}; {cell('jsonl ' + names[1])}", "≤ 2.5×"),
            (f"10^5 files: (sign − start-up) ÷ a Python read of the files ({names[0]}; {names[1]})",
             f"{cell('files ' + names[0])}; {cell('files ' + names[1])}", "≤ 2.5× on both"),
            ("sign, 741 MB folder of 10^5 files, 2 cores", cell("sign741"), "≤ 3.0 s"),
            (f"end to end, 10^5 documents, k = 128, `--verify none`, against rensa / datasketch ({names[0]}; "
             f"{names[1]})", f"{cell('rensa ' + names[0])} / {cell('datasketch ' + names[0])}; "
             f"{cell('rensa ' + names[1])} / {cell('datasketch ' + names[1])}", "≥ 5× / ≥ 25× on both"),
        ]
        return ["## Targets", "", "| what | measured | target |", "|---|---|---|",
                *(f"| {what} | {measured} | {target} |" for what, measured, target in rows)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", type=Path, nargs="+", default=[HERE / "data" / "corpus-10000"])
    parser.add_argument("--long-corpus", type=Path, nargs="*", default=[])
    parser.add_argument("--out", type=Path, default=HERE / "RESULTS-sign.md")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--baseline", help="a git revision to measure beside this checkout (e.g. main)")
    parser.add_argument("--skip-compile", action="store_true", help="do not time the kernel's first compile")
    parser.add_argument("--skip-peers", action="store_true", help="do not run datasketch and rensa")
    arguments = parser.parse_args()
    started = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="dedup-sign-bench-"))
    bench = Bench(arguments, work)
    short = [Corpus(path.resolve(), path.name) for path in arguments.corpus]
    long = [Corpus(path.resolve(), path.name) for path in arguments.long_corpus]
    for corpus in [*short, *long]:
        jsonl_of(corpus.folder)
    sized = sorted([Corpus(small_corpus(short[0].folder, work), "corpus-1mb"), *short, *long],
                   key=lambda corpus: corpus.megabytes)
    hundred_thousand = [corpus for corpus in [*short, *long] if corpus.documents >= 100_000]
    load = os.getloadavg()
    sections: list[list[str]] = [bench.startup(), bench.kernels(sized)]
    first_run_corpus = next((corpus for corpus in long if corpus.documents < 100_000), None)
    if first_run_corpus is not None:
        sections.append(bench.first_run(first_run_corpus))
    sections.append(bench.against_reading(hundred_thousand))
    if not arguments.skip_peers:
        sections.append(bench.peers(hundred_thousand))
    sections.append(["## Kernels per core (CPU seconds of the signing thread; 5-shingles)", "",
                     *kernel_rows(short[0].docs, arguments.repeat)])
    short_10e5 = next((c for c in hundred_thousand if c in short), None)
    long_10e5 = next((c for c in hundred_thousand if c in long), None)
    lines = ["# Signing: the kernel auto chooses, the first run, signing against reading, the peers", "",
             f"Generated by `make bench` (`python bench/sign_bench.py`) on {platform.machine()} with "
             f"{os.cpu_count()} cores, Python {platform.python_version()}; load average {load[0]:.2f} at the start. "
             "Commands ran in turn under `flock /tmp/dedup-bench.lock`; the machine is shared, so compare ratios "
             "within this run.", "", *bench.target_table(short_10e5, long_10e5), ""]
    for section in sections:
        lines += [*section, ""]
    load = os.getloadavg()
    lines += [f"Load average at the end: {load[0]:.2f}. Total time: {time.perf_counter() - started:.0f} s."]
    arguments.out.write_text("\n".join(lines) + "\n")
    shutil.rmtree(work, ignore_errors=True)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
