"""``dedup eval``: every number of its JSON against an independent computation over all pairs (a census, where the
design's estimates must equal the population's values exactly), a truth file, unreadable documents, the command
line, the picture and the errors."""

from __future__ import annotations

import json
import math
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from helpers import document_shingles, pair_codes_by_id, planted_families, raises_worded

import dedup_cli as dedup
from dedup_cli.candidates.banding import PairSizes, candidate_probability
from dedup_cli.cli.eval_report import eval_record
from dedup_cli.cli.main import cli
from dedup_cli.engine.local.evaluation import SWEEP_THRESHOLDS
from dedup_cli.errors import DedupError, InputError, OptionError
from dedup_cli.estimates.densified import Densification, densified_variance_2way
from dedup_cli.estimates.exact import pair_resemblances
from dedup_cli.estimates.intervals import confidence_interval_2way
from dedup_cli.evaluation.accuracy import STORAGE_NUM_PERMS
from dedup_cli.evaluation.design import frame_banding

THRESHOLD, BITS, NUM_PERM = 0.5, 2, 128
EVALUATED = [1, 2, 4, 8]


class Census:
    """A small store, every one of its pairs with its exact resemblance, and eval's record of a census of it."""

    def __init__(self, root: Path) -> None:
        self.texts = planted_families(root / "docs", families=12, size=5, edit_rate=(0.01, 0.12), seed=5)
        self.store = root / "sigs.parquet"
        # values of 8 bits: the computations below read them as bytes and band on 8-bit rows
        dedup.sign([str(root / "docs")], self.store, dedup.SignOptions(num_perm=NUM_PERM, bits=8, jobs=1))
        self.ids = sorted(self.texts)
        self.n = len(self.ids)
        self.first, self.second = np.triu_indices(self.n, 1)
        self.sets = [document_shingles(self.texts[i], 5, "word") for i in self.ids]
        self.exact = pair_resemblances(self.sets, self.first, self.second)
        read = dedup.read_store(self.store)
        self.values = read.values()
        # one permutation hashing (sign's default): each pair's variance, interval and S-curve are those of its
        # documents' sizes (docs/estimators.md, "One permutation hashing")
        assert read.params.scheme == "oph"
        self.sizes = read.shingle_counts[self.first].astype(float), read.shingle_counts[self.second].astype(float)
        options = dedup.EvalOptions(dedup.FindOptions(threshold=THRESHOLD, bits=BITS), sample=10_000)
        self.result = dedup.evaluate(self.store, options)
        self.record = eval_record(self.result)

    def matches(self, bits: int, positions: int = NUM_PERM) -> np.ndarray:
        values = self.values[:, :positions] & np.uint8((1 << bits) - 1)
        return np.count_nonzero(values[self.first] == values[self.second], axis=1)

    def estimate(self, bits: int, positions: int = NUM_PERM) -> np.ndarray:
        """The sparse b-bit estimator (2^b Ê − 1)/(2^b − 1), written out here."""
        return ((1 << bits) * self.matches(bits, positions) / positions - 1) / ((1 << bits) - 1)

    def variance(self, bits: int, positions: int = NUM_PERM) -> np.ndarray:
        chance = 2.0**-bits
        agree = chance + (1 - chance) * self.exact
        return agree * (1 - agree) / (positions * (1 - chance) ** 2)

    def densified_variance(self, bits: int) -> np.ndarray:
        """Eq. D4 at each pair's exact R and sizes."""
        return np.asarray(densified_variance_2way(self.exact, *self.sizes, bits, NUM_PERM))

    def interval(self, bits: int) -> tuple[np.ndarray, np.ndarray]:
        """find's 95 % interval of each pair: the score interval of eq. D4."""
        ratios = (self.sizes[0] / 2.0**64, self.sizes[1] / 2.0**64)
        return confidence_interval_2way(self.matches(bits), NUM_PERM, *ratios, bits,
                                        densification=Densification(NUM_PERM))

    def s_curve(self, bands: int, rows: int, band_bits: int) -> np.ndarray:
        """Each pair's predicted Pr(candidate): the S-curve of its documents' sizes."""
        return candidate_probability(self.exact, bands, rows, band_bits, PairSizes(NUM_PERM, *self.sizes))

    def share_a_band(self, bands: int, rows: int) -> np.ndarray:
        blocks = self.values[:, : bands * rows].reshape(self.n, bands, rows)
        return (blocks[self.first] == blocks[self.second]).all(axis=2).any(axis=1)

    def reported(self, threshold: float, bits: int, verify: str) -> np.ndarray:
        found = dedup.find(self.store, dedup.FindOptions(threshold=threshold, bits=bits, verify=verify))
        return np.isin(self.first * self.n + self.second, pair_codes_by_id(found, self.ids))


