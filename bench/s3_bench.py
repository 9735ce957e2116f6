"""Object storage against local disk: sign + find of the 10^5-document corpus with inputs and store in a bucket of
a local S3 server, the requests ``find`` makes, and SIGKILLs during sign runs into a bucket.

Usage: flock /tmp/dedup-bench.lock python bench/s3_bench.py [--corpus bench/data/corpus-100000] [--repeat 2]
                                                              [--kills 25] [--out bench/RESULTS-s3.md]

The server is moto in server mode (``tests/s3_server.py``) on 127.0.0.1, started here and stopped at the end; a
counting proxy in front of it (the same file) counts the requests of the runs whose requests are reported. Every
``dedup`` runs in a fresh process; each measurement is the fastest of ``--repeat`` runs into a new store, and the
local and object storage runs alternate, so that both see the same machine. Rows:

* sign + find of the corpus as one JSON Lines file (``corpus.jsonl``, built by ``bench/sign_bench.py``'s
  ``jsonl_of``) and as a folder of 10^5 files (``docs/``), locally and in the bucket (``s3://bench/…``); find's
  output is checked to be the same bytes both ways;
* the requests of ``find`` on the store in the bucket, by method, with ``--verify none`` (the store alone) and by
  default (which also re-reads the documents of borderline pairs), beside the store's parts;
* ``--kills`` sign runs into a bucket, each killed with SIGKILL at a random moment (seeded) while it rewrites every
  document (two versions of the corpus alternate); after each, the store is read: a torn store is one that cannot
  be read, lists a missing part, or holds rows of two runs. A last run must then leave nothing of the killed ones.

Run it alone on a shared machine (under ``flock /tmp/dedup-bench.lock``); compare ratios within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(HERE))

from s3_server import FaultProxy, S3Server, aws_environment, make_bucket  # noqa: E402
from sign_bench import jsonl_of  # noqa: E402

BUCKET = "s3://bench"


def dedup(*args: str, env: dict[str, str]) -> float:
    """Wall seconds of one ``dedup`` process (which must succeed)."""
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "dedup_cli", *args], env=env, capture_output=True,
                            cwd=tempfile.gettempdir())
    if result.returncode != 0:
        raise RuntimeError(f"dedup {' '.join(args)} failed: {result.stderr.decode()[-2000:]}")
    return time.perf_counter() - started


def environment(endpoint: str) -> dict[str, str]:
    variables = {key: value for key, value in os.environ.items() if not key.startswith(("DEDUP_", "AWS_"))}
    variables.update(aws_environment(endpoint))
    variables["PYTHONPATH"] = str(REPO)
    return variables


def upload(local: Path, url: str, env: dict[str, str]) -> float:
    """Copy a file or a folder into the bucket (s3fs, many PUTs at once); seconds."""
    os.environ.update({key: value for key, value in env.items() if key.startswith("AWS_")})
    from dedup_cli.objectstore import objects

    started = time.perf_counter()
    fs = objects.client(url)
    fs.put(str(local), url.removeprefix("s3://"), recursive=local.is_dir(), batch_size=64)
    return time.perf_counter() - started


def sign_and_find(inputs: str, store: str, out: str, env: dict[str, str], reading: list[str]) -> dict[str, float]:
    sign = dedup("sign", inputs, "-o", store, "-q", *reading, env=env)
    find = dedup("find", store, "-t", "0.5", "-q", "-o", out, env=env)
    return {"sign": sign, "find": find, "total": sign + find}


def read_back(url_or_path: str) -> bytes:
    if url_or_path.startswith("s3://"):
        from dedup_cli.objectstore import objects

        return objects.read_bytes(url_or_path)
    return Path(url_or_path).read_bytes()


def compare(corpus: Path, scratch: Path, repeat: int, folder_repeat: int, env: dict[str, str]
            ) -> list[dict[str, Any]]:
    """sign + find, locally and in the bucket, for the JSON Lines file and the folder."""
    rows = []
    for kind, slug, local_input, remote_input, reading, times in (
            ("one JSON Lines file", "jsonl", str(jsonl_of(corpus)), f"{BUCKET}/corpus.jsonl", ["--id-field", "id"],
             repeat),
            ("a folder of files", "folder", str(corpus / "docs"), f"{BUCKET}/docs/", [], folder_repeat))[
            :2 if folder_repeat else 1]:
        best: dict[str, dict[str, float]] = {}
        outputs = {}
        for attempt in range(times):
            for where, inputs, store, out in (
                    ("local", local_input, str(scratch / f"sigs-{slug}-{attempt}"),
                     str(scratch / f"out-{slug}-{attempt}.jsonl")),
                    ("s3", remote_input, f"{BUCKET}/sigs-{slug}-{attempt}", f"{BUCKET}/out-{slug}-{attempt}.jsonl")):
                measured = sign_and_find(inputs, store, out, env, reading)
                outputs[where] = read_back(out)
                if where not in best or measured["total"] < best[where]["total"]:
                    best[where] = measured
                print(kind, where, {key: round(value, 2) for key, value in measured.items()}, flush=True)
        assert outputs["local"] == outputs["s3"], f"{kind}: find's output differs between local and s3"
        rows.append({"kind": kind, "repeat": times, "local": best["local"], "s3": best["s3"],
                     "ratio": best["s3"]["total"] / best["local"]["total"]})
    return rows


def requests(proxy: FaultProxy, env: dict[str, str]) -> list[dict[str, Any]]:
    """The requests of find on the JSON Lines store in the bucket, through the counting proxy."""
    from dedup_cli.store.store import open_store

    store = f"{BUCKET}/sigs-jsonl-0"
    manifest = open_store(store).manifest
    assert manifest is not None
    rows = []
    for options in (["--verify", "none"], []):
        proxy.reset()
        dedup("find", store, "-t", "0.5", "-q", "-o", os.devnull, *options, env=env)
        rows.append({"options": " ".join(options) or "(default: --verify borderline)", "parts": len(manifest.parts),
                     "documents": manifest.documents, "requests": dict(sorted(proxy.requests.items())),
                     "total": proxy.total})
    return rows


def kills(corpus: Path, scratch: Path, count: int, env: dict[str, str], seed: int = 1) -> dict[str, Any]:
    """``count`` sign runs into a bucket killed at random moments; how many left a torn store."""
    from dedup_cli.objectstore import objects
    from dedup_cli.store.store import open_store

    versions = []
    source = jsonl_of(corpus)
    for version in range(2):  # every record's text differs between the two, so each run rewrites everything
        path = scratch / f"corpus-v{version}.jsonl"
        with open(source, encoding="utf-8") as lines, open(path, "w", encoding="utf-8") as out:
            for line in lines:
                record = json.loads(line)
                record["text"] += f" version {version}"
                out.write(json.dumps(record) + "\n")
        upload(path, f"{BUCKET}/kills/v{version}.jsonl", env)
        versions.append(f"{BUCKET}/kills/v{version}.jsonl")
    store = f"{BUCKET}/kills/sigs"
    dedup("sign", versions[0], "--id-field", "id", "-o", store, "-q", env=env)
    full = dedup("sign", versions[1], "--id-field", "id", "-o", store, "-q", env=env)  # a run that rewrites all
    generator = random.Random(seed)
    torn, killed, finished, moments, attempt = 0, 0, 0, [], 0
    while killed < count and attempt < 2 * count:
        moment = generator.uniform(0.2, full * 0.9)
        moments.append(moment)
        run = subprocess.Popen([sys.executable, "-m", "dedup_cli", "sign", versions[attempt % 2], "--id-field",
                                "id", "-o", store, "-q"], env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, cwd=tempfile.gettempdir())
        attempt += 1
        time.sleep(moment)
        run.send_signal(signal.SIGKILL)
        run.wait()
        killed += run.returncode == -signal.SIGKILL
        finished += run.returncode == 0
        try:
            opened = open_store(store)
            stored = opened.read()
            runs = set(stored.runs.tolist()) if stored.runs is not None else set()
            if len(stored.ids) != opened.documents or len(runs) != 1:
                torn += 1
        except Exception as error:  # noqa: BLE001 - any failure to read is a torn store
            print("torn:", error, flush=True)
            torn += 1
    dedup("sign", versions[0], "--id-field", "id", "-o", store, "-q", env=env)
    opened = open_store(store)
    assert opened.manifest is not None
    listed = {part.file for part in opened.manifest.parts} | {"_dedup_manifest.json"}
    left = [item.url for item in objects.listing(store) if item.url.rsplit("/", 1)[1] not in listed]
    left += [url for url, _, _ in objects.unfinished_uploads(store)]
    return {"runs": attempt, "killed": killed, "finished": finished, "torn": torn, "full_run": full,
            "moments": (min(moments), max(moments)), "left_after_next_run": len(left)}


def report(rows: list[dict[str, Any]], counted: list[dict[str, Any]], killing: dict[str, Any], corpus: Path,
           arguments: argparse.Namespace) -> str:
    shown = os.path.relpath(corpus, REPO)
    documents = json.loads((corpus / "manifest.json").read_text())["documents"] if (
        corpus / "manifest.json").exists() else "?"
    lines = [
        "# dedup with inputs and store in object storage, against local disk",
        "",
        f"`flock /tmp/dedup-bench.lock python bench/s3_bench.py --corpus {shown} --repeat "
        f"{arguments.repeat} --folder-repeat {arguments.folder_repeat} --kills {arguments.kills}`; "
        f"{platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}. The S3 server is moto in server mode on 127.0.0.1 (tests/s3_server.py), one "
        "process: what is measured is dedup's requests and the client, not a production object store.",
        "",
        f"## sign + find of the corpus ({documents} documents), the fastest of the runs (repeats: "
        f"{', '.join(str(row['repeat']) for row in rows)})",
        "",
        "| input | where | sign | find | sign + find | ratio to local |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        for where in ("local", "s3"):
            measured = row[where]
            ratio = f"{row['ratio']:.2f}×" if where == "s3" else "1"
            place = "local disk" if where == "local" else "bucket (inputs, store, output)"
            lines.append(f"| {row['kind']} | {place} | {measured['sign']:.2f} s | {measured['find']:.2f} s | "
                         f"{measured['total']:.2f} s | {ratio} |")
    lines += ["", "## requests of `find` on the 10^5-document store in the bucket", "",
              "| find options | documents | parts | requests | by method |", "|---|---|---|---|---|"]
    for row in counted:
        by_method = ", ".join(f"{method} {count}" for method, count in row["requests"].items())
        lines.append(f"| {row['options']} | {row['documents']} | {row['parts']} | {row['total']} | {by_method} |")
    lines += ["", "## SIGKILL during sign runs into a bucket", "",
              "| runs | killed | finished before the kill | torn stores | files of killed runs left after the next "
              "run |", "|---|---|---|---|---|",
              f"| {killing['runs']} | {killing['killed']} | {killing['finished']} | {killing['torn']} | "
              f"{killing['left_after_next_run']} |", "",
              f"Each run rewrites every document of the corpus (two versions alternate; such a run took "
              f"{killing['full_run']:.1f} s to the end) and is killed after {killing['moments'][0]:.1f}–"
              f"{killing['moments'][1]:.1f} s (uniform, seeded), until {arguments.kills} runs were killed; after "
              "each, the store is read whole: torn means it could not be read, a listed part was missing, or its "
              "rows came from two runs."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=HERE / "data" / "corpus-100000")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--folder-repeat", type=int, default=1,
                        help="runs of the folder (10^5 GETs a sign; 0: leave the folder out)")
    parser.add_argument("--kills", type=int, default=25, help="runs to kill with SIGKILL")
    parser.add_argument("--out", type=Path, default=HERE / "RESULTS-s3.md")
    arguments = parser.parse_args()
    arguments.corpus = arguments.corpus.resolve()
    server = S3Server().start()
    proxy = FaultProxy(server.endpoint).start()
    try:
        direct, counted = environment(server.endpoint), environment(proxy.endpoint)
        os.environ.update({key: value for key, value in direct.items() if key.startswith("AWS_")})
        make_bucket(BUCKET)
        print("upload JSON Lines:", round(upload(jsonl_of(arguments.corpus), f"{BUCKET}/corpus.jsonl", direct), 1),
              "s", flush=True)
        if arguments.folder_repeat:
            print("upload folder:", round(upload(arguments.corpus / "docs", f"{BUCKET}/docs", direct), 1), "s",
                  flush=True)
        with tempfile.TemporaryDirectory() as scratch:
            rows = compare(arguments.corpus, Path(scratch), arguments.repeat, arguments.folder_repeat, direct)
            numbers = requests(proxy, counted)
            print(numbers, flush=True)
            killing = kills(arguments.corpus, Path(scratch), arguments.kills, direct)
            print(killing, flush=True)
        arguments.out.write_text(report(rows, numbers, killing, arguments.corpus, arguments), encoding="utf-8")
        print(f"wrote {arguments.out}")
    finally:
        proxy.stop()
        server.stop()


if __name__ == "__main__":
    main()
