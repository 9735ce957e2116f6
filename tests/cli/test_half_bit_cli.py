"""b = 1/2 end to end: find, estimate and filter with --bits 1/2 on stores of the sample corpora, the library's
FindOptions(bits="1/2"), and the one-line refusals."""

from __future__ import annotations

import csv
import io
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from helpers import SAMPLE_CORPORA, exact_resemblances, planted_families

import dedup_cli as dedup
from dedup_cli.cli.main import cli
from dedup_cli.errors import OptionError
from dedup_cli.estimates.half_bit import HALF_BIT
from dedup_cli.estimates.pairs import score_matches
from dedup_cli.estimates.simultaneous import SimultaneousBound


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module", params=["bible-editions", "licenses"])
def corpus_store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    corpus = SAMPLE_CORPORA / request.param
    store = tmp_path_factory.mktemp("half") / "sigs.parquet"
    # k = 256: the XOR bits of the checks below are 128 a document
    code, _, stderr = run("sign", str(corpus), "--exclude", "SOURCE", "-o", str(store), "--num-perm", "256", "-q")
    assert code == 0, stderr
    return corpus, store


def _pairs(stdout: str) -> dict[tuple[str, str], dict]:
    records = [json.loads(line) for line in stdout.splitlines()]
    return {tuple(sorted((r["id_a"], r["id_b"]))): r for r in records}


def test_find_half_bit_finds_the_planted_pairs_at_r0_0_8(corpus_store: tuple[Path, Path]) -> None:
    corpus, store = corpus_store
    code, stdout, stderr = run("find", str(store), "--threshold", "0.8", "--bits", "1/2", "--output", "pairs")
    assert code == 0, stderr
    assert "1/2-bit R̂ ≥ 0.8" in stderr
    reported = _pairs(stdout)
    truth = exact_resemblances(corpus)
    planted = {pair for pair, r in truth.items() if r >= 0.8}
    assert planted and planted <= set(reported)
    for pair, record in reported.items():
        # k = 256 positions give 128 XOR bits
        assert 0 <= record["matches"] <= 128
        assert record["ci_low"] <= record["estimate"] <= record["ci_high"]
        if record["exact"] is not None:  # verified pairs are decided by their exact resemblance
            assert record["exact"] == pytest.approx(truth[pair], abs=1e-6) and truth[pair] >= 0.8
        else:  # unverified ones had their whole interval above R0
            assert record["ci_low"] >= 0.8
    # 0.5 spells the same b; every pair compared gives the same accepted pairs
    assert run("find", str(store), "-t", "0.8", "-b", "0.5", "--output", "pairs", "-q")[1] == stdout
    code, every, _ = run("find", str(store), "-t", "0.8", "-b", "1/2", "--candidates", "all", "--output", "pairs",
                         "-q")
    assert code == 0 and set(_pairs(every)) == set(reported)


def test_find_half_bit_in_every_output_and_format(corpus_store: tuple[Path, Path]) -> None:
    _, store = corpus_store
    _, groups, _ = run("find", str(store), "-t", "0.8", "-b", "1/2", "-q")
    assert groups.strip()
    for kind in ("groups", "pairs", "members"):
        for fmt in ("jsonl", "csv", "tsv"):
            code, stdout, stderr = run("find", str(store), "-t", "0.8", "-b", "1/2", "--output", kind, "--format",
                                       fmt, "-q")
            assert code == 0, stderr
            if fmt != "jsonl":
                rows = list(csv.reader(io.StringIO(stdout), delimiter="," if fmt == "csv" else "\t"))
                assert len(rows) > 1 and len({len(row) for row in rows}) == 1
    code, _, stderr = run("find", str(store), "-t", "0.8", "-b", "1/2", "--group", "strict", "--verify", "all", "-q")
    assert code == 0, stderr


