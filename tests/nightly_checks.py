"""What each night of the nightly-store simulation checks, against the model's exact truth (tests/nightly_model.py).

After the night's edits the corpus is signed into a store that has seen every night before (with or without
``--prune``), then ``find`` and ``filter`` run on it, and every answer is held against the truth:

* no live document is called gone, and nothing gone is listed live (kept or dropped);
* ``find``'s precision and recall on the true pairs at R0 0.5 and 0.8;
* ``filter`` (witness groups, the default) writes every id at most once, only live records, and drops nothing
  without a kept document at true R ≥ R0: no live text is left without a kept copy or near copy;
* ``filter --group strict`` keeps at most one live member of each strict group, and drops nothing unwitnessed;
* the store grown night by night gives the pairs a store signed afresh gives (every pair compared, so that the
  banding of two stores of different sizes does not enter).

The same functions serve the short simulation in ``make test`` and the long one in ``make soak``.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from nightly_model import Corpus, Record, jaccard, read_output, true_pairs

import dedup_cli as dedup
from dedup_cli.options.engine_choice import EngineOptions

THRESHOLDS = (0.5, 0.8)
READING = dedup.InputOptions(id_field="id")


@dataclass
class NightReport:
    """What one night of one engine found, beside the truth; ``violations`` name what must never happen."""

    night: int
    engine: str
    live: int = 0
    stored: int = 0
    moved: int = 0
    removed: int = 0
    called_gone_but_live: int = 0
    gone_listed_live: int = 0
    precision: dict[float, float] = field(default_factory=dict)
    recall: dict[float, float] = field(default_factory=dict)
    true_pairs: dict[float, int] = field(default_factory=dict)
    dropped: int = 0
    unwitnessed_drops: int = 0
    texts_without_copy: int = 0
    ids_written_twice: int = 0
    records_not_live: int = 0
    strict_groups_keeping_two: int = 0
    strict_unwitnessed_drops: int = 0
    differs_from_fresh: int = 0
    seconds: float = 0.0
    violations: list[str] = field(default_factory=list)

    def violate(self, what: str, count: int) -> None:
        if count:
            self.violations.append(f"night {self.night} ({self.engine}): {count} {what}")


def sign(corpus: Corpus, store: Path, engine: EngineOptions, prune: bool) -> dedup.SignReport:
    # --checksum: a file rewritten with its old size and time (one of the edits) is read again and its text checked.
    return dedup.sign([str(corpus.root)], store, dedup.SignOptions(input=READING, prune=prune, engine=engine,
                                                                    checksum=True))


def check_find(report: NightReport, store: Path, live: dict[str, Record], engine: EngineOptions) -> None:
    """Liveness, and precision and recall at each R0."""
    for threshold in THRESHOLDS:
        result = dedup.find(store, dedup.FindOptions(threshold=threshold, engine=engine))
        gone = set(result.gone)
        report.called_gone_but_live += len(gone & set(live))
        listed = {member.id for member in result.members() if member.action in ("keep", "drop")}
        report.gone_listed_live += len(listed - set(live))
        reported = {(min(p.id_a, p.id_b), max(p.id_a, p.id_b)) for p in result.pairs()}
        among_live = {pair for pair in reported if pair[0] in live and pair[1] in live}
        report.gone_listed_live += len({doc for pair in reported - among_live for doc in pair} - gone - set(live))
        truth = true_pairs(live, threshold)
        right = len(among_live & truth)
        report.precision[threshold] = right / len(among_live) if among_live else 1.0
        report.recall[threshold] = right / len(truth) if truth else 1.0
        report.true_pairs[threshold] = len(truth)


def check_filter(report: NightReport, corpus: Corpus, store: Path, live: dict[str, Record], engine: EngineOptions,
                 out: Path, group: str | None) -> list[Record]:
    """What ``filter`` wrote (with ``group``, else its default), checked; returns the records written."""
    if out.exists():
        shutil.rmtree(out)
    grouping = {} if group is None else {"group": group}  # filter's own grouping when none is named
    dedup.filter([str(corpus.root)], out, store,
                 dedup.FilterOptions(find=dedup.FindOptions(threshold=THRESHOLDS[0], engine=engine, **grouping)))
    written = read_output(out)
    ids = [record.id for record in written]
    report.ids_written_twice += len(ids) - len(set(ids))
    report.records_not_live += sum(1 for record in written if record.id not in live
                                   or live[record.id].text != record.text)
    kept_texts = {record.text for record in written}
    by_family: dict[int, list[str]] = {}  # texts of different families share no shingle: only the same family
    for record in written:
        if record.id in live:
            by_family.setdefault(live[record.id].family, []).append(record.text)
    unwitnessed = 0
    written_ids = set(ids)
    for identifier, record in live.items():
        if identifier in written_ids:
            continue
        if group is None:
            report.dropped += 1
        if record.text in kept_texts:
            continue
        if not any(jaccard(record.text, text) >= THRESHOLDS[0] for text in by_family.get(record.family, ())):
            unwitnessed += 1
    if group is None:
        report.unwitnessed_drops += unwitnessed
        report.texts_without_copy += unwitnessed
    else:
        report.strict_unwitnessed_drops += unwitnessed
    return written


def check_strict(report: NightReport, store: Path, live: dict[str, Record], written: list[Record],
                 engine: EngineOptions) -> None:
    """``filter --group strict`` keeps at most one live member of each strict group."""
    result = dedup.find(store, dedup.FindOptions(threshold=THRESHOLDS[0], group="strict", engine=engine))
    kept = {record.id for record in written}
    groups: dict[int, list[str]] = {}
    for member in result.members():
        groups.setdefault(member.group, []).append(member.id)
    report.strict_groups_keeping_two += sum(1 for members in groups.values()
                                            if sum(1 for m in members if m in kept and m in live) > 1)


def check_fresh(report: NightReport, corpus: Corpus, store: Path, live: dict[str, Record], fresh: Path) -> None:
    """The store grown night by night gives the pairs of live documents a store signed afresh gives."""
    if fresh.exists():
        shutil.rmtree(fresh)
    dedup.sign([str(corpus.root)], fresh, dedup.SignOptions(input=READING))
    every = dedup.FindOptions(threshold=THRESHOLDS[0], candidates="all")

    def pairs(path: Path) -> set[tuple[str, str]]:
        found = {(min(p.id_a, p.id_b), max(p.id_a, p.id_b)) for p in dedup.find(path, every).pairs()}
        return {pair for pair in found if pair[0] in live and pair[1] in live}

    report.differs_from_fresh += len(pairs(store) ^ pairs(fresh))


def run_night(number: int, corpus: Corpus, store: Path, engine: EngineOptions, name: str, work: Path,
              prune: bool, compare_fresh: bool) -> NightReport:
    """Sign the corpus as it is after a night's edits, and check find and filter against the truth."""
    started = time.perf_counter()
    report = NightReport(number, name)
    signed = sign(corpus, store, engine, prune)
    live = corpus.live()
    report.live, report.moved = len(live), getattr(signed, "moved", 0)
    report.stored = signed.run.documents if signed.run is not None else 0
    report.removed = signed.run.removed if signed.run is not None else 0
    check_find(report, store, live, engine)
    check_filter(report, corpus, store, live, engine, work / f"out-{name}", None)
    strict = check_filter(report, corpus, store, live, engine, work / f"strict-{name}", "strict")
    check_strict(report, store, live, strict, engine)
    if compare_fresh:
        check_fresh(report, corpus, store, live, work / "fresh.parquet")
    report.seconds = time.perf_counter() - started
    report.violate("live documents called gone", report.called_gone_but_live)
    report.violate("gone documents listed live", report.gone_listed_live)
    report.violate("dropped documents without a kept one at R >= R0", report.unwitnessed_drops)
    report.violate("ids written twice by filter", report.ids_written_twice)
    report.violate("records written that are not live", report.records_not_live)
    report.violate("strict groups with two live members kept", report.strict_groups_keeping_two)
    report.violate("drops of filter --group strict without a kept one at R >= R0", report.strict_unwitnessed_drops)
    report.violate("pairs that differ from a fresh store's", report.differs_from_fresh)
    return report