@pytest.fixture(scope="module")
def census(tmp_path_factory: pytest.TempPathFactory) -> Census:
    return Census(tmp_path_factory.mktemp("census"))


def exact_estimate(record: dict[str, Any] | None, value: float) -> None:
    """A census estimate: the population's value, no standard error, a point interval (6 significant digits)."""
    assert record is not None
    assert record["value"] == pytest.approx(value, rel=1e-5, abs=1e-12)
    assert record["stderr"] == 0.0
    assert record["ci_low"] == record["ci_high"] == record["value"]


def test_the_run_and_its_design(census: Census) -> None:
    record = census.record
    pairs = math.comb(census.n, 2)
    found = dedup.find(census.store, dedup.FindOptions(threshold=THRESHOLD, bits=BITS))
    assert found.banding is not None
    frame = frame_banding(census.n, NUM_PERM, 8)
    assert frame is not None
    candidate = census.share_a_band(found.banding.bands, found.banding.rows)
    banded = candidate | census.share_a_band(frame.bands, frame.rows)
    assert {key: record[key] for key in ("documents", "eligible", "pairs", "num_perm", "stored_bits", "threshold",
                                         "bits", "evaluated_bits", "candidates", "banded", "oversized_buckets")} == {
        "documents": census.n, "eligible": census.n, "pairs": pairs, "num_perm": NUM_PERM, "stored_bits": 8,
        "threshold": THRESHOLD, "bits": BITS, "evaluated_bits": EVALUATED, "candidates": int(candidate.sum()),
        "banded": int(banded.sum()), "oversized_buckets": 0}
    assert record["candidates"] == found.candidates
    assert record["banding"] == {"bands": found.banding.bands, "rows": found.banding.rows, "band_bits": 8}
    assert record["frame"] == {"bands": frame.bands, "rows": frame.rows, "band_bits": 8}
    grid = np.round(np.arange(101) / 100, 2)
    agree = 2.0**-8 + (1 - 2.0**-8) * grid
    caught = np.maximum(*(1 - (1 - agree**b.rows) ** b.bands for b in (found.banding, frame)))
    assert record["reach"] == grid[np.flatnonzero(caught >= 0.99)[0]]
    assert record["store"] == str(census.store) and record["seconds"] > 0
    sample = record["sample"]
    assert (sample["requested"], sample["seed"], sample["drawn"], sample["measured"]) == (10_000, 1, pairs, pairs)
    assert sample["unverifiable_documents"] == []
    bins = np.minimum((np.clip(census.estimate(8), 0, 1) * 10).astype(int), 9)[banded]
    expected = [(True, b / 10, (b + 1) / 10, int(count)) for b, count in enumerate(np.bincount(bins, minlength=10))
                if count] + [(False, None, None, pairs - int(banded.sum()))]
    strata = sample["strata"]
    assert [(s["banded"], s["low"], s["high"], s["population"]) for s in strata] == expected
    assert all(s["drawn"] == s["measured"] == s["population"] and s["weight"] == 1.0 for s in strata)
    assert strata[0]["name"] == "banded, R̂ in [0, 0.1)" and strata[-1]["name"] == "not banded"


def domain_values(error: np.ndarray, variance: np.ndarray, covered: np.ndarray, inside: np.ndarray
                  ) -> dict[str, float]:
    squares = error[inside] ** 2
    positive = variance[inside] > 0
    return {"bias": error[inside].mean(), "rmse": math.sqrt(squares.mean()),
            "variance_ratio": squares[positive].sum() / variance[inside][positive].sum(),
            "coverage": covered[inside].mean()}


