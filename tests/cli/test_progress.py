"""What a long find or eval shows while it runs: each stage on stderr when it is a terminal, nothing otherwise.

The stages are drawn by tqdm on a pseudo-terminal of 100 columns (a real terminal's stand-in: a pty of no size
would give tqdm no room); ``--band-memory`` forces the candidate stage into several rounds on a small store."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import REPO, on_a_terminal

import dedup_cli as dedup
from dedup_cli.cli.main import cli


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("progress") / "sigs"
    result = CliRunner().invoke(cli, ["sign", str(REPO / "sample_corpora"), "--exclude", "SOURCE", "-o", str(path),
                                      "-q"])
    assert result.exit_code == 0, result.stderr
    return path


def test_find_shows_each_stage_on_a_terminal(store: Path) -> None:
    code, shown = on_a_terminal("find", str(store), "--band-memory", "20KiB", "--output", "pairs")
    assert code == 0
    # Bands of three 16-bit rows (a new store's; 41 for the sample corpora's one-shingle documents), two a round in
    # 20 KiB
    banding = dedup.find(str(store), dedup.FindOptions(threshold=0.5, bits=2, verify="none")).banding
    assert banding is not None
    rounds = -(-banding.bands // 2)
    stages = ["numbering the documents", f"candidates, bands 1–2 (round 1 of {rounds})", f"round {rounds} of {rounds}",
              "reading the candidates' documents", "scoring", "exact checks", "groups", "writing"]
    positions = [shown.find(stage) for stage in stages]
    assert -1 not in positions and positions == sorted(positions), shown[-2000:]
    assert " steps/s]" in shown and " records/s]" in shown  # counted stages are bars
    assert shown.rstrip().splitlines()[-1].startswith(f"{store}: ")  # the summary, after the bars are cleared


def test_quiet_or_not_a_terminal_shows_no_stage(store: Path) -> None:
    code, shown = on_a_terminal("find", str(store), "--band-memory", "20KiB", "-q")
    assert code == 0 and shown == ""
    piped = subprocess.run([sys.executable, "-m", "dedup_cli", "find", str(store), "--band-memory", "20KiB"],
                           capture_output=True, text=True, timeout=120)
    assert piped.returncode == 0 and "candidates, bands" not in piped.stderr
    assert piped.stderr.count("\n") == 1  # the summary only


def test_eval_shows_its_stages(store: Path) -> None:
    code, shown = on_a_terminal("eval", str(store), "-t", "0.5", "-b", "2", "--sample", "200")
    assert code == 0
    # find's banding, chosen for the store's shortest documents (a sample corpus holds one-shingle documents)
    banding = dedup.find(str(store), dedup.FindOptions(threshold=0.5, bits=2, verify="none")).banding
    assert banding is not None
    for stage in ("reading the store", f"candidates, {banding.bands}×{banding.rows} bands", "re-reading the",
                  "measuring"):
        assert stage in shown, shown[-2000:]


def test_rounds_of_bands_change_nothing(store: Path) -> None:
    common = ["find", str(store), "--output", "pairs", "--format", "tsv", "--ways", "3", "--bits", "2"]
    whole = CliRunner().invoke(cli, common)
    rounds = CliRunner().invoke(cli, [*common, "--band-memory", "4KiB"])  # a band a round
    assert whole.exit_code == rounds.exit_code == 0
    assert rounds.stdout == whole.stdout and whole.stdout.count("\n") > 50
