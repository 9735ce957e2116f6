"""The nightly store, simulated: seeded nights of every kind of edit on a corpus in every format, signed night after
night into one store on each engine, with find and filter checked against exact truth after every night
(tests/nightly_model.py, tests/nightly_checks.py). ``make soak`` runs the long version (bench/soak.py)."""

from __future__ import annotations

import random
from pathlib import Path

from nightly_checks import THRESHOLDS, run_night
from nightly_model import EDITS, Corpus, night

from dedup_cli.options.engine_choice import EngineOptions

NIGHTS = 7
EDITS_PER_NIGHT = 16
DOCUMENTS = 110
KINDS = EDITS


def test_nights_of_edits_keep_every_record_in_its_place_on_both_engines(engine: EngineOptions,
                                                                        tmp_path: Path) -> None:
    corpus = Corpus(tmp_path / "corpus", random.Random(20261207))
    corpus.build(DOCUMENTS)
    corpus.write()
    stores = {"local": (tmp_path / "local.parquet", EngineOptions()), "dask": (tmp_path / "dask.parquet", engine)}
    reports, done = [], []
    for number in range(NIGHTS):
        if number:
            done += night(corpus, EDITS_PER_NIGHT, KINDS)
        for name, (store, options) in stores.items():
            reports.append(run_night(number, corpus, store, options, name, tmp_path, prune=number % 2 == 0,
                                     compare_fresh=name == "local"))
    assert set(done) == set(KINDS), sorted(set(KINDS) - set(done))  # every kind of edit was made
    violations = [violation for report in reports for violation in report.violations]
    assert not violations, violations
    for report in reports:
        for threshold in THRESHOLDS:
            assert report.precision[threshold] >= 0.99 and report.recall[threshold] >= 0.99, report
    assert sum(report.moved for report in reports) > 0 and sum(report.removed for report in reports) > 0
    # The two engines' stores answer alike, night by night.
    for local, dask in zip(reports[0::2], reports[1::2], strict=True):
        assert (local.precision, local.recall, local.stored) == (dask.precision, dask.recall, dask.stored)
