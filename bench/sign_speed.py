"""Single-core signing throughput: shingling alone, then ``sign_batch`` end to end for each scheme and k.

Usage: python bench/sign_speed.py [--megabytes 50] [--shape files|64k] [--unit word|char] [--repeat 3]
                                  [--only shingle kperm oph]

The text is the files of ``sample_corpora/`` (SOURCE notes excluded), read once and replicated in memory
to about ``--megabytes`` MB. ``--shape files`` keeps the files as documents (median 262 bytes: mostly
dictionary entries, the hard case for per-document overheads); ``--shape 64k`` concatenates them into
documents of about 64 KB. Batches are cut as ``dedup sign`` cuts them (8 MB or 4096 documents). Throughput
is input bytes (UTF-8, as read from disk) per second of wall time on one core, the best of ``--repeat``
runs; reading and decoding the files is not included. Prints a markdown table.

To measure another version of the package (e.g. before a change), export it and run from outside the
repository so that it shadows the installed one:
``git archive HEAD dedup_cli | tar -x -C /tmp/before && cd /tmp && PYTHONPATH=/tmp/before python
/path/to/bench/sign_speed.py --only shingle kperm`` (older versions ignore ``scheme``).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

from dedup_cli.engine.stages.sign import BATCH_BYTES, BATCH_DOCUMENTS, sign_batch
from dedup_cli.inputs.records import Document
from dedup_cli.minhash.kperm import HashFamily
from dedup_cli.params import SignatureParams
from dedup_cli.text import shingles as shingling

REPO = Path(__file__).resolve().parent.parent


def load_corpus(megabytes: float, shape: str) -> list[Document]:
    """The sample corpora replicated to about ``megabytes`` MB, as Documents with distinct ids."""
    texts = []
    for path in sorted((REPO / "sample_corpora").rglob("*")):
        if path.is_file() and "SOURCE" not in path.parts and not path.name.startswith("."):
            raw = path.read_bytes()
            if b"\x00" not in raw[:8192]:
                texts.append(raw.decode("utf-8-sig", errors="replace"))
    if shape == "64k":
        merged, current = [], []
        for text in texts:
            current.append(text)
            if sum(map(len, current)) >= 64 << 10:
                merged.append("\n".join(current))
                current = []
        texts = merged + (["\n".join(current)] if current else [])
    sizes = [len(t.encode()) for t in texts]
    copies = max(1, round(megabytes * 1e6 / sum(sizes)))
    documents = []
    for copy in range(copies):
        for number, (text, size) in enumerate(zip(texts, sizes, strict=True)):
            documents.append(Document(f"{copy}/{number}", f"{copy}/{number}", text, size, 0, 0))
    return documents


def batches(documents: list[Document]) -> list[list[Document]]:
    """Cut like ``engine.stages.sign.batches``: at 1 MB or 4096 documents."""
    out: list[list[Document]] = [[]]
    size = 0
    for document in documents:
        out[-1].append(document)
        size += document.size
        if size >= BATCH_BYTES or len(out[-1]) >= BATCH_DOCUMENTS:
            out.append([])
            size = 0
    return [b for b in out if b]


def shingle_only(batch: list[Document], params: SignatureParams) -> None:
    if hasattr(shingling, "batch_shingles"):
        shingling.batch_shingles([d.text for d in batch], params.shingle_size, params.shingle_unit)
    else:  # the per-document path before batch_shingles existed
        for document in batch:
            shingling.document_shingles(document.text, params.shingle_size, params.shingle_unit)


def best_time(run: Callable[[], None], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=50)
    parser.add_argument("--shape", choices=["files", "64k"], default="files")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--unit", choices=["word", "char"], default="word")
    parser.add_argument("--only", nargs="+", default=["shingle", "kperm", "oph"])
    args = parser.parse_args()
    documents = load_corpus(args.megabytes, args.shape)
    work = batches(documents)
    total = sum(d.size for d in documents)
    print(f"{total / 1e6:.1f} MB, {len(documents)} documents ({args.shape}), {len(work)} batches, "
          f"{args.unit} 5-shingles")
    print("| stage | k | MB/s |\n|---|---|---|")
    if "shingle" in args.only:
        params = SignatureParams(shingle_unit=args.unit)
        seconds = best_time(lambda: [shingle_only(b, params) for b in work], args.repeat)
        print(f"| shingling alone | – | {total / seconds / 1e6:.1f} |", flush=True)
    for scheme in ("kperm", "oph"):
        if scheme not in args.only:
            continue
        for num_perm in (128, 256):
            params = SignatureParams(num_perm=num_perm, bits=8, scheme=scheme, shingle_unit=args.unit)
            family = HashFamily.from_seed(params.seed, num_perm)
            seconds = best_time(lambda: [sign_batch(b, params, family) for b in work], args.repeat)  # noqa: B023
            print(f"| sign_batch {scheme} | {num_perm} | {total / seconds / 1e6:.1f} |", flush=True)


if __name__ == "__main__":
    main()
