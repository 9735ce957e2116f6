"""The one find driver (dedup_cli/engine/find_driver.py) on a backend of its own: the steps in order, each kept in
the work folder and resumed from it in one place with one note, the result's common fields from the plan, and no
step run for stores without a live document. Both engines' backends are tested by the engines' answers
(tests/engines/test_find_plan.py, test_dask_find.py); this shows the driver owns completion and resume."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import dedup_cli as dedup
from dedup_cli.engine.find_driver import run_find
from dedup_cli.engine.resume import Resume, kept_verification, verification_arrays
from dedup_cli.engine.stages.plan import FindPlan, plan_find
from dedup_cli.engine.stages.results import FindResult
from dedup_cli.estimates.simultaneous import SimultaneousBound
from dedup_cli.params import SignatureParams
from dedup_cli.store.checkpoints import WorkDir
from dedup_cli.store.store import create_store
from dedup_cli.verification import Verification


@dataclass
class Scored:
    count: int
    oversized: int


@dataclass
class Decided:
    verification: Verification | None
    aliases: np.ndarray


class Toy:
    """A backend that records which of its steps ran, keeping its stages as the local engine does."""

    kept_by: dict[str, object] = {"toy": 1}

    def __init__(self, plan: FindPlan, work: WorkDir | None) -> None:
        self.plan, self.work, self.ran = plan, work, []

    def scores(self, resume: Resume, progress: Any) -> Scored:
        self.ran.append("scores")
        return Scored(3, 1)

    def keep_scores(self, scored: Scored, key: str) -> None:
        assert self.work is not None
        self.work.save("scored", key, {"count": np.array(scored.count), "oversized": np.array(scored.oversized)})

    def kept_scores(self, kept: dict[str, np.ndarray], key: str, progress: Any) -> Scored:
        return Scored(int(kept["count"]), int(kept["oversized"]))

    def decisions(self, scored: Scored, bound: SimultaneousBound, progress: Any) -> Decided:
        self.ran.append(f"decisions of {scored.count} bounded by {bound.candidates}")
        return Decided(Verification(np.empty(0), 2, ["gone"]), np.array([7]))

    def keep_decisions(self, decided: Decided, key: str) -> None:
        assert self.work is not None
        self.work.save("decisions", key, {"aliases": decided.aliases, **verification_arrays(decided.verification)})

    def kept_decisions(self, kept: dict[str, np.ndarray], key: str, scored: Scored, progress: Any) -> Decided:
        return Decided(kept_verification(kept), kept["aliases"])

    def conclusion(self, scored: Scored, decided: Decided, common: dict[str, Any], progress: Any) -> FindResult:
        self.ran.append("conclusion")
        self.common = common
        return "result"  # type: ignore[return-value]


class Notes:
    def __init__(self) -> None:
        self.notes: list[str] = []

    def stage(self, name: str, total: int | None = None, unit: str = "steps") -> Any:
        return lambda count: None

    def note(self, text: str) -> None:
        self.notes.append(text)


def test_the_driver_keeps_each_stage_and_resumes_it_in_one_place(tmp_path: Path) -> None:
    params = SignatureParams(num_perm=64, bits=8)
    store = create_store(tmp_path / "store", params)
    options = dedup.FindOptions(work_dir=str(tmp_path / "work"), keep_work=True)
    plan = plan_find(options, params, 10, 10, None, 5, (1, 1))
    runs = []
    for _ in range(2):
        backend, notes = Toy(plan, WorkDir(tmp_path / "work", [store])), Notes()
        assert run_find(backend, backend.work, notes) == "result"
        runs.append((backend.ran, notes.notes, backend.common))
    (first, first_notes, common), (again, again_notes, common_again) = runs
    assert first == ["scores", "decisions of 3 bounded by 3", "conclusion"] and first_notes == []
    work = tmp_path / "work"
    assert again == ["conclusion"]
    assert again_notes == [f"resuming: scored candidate pairs from {work}",
                           f"resuming: exact checks and decisions from {work}"]
    expected = plan.result_fields(3, 1, None, 1)
    for found in (common, common_again):
        checks = found.pop("verification")
        assert (checks.checked, checks.unverifiable_documents) == (2, ["gone"])
        assert found == {name: value for name, value in expected.items() if name != "verification"}
    # The engine's own fields are in the keys: another engine's kept stages are not read.
    other = Toy(plan, WorkDir(work, [store]))
    other.kept_by = {"toy": 2}
    run_find(other, other.work, Notes())
    assert other.ran[0] == "scores"


def test_no_live_document_runs_no_step(tmp_path: Path) -> None:
    params = SignatureParams(num_perm=64, bits=8)
    backend = Toy(plan_find(dedup.FindOptions(verify="all"), params, 0, 0, None, 0, None), None)
    result = run_find(backend, None, Notes())
    assert backend.ran == [] and result.pair_count == 0 and result.group_count == 0
    assert result.verification is not None and result.verification.checked == 0 and result.document_count == 0
