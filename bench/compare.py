"""dedup against datasketch and rensa, side by side: sign throughput, find time, peak memory, precision/recall.

Usage: python bench/compare.py [--corpus bench/data/corpus-10000 ...] [--out bench/RESULTS.md]
       [--thresholds 0.5 0.8] [--bits 1 2 4 8] [--num-perm 128] [--tools dedup datasketch rensa]

Corpora come from ``bench/make_corpus.py`` (one file per document plus ``truth.tsv``, every pair with exact
5-shingle Jaccard ≥ 0.3). Every tool runs in a fresh subprocess (this script with ``--child``), so the peak
RSS it reports (``resource.getrusage``) is that tool's own; wall time (``time.perf_counter``) and CPU time
(user + system of the process and of its finished children, from ``resource.getrusage``) are measured for
signing and for each find separately.

* dedup, through its library: ``dedup_cli.sign`` (k = --num-perm, 8 stored bits) once per scheme, then
  ``dedup_cli.find(store, FindOptions(threshold=R0, bits=b, verify=...))`` for each R0, b in --bits and verify
  "none" and "borderline". The "oph" scheme is run only once ``SignOptions(scheme="oph")`` signs differently
  from "kperm" (otherwise its rows say "not available"); when ``SignOptions`` has ``jobs``, signing is also
  run with ``jobs = nproc``.
* datasketch: per document, the usual Python shingling (lower-case, split on non-word characters, 5 consecutive
  words joined by spaces) and ``MinHash(num_perm=k).update_batch(encoded shingles)``; for each R0 a
  ``MinHashLSH(threshold=R0, num_perm=k)``, every document inserted then queried; candidate pairs are kept when
  the MinHash estimate is ≥ R0 (the fair comparison: dedup also reports only pairs estimated ≥ R0).
* rensa: the same shingling, ``RMinHash(k, seed).update(shingles)`` (str tokens, its documented fast path),
  ``RMinHashLSH(R0, k, num_bands)`` with the number of bands (a divisor of k, which rensa requires) minimising
  datasketch's own weighted false-positive + false-negative criterion, and the same filter.

Precision and recall count a reported pair as true when its exact Jaccard is ≥ R0. Pairs a tool reports that
are not in ``truth.tsv`` are re-read and their exact Jaccard computed (so an overlap the truth file missed
would be counted, not assumed false). Writes a markdown report; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SHINGLE_SIZE = 5
SEED = 1
MARGIN = 0.05


# --- measuring ----------------------------------------------------------------------------------------------


def cpu_seconds() -> float:
    """User + system CPU time of this process and of its children that have finished."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def peak_rss_mb() -> dict[str, float]:
    """Peak resident set of this process and of its largest finished child (a process pool), in MB."""
    return {
        "self": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "children": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
    }


class Timer:
    def __enter__(self) -> Timer:
        self.wall0, self.cpu0 = time.perf_counter(), cpu_seconds()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.wall0
        self.cpu = cpu_seconds() - self.cpu0


def corpus_files(corpus: Path) -> list[str]:
    """Document ids (paths relative to CORPUS/docs) in sorted order, the order every tool uses."""
    docs = corpus / "docs"
    ids = []
    for directory, subdirectories, files in os.walk(docs):
        subdirectories.sort()
        relative = os.path.relpath(directory, docs)
        ids += [name if relative == "." else f"{relative}/{name}" for name in files if not name.startswith(".")]
    return sorted(ids)


def pair_codes(first: np.ndarray, second: np.ndarray, n: int) -> np.ndarray:
    """Unordered pairs of document indices as int64 a·n + b with a < b."""
    first, second = np.asarray(first, np.int64), np.asarray(second, np.int64)
    return np.minimum(first, second) * n + np.maximum(first, second)


def peer_shingles(text: str) -> set[str]:
    """The peers' usual shingling: lower-case, split on non-word characters, 5 consecutive words joined."""
    words = [w for w in re.split(r"\W+", text.lower()) if w]
    return {" ".join(words[i : i + SHINGLE_SIZE]) for i in range(len(words) - SHINGLE_SIZE + 1)}