def test_the_estimators_errors_per_b_and_per_bin(census: Census) -> None:
    binned = np.minimum((census.exact * 10).astype(int), 9)
    assert [entry["bits"] for entry in census.record["estimators"]] == EVALUATED
    for entry in census.record["estimators"]:
        bits = entry["bits"]
        estimate = census.estimate(bits)
        low, high = census.interval(bits)
        covered = (low <= census.exact) & (census.exact <= high)
        error, variance = estimate - census.exact, census.densified_variance(bits)
        domains = [(entry["overall"], np.ones(census.exact.size, dtype=bool), 0.0, 1.0)]
        domains += [(entry["bins"][b], binned == b, b / 10, (b + 1) / 10) for b in range(10)]
        for domain, inside, low_edge, high_edge in domains:
            assert (domain["low"], domain["high"], domain["pairs"]) == (low_edge, high_edge, int(inside.sum()))
            exact_estimate(domain["population"], float(inside.sum()))
            if not inside.any():
                assert all(domain[name] is None for name in ("bias", "rmse", "variance_ratio", "coverage"))
                continue
            for name, value in domain_values(error, variance, covered, inside).items():
                exact_estimate(domain[name], value)
    assert any(entry["bins"][b]["pairs"] == 0 for entry in census.record["estimators"] for b in range(10))


def test_the_measured_and_predicted_s_curve(census: Census) -> None:
    banding = census.record["banding"]
    candidate = census.share_a_band(banding["bands"], banding["rows"])
    predicted = census.s_curve(banding["bands"], banding["rows"], banding["band_bits"])
    binned = np.minimum((census.exact * 10).astype(int), 9)
    for b, point in enumerate(census.record["s_curve"]):
        inside = binned == b
        assert (point["low"], point["high"], point["pairs"]) == (b / 10, (b + 1) / 10, int(inside.sum()))
        if not inside.any():
            assert point["measured"] is point["resemblance"] is point["predicted"] is None
            continue
        exact_estimate(point["measured"], candidate[inside].mean())
        assert point["resemblance"] == pytest.approx(census.exact[inside].mean(), rel=1e-5)
        assert point["predicted"] == pytest.approx(predicted[inside].mean(), rel=1e-5)


def check_retrieval(census: Census, record: dict[str, Any], outside: int | None = None) -> None:
    reported = census.reported(record["threshold"], record["bits"], record["verify"])
    true = census.exact >= record["threshold"]
    hits = int((reported & true).sum())
    exact_estimate(record["reported"], float(reported.sum()))
    exact_estimate(record["true"], float(true.sum()))
    for name, count in (("precision", reported.sum()), ("recall", true.sum())):
        if count:
            exact_estimate(record[name], hits / count)
        else:
            assert record[name] is None  # nothing reported, or no true pair: no share to estimate
    assert record["outside_truth"] == outside


def test_precision_and_recall_at_r0_and_over_thresholds(census: Census) -> None:
    accuracy = census.record["accuracy"]
    assert accuracy["source"] == "sample" and accuracy["truth"] is None
    at_threshold = accuracy["at_threshold"]
    assert [(r["bits"], r["verify"]) for r in at_threshold] == [(b, v) for b in EVALUATED
                                                                for v in ("none", "borderline")]
    for record in at_threshold:
        assert record["threshold"] == THRESHOLD
        check_retrieval(census, record)
    assert [(r["threshold"], r["bits"], r["verify"]) for r in accuracy["sweep"]] == [
        (t, BITS, v) for t in SWEEP_THRESHOLDS for v in ("none", "borderline")]
    for record in accuracy["sweep"]:
        check_retrieval(census, record)
    # Not vacuous: without exact checks find errs here, with them it does not.
    assert at_threshold[0]["precision"]["value"] < 1 and at_threshold[1]["precision"]["value"] == 1


