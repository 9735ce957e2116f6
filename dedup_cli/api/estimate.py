"""``estimate``: the resemblance of two or three named documents of a store, with its uncertainty.

The detail view: match fractions, the 2-way (Li & König 2010, eq. 9) or 3-way (Li, König & Gui 2010, eq. 8,
or the dense procedure of its Sec. 4) estimate, its standard error, a confidence interval from the binomial
law of the match counts (Dembele & Lo 2017), and optionally the exact resemblance from the documents
themselves. The numbers come from the scorers ``find`` uses, so the two commands always agree; only the named
documents' rows of the store are read.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from shlex import quote
from typing import Any

import numpy as np

from dedup_cli.errors import DedupError, InputError, UsageError
from dedup_cli.estimates.dense import DENSE_R
from dedup_cli.estimates.exact import flat_pair_resemblances, flat_triple_resemblances
from dedup_cli.estimates.half_bit import is_half_bit
from dedup_cli.estimates.pairs import densification_of, score_pairs
from dedup_cli.estimates.triple_scores import score_triples
from dedup_cli.objectstore.urls import is_url
from dedup_cli.options.finding import EstimateOptions
from dedup_cli.options.vocabulary import default_store
from dedup_cli.store.format import MANIFEST_NAME
from dedup_cli.store.memory import Signatures
from dedup_cli.store.store import open_store

_RECORD_ORDER = ("ids", "bits", "num_perm", "shingle_counts", "r", "estimator", "matches", "match_fraction",
                 "pair_matches", "pair_match_fractions", "pairwise_estimates", "estimate", "stderr", "ci_low",
                 "ci_high", "level", "exact", "exact_pairwise")


@dataclass
class EstimateResult:
    """The resemblance of two or three documents: the estimate, its law, and what it was computed from.

    With three documents, ``pair_*`` and ``pairwise_estimates`` are for the pairs (1, 2), (1, 3), (2, 3);
    ``matches`` counts the positions where all three agree. Fields that do not apply are None.
    """

    ids: list[str]
    bits: float  # b, or 0.5 for b = 1/2 (then ``matches`` counts agreeing XOR bits, of num_perm // 2)
    num_perm: int
    shingle_counts: list[int]
    r: list[float]  # f/D of each document
    estimator: str
    estimate: float
    stderr: float
    ci_low: float
    ci_high: float
    level: float
    matches: int | None = None
    match_fraction: float | None = None
    pair_matches: list[int] | None = None
    pair_match_fractions: list[float] | None = None
    pairwise_estimates: list[float] | None = None
    exact: float | None = None
    exact_pairwise: list[float] | None = None

    def record(self) -> dict[str, Any]:
        """The fields that apply, in the order ``dedup estimate`` prints them."""
        return {name: getattr(self, name) for name in _RECORD_ORDER if getattr(self, name) is not None}


def estimate(ids: Sequence[str], store: str | os.PathLike[str] | Signatures | Iterable[str] | None = None,
             options: EstimateOptions | None = None) -> EstimateResult:
    """Estimate R for two or three documents of the store.

    Args:
        ids: two or three different document ids; of texts, their positions (``"0"``, ``"1"``, …), as
            :func:`dedup_cli.find_duplicates` names them.
        store: the store (default: ``$DEDUP_STORE``, else ``./dedup.parquet``), texts signed in memory
            (:func:`dedup_cli.sign_texts`), or the texts themselves (as ``sign_texts`` takes them; the named ones are
            signed with ``SignOptions()``, and ``sign_texts`` signs with other options or names them otherwise).
        options: b, the confidence level, and whether to compute the exact resemblance too.
    """
    options = EstimateOptions() if options is None else options
    ids = tuple(ids)
    options.check_ids(ids)
    if store is not None and not isinstance(store, (str, bytes, os.PathLike, Signatures)):
        store = _named_texts(ids, store)
    if isinstance(store, Signatures):
        params = store.params
        bits = options.check_store(ids, params.stored_bits, "the signatures", params.num_perm)
        named = store.stored(store.rows_of(ids))
    else:
        path = default_store(store)
        opened = open_store(path)  # the manifest only: options are checked before the store is read
        params = opened.params
        bits = options.check_store(ids, params.stored_bits, path, params.num_perm)
        named, missing = opened.read_documents(ids)
        if missing:
            raise UsageError(f"no document {missing[0]!r} in {path}; list its ids with: dedup info {quote(path)} --ids")
    rows = np.arange(len(ids), dtype=np.int64)
    values = named.values(bits)
    counts = named.shingle_counts
    r = named.shingle_counts / float(params.universe)
    k = values.shape[1]  # the positions compared: k, or k/2 XOR bits with b = 1/2
    level = options.level
    dense = bool(r.max() > DENSE_R)
    pair_index = [(0, 1)] if len(ids) == 2 else [(0, 1), (0, 2), (1, 2)]
    first = np.array([rows[i] for i, _ in pair_index])
    second = np.array([rows[j] for _, j in pair_index])
    densification = densification_of(params)  # one permutation hashing: eqs. D4–D6's variances
    pairs = score_pairs(values, first, second, r, bits, level=level, densification=densification)
    common: dict[str, Any] = {"ids": list(ids), "bits": bits, "num_perm": params.permutations,
                              "shingle_counts": counts.tolist(), "r": r.tolist(), "level": level}
    if np.any(counts == 0):
        result = EstimateResult(estimator="none: a document has no shingle, so it resembles nothing", estimate=0.0,
                                stderr=0.0, ci_low=0.0, ci_high=0.0, **common)
    elif len(ids) == 2:
        name = (f"2-way b = 1/2, XOR of positions j and j + {k} ({'precise r = f/D' if dense else 'sparse limit'}, "
                "Li & König eq. 25)" if is_half_bit(bits) else
                f"2-way b-bit, {'precise r = f/D' if dense else 'sparse limit'} (Li & König eq. 9)")
        result = EstimateResult(
            estimator=name,
            matches=int(pairs.matches[0]), match_fraction=int(pairs.matches[0]) / k,
            estimate=float(pairs.estimate[0]), stderr=float(pairs.stderr[0]),
            ci_low=float(pairs.ci_low[0]), ci_high=float(pairs.ci_high[0]), **common,
        )
    else:
        # score_triples takes the triple in any order and reports pairs (1,2), (1,3), (2,3) of that order.
        triple = score_triples(values, rows.reshape(1, 3), r, int(bits), level=level,  # b = 1/2 refused
                               densification=densification)
        name = ("3-way b-bit, dense data (Li, König & Gui Sec. 4, exact P_b solved for s)" if dense
                else "3-way b-bit, sparse (Li, König & Gui eq. 8)")
        result = EstimateResult(
            estimator=name, matches=int(triple.matches[0]), match_fraction=int(triple.matches[0]) / k,
            pair_matches=pairs.matches.tolist(), pair_match_fractions=(pairs.matches / k).tolist(),
            pairwise_estimates=pairs.estimate.tolist(), estimate=float(triple.estimate[0]),
            stderr=float(triple.stderr[0]), ci_low=float(triple.ci_low[0]), ci_high=float(triple.ci_high[0]),
            **common,
        )
    if options.exact:
        # Re-reading and shingling (5 ms of imports, for --exact only), and the exact checks' own arithmetic.
        from dedup_cli.verification import read_sets

        sets = read_sets(named, rows)
        gone = [named.ids[row] for row in rows[~sets.known].tolist()]
        if gone:
            raise InputError(f"cannot compute the exact resemblance: {gone[0]} cannot be re-read or changed "
                             "since it was signed; sign it again")
        pairwise = np.nan_to_num(flat_pair_resemblances(sets, first, second))  # two empty sets: 0
        result.exact = float(pairwise[0] if len(ids) == 2 else
                             np.nan_to_num(flat_triple_resemblances(sets, rows.reshape(1, 3)))[0])
        if len(ids) == 3:
            result.exact_pairwise = pairwise.tolist()
    return result


def _named_texts(ids: tuple[str, ...], texts: Iterable[str]) -> Signatures:
    """The texts named by ``ids`` (their positions among ``texts``) signed in memory, the others left unsigned."""
    from dedup_cli.api.texts import as_list, sign_texts  # the kernel and the find stages: not for a store's estimate

    listed = as_list(texts)
    names = [str(identifier) for identifier in ids]
    unknown = next((name for name in names if not (name.isdecimal() and str(int(name)) == name
                                                   and int(name) < len(listed))), None)
    if unknown is not None and not listed:
        raise UsageError("no texts given; give the texts whose ids are named, or a store")
    if unknown is not None:
        raise UsageError(f"no text with id {unknown!r} among the {len(listed)} given: texts are named by their "
                         f"positions, '0' to '{len(listed) - 1}'; name them otherwise with sign_texts(texts, ids=...)")
    return sign_texts([listed[int(name)] for name in names], names)


def _is_store(path: str) -> bool:
    """Whether ``path`` holds a dedup store (so ``estimate STORE A B`` is told from ``estimate A B C``): one that
    opens, or a directory with a store's manifest that does not (damaged, of a newer format), whose own error is
    then the one to report rather than the default store's absence."""
    try:
        open_store(path)
    except DedupError:
        return not is_url(path) and os.path.lexists(os.path.join(path, MANIFEST_NAME))
    return True


def store_and_ids(store: str | None, arguments: Sequence[str]) -> tuple[str, tuple[str, ...]]:
    """Split the command line's ``[STORE] ID ID [ID]`` into the store and the ids.

    The first argument is the store when ``store`` (``--store``) is not given and it is a store on disk (a
    document id never is), or when there are four arguments; else the store is ``store`` or the default one.
    """
    if store is None and arguments and (len(arguments) == 4 or _is_store(arguments[0])):
        return arguments[0], tuple(arguments[1:])
    return default_store(store), tuple(arguments)
