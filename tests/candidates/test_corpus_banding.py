"""Banding chosen for the corpus size: hand-computed values, the per-pair choice where the budget does not bind."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from helpers import SAMPLE_CORPORA
from hypothesis import given, settings
from hypothesis import strategies as st

import dedup_cli as dedup
from dedup_cli.candidates.banding import (
    CHANCE_FRACTION,
    Banding,
    bands_for_recall,
    chance_probability,
    choose_banding,
    choose_banding_for_corpus,
    expected_chance_candidates,
    required_num_perm,
    resolve_banding,
)
from dedup_cli.candidates.buckets import candidate_pairs
from dedup_cli.cli.main import cli

SAMPLES = SAMPLE_CORPORA

# E_8(0.5) = 2^-8 + (1 − 2^-8)·0.5 = 0.501953125 per row (Li & König 2010, eq. 4, sparse limit).
P_HALF = 0.501953125


def test_bands_for_recall_by_hand() -> None:
    # rows 3: p^3 = 0.1264706; log(0.01)/log(1 − 0.1264706) = 34.06 → 35 bands.
    assert P_HALF**3 == pytest.approx(0.1264706, abs=1e-7)
    assert bands_for_recall(0.5, 3, 8, 0.99) == 35
    # rows 4: p^4 = 0.0634823; 4.60517/0.0655852 = 70.22 → 71. rows 5: p^5 = 0.0318651; 4.60517/0.0323840 = 142.2.
    assert bands_for_recall(0.5, 4, 8, 0.99) == 71
    assert bands_for_recall(0.5, 5, 8, 0.99) == 143
    assert bands_for_recall(1.0, 40, 8, 0.99) == 1  # identical documents agree on every band
    assert bands_for_recall(0.5, 5000, 1, 0.99) == math.inf  # E^rows underflows: no banding reaches it


def test_chance_probability_by_hand() -> None:
    # 1 − (1 − 2^-24)^35 = 35 · 2^-24 − C(35, 2) · 2^-48 + …: unrelated documents share a 24-bit band key.
    assert chance_probability(35, 3, 8) == pytest.approx(35 * 2.0**-24 - 595 * 2.0**-48, rel=1e-9)
    assert chance_probability(1, 1, 1) == pytest.approx(0.5)
    assert chance_probability(2, 1, 1) == pytest.approx(0.75)  # 1 − (1 − 1/2)^2
    # 72-bit bands are hashed to 64 bits: the hash's own collisions dominate 2^-72.
    assert chance_probability(1, 9, 8) == pytest.approx(2.0**-72 + 2.0**-64, rel=1e-9)


def test_expected_chance_candidates_by_hand() -> None:
    # C(10^6, 2) · 35 · 2^-24 = 4.999995e11 · 2.0862e-6 = 1.043 M: the 1.05 M candidates find reports at 10^6.
    assert expected_chance_candidates(1_000_000, 35, 3, 8) == pytest.approx(1.0430792e6, rel=1e-6)
    assert expected_chance_candidates(1, 35, 3, 8) == 0.0


def test_small_corpora_keep_the_per_pair_choice_up_to_the_budget_edge() -> None:
    # The budget 0.1·n binds when (n − 1)/2 · P_0 > 0.1, i.e. n − 1 > 0.2 / 2.08616e-6 = 95,870.4.
    for documents in (2, 48, 1_000, 10_000, 95_870):
        choice = resolve_banding(0.5, 256, 8, 0.99, documents=documents)
        assert choice.banding == choose_banding(0.5, 256, 8) == Banding(35, 3, 8)
        assert choice.meets_recall and choice.meets_budget
    assert resolve_banding(0.5, 256, 8, 0.99, documents=10_000).required_num_perm == 105
    edge = resolve_banding(0.5, 256, 8, 0.99, documents=95_871)
    assert edge.banding == Banding(35, 3, 8) and edge.meets_recall and not edge.meets_budget
    assert edge.chance_candidates is not None and edge.chance_candidates / 95_871 == pytest.approx(0.1, rel=1e-5)


def test_a_million_documents_need_a_fourth_row_and_284_values() -> None:
    choice = resolve_banding(0.5, 256, 8, 0.99, documents=1_000_000)
    # 4 rows need 71 bands = 284 values > 256: the recall-meeting banding with the fewest chance candidates is
    # still 35 × 3, flagged, and 284 = 71 × 4 is named.
    assert choice.banding == Banding(35, 3, 8) and choice.meets_recall and not choice.meets_budget
    assert choice.required_num_perm == 284
    enough = resolve_banding(0.5, 284, 8, 0.99, documents=1_000_000)
    assert enough.banding == Banding(71, 4, 8) and enough.meets_budget and enough.meets_recall
    # C(10^6, 2) · 71 · 2^-32 = 8,266 chance candidates ≤ 10^5.
    assert enough.chance_candidates == pytest.approx(4.999995e11 * 71 * 2.0**-32, rel=1e-5)


def test_ten_million_documents_at_0_55_fit_in_256_values() -> None:
    # R0 = 0.55: E = 0.5517578; rows 4 need ⌈4.60517 / −log(1 − 0.0926810)⌉ = 48 bands (192 values), with
    # C(10^7, 2) · 48 · 2^-32 = 5.6·10^5 ≤ 10^6 chance candidates; 3 rows would give 1.4·10^8.
    choice = resolve_banding(0.55, 256, 8, 0.99, documents=10_000_000)
    assert choice.banding == Banding(48, 4, 8) and choice.meets_budget and choice.meets_recall
    assert choice.chance_candidates == pytest.approx(4.9999995e13 * 48 * 2.0**-32, rel=1e-4)


def test_a_hundred_million_documents_need_a_fifth_row() -> None:
    # rows 4: C(10^8, 2) · 71 · 2^-32 = 8.3e7 > 10^7; rows 5: 143 bands, 5.0e15 · 143 · 2^-40 = 6.5e5 ≤ 10^7.
    assert required_num_perm(0.5, 8, 0.99, 100_000_000) == 715
    assert choose_banding_for_corpus(0.5, 715, 8, 100_000_000) == Banding(143, 5, 8)


def test_over_budget_keeps_the_recall_with_the_fewest_chance_candidates() -> None:
    # 35 × 3 does not fit in 64 values; 16 × 2 reaches the recall but gives C(1000, 2) · 16 · 2^-16 = 122 > 100
    # chance candidates. It is kept (flagged), and 105 = 35 × 3 is the least k that meets both.
    choice = resolve_banding(0.5, 64, 8, 0.99, documents=1_000)
    assert choice.banding == Banding(16, 2, 8) and choice.meets_recall and not choice.meets_budget
    assert choice.chance_candidates == pytest.approx(121.93, abs=0.01)
    assert choice.required_num_perm == 105


def test_unreachable_recall_returns_the_highest_recall_like_the_per_pair_choice() -> None:
    # R0 = 0.1: one row needs log(0.01)/log(1 − 0.1035) = 43 bands > 16 values, more rows need more.
    choice = resolve_banding(0.1, 16, 8, 0.99, documents=100)
    assert not choice.meets_recall and choice.banding == choose_banding(0.1, 16, 8)
    assert choice.required_num_perm == 3 * bands_for_recall(0.1, 3, 8, 0.99)


def test_no_k_is_named_when_none_within_two_to_the_sixteen_works() -> None:
    assert required_num_perm(0.01, 8, 0.99, 1_000_000_000) is None


def test_a_given_banding_is_kept_and_judged() -> None:
    choice = resolve_banding(0.5, 256, 8, 0.99, bands=20, rows=3, documents=1_000_000)
    assert choice.banding == Banding(20, 3, 8) and not choice.chosen
    assert not choice.meets_recall and not choice.meets_budget
    assert resolve_banding(0.5, 256, 8, 0.99, bands=20).banding == Banding(20, 12, 8)
    with pytest.raises(ValueError):
        resolve_banding(0.5, 256, 8, 0.99, bands=100, rows=3)


@given(
    threshold=st.sampled_from([0.05, 0.2, 0.3, 0.5, 0.65, 0.8, 0.9, 0.97, 1.0]),
    num_perm=st.sampled_from([8, 16, 64, 100, 128, 256, 512]),
    band_bits=st.sampled_from([1, 2, 4, 8, 16]),
    recall=st.sampled_from([0.9, 0.99, 0.998]),
)
def test_an_unbinding_budget_reproduces_the_per_pair_choice(threshold: float, num_perm: int, band_bits: int,
                                                             recall: float) -> None:
    chosen = choose_banding_for_corpus(threshold, num_perm, band_bits, 1_000, recall, chance_fraction=1e6)
    assert chosen == choose_banding(threshold, num_perm, band_bits, recall)


@settings(max_examples=30)  # each example chooses three bandings over up to 1024 rows
@given(
    threshold=st.sampled_from([0.3, 0.5, 0.7, 0.9]),
    num_perm=st.sampled_from([64, 128, 256, 512, 1024]),
    band_bits=st.sampled_from([2, 4, 8]),
    documents=st.sampled_from([10**4, 10**6, 10**8, 10**9]),
)
def test_promises_are_kept_when_claimed(threshold: float, num_perm: int, band_bits: int, documents: int) -> None:
    choice = resolve_banding(threshold, num_perm, band_bits, 0.99, documents=documents)
    assert choice.banding.bands * choice.banding.rows <= num_perm
    assert choice.meets_budget == (choice.chance_candidates <= CHANCE_FRACTION * documents)
    if choice.required_num_perm is not None:
        # The named k really meets both, and one value fewer does not.
        enough = resolve_banding(threshold, choice.required_num_perm, band_bits, 0.99, documents=documents)
        assert enough.meets_recall and enough.meets_budget
        fewer = resolve_banding(threshold, choice.required_num_perm - 1, band_bits, 0.99, documents=documents)
        assert not (fewer.meets_recall and fewer.meets_budget)
        assert (choice.meets_recall and choice.meets_budget) == (choice.required_num_perm <= num_perm)


def test_chance_candidates_match_banding_random_signatures() -> None:
    # 20,000 unrelated 8-bit signatures banded 35 × 3: C(20000, 2) · 2.0862e-6 = 417.2 chance candidates
    # expected; a sum of nearly independent rare events, so Poisson with sd √417 ≈ 20.4.
    documents = 20_000
    values = np.random.default_rng(12).integers(0, 256, size=(documents, 105), dtype=np.uint8)
    found = candidate_pairs(values, 35, 3).first.size
    expected = expected_chance_candidates(documents, 35, 3, 8)
    assert expected == pytest.approx(417.2, abs=0.1)
    assert abs(found - expected) < 4 * math.sqrt(expected)


def test_plan_names_the_store_that_would_do(tmp_path: Path) -> None:
    # 256 values of 8 bits (the default layout before) at 10^6 documents: 35 × 3 bands on 24-bit keys expect a
    # million chance candidates. 284 such values would do (71 × 4 bands), and so do the same 256 bytes a document
    # in 128 values of 16 bits, which plan names as the cheapest store.
    runner = CliRunner()
    layout = ["--docs", "1000000", "-k", "256", "--stored-bits", "8"]
    planned = runner.invoke(cli, ["plan", *layout, "--format", "json"])
    record = json.loads(planned.stdout)
    assert (record["bands"], record["rows"], record["required_num_perm"]) == (35, 3, 284)
    assert record["chance_budget"] == pytest.approx(1e5)
    (warning,) = [w for w in record["warnings"] if "too few" in w]
    assert warning.startswith("k = 256 values of 8 bits are too few to keep chance candidates within 0.1 per "
                              "document at 1,000,000 documents with recall 0.99 at R0 = 0.5: 35×3 bands expect "
                              "about 1.04 million candidates between unrelated documents; sign into a new store with "
                              "--bits 16 --num-perm 128 (256 signature bytes a document, as now; find then needs "
                              "about ")
    assert warning.endswith(" GB at -j 1), or raise --threshold")
    named = json.loads(runner.invoke(cli, ["plan", "--docs", "1000000", "-k", "128", "--stored-bits", "16", "-j",
                                           "1", "--format", "json"]).stdout)
    assert not any("too few" in w for w in named["warnings"])
    gigabytes = float(warning.split("find then needs about ")[1].split()[0])
    assert gigabytes == pytest.approx(named["memory_peak_bytes"] / 1e9, rel=5e-3)  # the named store's find, -j 1
    fits = json.loads(runner.invoke(cli, ["plan", "--docs", "1000000", "-k", "284", "--stored-bits", "8",
                                          "--format", "json"]).stdout)
    assert (fits["bands"], fits["rows"]) == (71, 4) and not any("too few" in w for w in fits["warnings"])
    given = json.loads(runner.invoke(cli, ["plan", *layout, "--bands", "30", "--rows", "3",
                                           "--format", "json"]).stdout)
    assert any(w.startswith("--bands 30 × --rows 3 expect about 894,068 candidates") for w in given["warnings"])
    refused = runner.invoke(cli, ["plan", *layout, "--bands", "100", "--rows", "3"])
    assert refused.exit_code == 2 and "needs 300 values but signatures hold 256" in refused.stderr
    assert "chance budget          100,000 = 0.1·N" in runner.invoke(cli, ["plan", "--docs", "1000000"]).stdout


def test_find_warns_when_its_signatures_are_too_short_for_the_corpus(tmp_path: Path) -> None:
    # 48 documents, k = 16 values of 8 bits: 7 bands of 1 row reach 0.99 recall at 0.5 but expect
    # C(48, 2) · (1 − (1 − 2^-8)^7) = 30 chance candidates, over 4.8; 16 bands of 2 rows (32 values) expect
    # 1128 · 16 · 2^-16 = 0.28, and so do 7 bands of one 16-bit value, 1128 · 7 · 2^-16 = 0.12, in 8 values of the
    # same 16 bytes a document, the store the warning names.
    store = tmp_path / "store"
    inputs = dedup.InputOptions(exclude=("SOURCE",))
    dedup.sign([str(SAMPLES / "bible-editions")], store, dedup.SignOptions(num_perm=16, bits=8, input=inputs))
    found = dedup.find(store)
    assert found.banding == Banding(7, 1, 8)
    assert found.banding_choice is not None and found.banding_choice.required_num_perm == 32
    result = CliRunner().invoke(cli, ["find", str(store), "--output", "pairs"])
    assert result.exit_code == 0
    assert ("warning: k = 16 values of 8 bits are too few to keep chance candidates within 0.1 per document at 48 "
            "documents with recall 0.99 at R0 = 0.5: 7×1 bands expect about 30 candidates between unrelated "
            "documents; sign into a new store with --bits 16 --num-perm 8 (16 signature bytes a document, as now; "
            "find then needs about ") in result.stderr
    # the store it names serves the corpus: find on it warns of nothing
    named = tmp_path / "named"
    dedup.sign([str(SAMPLES / "bible-editions")], named, dedup.SignOptions(num_perm=8, bits=16, input=inputs))
    result = CliRunner().invoke(cli, ["find", str(named), "--output", "pairs"])
    assert result.exit_code == 0 and "warning" not in result.stderr