def test_the_recall_of_banding_above_r0_for_two_recalls(census: Census) -> None:
    # The default recall 0.99 beside 0.999: each curve is the banding find chooses for that recall, and over the
    # census its measured share of candidates is the population's, overall above R0 and per fifth of [R0, 1].
    curves = census.record["recall_curves"]
    assert [curve["recall"] for curve in curves] == [0.99, 0.999]
    true = census.exact >= THRESHOLD
    for curve in curves:
        found = dedup.find(census.store, dedup.FindOptions(threshold=THRESHOLD, bits=BITS, recall=curve["recall"]))
        assert found.banding is not None
        bands, rows = found.banding.bands, found.banding.rows
        assert curve["banding"] == {"bands": bands, "rows": rows, "band_bits": 8}
        candidate = census.share_a_band(bands, rows)
        exact_estimate(curve["recall_above_threshold"], candidate[true].mean())
        predicted = census.s_curve(bands, rows, curve["banding"]["band_bits"])
        slices = np.minimum(((census.exact - THRESHOLD) / 0.1).astype(int), 4)
        assert [(point["low"], point["high"]) for point in curve["points"]] == [
            (pytest.approx(THRESHOLD + i / 10), pytest.approx(THRESHOLD + (i + 1) / 10)) for i in range(5)]
        for index, point in enumerate(curve["points"]):
            inside = true & (slices == index)
            assert point["pairs"] == int(inside.sum())
            if not inside.any():
                assert point["measured"] is None and point["resemblance"] is None
                continue
            exact_estimate(point["measured"], candidate[inside].mean())
            assert point["resemblance"] == pytest.approx(census.exact[inside].mean(), rel=1e-5)
            assert point["predicted"] == pytest.approx(predicted[inside].mean(), rel=1e-5)
    # the higher recall's banding differs, and catches every pair the default one does near R0
    assert curves[0]["banding"] != curves[1]["banding"]


def test_the_storage_trade_off(census: Census) -> None:
    storage = census.record["storage"]
    inside = (census.exact >= 0.4) & (census.exact <= 0.6)
    assert (storage["low"], storage["high"], storage["pairs"]) == (0.4, 0.6, int(inside.sum()))
    assert [line["bits"] for line in storage["lines"]] == [1, 2, 4, 8, 32]
    for line in storage["lines"]:
        bits = line["bits"]
        unit = float(census.variance(bits, 1)[inside].mean()) if bits < 32 else float(
            (census.exact * (1 - census.exact))[inside].mean())
        assert line["storage_factor"] == pytest.approx(bits * unit, rel=1e-5)
        assert line["points"] == [{"num_perm": k, "bytes": k * bits / 8, "stderr": pytest.approx(
            math.sqrt(unit / k), rel=1e-5)} for k in STORAGE_NUM_PERMS]
    measured = storage["measured"]
    assert [(point["bits"], point["num_perm"]) for point in measured] == [(b, k) for b in EVALUATED
                                                                        for k in (32, 64, 128)]
    for point in measured:
        error = census.estimate(point["bits"], point["num_perm"]) - census.exact
        assert point["bytes"] == point["num_perm"] * point["bits"] / 8
        exact_estimate(point["rmse"], math.sqrt(np.mean(error[inside] ** 2)))


def key_paths(value: Any, prefix: str = "") -> set[str]:
    """The paths of the numbers (and strings) in a record; a null stands for a value shown where it is not null."""
    if value is None:
        return set()
    if isinstance(value, dict):
        return set().union(*(key_paths(item, f"{prefix}.{key}" if prefix else key) for key, item in value.items()))
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return set().union(*(key_paths(item, prefix + "[]") for item in value))
    return {prefix}


ESTIMATE = ("value", "stderr", "ci_low", "ci_high")
DOMAIN = {"low", "high", "pairs", *{f"{name}.{part}" for name in ("population", "bias", "rmse", "variance_ratio",
                                                                  "coverage") for part in ESTIMATE}}
RETRIEVAL = {"threshold", "bits", "verify", "outside_truth",
             *{f"{name}.{part}" for name in ("precision", "recall", "reported", "true") for part in ESTIMATE}}
