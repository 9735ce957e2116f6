"""find --engine dask writes what --engine local writes, byte for byte, for every output, format and option.

Stores: the bundled corpora signed in one run (ids in order: the pieces are numbered where they lie), the same
grown by incremental runs with changes and removals (parts interleave ids: the rows are sorted on the cluster), and
a format 1 file. Each option set runs once per engine; every output kind is then written in every format from
both results and compared.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from helpers import REPO, planted_families
from same_answers import assert_same_answers, without_time

import dedup_cli as dedup
from dedup_cli.cli.main import cli
from dedup_cli.cli.summaries import find_store_line, find_summary
from dedup_cli.engine import optional_engines
from dedup_cli.engine.dask import candidates as dask_candidates
from dedup_cli.engine.dask import end_on_workers, id_sort
from dedup_cli.engine.dask import exchange as dask_exchange
from dedup_cli.engine.stages.results import find_records
from dedup_cli.estimates.simultaneous import SimultaneousBound
from dedup_cli.options.engine_choice import EngineOptions
from dedup_cli.store.store_pieces import store_pieces

SAMPLES = REPO / "sample_corpora"


CASES = [  # each a path of the Dask engine: the option semantics themselves are the local engine's tests
    ("sample", {}),
    ("sample", {"ways": 3, "bits": 4, "group": "strict", "keep": "longest"}),
    ("sample", {"group": "strict", "keep": "shortest", "bits": 1, "threshold": 0.6}),
    ("sample", {"verify": "all", "threshold": 0.3}),
    ("sample", {"verify": "none", "bits": 2, "bands": 20, "rows": 4}),
    ("sample", {"max_bucket": 2, "threshold": 0.4}),
    ("grown", {"new_since": 1, "threshold": 0.4}),
    ("grown", {"new_since": 2, "ways": 3, "group": "strict", "bits": 2}),
    ("grown", {"keep": "newest", "threshold": 0.4}),
    ("legacy", {"threshold": 0.5, "bits": 2}),
]


@pytest.mark.parametrize(("store", "options"), CASES, ids=[f"{s}-{'-'.join(map(str, o.values())) or 'default'}"
                                                           for s, o in CASES])
def test_both_engines_write_the_same_bytes(stores: dict[str, Path], engine: EngineOptions, store: str,
                                           options: dict) -> None:
    path = stores[store]
    local = dedup.find(path, dedup.FindOptions(**options))
    remote = dedup.find(path, dedup.FindOptions(engine=engine, **options))
    assert_same_answers(local, remote)
    assert without_time(find_summary(str(path), remote)) == without_time(find_summary(str(path), local))
    assert find_store_line(str(path), remote) == find_store_line(str(path), local)
    assert len(remote.store) < len(local.store) or store == "legacy"  # only the documents reported were gathered


def test_the_command_line_writes_the_same_file(stores: dict[str, Path], engine: EngineOptions,
                                               tmp_path: Path) -> None:
    runner = CliRunner()
    common = ["find", str(stores["grown"]), "--ways", "3", "--bits", "2", "--output", "triples", "--format", "tsv"]
    local = runner.invoke(cli, [*common, "-o", str(tmp_path / "local.tsv")])
    remote = runner.invoke(cli, [*common, "-o", str(tmp_path / "dask.tsv"), "--engine", "dask", "--scheduler",
                                 str(engine.scheduler)])
    assert local.exit_code == remote.exit_code == 0, remote.output
    assert (tmp_path / "dask.tsv").read_bytes() == (tmp_path / "local.tsv").read_bytes()
    assert (tmp_path / "local.tsv").read_text().count("\n") > 1
    assert without_time(remote.stderr) == without_time(local.stderr)


def test_the_scheduler_comes_from_the_environment(stores: dict[str, Path], engine: EngineOptions) -> None:
    runner = CliRunner()
    arguments = ["find", str(stores["sample"]), "--output", "pairs", "-q"]
    remote = runner.invoke(cli, [*arguments, "--engine", "dask"], env={"DEDUP_SCHEDULER": str(engine.scheduler)})
    assert remote.exit_code == 0, remote.output
    assert remote.stdout == runner.invoke(cli, arguments).stdout


def test_every_pair_is_refused_on_the_cluster(stores: dict[str, Path]) -> None:
    result = CliRunner().invoke(cli, ["find", str(stores["sample"]), "--candidates", "all", "--engine", "dask"])
    assert result.exit_code == 2
    assert result.stderr.strip() == ("Error: --candidates all compares every pair in one process; use --candidates "
                                     "lsh with --engine dask, or --engine local")


@pytest.mark.parametrize("sorted_on", [None, "store", "both"])
def test_against_a_reference_store_the_records_are_the_local_engines(stores: dict[str, Path], engine: EngineOptions,
                                                                     monkeypatch: pytest.MonkeyPatch,
                                                                     sorted_on: str | None) -> None:
    """The store's documents are numbered before the reference's, as the local engine numbers them: every record
    (with the store of each id), gathered or streamed from the cluster; whether the driver numbers both stores,
    or one or both are past its limit and sorted on the cluster."""
    if sorted_on is not None:
        rows = {name: sum(piece.rows for piece in store_pieces(dedup.open_store(stores[name]))[0])
                for name in ("grown", "reference")}
        assert rows["grown"] > rows["reference"]
        monkeypatch.setattr(id_sort, "NUMBERED_IN_DRIVER", 0 if sorted_on == "both" else rows["reference"])
    options = {"against": str(stores["reference"]), "only_across": True, "ways": 3, "bits": 2}
    local = dedup.find(stores["grown"], dedup.FindOptions(**options))
    assert local.pair_count > 40
    assert sum(record["store_b"] == "reference" for record in find_records("pairs", local)) > 10
    # Gathered and streamed from the cluster; a store sorted on the cluster, gathered (the end is the same code).
    for gather_limit in (None, 40) if sorted_on is None else (None,):
        limit = {} if gather_limit is None else {"gather_limit": gather_limit}
        remote = dedup.find(stores["grown"], dedup.FindOptions(engine=engine, **options, **limit))
        assert (remote.streamed is not None) == (gather_limit is not None)
        assert_same_answers(local, remote)
        assert remote.reference_documents == local.reference_documents


def test_decisions_in_the_driver_or_on_the_workers_are_the_local_engines(engine: EngineOptions,
                                                                        tmp_path: Path) -> None:
    """Scored pairs within --gather-limit are decided in the driver (exact checks and file checks as tasks on the
    workers); beyond it by shuffles on the workers, the end gathered or not: the same records, checks and
    aliases (a file under a second name, by a symbolic and a hard link) every way."""
    corpus = tmp_path / "corpus"
    shutil.copytree(SAMPLES / "licenses", corpus)
    first = sorted(corpus.glob("*.txt"))[0]
    (corpus / "zz-symbolic.txt").symlink_to(first)
    os.link(first, corpus / "zz-hard.txt")
    store = tmp_path / "store.parquet"
    dedup.sign([str(corpus)], store, dedup.SignOptions(input=dedup.InputOptions(exclude=("SOURCE",))))
    options = {"threshold": 0.3, "verify": "all", "bits": 2}
    local = dedup.find(store, dedup.FindOptions(**options))
    assert local.aliases == 2 and local.verification is not None and local.verification.checked > 0
    in_driver = dedup.find(store, dedup.FindOptions(engine=engine, **options))
    needed = int(in_driver.profile["needed_pairs"])
    assert in_driver.profile["decisions_in_driver"] == 1.0 and needed < in_driver.candidates
    on_workers = dedup.find(store, dedup.FindOptions(engine=engine, gather_limit=needed, **options))
    assert on_workers.profile["decisions_in_driver"] == 0.0 and on_workers.streamed is None
    for remote in (in_driver, on_workers):
        assert_same_answers(local, remote)


@pytest.mark.parametrize(("store", "options"), [
    ("sample", {"ways": 3, "bits": 2}),
    ("grown", {"new_since": 1, "threshold": 0.4}),
    ("grown", {"against": "reference", "only_across": True, "bits": 2}),
], ids=["triples", "new-since", "only-across"])
def test_scores_with_or_without_shuffles_are_the_local_engines(stores: dict[str, Path], engine: EngineOptions,
                                                               store: str, options: dict,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Codes in one partition are scored without a shuffle; in several (partitions of 20 codes here), by two
    range joins: the same scores either way, the pairs the local engine leaves out left out too."""
    if "against" in options:
        options = {**options, "against": str(stores[options["against"]])}
    local = dedup.find(stores[store], dedup.FindOptions(**options))
    assert local.candidates > 40
    unshuffled = dedup.find(stores[store], dedup.FindOptions(engine=engine, **options))
    monkeypatch.setattr(dask_candidates, "ROWS_PER_PARTITION", 20)
    shuffled = dedup.find(stores[store], dedup.FindOptions(engine=engine, **options))
    for remote in (unshuffled, shuffled):
        assert_same_answers(local, remote)


