"""``find``, once for every engine: plan → candidates → scores → decisions → conclude → result.

The driver (:func:`run_find`) runs the steps in order, keeps each in ``--work-dir`` when it completes and resumes it
from there (:class:`dedup_cli.engine.resume.Resume`: the key, the look-up, the note and the commit, in one place),
and builds the result's common fields from the plan. An engine says only where the work runs and where its tables
meet, by implementing :class:`FindBackend`: the local engine holds the candidates' documents in this process and
runs the stages in forked workers (:class:`dedup_cli.engine.local.find.LocalFind`); the Dask engine holds tables
in parts on its workers and meets them by exchanges (:class:`dedup_cli.engine.dask.find.DaskFind`). The rules of
each step are the shared stages' (:mod:`dedup_cli.engine.stages`), which both backends call; neither backend knows
whether a step was computed or read back, and neither runs another's step.

So a step never knows its runner (datatrove's pipeline steps and their executors), and the algorithm is written
once against a small storage interface (datasketch's LSH and its storage backends): what varies is
:class:`FindBackend`.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

import numpy as np

from dedup_cli.engine.progress import Progress
from dedup_cli.engine.resume import Resume
from dedup_cli.engine.stages.conclude import nothing_found
from dedup_cli.engine.stages.find import decision_bound
from dedup_cli.engine.stages.plan import FindPlan
from dedup_cli.engine.stages.results import FindResult
from dedup_cli.estimates.simultaneous import SimultaneousBound
from dedup_cli.store.checkpoints import WorkDir
from dedup_cli.verification import Verification


class ScoredStage(Protocol):
    """What a backend's scored stage holds, as the driver reads it: the candidate pairs scored and the buckets
    cut."""

    @property
    def count(self) -> int: ...

    @property
    def oversized(self) -> int: ...


class DecidedStage(Protocol):
    """What a backend's decisions stage holds, as the driver reads it: the exact checks done and the aliases left
    out."""

    @property
    def verification(self) -> Verification | None: ...

    @property
    def aliases(self) -> np.ndarray: ...


Scored = TypeVar("Scored", bound=ScoredStage)
Decided = TypeVar("Decided", bound=DecidedStage)
Arrays = dict[str, np.ndarray]


class FindBackend(Protocol[Scored, Decided]):
    """Where ``find``'s work runs and where its tables meet: what an engine implements for :func:`run_find`.

    Attributes:
        plan: the plan of the find (:mod:`dedup_cli.engine.stages.plan`), the same for every engine.
        kept_by: what only this engine's kept stages depend on besides the plan (the Dask engine: the divisions of
            the ranges its kept parts are cut by), in their keys.
    """

    plan: FindPlan
    kept_by: dict[str, object]

    def scores(self, resume: Resume, progress: Progress) -> Scored:
        """The candidate pairs (their rounds of bands kept and resumed through ``resume``), those a report may
        want, scored."""
        ...

    def keep_scores(self, scored: Scored, key: str) -> None:
        """Keep the scored stage in the work folder under ``key``."""
        ...

    def kept_scores(self, kept: Arrays, key: str, progress: Progress) -> Scored:
        """The scored stage an earlier run kept under ``key`` (``kept``: its file's arrays)."""
        ...

    def decisions(self, scored: Scored, bound: SimultaneousBound, progress: Progress) -> Decided:
        """The exact checks ``--verify`` asks for (``bound``: the run's simultaneous bound), the decisions, and the
        aliases left out."""
        ...

    def keep_decisions(self, decided: Decided, key: str) -> None:
        """Keep the decisions stage in the work folder under ``key``."""
        ...

    def kept_decisions(self, kept: Arrays, key: str, scored: Scored, progress: Progress) -> Decided:
        """The decisions stage an earlier run kept under ``key``, for these ``scored`` pairs."""
        ...

    def conclusion(self, scored: Scored, decided: Decided, common: dict[str, Any], progress: Progress
                   ) -> FindResult:
        """The end of find (:func:`dedup_cli.engine.stages.conclude.conclude`) and the result, with the fields
        ``common`` that do not depend on how the stages ran."""
        ...


def run_find(backend: FindBackend[Any, Any], work: WorkDir | None, progress: Progress) -> FindResult:
    """``find`` with ``backend.plan``: each step kept in ``work`` and resumed from it, the result's common fields
    from the plan; with no live document, :func:`dedup_cli.engine.stages.conclude.nothing_found`. A complete run
    removes its work files unless ``--keep-work``."""
    plan = backend.plan
    if plan.documents == 0:
        result = nothing_found(plan)
    else:
        resume = Resume(work, progress.note)
        scored = resume.stage("scored", plan.key(work, "scored", **backend.kept_by),
                              lambda: backend.scores(resume, progress), backend.keep_scores,
                              lambda kept, key: backend.kept_scores(kept, key, progress))
        bound = decision_bound(plan, scored.count)
        decided = resume.stage("decisions", plan.key(work, "decisions", **backend.kept_by),
                               lambda: backend.decisions(scored, bound, progress), backend.keep_decisions,
                               lambda kept, key: backend.kept_decisions(kept, key, scored, progress))
        common = plan.result_fields(scored.count, scored.oversized, decided.verification, decided.aliases.size)
        progress.stage("groups", None)
        result = backend.conclusion(scored, decided, common, progress)
    if work is not None:
        work.finish(plan.options.keep_work)
    return result
