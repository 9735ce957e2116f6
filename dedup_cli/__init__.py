"""dedup: near-duplicate detection with b-bit minwise hashing and LSH banding.

The public API, one function per command, each taking one frozen dataclass of options whose defaults are the
command line's::

    import dedup_cli as dedup

    dedup.sign(["corpus/"], "sigs.parquet", dedup.SignOptions(num_perm=128))
    result = dedup.find("sigs.parquet", dedup.FindOptions(threshold=0.5, bits=2))
    for group in result.groups():  # Group(number, ids, representative, weakest)
        print(group.number, group.ids)

    # Texts in memory, without files or a store:
    result = dedup.find_duplicates(["a text", "a text, nearly", "another"], dedup.FindOptions(threshold=0.8))

``sign``, ``find``, ``filter`` (also ``filter_corpus``, a name that leaves Python's ``filter`` alone),
``estimate``, ``evaluate`` (``dedup eval``; ``plot_evaluation`` draws its result), ``plan``, ``info``,
``review`` (one HTML page of the groups, to look at before deleting); on texts in memory ``sign_texts`` (giving
``Signatures``, which ``estimate`` reads too) and ``find_duplicates``; ``open_store`` and ``read_store`` to read a
store directly; their options (``SignOptions`` with ``InputOptions``, ``FindOptions``, both with ``EngineOptions``
(``local``, or ``dask`` on a cluster), ``FilterOptions``, ``EstimateOptions``, ``EvalOptions``, ``PlanOptions``,
``ReviewOptions``), results (``SignReport`` with ``ReadReport``, ``FindResult`` with its records ``Group``,
``Pair``, ``Triple``, ``Member`` and its arrays of rows ``Groups``, ``ScoredPairs``, ``ScoredTriples``,
``Banding``, ``BandingChoice``, ``Verification``, ``FilterReport``, ``EstimateResult``, ``EvalResult``, ``Plan``,
``StoreInfo``, ``ReviewReport``; ``Store``, ``StoredSignatures``, ``SignatureParams``) and errors (``DedupError``
and its subclasses ``UsageError``, ``OptionError``, ``InputError``, ``StoreError``; and the warning category
``DedupWarning``).

Names are resolved when first used, so ``import dedup_cli`` (and ``dedup --help``) loads neither numpy nor
pyarrow.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from dedup_cli.version import __version__

if TYPE_CHECKING:
    from dedup_cli.api.estimate import EstimateResult, estimate
    from dedup_cli.api.eval import evaluate
    from dedup_cli.api.filter import FilterReport, filter, filter_corpus
    from dedup_cli.api.find import find
    from dedup_cli.api.info import StoreInfo, info
    from dedup_cli.api.plan import Plan, plan
    from dedup_cli.api.plot import plot_evaluation
    from dedup_cli.api.review import ReviewReport, review
    from dedup_cli.api.sign import SignReport, sign
    from dedup_cli.api.texts import find_duplicates, sign_texts
    from dedup_cli.candidates.banding import Banding, BandingChoice
    from dedup_cli.engine.stages.results import EvalResult, FindResult, Group, Member, Pair, Triple
    from dedup_cli.errors import DedupError, DedupWarning, InputError, OptionError, StoreError, UsageError
    from dedup_cli.estimates.pairs import ScoredPairs
    from dedup_cli.estimates.triple_scores import ScoredTriples
    from dedup_cli.groups.components import Groups
    from dedup_cli.inputs.report import ReadReport
    from dedup_cli.options.engine_choice import EngineOptions
    from dedup_cli.options.evaluating import EvalOptions
    from dedup_cli.options.filtering import FilterOptions
    from dedup_cli.options.finding import EstimateOptions, FindOptions
    from dedup_cli.options.input_options import InputOptions
    from dedup_cli.options.planning import PlanOptions
    from dedup_cli.options.reviewing import ReviewOptions
    from dedup_cli.options.signing import SignOptions
    from dedup_cli.params import SignatureParams
    from dedup_cli.store.memory import Signatures
    from dedup_cli.store.snapshot import StoredSignatures
    from dedup_cli.store.store import Store, open_store, read_store
    from dedup_cli.verification import Verification

# Each public name and the module that defines it.
_PUBLIC = {
    "sign": "dedup_cli.api.sign",
    "SignOptions": "dedup_cli.options.signing",
    "InputOptions": "dedup_cli.options.input_options",
    "SignReport": "dedup_cli.api.sign",
    "ReadReport": "dedup_cli.inputs.report",
    "find": "dedup_cli.api.find",
    "FindOptions": "dedup_cli.options.finding",
    "EngineOptions": "dedup_cli.options.engine_choice",
    "FindResult": "dedup_cli.engine.stages.results",
    "Group": "dedup_cli.engine.stages.results",
    "Pair": "dedup_cli.engine.stages.results",
    "Triple": "dedup_cli.engine.stages.results",
    "Member": "dedup_cli.engine.stages.results",
    "sign_texts": "dedup_cli.api.texts",
    "find_duplicates": "dedup_cli.api.texts",
    "Signatures": "dedup_cli.store.memory",
    "Groups": "dedup_cli.groups.components",
    "ScoredPairs": "dedup_cli.estimates.pairs",
    "ScoredTriples": "dedup_cli.estimates.triple_scores",
    "Banding": "dedup_cli.candidates.banding",
    "BandingChoice": "dedup_cli.candidates.banding",
    "Verification": "dedup_cli.verification",
    "filter": "dedup_cli.api.filter",
    "filter_corpus": "dedup_cli.api.filter",
    "FilterOptions": "dedup_cli.options.filtering",
    "FilterReport": "dedup_cli.api.filter",
    "estimate": "dedup_cli.api.estimate",
    "EstimateOptions": "dedup_cli.options.finding",
    "EstimateResult": "dedup_cli.api.estimate",
    "evaluate": "dedup_cli.api.eval",
    "EvalOptions": "dedup_cli.options.evaluating",
    "EvalResult": "dedup_cli.engine.stages.results",
    "plot_evaluation": "dedup_cli.api.plot",
    "plan": "dedup_cli.api.plan",
    "PlanOptions": "dedup_cli.options.planning",
    "Plan": "dedup_cli.api.plan",
    "info": "dedup_cli.api.info",
    "review": "dedup_cli.api.review",
    "ReviewOptions": "dedup_cli.options.reviewing",
    "ReviewReport": "dedup_cli.api.review",
    "StoreInfo": "dedup_cli.api.info",
    "open_store": "dedup_cli.store.store",
    "read_store": "dedup_cli.store.store",
    "Store": "dedup_cli.store.store",
    "StoredSignatures": "dedup_cli.store.snapshot",
    "SignatureParams": "dedup_cli.params",
    "DedupError": "dedup_cli.errors",
    "UsageError": "dedup_cli.errors",
    "OptionError": "dedup_cli.errors",
    "InputError": "dedup_cli.errors",
    "StoreError": "dedup_cli.errors",
    "DedupWarning": "dedup_cli.errors",
}

__all__ = [
    "Banding",
    "BandingChoice",
    "DedupError",
    "DedupWarning",
    "EngineOptions",
    "EstimateOptions",
    "EstimateResult",
    "EvalOptions",
    "EvalResult",
    "FilterOptions",
    "FilterReport",
    "FindOptions",
    "FindResult",
    "Group",
    "Groups",
    "InputError",
    "InputOptions",
    "Member",
    "OptionError",
    "Pair",
    "Plan",
    "PlanOptions",
    "ReadReport",
    "ReviewOptions",
    "ReviewReport",
    "ScoredPairs",
    "ScoredTriples",
    "SignOptions",
    "SignReport",
    "SignatureParams",
    "Signatures",
    "Store",
    "StoreError",
    "StoreInfo",
    "StoredSignatures",
    "Triple",
    "UsageError",
    "Verification",
    "__version__",
    "estimate",
    "evaluate",
    "filter",
    "filter_corpus",
    "find",
    "find_duplicates",
    "info",
    "open_store",
    "plan",
    "plot_evaluation",
    "read_store",
    "review",
    "sign",
    "sign_texts",
]


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use (PEP 562)."""
    try:
        module = _PUBLIC[name]
    except KeyError:
        raise AttributeError(f"module 'dedup_cli' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