@pytest.mark.parametrize("gather", [[], ["--gather-limit", "0"]], ids=["gathered", "on-the-workers"])
def test_a_store_numbered_on_the_cluster_through_the_command_line(stores: dict[str, Path], engine: EngineOptions,
                                                                  tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  gather: list[str]) -> None:
    """A store past what the driver numbers (the limit lowered to nothing) has its ids sorted on the cluster: a
    store of three runs with a change, additions and a prune writes the local engine's bytes and says the same; with
    every exchange run in two stages too, as a very large cluster's are (pieces and ranges of 50 rows, so that the
    exchanges have parts enough to be staged)."""
    monkeypatch.setattr(id_sort, "NUMBERED_IN_DRIVER", 0)
    monkeypatch.setattr(id_sort.store_documents, "__defaults__", (50,))
    monkeypatch.setattr(dask_exchange, "STAGED_TASKS", 1)
    # The stages call the exchange again through its module (the stages' own calls hold the name they imported):
    # every call seen here is a stage of a staged exchange.
    staged: list[tuple[int, int]] = []
    real_exchange = dask_exchange.exchange

    def stage(sources: list, route: object, parts: int, *args: object, **named: object) -> list:
        staged.append((len(sources), parts))
        return real_exchange(sources, route, parts, *args, **named)  # type: ignore[arg-type]

    monkeypatch.setattr(dask_exchange, "exchange", stage)
    common = ["find", str(stores["grown"]), "-t", "0.4", "--ways", "3", "--output", "members", "--format", "tsv"]
    local = CliRunner().invoke(cli, [*common, "-o", str(tmp_path / "local.tsv")])
    remote = CliRunner().invoke(cli, [*common, "-o", str(tmp_path / "dask.tsv"), "--engine", "dask", "--scheduler",
                                      str(engine.scheduler), *gather])
    assert local.exit_code == remote.exit_code == 0, remote.stderr
    assert (tmp_path / "dask.tsv").read_bytes() == (tmp_path / "local.tsv").read_bytes()
    assert (tmp_path / "local.tsv").read_text().count("\n") > 20
    assert without_time(remote.stderr) == without_time(local.stderr)
    assert staged  # some exchanges ran in two stages


