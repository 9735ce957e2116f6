"""Estimating the resemblance of two or three named documents of a store, with its uncertainty.

The detail view behind ``dedup estimate``: match fractions, the 2-way (Li & König 2010, eq. 9) or 3-way
(Li, König & Gui 2010, eq. 8, or the dense procedure of its Sec. 4) estimate, its standard error, a
confidence interval from the binomial law of the match counts (Dembele & Lo 2017), and optionally the
exact resemblance from the documents themselves.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from dedup_cli import estimators
from dedup_cli.errors import InputError, UsageError
from dedup_cli.finding import DENSE_R
from dedup_cli.scoring import score_pairs
from dedup_cli.storage import open_store
from dedup_cli.triples import score_triples
from dedup_cli.verification import exact_sets


def estimate_documents(
    store_path: str | os.PathLike[str],
    ids: Sequence[str],
    bits: int | None = None,
    exact: bool = False,
    level: float = 0.95,
) -> dict[str, Any]:
    """Estimate R for two or three documents of the store; returns a JSON-ready record.

    The numbers come from the same scorers ``find`` uses (:func:`dedup_cli.scoring.score_pairs`,
    :func:`dedup_cli.triples.score_triples`), so the two commands always agree.
    """
    opened = open_store(store_path)  # the manifest only: options are checked before the store is read
    params = opened.params
    if len(ids) not in (2, 3) or len(set(ids)) != len(ids):
        raise UsageError("name two or three different document ids")
    bits = params.bits if bits is None else bits
    if not 1 <= bits <= params.bits:
        raise UsageError(f"--bits {bits} exceeds the {params.bits} bits stored in {store_path}; use 1 to {params.bits}")
    if len(ids) == 3 and bits < 2:
        raise UsageError("3-way estimation needs --bits 2 or more; 1-bit values carry no 3-way information")
    store = opened.read()
    position = {identifier: row for row, identifier in enumerate(store.ids)}
    missing = [identifier for identifier in ids if identifier not in position]
    if missing:
        raise UsageError(f"no document {missing[0]!r} in {store_path}; list ids with: dedup find --output pairs")
    rows = np.array([position[identifier] for identifier in ids], dtype=np.int64)
    values = store.values(bits)
    counts = store.shingle_counts[rows]
    r_all = store.shingle_counts / float(params.universe)
    r = r_all[rows]
    k = params.num_perm
    dense = bool(r.max() > DENSE_R)
    record: dict[str, Any] = {"ids": list(ids), "bits": bits, "num_perm": k, "shingle_counts": counts.tolist(),
                              "r": r.tolist()}
    pair_index = [(0, 1)] if len(ids) == 2 else [(0, 1), (0, 2), (1, 2)]
    first = np.array([rows[i] for i, _ in pair_index])
    second = np.array([rows[j] for _, j in pair_index])
    pairs = score_pairs(values, first, second, r_all, bits, level=level)
    if np.any(counts == 0):
        record.update(estimator="none: a document has no shingle, so it resembles nothing", estimate=0.0,
                      stderr=0.0, ci_low=0.0, ci_high=0.0)
    elif len(ids) == 2:
        record.update(
            estimator=f"2-way b-bit, {'precise r = f/D' if dense else 'sparse limit'} (Li & König eq. 9)",
            matches=int(pairs.matches[0]), match_fraction=int(pairs.matches[0]) / k,
            estimate=float(pairs.estimate[0]), stderr=float(pairs.stderr[0]),
            ci_low=float(pairs.ci_low[0]), ci_high=float(pairs.ci_high[0]),
        )
    else:
        # score_triples takes the triple in any order and reports pairs (1,2), (1,3), (2,3) of that order.
        triple = score_triples(values, rows.reshape(1, 3), r_all, bits, level=level)
        name = ("3-way b-bit, dense data (Li, König & Gui Sec. 4, exact P_b solved for s)" if dense
                else "3-way b-bit, sparse (Li, König & Gui eq. 8)")
        record.update(
            estimator=name, matches=int(triple.matches[0]), match_fraction=int(triple.matches[0]) / k,
            pair_matches=pairs.matches.tolist(), pair_match_fractions=(pairs.matches / k).tolist(),
            pairwise_estimates=pairs.estimate.tolist(), estimate=float(triple.estimate[0]),
            stderr=float(triple.stderr[0]), ci_low=float(triple.ci_low[0]), ci_high=float(triple.ci_high[0]),
        )
    record["level"] = level
    if exact:
        found = exact_sets(store, rows)
        gone = [store.ids[row] for row, elements in found.items() if elements is None]
        if gone:
            raise InputError(f"cannot compute the exact resemblance: {gone[0]} cannot be re-read or changed "
                             "since it was signed; sign it again")
        sets = [found[int(row)] for row in rows]
        record["exact"] = float(estimators.exact_resemblance(*sets))
        if len(ids) == 3:
            record["exact_pairwise"] = [float(estimators.exact_resemblance(sets[i], sets[j])) for i, j in pair_index]
    return record
