"""eval's precision and recall on a store whose truth is known: unbiased, inside their intervals (fixed seeds).

240 documents in 40 families of 6 edits of one text, signed with k = 64 so that ``find`` errs around R0 = 0.5
(precision and recall about 0.75 at b = 1 without exact checks): the truth is ``find``'s own output against the
exact resemblance of all 28,680 pairs, and eval sees 200 of them.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from helpers import document_shingles, pair_codes_by_id, planted_families

import dedup_cli as dedup
from dedup_cli.estimates.exact import pair_resemblances
from dedup_cli.evaluation.retrieval import Retrieval

SEEDS = range(1, 21)
THRESHOLD = 0.5


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, tuple[float, float]]]:
    root = tmp_path_factory.mktemp("planted")
    texts = planted_families(root / "docs", families=40, size=6, edit_rate=(0.01, 0.07), seed=11)
    store = root / "sigs.parquet"
    dedup.sign([str(root / "docs")], store, dedup.SignOptions(num_perm=64, jobs=1))
    ids = sorted(texts)
    first, second = np.triu_indices(len(ids), 1)
    exact = pair_resemblances([document_shingles(texts[i], 5, "word") for i in ids], first, second)
    true = set((first * len(ids) + second)[exact >= THRESHOLD].tolist())
    truth = {}
    for bits in (1, 2):
        for verify in ("none", "borderline"):
            found = dedup.find(store, dedup.FindOptions(threshold=THRESHOLD, bits=bits, verify=verify))
            reported = set(pair_codes_by_id(found, ids).tolist())
            truth[f"{bits}-{verify}"] = (len(true & reported) / len(reported), len(true & reported) / len(true))
    return store, truth


@pytest.mark.slow
def test_sampled_precision_and_recall_are_unbiased_and_inside_their_intervals(
        planted: tuple[Path, dict[str, tuple[float, float]]]) -> None:
    store, truth = planted
    precision, recall = truth["1-none"]
    assert precision < 0.85 and recall < 0.85  # something to estimate
    estimates: dict[str, list[Retrieval]] = {key: [] for key in truth}
    unweighted = []
    for seed in SEEDS:
        options = dedup.EvalOptions(dedup.FindOptions(threshold=THRESHOLD, bits=1), sample=200, seed=seed)
        result = dedup.evaluate(store, options)
        assert result.pairs.first.size == 200 and result.population == math.comb(240, 2)
        for retrieval in result.at_threshold:
            if retrieval.bits in (1, 2):
                estimates[f"{retrieval.bits}-{retrieval.verify}"].append(retrieval)
        sample = result.pairs
        reported = sample.candidate & (sample.scores[1].estimate >= THRESHOLD)
        unweighted.append(np.mean(sample.exact[reported] >= THRESHOLD))  # precision ignoring the weights
    for key, (true_precision, true_recall) in truth.items():
        for name, true_value in (("precision", true_precision), ("recall", true_recall)):
            found = [getattr(retrieval, name) for retrieval in estimates[key]]
            values = np.array([estimate.value for estimate in found])
            inside = sum(estimate.ci_low <= true_value <= estimate.ci_high for estimate in found)
            assert inside >= 16, f"{key} {name}: {inside} of {len(found)} intervals hold {true_value}"
            if values.std() > 0:  # a census of the pairs that matter has no spread, and then must be exact
                assert abs(values.mean() - true_value) < 3 * values.std() / math.sqrt(len(values)) + 1e-3, key
            else:
                assert values.mean() == pytest.approx(true_value), key
    spread = np.std([retrieval.precision.value for retrieval in estimates["1-none"]])
    assert spread > 0.01  # the estimates do vary from seed to seed: this is sampling, not a census
    # The same check on the unweighted share fails: equal allocation over-represents the rare R̂ bins.
    assert abs(np.mean(unweighted) - precision) > 3 * spread / math.sqrt(len(SEEDS))