def test_library_find_options_half_bit(corpus_store: tuple[Path, Path]) -> None:
    _, store = corpus_store
    result = dedup.find(store, dedup.FindOptions(threshold=0.8, bits="1/2"))
    assert result.bits == 0.5
    cli_pairs = _pairs(run("find", str(store), "-t", "0.8", "-b", "1/2", "--output", "pairs", "-q")[1])
    assert {tuple(sorted((pair.id_a, pair.id_b))) for pair in result.pairs()} == set(cli_pairs)
    assert dedup.FindOptions(bits=0.5) == dedup.FindOptions(bits="1/2") == dedup.FindOptions(bits="0.5")


def test_estimate_half_bit_of_two_documents(corpus_store: tuple[Path, Path]) -> None:
    corpus, store = corpus_store
    truth = exact_resemblances(corpus)
    (a, b), exact = max(truth.items(), key=lambda item: (item[1] < 1.0, item[1]))
    code, stdout, stderr = run("estimate", str(store), a, b, "--bits", "1/2", "--format", "json", "--exact")
    assert code == 0, stderr
    record = json.loads(stdout)
    assert record["bits"] == 0.5 and record["num_perm"] == 256
    assert record["match_fraction"] == record["matches"] / 128
    assert "eq. 25" in record["estimator"]
    assert record["exact"] == pytest.approx(exact)
    assert record["ci_low"] <= record["estimate"] <= record["ci_high"]


def test_three_way_with_half_bit_is_refused_in_one_line(corpus_store: tuple[Path, Path]) -> None:
    _, store = corpus_store
    code, _, stderr = run("find", str(store), "--ways", "3", "--bits", "1/2")
    assert code == 2
    assert stderr.strip() == ("Error: --ways 3 has no b = 1/2 form (XOR bits estimate pairs only); use --bits 2 or "
                              "more, or --ways 2")
    ids = [record["id"] for record in map(json.loads, run("find", str(store), "-t", "0.5", "--output", "members",
                                                           "-q")[1].splitlines())][:3]
    code, _, stderr = run("estimate", str(store), *ids, "--bits", "1/2")
    assert code == 2 and len(stderr.strip().splitlines()) == 1 and "no b = 1/2 form" in stderr
    with pytest.raises(OptionError, match="no b = 1/2 form"):
        dedup.FindOptions(ways=3, bits="1/2")


@pytest.mark.parametrize("value", ["0.3", "1/3", "half"])
def test_other_fractions_are_refused(value: str, tmp_path: Path) -> None:
    code, _, stderr = run("find", str(tmp_path / "none.parquet"), "--bits", value)
    assert code == 2 and "use a whole number 1 to 64, or 1/2" in stderr and "Traceback" not in stderr


def test_dask_engine_refuses_half_bit_in_one_line() -> None:
    with pytest.raises(OptionError, match="local engine only"):
        dedup.FindOptions(bits="1/2", engine=dedup.EngineOptions(name="dask"))


def test_filter_half_bit_drops_what_find_members_drops(tmp_path: Path) -> None:
    words = [f"w{i}" for i in range(120)]
    lines = []
    for topic in range(3):
        for variant in range(3):
            text = [f"t{topic}{word}" for word in words]
            text[variant * 7] = f"v{variant}"
            lines.append(json.dumps({"id": f"{topic}-{variant}", "text": " ".join(text)}))
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("\n".join(lines) + "\n")
    store, out = tmp_path / "s.parquet", tmp_path / "out.jsonl"
    assert run("sign", str(corpus), "-o", str(store), "-q")[0] == 0
    code, _, stderr = run("filter", str(corpus), "-o", str(out), "-s", str(store), "-t", "0.8", "-b", "1/2", "-q")
    assert code == 0, stderr
    code, stdout, _ = run("find", str(store), "-t", "0.8", "-b", "1/2", "--output", "members", "-q")
    dropped = {record["id"] for record in map(json.loads, stdout.splitlines()) if record["action"] == "drop"}
    # ids are file:line; line 3t + 1 is each topic's first variant, kept (the smallest id)
    assert dropped == {f"c.jsonl:{3 * topic + variant + 1}" for topic in range(3) for variant in (1, 2)}
    kept = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    assert kept == [f"{topic}-0" for topic in range(3)]