def test_against_through_the_command_line(stores: dict[str, Path], engine: EngineOptions, tmp_path: Path) -> None:
    common = ["find", str(stores["sample"]), "--against", str(stores["reference"]), "--keep", "longest", "--output",
              "groups", "--format", "tsv"]
    local = CliRunner().invoke(cli, [*common, "-o", str(tmp_path / "local.tsv")])
    remote = CliRunner().invoke(cli, [*common, "-o", str(tmp_path / "dask.tsv"), "--engine", "dask", "--scheduler",
                                      str(engine.scheduler)])
    assert local.exit_code == remote.exit_code == 0, remote.stderr
    assert (tmp_path / "dask.tsv").read_bytes() == (tmp_path / "local.tsv").read_bytes()
    assert (tmp_path / "local.tsv").read_text().count("\treference") > 10
    assert without_time(remote.stderr) == without_time(local.stderr) and " against " in local.stderr


@pytest.mark.parametrize(("arguments", "message"), [
    (["--workers", "2"], "Error: --workers applies to --engine dask"),
    (["--engine", "dask", "--scheduler", "tcp://127.0.0.1:1", "--memory-limit", "1GiB"],
     "Error: --memory-limit sets up a local cluster; the cluster at --scheduler has its own workers"),
    (["--engine", "dask", "--memory-limit", "lots"],
     "Error: --memory-limit 'lots' is not an amount of memory; write e.g. 2GiB, 1.5GB or auto"),
])
def test_cluster_options_are_checked_before_any_work(stores: dict[str, Path], arguments: list[str],
                                                     message: str) -> None:
    result = CliRunner().invoke(cli, ["find", str(stores["sample"]), *arguments])
    assert result.exit_code == 2 and result.stderr.strip() == message


