"""``--recall``: the banding chosen for a recall at R0, what it finds that the default misses, and that it keeps
precision, the default's bytes, the work folder's keys and one-line answers at its extremes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from helpers import document_shingles

import dedup_cli as dedup
from dedup_cli.cli.main import cli
from dedup_cli.errors import OptionError

THRESHOLD = 0.5
PAIRS = 300


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def near_r0(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[tuple[str, str], float]]:
    """A planted corpus of 300 pairs just above R0 = 0.5 (|A ∩ B| = 139 of 200 words each) and 300 just below
    (128), word 1-shingles, k = 64: the pairs a banding for 0.99 misses now and then. Every pair's exact Jaccard,
    from the reference shingles of the tests' helpers."""
    corpus = tmp_path_factory.mktemp("recall") / "corpus"
    corpus.mkdir()
    texts = {}
    for index in range(2 * PAIRS):
        shared = 139 if index < PAIRS else 128
        words = [f"p{index}w{i}" for i in range(200)]
        texts[f"{index:03d}a.txt"] = " ".join(words)
        texts[f"{index:03d}b.txt"] = " ".join(words[:shared] + [f"p{index}x{i}" for i in range(200 - shared)])
    for name, text in texts.items():
        (corpus / name).write_text(text)
    truth = {}
    for index in range(2 * PAIRS):
        a, b = (document_shingles(texts[f"{index:03d}{side}.txt"], 1, "word") for side in "ab")
        truth[(f"{index:03d}a.txt", f"{index:03d}b.txt")] = np.intersect1d(a, b).size / np.union1d(a, b).size
    store = corpus.parent / "near.parquet"
    dedup.sign([str(corpus)], store, dedup.SignOptions(num_perm=64, bits=8, shingle_size=1, jobs=1))
    return store, truth


def reported(store: Path, *options: str) -> tuple[set[tuple[str, str]], str]:
    code, stdout, stderr = run("find", str(store), "-t", str(THRESHOLD), "-b", "1", "--output", "pairs", "--format",
                               "tsv", "--no-header", *options)
    assert code == 0, stderr
    return {tuple(sorted(line.split("\t")[:2])) for line in stdout.splitlines()}, stderr  # type: ignore[misc]


def test_a_higher_recall_finds_the_pairs_just_above_r0_and_accepts_none_below(near_r0: tuple[Path, dict]) -> None:
    store, truth = near_r0
    above = {pair for pair, value in truth.items() if value >= THRESHOLD}
    assert len(above) == PAIRS and min(truth[pair] for pair in above) < 0.54  # all of them just above R0
    default, default_summary = reported(store)
    higher, higher_summary = reported(store, "--recall", "0.999")
    assert len(default & above) < PAIRS, "the corpus must make the default banding miss pairs just above R0"
    assert higher & above == above  # --recall 0.999: every one of them
    # precision with verification: no pair below R0 accepted, by either recall (and nothing outside the truth)
    assert all(pair in truth for pair in default | higher)
    assert [pair for pair in default | higher if truth[pair] < THRESHOLD] == []
    # the summary names each banding; the higher recall's has more bands
    default_bands = int(default_summary.split("×")[0].rsplit(" ", 1)[1])
    higher_bands = int(higher_summary.split("×")[0].rsplit(" ", 1)[1])
    assert higher_bands > default_bands


def test_the_default_recall_is_the_find_without_it_byte_for_byte(near_r0: tuple[Path, dict], tmp_path: Path) -> None:
    store, _ = near_r0
    code, without, _ = run("find", str(store), "-t", "0.5", "-b", "1", "--output", "pairs", "-q")
    assert code == 0
    code, given, _ = run("find", str(store), "-t", "0.5", "-b", "1", "--output", "pairs", "-q", "--recall", "0.99")
    assert code == 0 and given == without
    # as a user runs it: a real process, the option from the environment too
    child = subprocess.run([sys.executable, "-m", "dedup_cli", "find", str(store), "-t", "0.5", "-b", "1", "--output",
                            "pairs", "-q"], capture_output=True, text=True, env={"DEDUP_FIND_RECALL": "0.999",
                                                                                 "PATH": "/usr/bin:/bin",
                                                                                 "PYTHONPATH": ":".join(sys.path)})
    assert child.returncode == 0, child.stderr
    code, higher, _ = run("find", str(store), "-t", "0.5", "-b", "1", "--output", "pairs", "-q", "--recall", "0.999")
    assert child.stdout == higher != without


def test_the_api_options_take_the_command_lines_default() -> None:
    assert dedup.FindOptions().recall == 0.99
    defaults = {command: {param.name: param.default for param in cli.commands[command].params}["recall"]
                for command in ("find", "filter", "eval", "plan")}
    assert defaults == {"find": 0.99, "filter": 0.99, "eval": 0.99, "plan": 0.99}
    assert dedup.FilterOptions(find=dedup.FindOptions(recall=0.999)).find.recall == 0.999
    assert dedup.EvalOptions(dedup.FindOptions(recall=0.999)).find.recall == 0.999
    for wrong in (0.0, 1.0, 1.5):
        with pytest.raises(OptionError, match="recall"):
            dedup.FindOptions(recall=wrong)


