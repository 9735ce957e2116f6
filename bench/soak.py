"""The nightly store, soaked: many nights of every kind of edit on a larger corpus, both engines, every answer
checked against exact truth (the model and the checks of the suite's short simulation: tests/nightly_model.py,
tests/nightly_checks.py). Writes bench/RESULTS-soak.md.

    python bench/soak.py --nights 30 --documents 10000    # make soak
"""

from __future__ import annotations

import argparse
import platform
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from nightly_checks import THRESHOLDS, NightReport, run_night  # noqa: E402
from nightly_model import EDITS, Corpus, night  # noqa: E402

from dedup_cli.options.engine_choice import EngineOptions  # noqa: E402


def table(reports: list[NightReport]) -> list[str]:
    lines = ["| night | engine | live | stored | moved | removed | P/R at 0.5 | P/R at 0.8 | dropped | violations "
             "| s |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in reports:
        lines.append(f"| {r.night} | {r.engine} | {r.live} | {r.stored} | {r.moved} | {r.removed} | "
                     f"{r.precision[0.5]:.4f} / {r.recall[0.5]:.4f} | {r.precision[0.8]:.4f} / {r.recall[0.8]:.4f} | "
                     f"{r.dropped} | {len(r.violations)} | {r.seconds:.1f} |")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nights", type=int, default=30)
    parser.add_argument("--documents", type=int, default=10_000)
    parser.add_argument("--edits", type=int, default=0, help="edits a night (default: 1 %% of the documents)")
    parser.add_argument("--engines", default="local,dask")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=HERE / "RESULTS-soak.md")
    args = parser.parse_args()
    edits = args.edits or max(10, args.documents // 100)
    engines = {"local": EngineOptions()}
    cluster = None
    if "dask" in args.engines.split(","):
        from distributed import LocalCluster

        cluster = LocalCluster(n_workers=2, processes=True, threads_per_worker=1, host="127.0.0.1",
                               dashboard_address=None, memory_limit="3GiB")
        engines["dask"] = EngineOptions("dask", scheduler=cluster.scheduler_address)
    started = time.perf_counter()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=HERE).stdout.strip()  # the code that runs: read now, not when the file is written
    reports: list[NightReport] = []
    done: list[str] = []
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        corpus = Corpus(work / "corpus", random.Random(args.seed))
        corpus.build(args.documents)
        corpus.write()
        for number in range(args.nights):
            if number:
                done += night(corpus, edits, EDITS)
            for name, options in engines.items():
                report = run_night(number, corpus, work / f"{name}.parquet", options, name, work,
                                   prune=number % 3 == 0, compare_fresh=name == "local" and number % 5 == 4)
                reports.append(report)
                print(table([report])[-1], flush=True)
    if cluster is not None:
        cluster.close()
    violations = [v for r in reports for v in r.violations]
    worst = {t: (min(r.precision[t] for r in reports), min(r.recall[t] for r in reports)) for t in THRESHOLDS}
    counts = {kind: done.count(kind) for kind in EDITS}
    text = [
        "# The nightly store, soaked", "",
        f"`python bench/soak.py --nights {args.nights} --documents {args.documents} --edits {edits} --seed "
        f"{args.seed} --engines {args.engines}` at commit {commit}, {platform.processor() or platform.machine()}, "
        f"{time.strftime('%Y-%m-%d')}: {time.perf_counter() - started:.0f} s in all.", "",
        "Each night applies the edits, signs the corpus into a store that has seen every night before (with "
        "`--prune` every third night), and checks find and filter against exact Jaccard truth computed by the "
        "model (tests/nightly_checks.py says what each check is); every fifth night the store is compared with "
        "one signed afresh.", "",
        "Edits made: " + ", ".join(f"{kind} {count}" for kind, count in counts.items()) + ".", "",
        f"Violations (live called gone, gone listed live, drops without a kept document at R ≥ R0, ids written "
        f"twice, strict groups keeping two, pairs unlike a fresh store's): **{len(violations)}**. "
        f"Lowest precision / recall over the nights: R0 0.5 {worst[0.5][0]:.4f} / {worst[0.5][1]:.4f}, "
        f"R0 0.8 {worst[0.8][0]:.4f} / {worst[0.8][1]:.4f}.", "",
        *table(reports), "",
        *(["Violations:", "", *[f"- {v}" for v in violations], ""] if violations else []),
    ]
    args.out.write_text("\n".join(text))
    print(f"wrote {args.out}: {len(violations)} violations")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
