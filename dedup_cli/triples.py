"""Near-duplicate triples: candidate triples as triangles of the candidate-pair graph, and 3-way scoring.

A triple can reach 3-way resemblance R ≥ R0 only if each of its pairs can, since R ≤ min(R_12, R_13, R_23)
(SPEC, 3-way, last note). So the candidate triples are the triangles of the graph whose edges are the LSH
candidate pairs with a 2-way estimate R̂_ij ≥ R0 − margin, the margin absorbing the estimation noise of a
pair that truly sits at R0 (:func:`pair_margin`). Three documents sharing an LSH bucket are pairwise
candidates, so bucket triples are among these triangles automatically (SPEC, LSH banding, last note).

A truly qualifying triple becomes a candidate when each of its three pairs is an LSH candidate and survives
the margin. By the union bound, Pr(missed) ≤ 3 · (Pr(LSH misses a pair at R0) + Pr(margin drops it)), so the
banding is chosen for the per-pair recall of :func:`pair_recall_for_triples` (every R_ij ≥ R ≥ R0 and the
S-curve increases, so recall at R0 is the worst case).

Candidates are then scored with the 3-way b-bit estimator (Li, König & Gui 2010, eq. 8, or the dense
procedure of its Sec. 4) and kept when R̂ ≥ R0 (:func:`find_triples`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from dedup_cli import estimators
from dedup_cli.arrays import sorted_unique
from dedup_cli.errors import UsageError
from dedup_cli.scoring import ScoredPairs

# Above this r = f/D the sparse 3-way estimator is visibly biased and the dense procedure is used. Must equal
# find's DENSE_R (a test checks it); not imported from there because finding.py imports this module.
DENSE_R = 1e-4

# Default wedges (open paths u–v, u–w) tested per batch in ``triangles``: about 100 bytes of temporaries a
# wedge, so about 26 MB whatever the degree of the largest hub; larger batches are no faster.
WEDGE_BATCH = 1 << 18

# Bounds the [triples, k] comparison temporaries of ``score_triples`` to about 32 MB, as in scoring.py.
_COMPARISON_BYTES = 1 << 25

_BITS_MESSAGE = "3-way estimation needs --bits 2 or more; 1-bit values carry no 3-way information"


# ----------------------------------------------------------------------------------------------
# How many pairs the candidate step must keep
# ----------------------------------------------------------------------------------------------


def pair_margin(threshold: float, num_perm: int, bits: int, z: float = 3.0) -> float:
    """How far below R0 a pair's 2-way estimate may fall and the pair still be kept for triples.

    z times the sparse-limit standard error of R̂_b at R = R0 (Li & König 2010, eq. 11 with
    C_1 = C_2 = 2^-b): z · sqrt(E_b (1 − E_b) / k) / (1 − 2^-b), E_b = 2^-b + (1 − 2^-b) R0. A pair whose
    true resemblance is R0 has its estimate below R0 − margin with probability about Φ(−z) (0.00135 at
    z = 3); a pair above R0 even less, because its estimate is centred higher.

    Args:
        threshold: R0 in (0, 1].
        num_perm: k, the number of positions the pair estimates use.
        bits: b of the pair estimates, 1..64.
        z: normal quantile; 3 keeps about 99.87 % of pairs at R0.

    Returns:
        The margin, a float ≥ 0 (0 at R0 = 1, where the estimate has no spread).
    """
    if not 0.0 < threshold <= 1.0:
        raise UsageError(f"--threshold {threshold} must be in (0, 1]")
    if z < 0:
        raise UsageError(f"margin quantile z = {z} must be ≥ 0; 3 is the usual choice")
    variance = float(estimators.variance_2way(threshold, 0.0, 0.0, bits, num_perm))
    return z * math.sqrt(max(variance, 0.0))


def pair_recall_for_triples(triple_recall: float = 0.99, z: float = 3.0) -> float:
    """The per-pair LSH recall at R0 to request so that ``triple_recall`` of qualifying triples are candidates.

    A triple with R ≥ R0 is missed only if one of its three pairs (each with R_ij ≥ R0) is missed by the
    banding or dropped by the margin of :func:`pair_margin`. By the union bound
    1 − triple_recall ≤ 3 · (1 − pair_recall + Φ(−z)), so
    pair_recall = 1 − ((1 − triple_recall)/3 − Φ(−z)); 0.99 and z = 3 give 0.998017.

    The bound has slack: unless the three sets are identical, at most two pairs can sit at R0 (R_12 = R
    forces S_3 ⊆ S_1 ∪ S_2 and S_1 ∩ S_2 ⊆ S_3; all three together force S_1 = S_2 = S_3). That slack absorbs
    the margin's exact binomial tail at k = 256, which is 0.0014–0.0022 rather than Φ(−3) = 0.00135
    (b = 2–4, R0 = 0.5–0.8; the count's left tail is heavier when E_b > 1/2). With two pairs at R0 the
    measured candidate recall is 0.996–0.998.

    Args:
        triple_recall: wanted fraction of triples with R ≥ R0 among the candidates, in (0, 1).
        z: the margin's normal quantile, as given to :func:`pair_margin`.

    Returns:
        The recall to pass to :func:`dedup_cli.lsh.choose_banding`.

    Raises:
        UsageError: when the margin alone loses more than the budget (z too small for the recall).
    """
    if not 0.0 < triple_recall < 1.0:
        raise UsageError(f"triple recall {triple_recall} must lie strictly between 0 and 1, e.g. 0.99")
    margin_loss = NormalDist().cdf(-z)
    budget = (1.0 - triple_recall) / 3.0 - margin_loss
    if budget <= 0.0:
        reachable = math.floor((1.0 - 3.0 * margin_loss) * 1e4) / 1e4  # rounded down: the advice must work
        raise UsageError(
            f"--recall {triple_recall} is out of reach for triples: the pair margin of {z:g} standard errors "
            f"alone may lose {3 * margin_loss:.4f} of them; use --recall {reachable:.4f} or lower"
        )
    return 1.0 - budget


PAIR_RECALL_FOR_TRIPLES = pair_recall_for_triples()
"""Per-pair banding recall for 0.99 of qualifying triples with the default margin (z = 3): 0.998017."""


# ----------------------------------------------------------------------------------------------
# Triangles of the candidate-pair graph
# ----------------------------------------------------------------------------------------------


def _pair_positions(local: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Invert t = y(y − 1)/2 + x (0 ≤ x < y): the t-th pair of a node's forward list, int64 each."""
    y = np.floor((1.0 + np.sqrt(1.0 + 8.0 * local.astype(np.float64))) / 2.0).astype(np.int64)
    # The float square root can be off by one for huge t; one correction step each way makes it exact.
    y -= (y * (y - 1) // 2) > local
    y += ((y + 1) * y // 2) <= local
    return local - y * (y - 1) // 2, y


def wedge_count(first: np.ndarray, second: np.ndarray, num_docs: int) -> int:
    """The number of wedges :func:`triangles` will test: Σ_u d⁺(u)(d⁺(u) − 1)/2 (see there)."""
    _, _, _, forward_degree = _forward_graph(first, second, num_docs)
    return int(np.sum(forward_degree * (forward_degree - 1) // 2))


def _forward_graph(
    first: np.ndarray, second: np.ndarray, num_docs: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Orient each undirected edge from its lower- to its higher-ranked end (rank = (degree, index)).

    Returns ``node_of_rank`` int64[n], the forward edge codes ``rank_u · n + rank_v`` (rank_u < rank_v)
    sorted, int64[m] (their targets, in CSR order, are ``codes % n``), the CSR offsets int64[n + 1] and
    the forward degrees int64[n], all indexed by rank.
    """
    first = np.asarray(first)
    second = np.asarray(second)
    if first.shape != second.shape or first.ndim != 1:
        raise ValueError(f"first and second must be 1-D and aligned, got shapes {first.shape} and {second.shape}")
    n = int(num_docs)
    if n < 0 or n > 3_037_000_499:
        raise ValueError(f"num_docs {n} must lie in 0..3037000499 (edge codes i·n + j are int64)")
    first = first.astype(np.int64, copy=False)
    second = second.astype(np.int64, copy=False)
    if first.size and (min(first.min(), second.min()) < 0 or max(first.max(), second.max()) >= n):
        raise ValueError(f"edge endpoints must lie in 0..{n - 1}")
    low, high = np.minimum(first, second), np.maximum(first, second)
    keep = low != high  # a self-loop closes no triangle of distinct documents
    codes = sorted_unique(low[keep] * n + high[keep])  # duplicates and both orientations collapse
    low, high = codes // max(n, 1), codes % max(n, 1)
    degree = np.bincount(low, minlength=n) + np.bincount(high, minlength=n)
    # Ranking by degree bounds every forward degree by sqrt(2m): a hub's edges mostly point *into* it, so a
    # star with one centre costs no wedge at all (by index alone it would cost C(d, 2)).
    node_of_rank = np.lexsort((np.arange(n), degree)).astype(np.int64)
    rank = np.empty(n, dtype=np.int64)
    rank[node_of_rank] = np.arange(n, dtype=np.int64)
    rank_low, rank_high = rank[low], rank[high]
    source = np.minimum(rank_low, rank_high)
    forward_codes = np.sort(source * n + np.maximum(rank_low, rank_high))
    forward_degree = np.bincount(source, minlength=n).astype(np.int64)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(forward_degree, out=offsets[1:])
    return node_of_rank, forward_codes, offsets, forward_degree


def triangles(first: np.ndarray, second: np.ndarray, num_docs: int, max_wedges: int = WEDGE_BATCH) -> np.ndarray:
    """All triangles of the undirected graph with edges (first[p], second[p]): int64[n_triangles, 3].

    Each row is (a, b, c) with a < b < c; rows are unique and sorted. Duplicate edges, both orientations of
    an edge and self-loops are allowed in the input.

    Algorithm ("forward", Schank & Wagner 2005; Latapy 2008): rank nodes by (degree, index) and orient
    every edge from lower to higher rank; in CSR form (edges sorted by code rank_u·n + rank_v) each node u
    has a sorted forward list N⁺(u). Every triangle has exactly one lowest-ranked corner u, and its other
    corners v < w both lie in N⁺(u), so each triangle is found exactly once by testing, for every wedge
    (v, w) of a forward list, whether the closing edge v → w exists — a binary search (np.searchsorted)
    over the sorted edge codes.

    Cost: W = Σ_u d⁺(u)(d⁺(u) − 1)/2 wedges (:func:`wedge_count`), each an O(log m) search. Degree ranking
    gives d⁺(u) ≤ sqrt(2m), so W ≤ m·sqrt(2m)/2 in the worst case, and a hub of degree d that is not in a
    clique costs far less than the d²/2 of index order. A clique of d documents (d mutual near-duplicates)
    has C(d, 3) triangles and costs C(d, 3) wedges, all closing: the output itself is that large.

    Memory: wedges are numbered globally 0..W − 1 and processed ``max_wedges`` at a time, split across
    nodes and within one node's list alike (the t-th pair of a list is found by inverting t = y(y−1)/2 + x),
    so the temporaries stay at about 100 bytes × ``max_wedges`` however large one hub is; the output needs
    24 bytes a triangle. About 0.4 s for 10^6 random edges over 10^5 nodes (5.4·10^6 wedges) on one core.

    Args:
        first, second: int[m] endpoints, each in 0..num_docs − 1.
        num_docs: n, the number of nodes.
        max_wedges: wedges tested per batch (≥ 1).

    Returns:
        int64[n_triangles, 3], rows ascending within and sorted lexicographically.
    """
    if max_wedges < 1:
        raise ValueError(f"max_wedges must be at least 1, got {max_wedges}")
    n = int(num_docs)
    node_of_rank, forward_codes, offsets, forward_degree = _forward_graph(first, second, n)
    wedges_per_node = forward_degree * (forward_degree - 1) // 2
    busy = np.flatnonzero(wedges_per_node)  # nodes with at least one wedge, by rank
    if busy.size == 0:
        return np.empty((0, 3), dtype=np.int64)
    ends = np.cumsum(wedges_per_node[busy])  # wedges of busy[i] are ends[i] − count .. ends[i] − 1
    total = int(ends[-1])
    found: list[np.ndarray] = []
    for start in range(0, total, max_wedges):
        wedge = np.arange(start, min(total, start + max_wedges), dtype=np.int64)
        which = np.searchsorted(ends, wedge, side="right")
        corner = busy[which]
        x, y = _pair_positions(wedge - (ends[which] - wedges_per_node[corner]))
        # Forward lists are sorted, so x < y gives v < w in rank: the closing edge, if any, is v → w.
        base = offsets[corner]
        v = forward_codes[base + x] % n
        w = forward_codes[base + y] % n
        closing = v * n + w
        # Searching sorted queries walks the edge codes in order (cache-friendly): with the sort included
        # this is about 3× faster than searching the wedges in enumeration order.
        order = np.argsort(closing)
        queries = closing[order]
        position = np.minimum(np.searchsorted(forward_codes, queries), forward_codes.size - 1)
        hit = order[forward_codes[position] == queries]
        if hit.size:
            found.append(np.sort(node_of_rank[np.stack([corner[hit], v[hit], w[hit]], axis=1)], axis=1))
    if not found:
        return np.empty((0, 3), dtype=np.int64)
    result = np.concatenate(found)
    # Each triangle is found once (at its lowest-ranked corner), so sorting is all that is left to do.
    order = np.lexsort((result[:, 2], result[:, 1], result[:, 0]))
    return result[order]


# ----------------------------------------------------------------------------------------------
# 3-way scoring
# ----------------------------------------------------------------------------------------------


@dataclass
class ScoredTriples:
    """Triples with their b-bit match counts and 3-way estimates; arrays aligned by triple."""

    docs: np.ndarray  # int64[n, 3], each row ascending
    matches: np.ndarray  # int64[n], positions where all three b-bit values agree (k · P̂_b)
    pair_matches: np.ndarray  # int64[n, 3], pairwise agreements of (1, 2), (1, 3), (2, 3)
    estimate: np.ndarray  # float64[n], eq. 8 (sparse) or the Sec. 4 dense procedure; not clipped
    stderr: np.ndarray  # float64[n], Theorem 3 (eq. 9) at the clipped estimate
    ci_low: np.ndarray  # float64[n]
    ci_high: np.ndarray  # float64[n]
    pairwise: np.ndarray  # float64[n, 3], 2-way estimates R̂_12, R̂_13, R̂_23 (Li & König eq. 9)

    def __len__(self) -> int:
        return int(self.estimate.size)

    def select(self, keep: np.ndarray) -> ScoredTriples:
        """The rows picked by a boolean mask or an index array, in that order."""
        return ScoredTriples(**{name: getattr(self, name)[keep] for name in self.__dataclass_fields__})

    @classmethod
    def empty(cls) -> ScoredTriples:
        return cls(
            docs=np.empty((0, 3), dtype=np.int64),
            matches=np.empty(0, dtype=np.int64),
            pair_matches=np.empty((0, 3), dtype=np.int64),
            estimate=np.empty(0),
            stderr=np.empty(0),
            ci_low=np.empty(0),
            ci_high=np.empty(0),
            pairwise=np.empty((0, 3)),
        )


def _count_triple_matches(values: np.ndarray, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """k·P̂_b and k·P̂_ij for a chunk of triples: int64[t] and int64[t, 3]."""
    first, second, third = values[docs[:, 0]], values[docs[:, 1]], values[docs[:, 2]]
    equal_12 = first == second
    equal_13 = first == third
    equal_23 = second == third
    pair_matches = np.stack(
        [np.count_nonzero(equal_12, axis=1), np.count_nonzero(equal_13, axis=1), np.count_nonzero(equal_23, axis=1)],
        axis=1,
    ).astype(np.int64)
    # 1 = 2 and 1 = 3 imply 2 = 3, so two comparisons decide "all three agree".
    matches = np.count_nonzero(equal_12 & equal_13, axis=1).astype(np.int64)
    return matches, pair_matches


def score_triples(
    values: np.ndarray, docs: np.ndarray, r: np.ndarray, bits: int, level: float = 0.95
) -> ScoredTriples:
    """Estimate the 3-way resemblance of each triple from b-bit values.

    Per triple (Li, König & Gui 2010, Alg. 1): P̂_b = fraction of the k positions where all three b-bit
    values agree, P̂_ij the pairwise fractions over the same positions, then

    - estimate: R̂_b = (4^b P̂_b − 2^b (P̂_12 + P̂_13 + P̂_23) + 2) / ((2^b − 1)(2^b − 2)) (eq. 8) when every
      r ≤ DENSE_R; otherwise the dense procedure of Sec. 4 (:func:`estimators.estimate_3way_dense`), as
      the sparse one is biased there. Not clipped.
    - pairwise: R̂_ij = (P̂_ij − C_1) / (1 − C_2) with the precise r (Li & König 2010, eq. 9).
    - stderr: sqrt of Theorem 3 (eq. 9) at R = clip(R̂, 0, 1) and T = Σ clip(R̂_ij, 0, 1), T kept ≥ 3R
      because every R_ij ≥ R (otherwise the variance can come out negative near R = 1).
    - ci_low, ci_high: the score interval of :func:`estimators.confidence_interval_3way` for sparse rows;
      for dense rows the Wilson interval of P_b mapped through the dense procedure (as ``dedup estimate``).

    Documents without shingles (r = 0 because f = 0) must be left out beforehand, as ``find`` does: their
    all-zero values agree with each other everywhere.

    Args:
        values: uint[n_docs, k], the lowest ``bits`` bits of each minwise value.
        docs: int[n, 3] document indices; the rows are returned as given (usually ascending).
        r: float64[n_docs], r = f/D per document.
        bits: b ≥ 2.
        level: confidence level of the interval.

    Returns:
        ScoredTriples aligned with ``docs``.

    Raises:
        UsageError: bits < 2.
    """
    return _score(values, docs, r, bits, level, threshold=None)


def _score(
    values: np.ndarray, docs: np.ndarray, r: np.ndarray, bits: int, level: float, threshold: float | None
) -> ScoredTriples:
    """:func:`score_triples`, keeping only rows with R̂ ≥ ``threshold`` when one is given.

    Filtering inside the chunk loop spares the interval (a 100-step bisection) for rejected candidates,
    about half the scoring time, and keeps memory proportional to the accepted triples.
    """
    if bits < 2:
        raise UsageError(_BITS_MESSAGE)
    docs = np.asarray(docs, dtype=np.int64).reshape(-1, 3)
    r = np.asarray(r, dtype=np.float64)
    n, k = docs.shape[0], values.shape[1]
    if n == 0:
        return ScoredTriples.empty()
    # Three gathered [chunk, k] copies and three boolean [chunk, k] masks live at once.
    chunk = max(1, _COMPARISON_BYTES // max(1, k * (3 * values.dtype.itemsize + 4)))
    parts: list[ScoredTriples] = []
    for start in range(0, n, chunk):
        rows = docs[start : start + chunk]
        matches, pair_matches = _count_triple_matches(values, rows)
        parts.append(_estimate_chunk(rows, matches, pair_matches, r, bits, k, level, threshold))
    if len(parts) == 1:
        return parts[0]
    return ScoredTriples(
        **{name: np.concatenate([getattr(p, name) for p in parts]) for name in ScoredTriples.__dataclass_fields__}
    )


def _dense_estimate(p123: np.ndarray, p_pair: np.ndarray, ratios: np.ndarray, bits: int) -> np.ndarray:
    """The Sec. 4 dense procedure: p123 float64[t], p_pair float64[t, 3] (12, 13, 23), ratios float64[t, 3]."""
    return np.asarray(
        estimators.estimate_3way_dense(
            p123, p_pair[:, 0], p_pair[:, 1], p_pair[:, 2], ratios[:, 0], ratios[:, 1], ratios[:, 2], bits
        ),
        dtype=np.float64,
    )


def _estimate_chunk(
    docs: np.ndarray,
    matches: np.ndarray,
    pair_matches: np.ndarray,
    r: np.ndarray,
    bits: int,
    k: int,
    level: float,
    threshold: float | None,
) -> ScoredTriples:
    """Estimates, standard errors, intervals and pairwise estimates for one chunk of counted triples."""
    ratios = r[docs]  # float64[t, 3]
    p123 = matches / k
    p_pair = pair_matches / k  # columns 12, 13, 23
    pair_index = ((0, 1), (0, 2), (1, 2))
    pairwise = np.stack(
        [
            estimators.estimate_2way(p_pair[:, column], ratios[:, i], ratios[:, j], bits)
            for column, (i, j) in enumerate(pair_index)
        ],
        axis=1,
    ).astype(np.float64)
    estimate = np.array(
        estimators.estimate_3way(p123, p_pair[:, 0], p_pair[:, 1], p_pair[:, 2], bits), dtype=np.float64
    )
    dense = ratios.max(axis=1) > DENSE_R
    if np.any(dense):
        estimate[dense] = _dense_estimate(p123[dense], p_pair[dense], ratios[dense], bits)
    if threshold is not None:
        keep = estimate >= threshold
        docs, matches, pair_matches, ratios = docs[keep], matches[keep], pair_matches[keep], ratios[keep]
        p_pair, pairwise, estimate, dense = p_pair[keep], pairwise[keep], estimate[keep], dense[keep]
    low, high = np.empty(estimate.size), np.empty(estimate.size)
    sparse = ~dense
    if np.any(sparse):
        m12, m13, m23 = pair_matches[sparse, 0], pair_matches[sparse, 1], pair_matches[sparse, 2]
        low[sparse], high[sparse] = estimators.confidence_interval_3way(
            matches[sparse], m12, m13, m23, k, bits, level=level
        )
    if np.any(dense):
        # The same monotone map as the estimate, applied to the Wilson interval of P_b (the count is binomial).
        p_low, p_high = estimators.wilson_interval(matches[dense], k, level)
        low[dense] = np.clip(_dense_estimate(p_low, p_pair[dense], ratios[dense], bits), 0.0, 1.0)
        high[dense] = np.clip(_dense_estimate(p_high, p_pair[dense], ratios[dense], bits), 0.0, 1.0)
    clipped = np.clip(estimate, 0.0, 1.0)
    total = np.maximum(np.clip(pairwise, 0.0, 1.0).sum(axis=1), 3.0 * clipped)
    variance = np.asarray(estimators.variance_3way(clipped, total, bits, k), dtype=np.float64)
    return ScoredTriples(
        docs=docs,
        matches=matches,
        pair_matches=pair_matches,
        estimate=estimate,
        stderr=np.sqrt(np.maximum(variance, 0.0)),
        ci_low=low,
        ci_high=high,
        pairwise=pairwise,
    )


# ----------------------------------------------------------------------------------------------
# The whole step
# ----------------------------------------------------------------------------------------------


def candidate_triples(
    pairs: ScoredPairs, num_docs: int, threshold: float, bits: int, num_perm: int, z: float = 3.0,
    max_wedges: int = WEDGE_BATCH,
) -> np.ndarray:
    """Candidate triples: triangles of the LSH candidate pairs whose estimate is ≥ R0 − :func:`pair_margin`.

    Args:
        pairs: every LSH candidate pair, scored with ``bits``-bit values (not only the accepted ones).
        num_docs: documents in the store.
        threshold: R0.
        bits: b of ``pairs.estimate`` (the margin is that estimate's standard error).
        num_perm: k.
        z: the margin in standard errors.
        max_wedges: wedges per batch of :func:`triangles`.

    Returns:
        int64[n_candidates, 3], rows ascending, sorted.
    """
    floor = threshold - pair_margin(threshold, num_perm, bits, z)
    kept = pairs.estimate >= floor
    return triangles(pairs.first[kept], pairs.second[kept], num_docs, max_wedges=max_wedges)


def find_triples(
    values: np.ndarray,
    pairs: ScoredPairs,
    r: np.ndarray,
    threshold: float,
    bits: int,
    z: float = 3.0,
    level: float = 0.95,
    max_wedges: int = WEDGE_BATCH,
) -> ScoredTriples:
    """Triples with 3-way estimate R̂ ≥ R0, sorted by descending estimate, then by documents.

    The whole 3-way step of ``dedup find --ways 3`` after LSH: keep candidate pairs with R̂_ij ≥ R0 − margin,
    take the triangles (:func:`candidate_triples`), score them (:func:`score_triples`), keep R̂ ≥ R0.
    For ≥ 0.99 of triples with R ≥ R0 to become candidates, the banding must have been chosen with
    ``recall=PAIR_RECALL_FOR_TRIPLES`` (or :func:`pair_recall_for_triples` for another target or z).

    Cost: about 1.5 µs per candidate triple (counting, estimates; intervals only for the kept ones), e.g.
    5 s for 3.3·10^6 candidates from 50 000 documents at R0 = 0.5, b = 2. A cluster of d mutual
    near-duplicates yields C(d, 3) candidates (1.7·10^8 for d = 1000); :func:`wedge_count` on the kept
    pairs tells the cost before enumerating.

    Args:
        values: uint[n_docs, k], the lowest ``bits`` bits of each minwise value.
        pairs: every LSH candidate pair, scored on ``values`` (``scoring.score_pairs``).
        r: float64[n_docs], r = f/D.
        threshold: R0 in (0, 1].
        bits: b ≥ 2.
        z: the pair margin in standard errors.
        level: confidence level of the intervals.
        max_wedges: wedges per batch of :func:`triangles`.

    Raises:
        UsageError: bits < 2, or a threshold outside (0, 1].
    """
    if bits < 2:
        raise UsageError(_BITS_MESSAGE)
    num_docs, num_perm = values.shape
    candidates = candidate_triples(pairs, num_docs, threshold, bits, num_perm, z=z, max_wedges=max_wedges)
    accepted = _score(values, candidates, r, bits, level, threshold=threshold)
    order = np.lexsort((accepted.docs[:, 2], accepted.docs[:, 1], accepted.docs[:, 0], -accepted.estimate))
    return accepted.select(order)