TESTED = {
    # test_the_run_and_its_design
    "store", "documents", "eligible", "pairs", "num_perm", "stored_bits", "threshold", "bits", "evaluated_bits",
    "banding.bands", "banding.rows", "banding.band_bits", "frame.bands", "frame.rows", "frame.band_bits", "reach",
    "candidates", "banded", "oversized_buckets", "seconds", "sample.requested", "sample.seed", "sample.drawn",
    "sample.measured", "sample.unverifiable_documents",
    *{f"sample.strata[].{key}" for key in ("name", "banded", "low", "high", "population", "drawn", "measured",
                                           "weight")},
    # test_the_estimators_errors_per_b_and_per_bin
    "estimators[].bits", *{f"estimators[].overall.{key}" for key in DOMAIN},
    *{f"estimators[].bins[].{key}" for key in DOMAIN},
    # test_the_measured_and_predicted_s_curve
    *{f"s_curve[].{key}" for key in ("low", "high", "pairs", "resemblance", "predicted")},
    *{f"s_curve[].measured.{part}" for part in ESTIMATE},
    # test_precision_and_recall_at_r0_and_over_thresholds (and the truth file's, below)
    "accuracy.source", *{f"accuracy.at_threshold[].{key}" for key in RETRIEVAL},
    *{f"accuracy.sweep[].{key}" for key in RETRIEVAL},
    # test_precision_and_recall_against_a_truth_file
    "accuracy.truth.path", "accuracy.truth.pairs", "accuracy.truth.ignored", "accuracy.truth.floor",
    # test_the_storage_trade_off
    "storage.low", "storage.high", "storage.pairs", "storage.lines[].bits", "storage.lines[].storage_factor",
    *{f"storage.lines[].points[].{key}" for key in ("num_perm", "bytes", "stderr")},
    "storage.measured[].bits", "storage.measured[].num_perm", "storage.measured[].bytes",
    *{f"storage.measured[].rmse.{part}" for part in ESTIMATE},
    # test_the_recall_of_banding_above_r0_for_two_recalls
    "recall_curves[].recall", "recall_curves[].banding.bands", "recall_curves[].banding.rows",
    "recall_curves[].banding.band_bits", *{f"recall_curves[].recall_above_threshold.{part}" for part in ESTIMATE},
    *{f"recall_curves[].points[].{key}" for key in ("low", "high", "pairs", "resemblance", "predicted")},
    *{f"recall_curves[].points[].measured.{part}" for part in ESTIMATE},
}


def test_every_number_in_the_json_has_a_test(census: Census, tmp_path: Path) -> None:
    truth = tmp_path / "truth.tsv"
    truth.write_text(f"id_a\tid_b\tresemblance\n{census.ids[0]}\t{census.ids[1]}\t{census.exact[0]}\n")
    with_truth = eval_record(dedup.evaluate(census.store, dedup.EvalOptions(sample=100, truth=str(truth))))
    assert key_paths(census.record) | key_paths(with_truth) == TESTED
    json.dumps(census.record)  # and it is JSON


# --- a truth file -----------------------------------------------------------------------------------------------


def test_precision_and_recall_against_a_truth_file(census: Census, tmp_path: Path) -> None:
    listed = census.exact >= 0.3
    reported = census.reported(THRESHOLD, BITS, "none")
    left_out = int(np.flatnonzero(listed & reported & (census.exact >= THRESHOLD))[0])  # a pair find reports
    truth = tmp_path / "truth.tsv"
    rows = ["id_a\tid_b\tshared\tunion\tjaccard\tkind"]  # bench/make_corpus.py's columns
    rows += [f"{census.ids[census.second[p]]}\t{census.ids[census.first[p]]}\t0\t0\t{census.exact[p]:.9f}\tfamily"
             for p in np.flatnonzero(listed) if p != left_out]
    truth.write_text("\n".join(rows) + "\n")
    options = dedup.EvalOptions(dedup.FindOptions(threshold=THRESHOLD, bits=BITS), sample=100, truth=str(truth))
    result = dedup.evaluate(census.store, options)
    accuracy = eval_record(result)["accuracy"]
    assert accuracy["source"] == "truth"
    floor = float(census.exact[listed].min())
    assert accuracy["truth"] == {"path": str(truth), "pairs": int(listed.sum()) - 1, "ignored": 0,
                                 "floor": pytest.approx(floor, rel=1e-5)}
    unlisted = ~listed
    unlisted[left_out] = True
    assert [r["threshold"] for r in accuracy["sweep"][::2]] == [t for t in SWEEP_THRESHOLDS if t >= floor]
    for record in accuracy["at_threshold"] + accuracy["sweep"]:
        # Reported pairs the file does not list are re-read: the left-out one counts as the true pair it is.
        says = census.reported(record["threshold"], record["bits"], record["verify"])
        check_retrieval(census, record, outside=int((says & unlisted).sum()))
    assert any(record["outside_truth"] for record in accuracy["at_threshold"])