def test_eval_half_bit_reports_precision_recall_and_storage(corpus_store: tuple[Path, Path]) -> None:
    corpus, store = corpus_store
    code, stdout, stderr = run("eval", str(store), "-t", "0.8", "--bits", "1/2", "--sample", "200", "--format",
                               "json")
    assert code == 0, stderr
    report = json.loads(stdout)
    assert report["bits"] == 0.5 and 0.5 in report["evaluated_bits"]
    judged = [item for item in report["accuracy"]["at_threshold"] if item["bits"] == 0.5]
    assert {item["verify"] for item in judged} == {"none", "borderline"}
    borderline = next(item for item in judged if item["verify"] == "borderline")
    # the planted pairs (exact R ≥ 0.8) are few enough to be a census: find --bits 1/2 gets them all, and only them
    assert borderline["recall"]["value"] == 1.0 and borderline["precision"]["value"] == 1.0
    half_line = next(line for line in report["storage"]["lines"] if line["bits"] == 0.5)
    one_line = next(line for line in report["storage"]["lines"] if line["bits"] == 1)
    # k positions of b = 1/2 take k/16 bytes; near R0 = 0.8 it stores less than b = 1 for the same accuracy
    assert [point["bytes"] for point in half_line["points"]] == [point["num_perm"] / 16
                                                                 for point in half_line["points"]]
    assert half_line["storage_factor"] < one_line["storage_factor"]
    code, out, err = run("eval", str(store), "-t", "0.8", "--bits", "1/2", "--sample", "200")
    assert code == 0 and "b = 1/2, verify borderline precision" in out + err


# --- stores signed with --bits 1/2: only the XOR bits -----------------------------------------------------------

BIBLE = SAMPLE_CORPORA / "bible-editions"


@pytest.fixture(scope="module")
def xor_and_full_stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("xor")
    xor, full = folder / "xor.parquet", folder / "full.parquet"
    for store, bits in ((xor, "1/2"), (full, "8")):  # k = 256 each: 128 XOR bits, 16 bytes a document
        code, _, stderr = run("sign", str(BIBLE), "--exclude", "SOURCE", "-o", str(store), "--bits", bits,
                              "--num-perm", "256", "-q")
        assert code == 0, stderr
    return xor, full


@pytest.mark.parametrize("scheme", ["oph", "kperm"])
@pytest.mark.parametrize("kernel", ["numpy", "numba"])
def test_a_half_bit_store_holds_the_xor_of_the_full_stores_lowest_bits(tmp_path: Path, scheme: str,
                                                                        kernel: str) -> None:
    if kernel == "numba":
        pytest.importorskip("numba")
    stores = {}
    for bits in ("1/2", "8"):
        stores[bits] = tmp_path / f"{bits.replace('/', '-')}.parquet"
        code, _, stderr = run("sign", str(BIBLE / "KJV"), "-o", str(stores[bits]), "--bits", bits, "--scheme",
                              scheme, "--kernel", kernel, "-k", "64", "-q")
        assert code == 0, stderr
    xor, full = dedup.read_store(stores["1/2"]), dedup.read_store(stores["8"])
    assert xor.params.xor_pairs and xor.params.num_perm == 32 and xor.params.permutations == 64
    assert xor.params.signature_bytes == 4  # k/2 bits: 64 permutations in 4 bytes
    assert xor.ids == full.ids
    np.testing.assert_array_equal(xor.values(), xor.values(0.5))
    np.testing.assert_array_equal(xor.values(), full.values(0.5))


