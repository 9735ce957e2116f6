"""Both engines follow one plan (dedup_cli/engine/stages/plan.py): the same decisions from the same store and options,
the same fields in the keys of the stages they keep in a work folder (the Dask engine adds its divisions), one
R0 − margin wherever find needs it, and kept stages reused by the next run of either engine, or recomputed when
their key does not match (work of another version).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from distributed import Client
from same_answers import assert_same_answers

import dedup_cli as dedup
from dedup_cli.candidates import candidate_triples
from dedup_cli.candidates.triple_recall import pair_recall_for_triples
from dedup_cli.engine.dask import find as dask_find
from dedup_cli.engine.local import find as local_find
from dedup_cli.engine.resume import Resume
from dedup_cli.engine.stages import conclude as conclude_stage
from dedup_cli.engine.stages import find as find_stages
from dedup_cli.engine.stages import plan as find_plan
from dedup_cli.engine.stages.find import decision_bound
from dedup_cli.engine.stages.plan import FindPlan, plan_find
from dedup_cli.estimates.densified import largest_sharing_factor
from dedup_cli.options.engine_choice import EngineOptions
from dedup_cli.params import SignatureParams
from dedup_cli.store.checkpoints import WorkDir
from dedup_cli.store.documents import NumberedDocuments
from dedup_cli.store.store import open_store

OPTION_SETS = [
    {},
    {"ways": 3, "bits": 2, "threshold": 0.4},
    {"bands": 20, "rows": 4, "verify": "all", "max_bucket": 5},
    {"new_since": 1, "only_across": False, "bits": 4},
    {"against": "reference", "only_across": True, "ways": 3, "bits": 2},
]


class Notes:
    """A progress that keeps what it is told besides the stages (the "resuming: …" notes)."""

    def __init__(self) -> None:
        self.notes: list[str] = []

    def stage(self, name: str, total: int | None = None, unit: str = "steps") -> Callable[[int], None]:
        return lambda count: None

    def note(self, text: str) -> None:
        self.notes.append(text)


def test_the_plan_decides_each_thing_once() -> None:
    params = SignatureParams(num_perm=256, bits=8)

    def planned(max_shingle_count: int = 10, **options: Any) -> FindPlan:
        return plan_find(dedup.FindOptions(**options), params, 1000, 990, None, max_shingle_count, (1, 3))

    pairs, threes, everything = planned(), planned(ways=3, bits=2), planned(candidates="all", bits=1)
    assert pairs.bits == 8 and threes.bits == 2 and everything.bits == 1
    # Triples ask more recall of each pair (the banding's target), and keep pairs down to R0 − margin.
    assert pairs.choice is not None and pairs.choice.recall_target == 0.99
    assert threes.choice is not None and threes.choice.recall_target == pair_recall_for_triples(0.99)
    # one permutation hashing (the default scheme): the margin of the noisiest pair, eq. D4 at the largest ψ
    sharing = largest_sharing_factor(256)
    assert threes.triple_floor == threes.pair_floor == candidate_triples.pair_floor(0.5, 256, 2, sharing=sharing) < 0.5
    assert threes.pair_floor < candidate_triples.pair_floor(0.5, 256, 2)
    assert pairs.triple_floor is None and everything.banding is None
    assert everything.depends_on("scored")["banding"] is None and everything.depends_on("scored")["method"] == "all"
    half = plan_find(dedup.FindOptions(bits=0.5), SignatureParams(num_perm=256, bits=1), 10, 10, None, 1, None)
    # b = 1/2 compares k/2 XOR bits of k bins
    assert half.pair_floor == candidate_triples.pair_floor(0.5, 128, 0.5, sharing=largest_sharing_factor(256))
    kperm = plan_find(dedup.FindOptions(ways=3, bits=2), dataclasses.replace(params, scheme="kperm"), 1000, 990,
                      None, 10, None)
    assert kperm.densification is None and kperm.pair_floor == candidate_triples.pair_floor(0.5, 256, 2)
    assert pairs.estimator == "b-bit, sparse limit (r ≈ 0)"
    dense = planned(max_shingle_count=params.universe // 100)
    assert dense.estimator == "b-bit with precise r = f/D (max r = 0.01)"
    assert pairs.result_fields(5, 0, None, 0)["reference_documents"] is None
    assert plan_find(dedup.FindOptions(), params, 1000, 990, 600, 10, None).result_fields(
        5, 0, None, 0)["reference_documents"] == 400
    with pytest.raises(ValueError, match="candidates"):
        pairs.depends_on("candidates")


def find_options(stores: dict[str, Path], options: dict[str, Any], **more: Any) -> dedup.FindOptions:
    named = dict(options)
    if "against" in named:
        named["against"] = str(stores[named["against"]])
    return dedup.FindOptions(**named, **more)


def opened(stores: dict[str, Path], options: dedup.FindOptions) -> list:
    store = open_store(stores["sample" if options.new_since is None else "grown"])
    return [store] if options.against is None else [store, open_store(options.against)]


def both_plans(stores: dict[str, Path], options: dedup.FindOptions, engine: EngineOptions
               ) -> tuple[FindPlan, FindPlan, tuple[int, ...]]:
    """The local engine's plan, the Dask engine's (and its frames' divisions) for the same store and options."""
    chosen = opened(stores, options)
    with NumberedDocuments(chosen) as documents:
        local_plan = local_find.plan_documents(documents, options)
    remote = dataclasses.replace(options, engine=engine)
    frames = dask_find.read_numbered(chosen[0], chosen[1] if len(chosen) > 1 else None)
    return local_plan, dask_find.plan_numbered(frames, remote), frames.divisions


@pytest.mark.parametrize("options", OPTION_SETS, ids=[str(i) for i in range(len(OPTION_SETS))])
def test_both_engines_plan_the_same_find(stores: dict[str, Path], engine: EngineOptions, client: Client,
                                         options: dict[str, Any]) -> None:
    chosen = find_options(stores, options)
    local_plan, dask_plan, divisions = both_plans(stores, chosen, engine)
    assert dataclasses.replace(dask_plan, options=chosen) == local_plan  # all but the engine named
    assert local_plan.documents > 0 and local_plan.eligible > 0 and local_plan.banding is not None
    assert (local_plan.reference_start is None) == (chosen.against is None)
    for stage in find_plan.KEPT_STAGES:
        common = local_plan.depends_on(stage)
        assert dask_plan.depends_on(stage) == common
        assert dask_plan.depends_on(stage, divisions=divisions) == {**common, "divisions": divisions}
    assert set(local_plan.depends_on("decisions")) - set(local_plan.depends_on("scored")) == {"verify"}
    fields = local_plan.result_fields(7, 1, None, 2)
    assert dask_plan.result_fields(7, 1, None, 2) == {**fields, "against": chosen.against}


def test_the_triple_floor_is_one_number_in_every_place(stores: dict[str, Path], engine: EngineOptions,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """R0 − margin reaches the comparison of every pair and the triangles of both engines' ends from the plan, and
    the Dask engine gathers exactly the pairs the local engine keeps for triples with it."""
    options = find_options(stores, {"ways": 3, "bits": 2, "threshold": 0.4})
    with NumberedDocuments(opened(stores, options)) as documents:
        plan = local_find.plan_documents(documents, options)
    expected = 0.4 - candidate_triples.pair_margin(0.4, documents.params.num_perm, 2,
                                                   sharing=largest_sharing_factor(documents.params.permutations))
    assert plan.pair_floor == plan.triple_floor == expected
    floors: dict[str, list[float | None]] = {"every pair": [], "triples": [], "scored": []}
    every_pair, original_triples, conclude = (find_stages.every_pair_candidates, conclude_stage.candidate_triples,
                                               dask_find.conclude)

    def every_pair_spy(values: np.ndarray, bits: float, floor: float, *args: Any, **named: Any) -> Any:
        floors["every pair"].append(floor)
        return every_pair(values, bits, floor, *args, **named)

    def triples_spy(*args: Any, floor: float | None = None, **named: Any) -> Any:
        floors["triples"].append(floor)
        return original_triples(*args, floor=floor, **named)

    gathered: list[int] = []

    def conclude_spy(store: Any, values: Any, r: Any, scored: Any, *args: Any) -> Any:
        gathered.append(int(scored.first.size))
        return conclude(store, values, r, scored, *args)

    monkeypatch.setattr(find_stages, "every_pair_candidates", every_pair_spy)
    monkeypatch.setattr(conclude_stage, "candidate_triples", triples_spy)
    monkeypatch.setattr(dask_find, "conclude", conclude_spy)
    found = {name: dedup.find(stores["sample"], dataclasses.replace(options, **more)) for name, more in
             (("lsh", {}), ("all", {"candidates": "all"}), ("dask", {"engine": engine}))}
    assert floors["every pair"] == [expected]
    assert floors["triples"] == [expected] * 3  # local lsh, local all, Dask gathered
    # The Dask engine gathered the accepted pairs and those at or above the floor: as many as the local engine's.
    stores_found = opened(stores, options)
    with NumberedDocuments(stores_found) as documents:
        backend = local_find.LocalFind(documents, options, stores_found, None)
        scores = backend.scores(Resume(None, Notes().note), Notes())
        decisions = backend.decisions(scores, decision_bound(plan, scores.count), Notes())
    above = scores.scored.estimate >= expected
    assert np.count_nonzero(above & ~decisions.decided) > 0  # the floor matters here
    assert gathered == [int(np.count_nonzero(above | decisions.decided))]
    assert found["lsh"].triple_count
    assert_same_answers(found["lsh"], found["dask"])


@pytest.mark.parametrize("on", ["local", "dask"])
def test_a_kept_stage_is_reused_by_the_next_run(stores: dict[str, Path], engine: EngineOptions, client: Client,
                                                tmp_path: Path, on: str) -> None:
    """Each engine's scored pairs and decisions kept by one run are read back by the next, which writes the same
    answer; their files are named by the plan's fields (and the Dask engine's divisions)."""
    work = tmp_path / "work"
    more = {} if on == "local" else {"engine": engine}
    options = dedup.FindOptions(ways=3, bits=2, verify="all", threshold=0.4, work_dir=str(work), keep_work=True,
                                **more)
    first, again = Notes(), Notes()
    clean = dedup.find(stores["sample"], options, progress=first)
    assert not any(note.startswith("resuming: scored") for note in first.notes)
    kept = sorted(path.name for path in work.iterdir())
    assert any(name.startswith("scored-") for name in kept) and any(name.startswith("decisions-") for name in kept)
    resumed = dedup.find(stores["sample"], options, progress=again)
    assert again.notes[-2:] == [f"resuming: scored candidate pairs from {work}",
                                f"resuming: exact checks and decisions from {work}"]
    assert_same_answers(clean, resumed)
    assert sorted(path.name for path in work.iterdir()) == kept  # nothing new written
    store = open_store(stores["sample"])
    with NumberedDocuments([store]) as documents:
        plan = local_find.plan_documents(documents, dataclasses.replace(options, engine=EngineOptions()))
    extra = {} if on == "local" else {"divisions": dask_find.read_numbered(store, None).divisions}
    for stage in find_plan.KEPT_STAGES:
        assert f"{stage}-{WorkDir(work, [store]).key(stage, **plan.depends_on(stage, **extra))}.npz" in kept


@pytest.mark.parametrize("first_limit", ["on the workers", "in the driver"])
def test_decisions_kept_one_way_are_resumed_the_other(stores: dict[str, Path], engine: EngineOptions,
                                                      tmp_path: Path, first_limit: str) -> None:
    """The Dask engine's decisions kept by a run that decided on the workers (scored pairs past --gather-limit)
    are read back by one that decides in the driver, and the reverse: one format, partitioned alike."""
    work = tmp_path / "work"
    options = dedup.FindOptions(engine=engine, ways=3, bits=2, verify="all", threshold=0.4, work_dir=str(work),
                                keep_work=True)
    clean = dedup.find(stores["sample"], dataclasses.replace(options, work_dir=None, keep_work=False))
    needed = int(clean.profile["needed_pairs"])
    assert clean.profile["decisions_in_driver"] == 1.0 and needed < clean.candidates
    limits = {"on the workers": needed, "in the driver": options.gather_limit}
    first = dedup.find(stores["sample"], dataclasses.replace(options, gather_limit=limits[first_limit]))
    other = "in the driver" if first_limit == "on the workers" else "on the workers"
    notes = Notes()
    resumed = dedup.find(stores["sample"], dataclasses.replace(options, gather_limit=limits[other]), progress=notes)
    assert f"resuming: exact checks and decisions from {work}" in notes.notes
    assert resumed.profile["decisions_in_driver"] == (1.0 if other == "in the driver" else 0.0)
    for result in (first, resumed):
        assert_same_answers(clean, result)


@pytest.mark.parametrize("on", ["local", "dask"])
def test_work_kept_under_other_keys_is_recomputed_not_read(stores: dict[str, Path], engine: EngineOptions,
                                                           tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           on: str) -> None:
    """Work kept by a version whose keys had other fields (here: one field more) is not found under this
    version's keys: the run computes every stage again, without an error, and writes the clean run's answer."""
    work = tmp_path / "work"
    more = {} if on == "local" else {"engine": engine}
    options = dedup.FindOptions(bits=2, verify="all", threshold=0.4, work_dir=str(work), keep_work=True, **more)
    clean = dedup.find(stores["sample"], dataclasses.replace(options, work_dir=None, keep_work=False))
    depends_on = FindPlan.depends_on

    def older(plan: FindPlan, stage: str, **engine_fields: object) -> dict[str, object]:
        return {**depends_on(plan, stage, **engine_fields), "engine": on}

    with monkeypatch.context() as patch:
        patch.setattr(FindPlan, "depends_on", older)
        dedup.find(stores["sample"], options)
    old = {path.name for path in work.iterdir() if path.name.startswith(("scored-", "decisions-"))}
    assert old
    notes = Notes()
    recomputed = dedup.find(stores["sample"], options, progress=notes)
    assert not any(note.startswith(("resuming: scored", "resuming: exact")) for note in notes.notes)
    assert_same_answers(clean, recomputed)
    new = {path.name for path in work.iterdir() if path.name.startswith(("scored-", "decisions-"))} - old
    assert {name.split("-")[0] for name in new} == {"scored", "decisions"}