def test_a_json_lines_truth_file_and_the_pairs_it_cannot_use(census: Census, tmp_path: Path) -> None:
    truth = tmp_path / "truth.jsonl"
    lines = [{"id_a": census.ids[0], "id_b": census.ids[1], "resemblance": float(census.exact[0])},
             {"id_a": census.ids[0], "id_b": "no-such-document", "resemblance": 0.9},
             {"id_a": census.ids[2], "id_b": census.ids[2], "resemblance": 1.0}]
    truth.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = dedup.evaluate(census.store, dedup.EvalOptions(sample=100, truth=str(truth)))
    assert result.truth is not None
    assert (result.truth.resemblance.size, result.truth.ignored) == (1, 2)


@pytest.mark.parametrize(("content", "message"), [
    ("id_a\tid_b\tscore\na\tb\t0.5\n", "has no field 'resemblance'"),
    ("id_a,id_b,resemblance\na,b,0.5\na,c,1.5\n", r"truth\.csv:3: a resemblance outside \[0, 1\]"),
    ("id_a,id_b,resemblance\na,b,\n", r"truth\.csv:2: a resemblance outside"),
])
def test_a_malformed_truth_file_is_named(census: Census, tmp_path: Path, content: str, message: str) -> None:
    truth = tmp_path / ("truth.csv" if "," in content else "truth.tsv")
    truth.write_text(content)
    with pytest.raises(InputError, match=message):
        dedup.evaluate(census.store, dedup.EvalOptions(sample=100, truth=str(truth)))


# --- documents that cannot be re-read -----------------------------------------------------------------------------


def test_unreadable_documents_are_left_out_and_their_strata_reweighted(tmp_path: Path) -> None:
    planted_families(tmp_path / "docs", families=4, size=3, edit_rate=(0.01, 0.05), seed=2)
    store = tmp_path / "sigs.parquet"
    dedup.sign([str(tmp_path / "docs")], store, dedup.SignOptions(jobs=1))
    (tmp_path / "docs" / "f01-1.txt").unlink()
    (tmp_path / "docs" / "f02-0.txt").write_text("changed since it was signed")
    result = dedup.evaluate(store, dedup.EvalOptions(sample=1000))
    assert result.unverifiable == ["f01-1.txt", "f02-0.txt"]
    excluded = 11 + 10  # pairs with either of the two documents, among C(12, 2) = 66
    assert sum(stratum.drawn for stratum in result.strata) == 66
    assert int(result.measured.sum()) == 66 - excluded
    ids = dedup.read_store(store).ids
    gone = [ids.index("f01-1.txt"), ids.index("f02-0.txt")]
    assert not np.isin(result.pairs.first, gone).any() and not np.isin(result.pairs.second, gone).any()
    for index, stratum in enumerate(result.strata):
        weights = result.pairs.weight[result.pairs.stratum == index]
        if weights.size:  # the pairs re-read stand for the stratum's whole population
            assert weights == pytest.approx(stratum.population / result.measured[index])
    assert any(stratum.drawn > result.measured[index] for index, stratum in enumerate(result.strata))


# --- the command line -------------------------------------------------------------------------------------------


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_the_command_writes_json_a_summary_and_a_picture(census: Census, tmp_path: Path) -> None:
    picture = tmp_path / "eval.png"
    code, stdout, stderr = run("eval", str(census.store), "-t", "0.5", "-b", "2", "--sample", "300",
                               "--plot", str(picture), "--format", "json")
    assert code == 0, stderr
    record = json.loads(stdout)
    assert record["sample"]["drawn"] == 300 and record["bits"] == 2
    assert "b = 2, verify borderline precision" in stderr and "S-curve" in stderr
    data = picture.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert width >= 800 and height >= 500
    assert data[-8:-4] == b"IEND" and len(data) < 400_000
    code, stdout, stderr = run("eval", str(census.store), "--sample", "100", "-q")
    assert (code, stdout, stderr) == (0, "", "")


