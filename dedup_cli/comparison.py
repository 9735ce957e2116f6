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
from dedup_cli.corpus import read_text, reread_set
from dedup_cli.errors import UsageError
from dedup_cli.finding import DENSE_R
from dedup_cli.shingling import document_shingles
from dedup_cli.storage import StoredSignatures, read_store


def _exact_sets(store: StoredSignatures, rows: Sequence[int]) -> list[np.ndarray]:
    params = store.params
    if params.input_kind == "sets":
        return [reread_set(store.paths[row]) for row in rows]
    return [document_shingles(read_text(store.paths[row]), params.shingle_size, params.shingle_unit) for row in rows]


def estimate_documents(
    store_path: str | os.PathLike[str],
    ids: Sequence[str],
    bits: int | None = None,
    exact: bool = False,
    level: float = 0.95,
) -> dict[str, Any]:
    """Estimate R for two or three documents of the store; returns a JSON-ready record."""
    store = read_store(store_path)
    params = store.params
    if len(ids) not in (2, 3) or len(set(ids)) != len(ids):
        raise UsageError("name two or three different document ids")
    position = {identifier: row for row, identifier in enumerate(store.ids)}
    missing = [identifier for identifier in ids if identifier not in position]
    if missing:
        raise UsageError(f"no document {missing[0]!r} in {store_path}; list ids with: dedup find --output pairs")
    bits = params.bits if bits is None else bits
    if not 1 <= bits <= params.bits:
        raise UsageError(f"--bits {bits} exceeds the {params.bits} bits stored in {store_path}; use 1 to {params.bits}")
    if len(ids) == 3 and bits < 2:
        raise UsageError("3-way estimation needs --bits 2 or more; 1-bit values carry no 3-way information")
    rows = [position[identifier] for identifier in ids]
    values = store.values(bits)[rows]
    counts = store.shingle_counts[rows]
    r = counts / float(params.universe)
    k = params.num_perm
    dense = bool(r.max() > DENSE_R)
    record: dict[str, Any] = {"ids": list(ids), "bits": bits, "num_perm": k, "shingle_counts": counts.tolist(),
                              "r": r.tolist()}

    pair_index = [(0, 1)] if len(ids) == 2 else [(0, 1), (0, 2), (1, 2)]
    pair_matches = [int(np.count_nonzero(values[i] == values[j])) for i, j in pair_index]
    pairwise = [
        float(estimators.estimate_2way(m / k, r[i], r[j], bits))
        for m, (i, j) in zip(pair_matches, pair_index, strict=True)
    ]
    if np.any(counts == 0):
        record.update(estimator="none: a document has no shingle, so it resembles nothing", estimate=0.0,
                      stderr=0.0, ci_low=0.0, ci_high=0.0)
    elif len(ids) == 2:
        (matches,), (i, j) = pair_matches, pair_index[0]
        low, high = estimators.confidence_interval_2way(matches, k, r[i], r[j], bits, level=level)
        record.update(
            estimator=f"2-way b-bit, {'precise r = f/D' if dense else 'sparse limit'} (Li & König eq. 9)",
            matches=matches, match_fraction=matches / k, estimate=pairwise[0],
            stderr=float(estimators.standard_error_2way(matches / k, r[i], r[j], bits, k)),
            ci_low=float(low), ci_high=float(high),
        )
    else:
        matches123 = int(np.count_nonzero((values[0] == values[1]) & (values[0] == values[2])))
        p123, (p12, p13, p23) = matches123 / k, (m / k for m in pair_matches)
        if dense:
            estimate = float(estimators.estimate_3way_dense(p123, p12, p13, p23, r[0], r[1], r[2], bits))
            name = "3-way b-bit, dense data (Li, König & Gui Sec. 4, exact P_b by bisection)"
        else:
            estimate = float(estimators.estimate_3way(p123, p12, p13, p23, bits))
            name = "3-way b-bit, sparse (Li, König & Gui eq. 8)"
        clipped = min(max(estimate, 0.0), 1.0)
        total = float(np.clip(pairwise, 0.0, 1.0).sum())
        if dense:
            # Map the Wilson interval of P_b through the same dense procedure as the estimate.
            p_low, p_high = estimators.wilson_interval(matches123, k, level)
            low, high = np.clip(
                estimators.estimate_3way_dense(np.array([p_low, p_high]), p12, p13, p23, r[0], r[1], r[2], bits),
                0.0, 1.0,
            )
        else:
            m12, m13, m23 = pair_matches
            low, high = estimators.confidence_interval_3way(matches123, m12, m13, m23, k, bits, level=level)
        record.update(
            estimator=name, matches=matches123, match_fraction=p123,
            pair_matches=pair_matches, pair_match_fractions=[m / k for m in pair_matches],
            pairwise_estimates=pairwise, estimate=estimate,
            stderr=float(np.sqrt(estimators.variance_3way(clipped, total, bits, k))),
            ci_low=float(low), ci_high=float(high),
        )
    record["level"] = level
    if exact:
        sets = _exact_sets(store, rows)
        record["exact"] = float(estimators.exact_resemblance(*sets))
        if len(ids) == 3:
            record["exact_pairwise"] = [float(estimators.exact_resemblance(sets[i], sets[j])) for i, j in pair_index]
    return record