def test_a_half_bit_store_of_integer_sets_holds_the_same_xor_bits(tmp_path: Path) -> None:
    source = tmp_path / "sets.jsonl"
    rng = np.random.default_rng(7)
    base = rng.choice(1 << 20, 300, replace=False)
    source.write_text("".join(json.dumps({"id": f"s{i}", "elements": sorted(map(int, base[i * 20:i * 20 + 200]))})
                              + "\n" for i in range(4)))
    stores = {}
    for bits in ("1/2", "4"):
        stores[bits] = tmp_path / f"{bits.replace('/', '-')}.parquet"
        code, _, stderr = run("sign", "--input-format", "sets", str(source), "--universe", str(1 << 20), "-o",
                              str(stores[bits]), "--bits", bits, "-k", "128", "-q")
        assert code == 0, stderr
    xor, full = dedup.read_store(stores["1/2"]), dedup.read_store(stores["4"])
    assert xor.params.xor_pairs and xor.params.signature_bytes == 8
    np.testing.assert_array_equal(xor.values(), full.values(0.5))


def test_find_on_a_half_bit_store_bands_xor_bits_and_finds_the_planted_pairs(
        xor_and_full_stores: tuple[Path, Path]) -> None:
    xor, full = xor_and_full_stores
    assert dedup.open_store(xor).params.signature_bytes == 16  # 16 bytes a document at k = 256
    code, stdout, stderr = run("find", str(xor), "-t", "0.8", "--output", "pairs")
    assert code == 0, stderr
    assert "bands on XOR bits" in stderr and "1/2-bit R̂ ≥ 0.8" in stderr
    truth = exact_resemblances(BIBLE)
    planted = {pair for pair, r in truth.items() if r >= 0.8}
    reported = _pairs(stdout)
    assert planted and planted <= set(reported)
    # the scores are those of the full store's --bits 1/2: the same XOR bits
    scored_full = _pairs(run("find", str(full), "-t", "0.8", "-b", "1/2", "--output", "pairs", "-q")[1])
    for pair in set(reported) & set(scored_full):
        assert reported[pair]["matches"] == scored_full[pair]["matches"]
    result = dedup.find(xor, dedup.FindOptions(threshold=0.8))
    assert result.bits == 0.5 and result.banding is not None and result.banding.band_bits == 0.5


def test_a_half_bit_store_answers_only_half_bit_in_one_line(xor_and_full_stores: tuple[Path, Path]) -> None:
    xor, _ = xor_and_full_stores
    for command in (["find", str(xor), "--bits", "2"], ["estimate", str(xor), "KJV/ruth-01.txt",
                                                         "ASV/ruth-01.txt", "--bits", "1"],
                    ["eval", str(xor), "--bits", "2"]):
        code, _, stderr = run(*command)
        assert code == 2, command
        assert stderr.strip().splitlines() == [
            f"Error: --bits {command[-1]}: {xor} holds only XOR bits (signed with --bits 1/2), which answer --bits "
            "1/2 alone; use --bits 1/2, or sign again with whole bits into a new store"]
    code, _, stderr = run("find", str(xor), "--ways", "3")
    assert code == 2 and "no b = 1/2 form" in stderr and len(stderr.strip().splitlines()) == 1


def test_estimate_and_eval_on_a_half_bit_store(xor_and_full_stores: tuple[Path, Path]) -> None:
    xor, full = xor_and_full_stores
    ids = ["KJV/ruth-01.txt", "AKJV/ruth-01.txt"]
    on_xor = json.loads(run("estimate", str(xor), *ids, "--format", "json")[1])
    on_full = json.loads(run("estimate", str(full), *ids, "-b", "1/2", "--format", "json")[1])
    assert on_xor == on_full and on_xor["num_perm"] == 256 and on_xor["bits"] == 0.5
    code, stdout, stderr = run("eval", str(xor), "-t", "0.8", "--sample", "200", "--format", "json")
    assert code == 0, stderr
    report = json.loads(stdout)
    assert report["evaluated_bits"] == [0.5] and report["num_perm"] == 256 and report["banding"]["band_bits"] == 0.5
    borderline = next(item for item in report["accuracy"]["at_threshold"] if item["verify"] == "borderline")
    assert borderline["recall"]["value"] == 1.0


def test_sign_half_bit_needs_an_even_k(tmp_path: Path) -> None:
    code, _, stderr = run("sign", str(BIBLE / "KJV"), "-o", str(tmp_path / "s.parquet"), "--bits", "1/2", "-k", "63")
    assert code == 2
    assert stderr.strip().splitlines() == ["Error: --bits 1/2 combines the permutations in pairs; use an even "
                                           "--num-perm"]