def test_the_summary_shows_the_recall_asked_for_beside_the_default(census: Census) -> None:
    code, _, stderr = run("eval", str(census.store), "-t", "0.5", "-b", "2", "--sample", "300", "--recall", "0.9999")
    assert code == 0, stderr
    lines = stderr.splitlines()
    start = lines.index("recall of banding above R0 by exact R, for the banding each --recall chooses (measured; "
                        "predicted):")
    assert lines[start + 1].split()[:5] == ["--recall", "banding", "R", "≥", "R0"]
    default = dedup.find(census.store, dedup.FindOptions(threshold=0.5, bits=2)).banding
    chosen = dedup.find(census.store, dedup.FindOptions(threshold=0.5, bits=2, recall=0.9999)).banding
    assert default is not None and chosen is not None and default != chosen
    assert lines[start + 2].split()[:2] == ["0.99", f"{default.bands}×{default.rows}"]
    assert lines[start + 4].split()[:2] == ["0.9999", f"{chosen.bands}×{chosen.rows}"]
    # A banding given by hand is chosen by no recall: nothing to compare.
    code, _, stderr = run("eval", str(census.store), "--sample", "300", "--bands", "20", "--rows", "5")
    assert code == 0 and "recall of banding above R0" not in stderr
    for wrong in ("0", "1", "1.5"):
        code, _, stderr = run("eval", str(census.store), "--recall", wrong)
        assert code == 2 and "Invalid value for '--recall'" in stderr and "Traceback" not in stderr


def test_without_matplotlib_plot_is_a_one_line_error_before_any_work(monkeypatch: pytest.MonkeyPatch,
                                                                        tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now fails
    code, stdout, stderr = run("eval", str(tmp_path / "no-store.parquet"), "--plot", str(tmp_path / "e.png"))
    assert code == 1 and stdout == ""
    assert stderr == ("Error: --plot needs matplotlib, which is not installed; install it with: "
                      "pip install 'dedup-cli[plot]'\n")
    assert not (tmp_path / "e.png").exists()


def test_bad_options_and_stores(census: Census, tmp_path: Path) -> None:
    code, _, stderr = run("eval", str(census.store), "--bits", "9")
    assert code == 2 and "--bits 9 exceeds the 8 bits stored" in stderr
    code, _, stderr = run("eval", str(census.store), "--sample", "10")
    assert code == 2 and "--sample" in stderr
    code, _, stderr = run("eval", str(census.store), "--truth", str(tmp_path / "missing.tsv"))
    assert code == 1 and "truth file" in stderr and "does not exist" in stderr
    code, _, stderr = run("eval", str(tmp_path / "missing.parquet"))
    assert code == 1 and "does not exist" in stderr
    with raises_worded(OptionError, "--sample 10 is out of range"):
        dedup.EvalOptions(sample=10)
    with raises_worded(OptionError, "leave --candidates out"):
        dedup.EvalOptions(dedup.FindOptions(candidates="all"))
    lonely = tmp_path / "one"
    lonely.mkdir()
    (lonely / "a.txt").write_text("only one document here with enough words")
    dedup.sign([str(lonely)], tmp_path / "one.parquet", dedup.SignOptions(jobs=1))
    with pytest.raises(DedupError, match="fewer than two documents"):
        dedup.evaluate(tmp_path / "one.parquet")


def test_evaluation_is_deterministic(census: Census) -> None:
    options = dedup.EvalOptions(sample=200, seed=3)
    first, second = dedup.evaluate(census.store, options), dedup.evaluate(census.store, options)
    assert json.dumps({**eval_record(first), "seconds": 0}) == json.dumps({**eval_record(second), "seconds": 0})
    shutil.rmtree(census.store.parent / "unused", ignore_errors=True)