@pytest.mark.parametrize("command", ["find", "filter", "eval", "plan"])
@pytest.mark.parametrize("value", ["0", "1", "-0.5", "nan"])
def test_a_recall_outside_the_open_interval_is_a_usage_error(command: str, value: str, tmp_path: Path) -> None:
    needed = ["-o", str(tmp_path / "kept.jsonl")] if command == "filter" else []
    code, stdout, stderr = run(command, *needed, "--recall", value)
    assert code == 2 and stdout == ""
    assert "Traceback" not in stderr
    # Click's range, or for NaN (no range holds it out) the options' own one line
    assert "Invalid value for '--recall'" in stderr or stderr == (
        "Error: --recall nan must lie strictly between 0 and 1, e.g. 0.99\n")


def test_a_recall_no_banding_of_k_values_reaches_is_one_line_naming_the_k(near_r0: tuple[Path, dict]) -> None:
    store, _ = near_r0
    code, _, stderr = run("find", str(store), "-t", "0.5", "-b", "1", "--recall", "0.999999", "-q", "-o", os.devnull)
    assert code == 0
    (line,) = [line for line in stderr.splitlines() if line.startswith("warning:")]
    assert "recall 0.999999" in line and "sign into a new store with --bits " in line
    # the store it names keeps the chance candidates of the same corpus and recall within the budget
    bits, num_perm = line.split("sign into a new store with --bits ")[1].split()[:3:2]
    code, stdout, _ = run("plan", "-t", "0.5", "-b", "1", "-k", num_perm, "--stored-bits", bits, "--recall",
                          "0.999999", "--docs", "1200")
    assert code == 0 and "Warnings:" not in stdout
    # plan with a k too small for any banding: the recall it reaches, with enough digits, and the k that reaches it
    # (values of 8 bits, whose chance agreements the recall below counts)
    code, stdout, _ = run("plan", "-t", "0.5", "-k", "16", "--stored-bits", "8", "--recall", "0.999999")
    assert code == 0
    (line,) = [line for line in stdout.splitlines() if "below the target" in line]
    assert "is 0.9999857, below the target 0.999999; no banding of k = 16 values reaches it; sign with --num-perm" \
        in line
    needed = int(line.split("--num-perm ")[1].split()[0])
    code, stdout, _ = run("plan", "-t", "0.5", "-k", str(needed), "--stored-bits", "8", "--recall", "0.999999")
    assert code == 0 and "below the target" not in stdout
    # the largest k and the highest recall still plan, promptly
    code, stdout, _ = run("plan", "-t", "0.5", "-k", "65536", "--recall", "0.999999", "--docs", "1000000000")
    assert code == 0 and "Recall and its cost" in stdout


def test_plan_shows_the_default_recall_beside_the_chosen_one() -> None:
    code, stdout, _ = run("plan", "-t", "0.8", "-b", "2", "-k", "128", "--recall", "0.999", "--docs", "100000")
    assert code == 0
    lines = stdout.splitlines()
    start = lines.index("Recall and its cost (find --recall R: bands × rows with Pr(candidate) ≥ R at R0):")
    default, chosen = lines[start + 2].split(), lines[start + 3].split()
    low = dedup.plan(dedup.PlanOptions(threshold=0.8, bits=2, num_perm=128, docs=100000))
    high = dedup.plan(dedup.PlanOptions(threshold=0.8, bits=2, num_perm=128, docs=100000, recall=0.999))
    assert default[:2] == ["0.99", f"{low.bands}×{low.rows}"]
    assert chosen[:2] == ["0.999", f"{high.bands}×{high.rows}"] and chosen[-3:] == ["<-", "this", "plan"]
    assert float(chosen[2]) >= 0.999 > float(default[2]) >= 0.99
    assert high.recall_costs[1].band_work == pytest.approx(high.bands / low.bands)
    assert high.recall_costs[0].candidates == pytest.approx(low.expected_candidates)


def test_kept_work_is_keyed_by_the_banding_not_the_recall(near_r0: tuple[Path, dict], tmp_path: Path) -> None:
    store, _ = near_r0
    work = tmp_path / "work"
    common = ["find", str(store), "-t", "0.5", "-b", "1", "--output", "pairs", "--work-dir", str(work), "--keep-work"]
    code, default, stderr = run(*common)
    assert code == 0 and "resuming" not in stderr
    # another recall, another banding: nothing of the default's candidates is reused, and the answer is its own
    code, higher, stderr = run(*common, "--recall", "0.999")
    assert code == 0 and "resuming" not in stderr
    assert higher == run("find", str(store), "-t", "0.5", "-b", "1", "--output", "pairs", "--recall", "0.999")[1]
    # the same recall again resumes from its own kept stages
    code, again, stderr = run(*common, "--recall", "0.999")
    assert code == 0 and again == higher and stderr.startswith("resuming")
    # a recall that chooses the default's banding resumes from the default's scored candidates (its decisions,
    # which check a few more pairs below R0 above 0.99, are its own)
    same = dedup.find(store, dedup.FindOptions(threshold=0.5, bits=1, recall=0.9901)).banding
    assert same == dedup.find(store, dedup.FindOptions(threshold=0.5, bits=1)).banding
    code, resumed, stderr = run(*common, "--recall", "0.9901")
    assert code == 0 and stderr.startswith("resuming: scored candidate pairs from")
    assert resumed == run("find", str(store), "-t", "0.5", "-b", "1", "--output", "pairs", "--recall", "0.9901")[1]