def test_a_store_of_one_value_a_document_answers_every_command_but_half_bit_in_one_line(tmp_path: Path) -> None:
    """sign accepts -k 1 (the 2-way and 3-way estimators are defined for any k); b = 1/2 XORs two permutations'
    bits, so with one value it is refused in one line by each command that takes it; eval measures k = 1."""
    store, corpus = tmp_path / "k1", BIBLE / "KJV"
    assert run("sign", str(corpus), "-o", str(store), "-k", "1", "-q")[0] == 0
    ids = sorted(dedup.open_store(store).document_index().ids)[:3]
    for command in (["find", str(store)], ["find", str(store), "--ways", "3"], ["estimate", str(store), *ids],
                    ["estimate", str(store), *ids[:2]], ["info", str(store)],
                    ["filter", str(corpus), "-s", str(store), "-o", str(tmp_path / "kept"), "-q"]):
        code, _, stderr = run(*command)
        assert code == 0, (command, stderr)
    code, stdout, stderr = run("eval", str(store), "--format", "json")
    assert code == 0, stderr
    report = json.loads(stdout)
    assert report["num_perm"] == 1 and report["sample"]["measured"] > 0
    # a new store keeps 16 bits of each value unless told otherwise: --bits 1 to 16 are what it answers
    refusal = (f"Error: --bits 1/2 XORs the values of two permutations; in {store}, signed with --num-perm 1, a "
               "document has one; use --bits 1 to 16, or sign again with --num-perm 2 or more")
    for command in (["find", str(store)], ["eval", str(store)], ["estimate", str(store), *ids[:2]],
                    ["filter", str(corpus), "-s", str(store), "-o", str(tmp_path / "half"), "-q"]):
        code, _, stderr = run(*command, "-b", "1/2")
        assert (code, stderr.splitlines()) == (2, [refusal]), command
    assert not (tmp_path / "half").exists()
    code, _, stderr = run("plan", "-k", "1", "-b", "1/2")
    assert (code, stderr.splitlines()) == (2, ["Error: --bits 1/2 XORs the values of two permutations; "
                                               "--num-perm 1 gives one; use --bits 1 to 16, or --num-perm 2 or more"])
    with pytest.raises(OptionError, match="^bits 1/2 XORs the values of two permutations; in the signatures, "
                       "signed with num_perm 1, a document has one; use bits 1 to 16, or sign again with num_perm 2"):
        dedup.find_duplicates(["one two three four five six", "one two three four five seven"],
                              dedup.FindOptions(bits="1/2"), sign_options=dedup.SignOptions(num_perm=1))


# --- plan ---------------------------------------------------------------------------------------------------------


def test_plan_recommends_half_bit_where_it_stores_less() -> None:
    code, stdout, _ = run("plan", "-t", "0.8", "-b", "1", "--format", "json")
    assert code == 0
    record = json.loads(stdout)
    factors = {item["bits"]: item["storage_factor"] for item in record["storage_factors"]}
    assert set(factors) == {0.5, 1, 2, 4, 8}
    # eq. 12 extended, sparse limit at R0 = 0.8: B(1/2) = T(1 − T)/R² = 0.82·0.18/0.64, B(1) = (1 − R²)·... = 0.36
    assert factors[0.5] == pytest.approx(0.82 * 0.18 / 0.64) and factors[1] == pytest.approx(0.36)
    assert record["recommend_half_bit"] is True
    text = run("plan", "-t", "0.8", "-b", "1")[1]
    assert "b = 1/2                stores 1.56× less than b = 1 at equal accuracy: recommended" in text
    below = json.loads(run("plan", "-t", "0.5", "-b", "1", "--format", "json")[1])
    assert below["recommend_half_bit"] is False
    assert "stores 1.25× more than b = 1" in run("plan", "-t", "0.5", "-b", "1")[1]