def remove_store(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


# --- children: one tool each --------------------------------------------------------------------------------


def child_dedup(spec: dict[str, Any]) -> dict[str, Any]:
    import dedup_cli as dedup

    baseline = peak_rss_mb()["self"]
    corpus, work = Path(spec["corpus"]), Path(spec["work"])
    ids = corpus_files(corpus)
    n = len(ids)
    store = work / f"dedup-{spec['scheme']}-jobs{spec['jobs']}.parquet"
    remove_store(store)
    extra = {"jobs": spec["jobs"]} if spec["jobs_supported"] else {}
    options = dedup.SignOptions(num_perm=spec["num_perm"], bits=8, seed=SEED, scheme=spec["scheme"], **extra)
    with Timer() as timer:
        report = dedup.sign([str(corpus / "docs")], store, options)
    result: dict[str, Any] = {
        "sign": {"wall": timer.wall, "cpu": timer.cpu, "documents": report.documents,
                 "bytes": report.read.bytes_read, "rss": peak_rss_mb()},
        "finds": [],
        "baseline_rss": baseline,
    }
    for threshold in spec["thresholds"] if spec["finds"] else []:
        for bits in spec["bits"]:
            for verify in spec["verify"]:
                with Timer() as timer:
                    found = dedup.find(store, dedup.FindOptions(threshold=threshold, bits=bits, verify=verify))
                store_ids = found.store.ids
                if store_ids != ids:
                    position = {identifier: i for i, identifier in enumerate(ids)}
                    index = np.array([position[i] for i in store_ids], dtype=np.int64)
                else:
                    index = np.arange(n, dtype=np.int64)
                codes = pair_codes(index[found.accepted.first], index[found.accepted.second], n)
                name = f"dedup-{spec['scheme']}-R{threshold}-b{bits}-{verify}.npy"
                np.save(work / name, np.unique(codes))
                banding = found.banding
                result["finds"].append({
                    "threshold": threshold, "bits": bits, "verify": verify, "wall": timer.wall, "cpu": timer.cpu,
                    "candidates": found.candidates, "pairs_file": name,
                    "banding": f"{banding.bands}×{banding.rows}" if banding is not None else "all pairs",
                    "verified": found.verification.checked if found.verification is not None else 0,
                })
    result["rss"] = peak_rss_mb()
    if spec["keep_store"]:
        result["store"] = str(store)
    else:
        remove_store(store)
    return result


def rensa_bands(threshold: float, num_perm: int) -> int:
    """The divisor b of k (rows k/b) minimising datasketch's criterion: ∫ false positives + ∫ false negatives."""

    below, above = np.linspace(0.0, threshold, 2000), np.linspace(threshold, 1.0, 2000)
    best, best_error = 1, math.inf
    for bands in (b for b in range(1, num_perm + 1) if num_perm % b == 0):
        rows = num_perm // bands
        false_positive = np.trapezoid(1 - (1 - below**rows) ** bands, below)
        false_negative = np.trapezoid((1 - above**rows) ** bands, above)
        error = 0.5 * float(false_positive) + 0.5 * float(false_negative)
        if error < best_error:
            best, best_error = bands, error
    return best


def child_peer(spec: dict[str, Any]) -> dict[str, Any]:
    tool = spec["tool"]
    corpus, work = Path(spec["corpus"]), Path(spec["work"])
    ids = corpus_files(corpus)
    n = len(ids)
    k = spec["num_perm"]
    docs = corpus / "docs"
    if tool == "datasketch":
        from datasketch import MinHash, MinHashLSH
    else:
        from rensa import RMinHash, RMinHashLSH
    baseline = peak_rss_mb()["self"]

    sketches: list[Any] = []
    total_bytes = 0
    with Timer() as timer:
        for identifier in ids:
            with open(docs / identifier, "rb") as handle:
                raw = handle.read()
            total_bytes += len(raw)
            shingles = peer_shingles(raw.decode("utf-8"))
            if tool == "datasketch":
                sketch = MinHash(num_perm=k, seed=SEED)
                sketch.update_batch([s.encode("utf-8") for s in shingles])
            else:
                sketch = RMinHash(k, SEED)
                sketch.update(list(shingles))
            sketches.append(sketch if shingles else None)
    result: dict[str, Any] = {
        "sign": {"wall": timer.wall, "cpu": timer.cpu, "documents": n, "bytes": total_bytes, "rss": peak_rss_mb()},
        "finds": [],
        "baseline_rss": baseline,
    }
    for threshold in spec["thresholds"]:
        with Timer() as timer:
            if tool == "datasketch":
                index = MinHashLSH(threshold=threshold, num_perm=k)
                banding = f"{index.b}×{index.r}"
                with index.insertion_session() as session:
                    for i, sketch in enumerate(sketches):
                        if sketch is not None:
                            session.insert(i, sketch)
            else:
                bands = rensa_bands(threshold, k)
                index = RMinHashLSH(threshold, k, bands)
                banding = f"{bands}×{k // bands}"
                for i, sketch in enumerate(sketches):
                    if sketch is not None:
                        index.insert(i, sketch)
            first, second, kept = [], [], []
            for i, sketch in enumerate(sketches):
                if sketch is None:
                    continue
                for j in index.query(sketch):
                    if j > i:
                        first.append(i)
                        second.append(j)
                        kept.append(sketch.jaccard(sketches[j]) >= threshold)
        codes = pair_codes(np.array(first, np.int64), np.array(second, np.int64), n)
        keep = np.array(kept, dtype=bool)
        candidates_name = f"{tool}-R{threshold}-candidates.npy"
        name = f"{tool}-R{threshold}.npy"
        np.save(work / candidates_name, np.unique(codes))
        np.save(work / name, np.unique(codes[keep]))
        result["finds"].append({
            "threshold": threshold, "bits": None, "verify": "none", "wall": timer.wall, "cpu": timer.cpu,
            "candidates": int(codes.size), "pairs_file": name, "candidates_file": candidates_name,
            "banding": banding, "verified": 0,
        })
    result["rss"] = peak_rss_mb()
    return result


def child(spec: dict[str, Any]) -> None:
    load = os.getloadavg()[0]  # other work on the machine inflates wall times; the report shows it
    result = child_dedup(spec) if spec["tool"] == "dedup" else child_peer(spec)
    result["load"] = load
    print(json.dumps(result))


# --- the parent ---------------------------------------------------------------------------------------------


def same_signatures(stores: list[str | None]) -> bool:
    """Whether every store holds the same ids and signatures (signing in parallel must not change them)."""
    from dedup_cli import read_store

    paths = [Path(store) for store in stores if store is not None]
    if len(paths) < len(stores):
        return False
    read = [read_store(path) for path in paths]
    same = all(r.ids == read[0].ids and np.array_equal(r.packed, read[0].packed) for r in read[1:])
    for path in paths:
        remove_store(path)
    return same


def oph_status(num_perm: int) -> tuple[bool, str]:
    """Whether ``scheme="oph"`` is implemented: it signs without error and differently from "kperm"."""
    import dedup_cli as dedup

    words = ("the quick brown fox jumps over a lazy dog while seven wise men count their gold coins "
             "under an old oak tree near the river bank").split()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as scratch:
        docs = Path(scratch) / "docs"
        docs.mkdir()
        for i in range(4):
            (docs / f"{i}.txt").write_text(" ".join(rng.choice(words, size=300)) + "\n")
        packed = {}
        for scheme in ("kperm", "oph"):
            store = Path(scratch) / f"{scheme}.parquet"
            try:
                options = dedup.SignOptions(num_perm=num_perm, bits=8, seed=SEED, scheme=scheme)
                dedup.sign([str(docs)], store, options)
                packed[scheme] = dedup.read_store(store).packed
            except Exception as error:  # noqa: BLE001 - any failure means "not available"
                return False, f"signing with scheme='{scheme}' failed: {type(error).__name__}: {error}"
    if np.array_equal(packed["kperm"], packed["oph"]):
        return False, "SignOptions(scheme='oph') signs exactly like 'kperm' (not implemented yet)"
    return True, "available"


def jobs_supported() -> bool:
    import dataclasses

    import dedup_cli as dedup

    return "jobs" in {field.name for field in dataclasses.fields(dedup.SignOptions)}


def run_repeated(spec: dict[str, Any], repeat: int) -> dict[str, Any]:
    """Run a child ``repeat`` times; keep, for signing and for each find, the repeat with the least wall time.

    Results other than times are deterministic, so they are the same in every repeat.
    """
    results = [run_child(spec) for _ in range(repeat)]
    done = [r for r in results if "error" not in r]
    if not done:
        return results[0]
    best = dict(done[0])
    best["sign"] = min((r["sign"] for r in done), key=lambda sign: sign["wall"])
    best["finds"] = [min((r["finds"][i] for r in done), key=lambda find: find["wall"])
                     for i in range(len(done[0]["finds"]))]
    best["rss"] = {key: max(r["rss"][key] for r in done) for key in done[0]["rss"]}
    best["load"] = max(r["load"] for r in done)
    best["baseline_rss"] = max(r["baseline_rss"] for r in done)
    best["repeats"] = len(done)
    return best


def run_child(spec: dict[str, Any]) -> dict[str, Any]:
    label = spec["label"]
    print(f"  {label} ...", end="", flush=True, file=sys.stderr)
    started = time.perf_counter()
    completed = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], capture_output=True,
                               text=True, check=False)
    if completed.returncode != 0:
        print(" failed", file=sys.stderr)
        return {"error": (completed.stderr.strip() or completed.stdout.strip()).splitlines()[-1:] or ["?"]}
    print(f" {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return json.loads(completed.stdout.strip().splitlines()[-1])


@dataclass
class Truth:
    """The exact ground truth of a corpus: pair codes and their Jaccard, plus pairs judged later."""

    corpus: Path
    ids: list[str]
    codes: np.ndarray  # int64, sorted
    jaccard: np.ndarray  # float64, aligned with codes
    extra: dict[int, float]  # pairs outside truth.tsv, judged exactly on demand

    @classmethod
    def load(cls, corpus: Path, ids: list[str]) -> Truth:
        position = {identifier: i for i, identifier in enumerate(ids)}
        first, second, shared, union = [], [], [], []
        with open(corpus / "truth.tsv", encoding="utf-8") as handle:
            next(handle)
            for line in handle:
                a, b, s, u, _, _ = line.rstrip("\n").split("\t")
                first.append(position[a])
                second.append(position[b])
                shared.append(int(s))
                union.append(int(u))
        codes = pair_codes(np.array(first, np.int64), np.array(second, np.int64), len(ids))
        order = np.argsort(codes)
        jaccard = np.array(shared, np.float64) / np.maximum(np.array(union, np.float64), 1)
        return cls(corpus, ids, codes[order], jaccard[order], {})

    def judge(self, codes: np.ndarray) -> np.ndarray:
        """Exact Jaccard of each pair: from truth.tsv, else computed from the documents (and remembered)."""
        from dedup_cli.estimates.exact import pair_resemblances
        from dedup_cli.text.shingles import batch_shingles

        n = len(self.ids)
        where = np.searchsorted(self.codes, codes)
        where = np.minimum(where, max(self.codes.size - 1, 0))
        known = (self.codes.size > 0) & (self.codes[where] == codes) if codes.size else np.zeros(0, bool)
        result = np.where(known, self.jaccard[where] if self.codes.size else 0.0, np.nan)
        cache: dict[int, np.ndarray] = {}

        def shingles(i: int) -> np.ndarray:
            if i not in cache:
                text = (self.corpus / "docs" / self.ids[i]).read_bytes().decode("utf-8-sig", errors="replace")
                cache[i] = batch_shingles([text], SHINGLE_SIZE, "word")[0]
            return cache[i]

        unknown = sorted({int(code) for code in codes[~known].tolist()} - set(self.extra))
        if unknown:
            documents = sorted({code // n for code in unknown} | {code % n for code in unknown})
            local = {document: i for i, document in enumerate(documents)}
            exact = pair_resemblances([shingles(document) for document in documents],
                                      np.array([local[code // n] for code in unknown], np.int64),
                                      np.array([local[code % n] for code in unknown], np.int64))
            self.extra.update(zip(unknown, np.nan_to_num(exact, nan=0.0).tolist(), strict=True))
        for p in np.flatnonzero(~known).tolist():
            result[p] = self.extra[int(codes[p])]
        return result

    def true_codes(self, threshold: float) -> np.ndarray:
        inside = self.codes[self.jaccard >= threshold]
        outside = [c for c, j in self.extra.items() if j >= threshold]
        return np.union1d(inside, np.array(outside, np.int64))


def evaluate(truth: Truth, reported: np.ndarray, threshold: float) -> dict[str, Any]:
    exact = truth.judge(reported)
    in_file = np.isin(reported, truth.codes)
    true = truth.true_codes(threshold)
    hits = int(np.count_nonzero(exact >= threshold))
    outside = exact[~in_file]
    # Errors on pairs within MARGIN of R0 are what any estimator with k values makes; these two count only
    # clear errors: a reported pair below R0 − MARGIN, a missed pair at or above R0 + MARGIN.
    clear_true = truth.true_codes(threshold + MARGIN)
    return {
        "true": int(true.size), "reported": int(reported.size), "hits": hits,
        "precision": hits / reported.size if reported.size else 1.0,
        "recall": hits / true.size if true.size else 1.0,
        "precision_clear": float(np.mean(exact >= threshold - MARGIN)) if reported.size else 1.0,
        "recall_clear": float(np.isin(clear_true, reported).mean()) if clear_true.size else 1.0,
        "outside_truth": int(outside.size), "outside_max": float(outside.max()) if outside.size else None,
    }


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for package in ("numpy", "scipy", "pyarrow", "xxhash", "datasketch", "rensa", "dedup-cli"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = "not installed"
    return found


def machine() -> dict[str, str]:
    model = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, check=False).stdout.strip() or "?"
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "dedup_cli"], capture_output=True,
                           text=True, check=False).stdout.strip()
    return {"nproc": str(os.cpu_count()), "cpu": model, "memory": f"{memory:.0f} GiB",
            "platform": platform.platform(), "commit": commit + (" (dedup_cli/ modified)" if dirty else "")}


def fmt(value: float | None, digits: int = 2) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def ratio(peer: float | None, ours: float | None) -> str:
    if not peer or not ours:
        return "–"
    return f"{peer / ours:.1f}×"


def bench_corpus(corpus: Path, arguments: argparse.Namespace, oph: tuple[bool, str], jobs: bool) -> dict[str, Any]:
    """Run every tool on one corpus; returns everything the report needs."""
    manifest = json.loads((corpus / "manifest.json").read_text())
    ids = corpus_files(corpus)
    work = HERE / "data" / "compare" / corpus.name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    base = {"corpus": str(corpus), "work": str(work), "num_perm": arguments.num_perm,
            "thresholds": arguments.thresholds, "bits": arguments.bits, "verify": ["none", "borderline"],
            "jobs_supported": jobs, "keep_store": False}
    nproc = os.cpu_count() or 1
    runs: list[dict[str, Any]] = []
    print(f"{corpus} ({len(ids)} documents):", file=sys.stderr)
    if "dedup" in arguments.tools:
        for scheme in ("kperm", "oph"):
            if scheme == "oph" and not oph[0]:
                runs.append({"tool": "dedup", "scheme": scheme, "jobs": 1, "label": "dedup oph",
                             "result": {"error": [oph[1]]}})
                continue
            job_counts = [1] + ([nproc] if jobs and nproc > 1 else [])
            stores = []
            for count in job_counts:
                spec = {**base, "tool": "dedup", "scheme": scheme, "jobs": count, "finds": count == 1,
                        "label": f"dedup {scheme}" + (f" jobs={count}" if jobs else ""),
                        "keep_store": len(job_counts) > 1}
                runs.append({**spec, "result": run_repeated(spec, arguments.repeat)})
                stores.append(runs[-1]["result"].get("store"))
            if len(stores) > 1:
                runs[-1]["same_signatures"] = same_signatures(stores)
    for tool in ("datasketch", "rensa"):
        if tool in arguments.tools:
            spec = {**base, "tool": tool, "scheme": None, "jobs": 1, "label": tool}
            runs.append({**spec, "result": run_repeated(spec, arguments.repeat)})
    truth = Truth.load(corpus, ids)
    for run in runs:
        for find in run["result"].get("finds", []):
            reported = np.load(work / find["pairs_file"])
            find["accuracy"] = evaluate(truth, reported, find["threshold"])
            if "candidates_file" in find:
                candidates = np.load(work / find["candidates_file"])
                true = truth.true_codes(find["threshold"])
                find["candidate_recall"] = (np.isin(true, candidates).mean() if true.size else 1.0)
    return {"corpus": corpus, "manifest": manifest, "runs": runs, "truth": truth}


def best_dedup(runs: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The fastest-signing dedup run and the run of the same scheme that did the finds."""
    signed = [r for r in runs if r["tool"] == "dedup" and "sign" in r["result"]]
    if not signed:
        return None, None
    fastest = min(signed, key=lambda r: r["result"]["sign"]["wall"])
    finder = next(r for r in signed if r["scheme"] == fastest["scheme"] and r["result"]["finds"])
    return fastest, finder


def throughput(run: dict[str, Any]) -> float:
    """Signing throughput of a run, bytes per wall second."""
    return float(run["result"]["sign"]["bytes"] / run["result"]["sign"]["wall"])


def find_row(run: dict[str, Any], threshold: float, bits: int | None, verify: str) -> dict[str, Any] | None:
    for find in run["result"].get("finds", []):
        if find["threshold"] == threshold and find["bits"] == bits and find["verify"] == verify:
            return find
    return None


def report_corpus(bench: dict[str, Any], arguments: argparse.Namespace) -> list[str]:
    manifest, runs = bench["manifest"], bench["runs"]
    megabytes = manifest["bytes"] / 1e6
    lines = [
        f"## {manifest['documents']:,} documents ({megabytes:.1f} MB, `{bench['corpus'].relative_to(REPO)}`)",
        "",
        f"{manifest['planted_documents']:,} documents in planted structures "
        f"({', '.join(f'{v} {k}' for k, v in manifest['structures'].items())}); exact pairs with Jaccard "
        + ", ".join(f"≥ {t}: {manifest['truth_pairs'][f'>={t}']['total']:,}" for t in (0.3, 0.5, 0.8))
        + "; within ±0.05 of R0: "
        + ", ".join(f"{k.replace('±', ' ± ')}: {v:,}" for k, v in manifest["truth_pairs_near_threshold"].items())
        + ". Text: " + ", ".join(f"{v:,} {k}" for k, v in manifest["sources"]["pool"].items())
        + f" (drawn in {manifest['pool_epochs']} shuffled passes over the pool); see `bench/make_corpus.py`.",
        "",
        "### Sign (read every file, shingle, minhash; dedup also writes its Parquet store)",
        "",
        "| tool | wall s | CPU s | MB/s (wall) | docs/s (wall) | MB/s per CPU s | peak RSS MB (after imports) "
        "| load avg |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        result = run["result"]
        if "sign" not in result:
            lines.append(f"| {run['label']} | not available: {'; '.join(result['error'])} | – | – | – | – | – | – |")
            continue
        sign = result["sign"]
        rss = max(sign["rss"]["self"], sign["rss"]["children"])
        label = run["label"]
        if "same_signatures" in run:
            label += (" (signatures identical to jobs=1)" if run["same_signatures"]
                      else " (SIGNATURES DIFFER from jobs=1)")
        lines.append(
            f"| {label} | {sign['wall']:.2f} | {sign['cpu']:.2f} | {sign['bytes'] / 1e6 / sign['wall']:.1f} | "
            f"{sign['documents'] / sign['wall']:,.0f} | {sign['bytes'] / 1e6 / sign['cpu']:.1f} | "
            f"{rss:.0f} ({result['baseline_rss']:.0f}) | "
            f"{result['load']:.1f} |"
        )
    for threshold in arguments.thresholds:
        lines += [
            "",
            f"### Find and accuracy at R0 = {threshold}",
            "",
            "| tool | b | verify | banding | candidates | reported | precision | recall | "
            f"precision vs R0 − {MARGIN} | recall of R0 + {MARGIN} | find wall s | find CPU s | "
            "peak RSS MB (whole run) |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for run in runs:
            result = run["result"]
            finds = [f for f in result.get("finds", []) if f["threshold"] == threshold]
            if "error" in result:
                lines.append(f"| {run['label']} | – | – | not available | – | – | – | – | – | – | – | – | – |")
                continue
            for find in sorted(finds, key=lambda f: (f["verify"] != "none", f["bits"] or 0)):
                accuracy = find["accuracy"]
                rss = max(result["rss"]["self"], result["rss"]["children"])
                candidates = f"{find['candidates']:,}"
                if "candidate_recall" in find:
                    candidates += f" (recall {find['candidate_recall']:.3f})"
                if run["tool"] != "dedup":
                    verify = "estimate ≥ R0"
                else:
                    verify = find["verify"] + (f" ({find['verified']} checked)" if find["verify"] != "none" else "")
                name = run["label"].split(" jobs")[0]
                lines.append(
                    f"| {name} | {find['bits'] or '32 (full)'} | {verify} | {find['banding']} | {candidates} | "
                    f"{accuracy['reported']:,} | {accuracy['precision']:.3f} | "
                    f"{accuracy['recall']:.3f} | {accuracy['precision_clear']:.3f} | {accuracy['recall_clear']:.3f} | "
                    f"{find['wall']:.2f} | {find['cpu']:.2f} | {rss:.0f} |"
                )
        outside = [f["accuracy"]["outside_max"] for r in runs for f in r["result"].get("finds", [])
                   if f["threshold"] == threshold and f["accuracy"]["outside_max"] is not None]
        count = sum(f["accuracy"]["outside_truth"] for r in runs for f in r["result"].get("finds", [])
                    if f["threshold"] == threshold)
        lines += ["", f"Reported pairs outside truth.tsv (judged exactly): {count} over all rows"
                  + (f", highest exact Jaccard {max(outside):.4f}" if outside else "") + "."]

    fastest, finder = best_dedup(runs)
    peers = {r["tool"]: r for r in runs if r["tool"] in ("datasketch", "rensa") and "sign" in r["result"]}
    if fastest is not None and finder is not None:
        lines += [
            "",
            f"### End to end: sign + find (dedup {fastest['label'].removeprefix('dedup ')}, b = 2; "
            "peers: LSH + estimate filter)",
            "",
            "| R0 | dedup wall s | dedup CPU s | "
            + " | ".join(f"{p} wall s | {p} CPU s | speed-up wall | speed-up CPU" for p in peers) + " |",
            "|---|---|---|" + "---|---|---|---|" * len(peers),
        ]
        for threshold, verify in ((t, v) for t in arguments.thresholds for v in ("none", "borderline")):
            ours = find_row(finder, threshold, 2, verify)
            if ours is None:
                continue
            sign = fastest["result"]["sign"]
            wall, cpu = sign["wall"] + ours["wall"], sign["cpu"] + ours["cpu"]
            cells = [f"{threshold}" + (" (dedup verify borderline)" if verify != "none" else ""),
                     f"{wall:.2f}", f"{cpu:.2f}"]
            for peer in peers.values():
                theirs = find_row(peer, threshold, None, "none")
                if theirs is None:
                    cells += ["–"] * 4
                    continue
                peer_sign = peer["result"]["sign"]
                peer_wall, peer_cpu = peer_sign["wall"] + theirs["wall"], peer_sign["cpu"] + theirs["cpu"]
                cells += [f"{peer_wall:.2f}", f"{peer_cpu:.2f}", ratio(peer_wall, wall), ratio(peer_cpu, cpu)]
            lines.append("| " + " | ".join(cells) + " |")
        lines += [
            "",
            "Speed-up = peer time ÷ dedup time. Ratios of sign throughput (dedup MB/s ÷ peer MB/s, wall): "
            + ", ".join(f"{p} {throughput(fastest) / throughput(r):.1f}×" for p, r in peers.items()) + ".",
        ]
    return lines


def targets(benches: list[dict[str, Any]], arguments: argparse.Namespace) -> list[str]:
    """The lead's targets, measured (information only: nothing here fails the run)."""
    small = min(benches, key=lambda b: b["manifest"]["documents"])
    runs = small["runs"]
    fastest, finder = best_dedup(runs)
    lines = ["## Targets (measured; informational)", "", "| target | measured | met |", "|---|---|---|"]
    if fastest is None or finder is None:
        return lines + ["| (no dedup run) | | |"]
    peers = {r["tool"]: r for r in runs if r["tool"] in ("datasketch", "rensa") and "sign" in r["result"]}
    documents = small["manifest"]["documents"]
    for peer, goal in (("datasketch", 10), ("rensa", 4)):
        if peer not in peers:
            lines.append(f"| end to end ≥ {goal}× {peer} ({documents:,} docs) | {peer} did not run | |")
            continue
        for threshold in arguments.thresholds:
            ours, theirs = find_row(finder, threshold, 2, "none"), find_row(peers[peer], threshold, None, "none")
            if ours is None or theirs is None:
                continue
            speedup = ((peers[peer]["result"]["sign"]["wall"] + theirs["wall"])
                       / (fastest["result"]["sign"]["wall"] + ours["wall"]))
            lines.append(f"| end to end (wall) ≥ {goal}× {peer}, {documents:,} docs, R0 = {threshold} | "
                         f"{speedup:.1f}× ({fastest['label']}) | {'yes' if speedup >= goal else 'no'} |")
    for bench in benches:
        documents = bench["manifest"]["documents"]
        signed = [r for r in bench["runs"] if r["tool"] == "dedup" and "sign" in r["result"]]
        oph_runs = [r for r in signed if r["scheme"] == "oph"]
        if oph_runs:
            best = max(oph_runs, key=throughput)
            lines.append(f"| sign ≥ 40 MB/s wall with oph on {os.cpu_count()} cores ({documents:,} docs) | "
                         f"{throughput(best) / 1e6:.1f} MB/s ({best['label']}) | "
                         f"{'yes' if throughput(best) >= 40e6 else 'no'} |")
        elif signed:
            best = max(signed, key=throughput)
            lines.append(f"| sign ≥ 40 MB/s wall with oph on {os.cpu_count()} cores ({documents:,} docs) | oph not "
                         f"available ({best['label']}: {throughput(best) / 1e6:.1f} MB/s) | no |")
    for bench in benches:
        documents = bench["manifest"]["documents"]
        for run in bench["runs"]:
            if run["tool"] != "dedup" or not run["result"].get("finds"):
                continue
            name = run["label"].split(" jobs")[0]
            for threshold, metric, minimum in ((0.5, "precision", 0.97), (0.5, "recall", 0.98),
                                               (0.8, "recall", 0.90)):
                for verify in ("none", "borderline"):
                    find = find_row(run, threshold, 2, verify)
                    if find is None:
                        continue
                    value = find["accuracy"][metric]
                    lines.append(f"| {metric} ≥ {minimum} at R0 = {threshold}, b = 2 ({name}, verify {verify}, "
                                 f"{documents:,} docs) | {value:.3f} | {'yes' if value >= minimum else 'no'} |")
    return lines


def write_report(benches: list[dict[str, Any]], arguments: argparse.Namespace, oph: tuple[bool, str],
                 jobs: bool, seconds: float) -> None:
    info, found = machine(), versions()
    corpora = " ".join(str(b["corpus"].relative_to(REPO)) for b in benches)
    lines = [
        "# dedup vs datasketch vs rensa",
        "",
        "Generated by `make bench` on the machine below. All tools use k = "
        f"{arguments.num_perm} minwise values and word 5-shingles; each runs in its own process, and times "
        "exclude interpreter start-up and imports (the peak RSS after imports is shown in brackets).",
        "",
        "Commands:",
        "",
        "```",
        *[b["manifest"]["command"] for b in benches],
        f"bench/.venv/bin/python bench/compare.py --corpus {corpora} --num-perm {arguments.num_perm} "
        f"--thresholds {' '.join(map(str, arguments.thresholds))} --bits {' '.join(map(str, arguments.bits))} "
        f"--repeat {arguments.repeat} "
        f"--out {arguments.out.relative_to(REPO) if arguments.out.is_relative_to(REPO) else arguments.out}",
        "```",
        "",
        f"Machine: {info['nproc']} cores ({info['cpu']}), {info['memory']}, {info['platform']}. "
        + ", ".join(f"{k} {v}" for k, v in found.items()) + f"; dedup commit {info['commit']}.",
        f"dedup scheme oph: {oph[1]}; `SignOptions(jobs=...)`: {'available' if jobs else 'not available yet'}.",
        f"Total time of this comparison: {seconds:.0f} s. Each tool ran {arguments.repeat} time(s); the table keeps "
        "the fastest signing and the fastest of each find. \"load avg\" is the machine's 1-minute load average "
        f"when the tool started: above 0 means other work shared the {info['nproc']} cores and inflated wall "
        "times (CPU times are less affected).",
        "",
        "How each tool is driven: dedup through `dedup_cli.sign` (8 stored bits) and "
        "`dedup_cli.find(FindOptions(threshold, bits, verify))`, its banding chosen by dedup for 0.99 recall at R0; datasketch `MinHash(num_perm=k)` + "
        "`update_batch` of the UTF-8 shingles and `MinHashLSH(threshold=R0, num_perm=k)` (its own optimal "
        "bands × rows); rensa `RMinHash(k, 1).update(shingles)` and `RMinHashLSH(R0, k, bands)` with bands the "
        "divisor of k best by datasketch's criterion (rensa needs bands | k). Peers tokenise with "
        "`re.split(r'\\W+', text.lower())`; on this ASCII corpus that gives the same shingle sets as dedup "
        "(checked when the corpus is built). A peer's pair is reported when its LSH makes it a candidate and its "
        "MinHash estimate is ≥ R0; \"candidates (recall …)\" is the recall of its LSH alone. dedup's precision "
        "and recall are for its accepted pairs (estimate ≥ R0 with b bits; with verify borderline the pairs "
        "whose interval straddles R0 are decided by exact Jaccard).",
        "",
    ]
    for bench in benches:
        lines += report_corpus(bench, arguments) + [""]
    lines += targets(benches, arguments) + [""]
    arguments.out.write_text("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, nargs="+", default=[HERE / "data" / "corpus-10000"])
    parser.add_argument("--out", type=Path, default=HERE / "RESULTS.md")
    parser.add_argument("--thresholds", type=float, nargs="+", default=[0.5, 0.8])
    parser.add_argument("--bits", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--num-perm", type=int, default=128)
    parser.add_argument("--tools", nargs="+", default=["dedup", "datasketch", "rensa"],
                        choices=["dedup", "datasketch", "rensa"])
    parser.add_argument("--repeat", type=int, default=1,
                        help="run each tool this many times and keep the fastest (default 1)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.child:
        child(json.loads(arguments.child))
        return
    started = time.perf_counter()
    arguments.out = arguments.out.resolve()
    corpora = [c.resolve() for c in arguments.corpus]
    for corpus in corpora:
        if not (corpus / "truth.tsv").exists():
            sys.exit(f"error: {corpus} has no truth.tsv; build it with bench/make_corpus.py")
    oph = oph_status(arguments.num_perm)
    jobs = jobs_supported()
    print(f"oph: {oph[1]}; jobs: {'yes' if jobs else 'no'}", file=sys.stderr)
    benches = [bench_corpus(corpus, arguments, oph, jobs) for corpus in corpora]
    write_report(benches, arguments, oph, jobs, time.perf_counter() - started)
    print(arguments.out.read_text())


if __name__ == "__main__":
    main()