def test_an_unreachable_scheduler_is_one_line(stores: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    from dedup_cli.engine.dask import cluster

    monkeypatch.setattr(cluster, "CONNECT_SECONDS", 1)
    result = CliRunner().invoke(cli, ["find", str(stores["sample"]), "--engine", "dask", "--scheduler",
                                      "tcp://127.0.0.1:9"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.stderr.startswith("Error: cannot connect to the Dask scheduler at tcp://127.0.0.1:9 (")
    assert result.stderr.rstrip().endswith("start one with: dask scheduler, or leave --scheduler out for a local "
                                           "cluster")


def test_without_the_extra_the_engine_says_how_to_install_it(stores: dict[str, Path], tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    real = optional_engines.importlib.util.find_spec
    monkeypatch.setattr(optional_engines.importlib.util, "find_spec",
                        lambda name, *rest: None if name == "distributed" else real(name, *rest))
    new = tmp_path / "new.parquet"
    for command in (["find", str(stores["sample"])], ["sign", str(SAMPLES / "licenses"), "-o", str(new)]):
        result = CliRunner().invoke(cli, [*command, "--engine", "dask"])
        assert result.exit_code == 1
        assert result.stderr == ("Error: --engine dask needs the dask extra (distributed not installed); install it "
                                 "with: pip install 'dedup-cli[dask]'\n")
    assert not new.exists()


@pytest.mark.parametrize(("store", "options"), [
    ("sample", {"ways": 3, "bits": 2}),
    ("sample", {"group": "strict", "verify": "all", "threshold": 0.3}),
    ("grown", {"new_since": 1, "ways": 3, "group": "strict", "threshold": 0.4}),
], ids=["triples", "strict", "new-since"])
def test_many_edges_end_per_component_on_the_workers(stores: dict[str, Path], engine: EngineOptions, store: str,
                                                     options: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    # Nothing is gathered: components on the cluster, then output sorted there in chunks of 15 rows (the floor of
    # a chunk lowered, so that a small store's few hundred pairs make several).
    monkeypatch.setattr(end_on_workers, "MIN_PAIRS_PER_PARTITION", 1)
    local = dedup.find(stores[store], dedup.FindOptions(**options))
    remote = dedup.find(stores[store], dedup.FindOptions(engine=engine, gather_limit=15, **options))
    assert remote.streamed is not None and len(list(remote.streamed.chunks("pairs"))) > 2
    assert_same_answers(local, remote)
    assert (remote.pair_count, remote.group_count, remote.triple_count) == (local.pair_count, local.group_count,
                                                                           local.triple_count)


# --- the command line writes what the result holds, gathered or streamed ------------------------------------------


def test_pairs_the_bound_for_every_candidate_cannot_clear_are_checked_alike(engine: EngineOptions,
                                                                           tmp_path: Path) -> None:
    """With about every pair a candidate (16 one-bit values, one per band) some accepted pairs clear R0 by their
    per-pair interval but not by the bound for all the candidates at once: both engines check those exactly,
    count the same candidates for the bound, and write the same bytes."""
    corpus = tmp_path / "corpus"
    planted_families(corpus, 40, 4, (0.0, 0.15), seed=5)
    store = tmp_path / "store.parquet"
    dedup.sign([str(corpus)], store, dedup.SignOptions(num_perm=16, bits=1))
    options = {"threshold": 0.5, "bands": 16, "rows": 1}
    local = dedup.find(store, dedup.FindOptions(**options))
    accepted = local.accepted
    bound = SimultaneousBound(local.bits, 16, local.candidates)
    unsure = bound.unsure(0.5, accepted.estimate, accepted.ci_low, accepted.matches, accepted.r1, accepted.r2)
    assert unsure.any() and not np.isnan(local.exact[unsure]).any()
    for gather_limit in (10**9, 0):  # decided in the driver, and on the workers
        assert_same_answers(local, dedup.find(store, dedup.FindOptions(engine=engine, gather_limit=gather_limit,
                                                                       **options)))


def test_a_higher_recall_chooses_and_checks_alike(engine: EngineOptions, tmp_path: Path) -> None:
    """--recall 0.999: both engines choose the same banding (one planner) and check the same pairs estimated just
    below R0 that the recall rescues, deciding in the driver or on the workers."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for index in range(150):  # pairs just above R0 = 0.5 (139 of 200 words shared: R = 0.53)
        words = [f"p{index}w{i}" for i in range(200)]
        (corpus / f"{index:03d}a.txt").write_text(" ".join(words))
        (corpus / f"{index:03d}b.txt").write_text(" ".join(words[:139] + [f"p{index}x{i}" for i in range(61)]))
    store = tmp_path / "store.parquet"
    dedup.sign([str(corpus)], store, dedup.SignOptions(num_perm=64, shingle_size=1, jobs=1))
    options = {"threshold": 0.5, "bits": 1, "recall": 0.999}
    local = dedup.find(store, dedup.FindOptions(**options))
    default = dedup.find(store, dedup.FindOptions(threshold=0.5, bits=1))
    assert local.banding != default.banding
    accepted = local.accepted
    assert (accepted.ci_high < 0.5).any()  # a pair its interval put below R0, checked and found above
    for gather_limit in (10**9, 0):
        remote = dedup.find(store, dedup.FindOptions(engine=engine, gather_limit=gather_limit, **options))
        assert remote.banding == local.banding
        assert_same_answers(local, remote)


def test_triples_are_checked_alike_per_component(engine: EngineOptions, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Triples of planted families (b = 2, R0 = 0.5, strict groups): the triples the bound for all candidate
    triples at once cannot clear are checked exactly, and so are they when the Dask engine ends per component on
    its workers (each part counting its candidate triples for the run's bound first) or in the driver."""
    monkeypatch.setattr(end_on_workers, "MIN_PAIRS_PER_PARTITION", 1)
    corpus = tmp_path / "corpus"
    planted_families(corpus, 60, 6, (0.0, 0.12), seed=11)
    store = tmp_path / "store.parquet"
    dedup.sign([str(corpus)], store, dedup.SignOptions(bits=2))
    options = {"threshold": 0.5, "ways": 3, "group": "strict"}
    local = dedup.find(store, dedup.FindOptions(**options))
    triples = local.accepted_triples
    assert triples is not None
    by_the_bound = (triples.ci_low >= 0.5) & ~np.isnan(triples.exact)
    assert by_the_bound.any()
    for gather_limit in (10**9, 15):
        remote = dedup.find(store, dedup.FindOptions(engine=engine, gather_limit=gather_limit, **options))
        assert_same_answers(local, remote)


def test_triples_estimated_below_the_threshold_are_checked_alike(engine: EngineOptions, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Triples whose 3-way interval straddles R0 but whose estimate is below it are checked exactly under the
    default --verify borderline, and reported when the exact 3-way resemblance reaches R0, by both engines alike;
    without checks only the estimate decides."""
    monkeypatch.setattr(end_on_workers, "MIN_PAIRS_PER_PARTITION", 1)
    corpus = tmp_path / "corpus"
    planted_families(corpus, 30, 4, (0.02, 0.05), seed=7)
    store = tmp_path / "store.parquet"
    dedup.sign([str(corpus)], store, dedup.SignOptions(bits=2, num_perm=128))
    options = {"threshold": 0.5, "ways": 3, "bits": 2}
    local = dedup.find(store, dedup.FindOptions(**options))
    triples = local.accepted_triples
    assert triples is not None
    rescued = (triples.estimate < 0.5) & (triples.exact >= 0.5)
    assert rescued.any() and (triples.ci_high[rescued] >= 0.5).all()
    assert ((triples.estimate >= 0.5) | (triples.exact >= 0.5)).all()
    unchecked = dedup.find(store, dedup.FindOptions(verify="none", **options)).accepted_triples
    assert unchecked is not None and (unchecked.estimate >= 0.5).all()
    for gather_limit in (10**9, 15):
        remote = dedup.find(store, dedup.FindOptions(engine=engine, gather_limit=gather_limit, **options))
        assert_same_answers(local, remote)


def test_eval_on_the_dask_engine_is_the_local_engines_report(stores: dict[str, Path], engine: EngineOptions) -> None:
    """eval reaches the Dask engine through the engine interface, which measures in this process with the local
    engine's stages: the same report (every field of its JSON record, the seconds aside) and the same summary."""
    from dedup_cli.cli.eval_report import eval_record, eval_summary

    options = dedup.EvalOptions(dedup.FindOptions(threshold=0.5, bits=2), sample=200, seed=3)
    local = dedup.evaluate(stores["sample"], options)
    remote = dedup.evaluate(stores["sample"], dedup.EvalOptions(dedup.FindOptions(threshold=0.5, bits=2,
                                                                                  engine=engine),
                                                                sample=200, seed=3))
    local_record, remote_record = eval_record(local), eval_record(remote)
    for record in (local_record, remote_record):
        record.pop("seconds", None)
    assert remote_record == local_record
    assert [without_time(line) for line in eval_summary(remote)] == [without_time(line) for line in eval_summary(local)]


def test_texts_in_memory_are_searched_by_the_local_engine(engine: EngineOptions) -> None:
    """find_duplicates reaches its engine through the interface; the Dask engine is refused for texts in memory
    (no worker can read them), with a message naming the engine."""
    text = "the quick brown fox jumps over the lazy dog and runs far away into the green hills"
    texts = [text, "an entirely different sentence about signatures, stores and clusters of workers", text]
    with pytest.raises(dedup.OptionError, match="texts in memory are searched by the local engine"):
        dedup.find_duplicates(texts, dedup.FindOptions(engine=engine))
    assert [(pair.id_a, pair.id_b) for pair in dedup.find_duplicates(texts).pairs()] == [("0", "2")]