def test_plan_of_a_store_of_xor_bits_bands_with_t() -> None:
    code, stdout, stderr = run("plan", "-t", "0.8", "-b", "1/2", "--stored-bits", "1/2", "-k", "512", "--docs",
                               "1000", "--format", "json")
    assert code == 0, stderr
    record = json.loads(stdout)
    assert record["bits"] == 0.5 and record["stored_bits"] == 0.5 and record["band_bits"] == 0.5
    assert record["signature_bytes"] == 32  # 256 XOR bits
    assert record["row_agreement_at_threshold"] == pytest.approx(0.82)  # T = (1 + R0²)/2
    assert record["bands"] * record["rows"] <= 256
    assert record["standard_error"] == pytest.approx(math.sqrt(0.82 * 0.18 / (256 * 0.64)))
    # the k it asks for counts permutations: twice the XOR bits the banding needs
    assert record["required_num_perm"] % 2 == 0 and record["required_num_perm"] > 512
    text = run("plan", "-t", "0.8", "-b", "1/2", "--stored-bits", "1/2", "-k", "512")[1]
    assert "on the stored XOR bits" in text and "T = (1 + R²)/2" in text
    code, _, stderr = run("plan", "-b", "2", "--stored-bits", "1/2")
    assert code == 2 and stderr.strip().splitlines() == [
        "Error: --bits 2: --stored-bits 1/2 keeps only XOR bits, which answer --bits 1/2 alone; use --bits 1/2, or "
        "whole --stored-bits"]
    with pytest.raises(OptionError, match="even"):
        dedup.PlanOptions(bits="1/2", stored_bits="1/2", num_perm=63)


# --- many candidates: the decisions hold for all of them at once --------------------------------------------------


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """160 documents in 40 planted families of 4 (in a family R ≈ 0.4–1; across families R ≈ 0)."""
    root = tmp_path_factory.mktemp("planted") / "corpus"
    planted_families(root, 40, 4, (0.0, 0.15), seed=5)
    return root


def test_unrelated_pairs_are_not_reported_however_many_candidates(planted: Path, tmp_path: Path) -> None:
    """16 XOR bits a document make about every pair a candidate (some 12 000), and a per-pair 95 % interval lets
    dozens of unrelated ones (exact R = 0) clear R0 = 0.5 by chance; the bound for all the candidates at once
    sends them to the exact check, which rejects them. Through a real process, as a user runs it."""
    store = tmp_path / "sigs.parquet"
    code, _, stderr = run("sign", str(planted), "-k", "32", "-b", "1/2", "-o", str(store), "-q")
    assert code == 0, stderr
    finished = subprocess.run([sys.executable, "-m", "dedup_cli", "find", str(store), "--output", "pairs", "-q"],
                              capture_output=True, text=True, check=False)
    assert finished.returncode == 0, finished.stderr
    reported = _pairs(finished.stdout)
    exact = exact_resemblances(planted)
    assert len(reported) >= 30  # the families are found
    far_below = sorted(pair for pair in reported if exact[pair] < 0.5 - 0.1)
    assert far_below == []


def test_the_bound_widens_with_the_candidates_not_for_one_pair() -> None:
    """The pair of the report (128 XOR bits, R̂ 0.65, per-pair lower end 0.50): alone it clears R0 = 0.5; among
    3.2 million candidates it does not, and is checked exactly."""
    bound_alone = SimultaneousBound(HALF_BIT, 128, 1)
    bound_many = SimultaneousBound(HALF_BIT, 128, 3_200_000)
    matches = np.array([92])
    zero = np.zeros(1)
    scored = score_matches(np.zeros(1, np.int64), np.ones(1, np.int64), matches, zero, zero, 128, HALF_BIT)
    assert scored.estimate[0] >= 0.65 and scored.ci_low[0] >= 0.5
    args = (0.5, scored.estimate, scored.ci_low, matches, zero, zero)
    assert not bound_alone.unsure(*args)[0]
    assert bound_many.unsure(*args)[0]
