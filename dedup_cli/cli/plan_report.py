"""The plan as text (with the S-curve drawn in characters) and as a JSON-ready record."""

from __future__ import annotations

from typing import Any

import numpy as np

from dedup_cli.api.plan import Plan, recall_text
from dedup_cli.options.signing import SignOptions
from dedup_cli.options.vocabulary import HALF_BIT, bits_label


def _probability(p: float) -> str:
    """Fixed point where it reads well, scientific for the tiny probabilities of unrelated pairs."""
    if p == 0.0 or p >= 1e-3:
        return f"{p:.4f}"
    return f"{p:.2e}"


def _bytes(count: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= size:
            return f"{count / size:.3g} {unit}"
    return f"{count:.0f} B"


def _count(value: float) -> str:
    for unit, size in (("billion", 1e9), ("million", 1e6)):
        if value >= size:
            return f"{value / size:.3g} {unit}"
    return f"{value:,.0f}" if value >= 10 else f"{value:.2g}"


def _plot(plan: Plan, width: int, height: int) -> list[str]:
    """The S-curve as text: R from 0 to 1 across ``width`` columns, Pr(candidate) up ``height`` rows.

    The curve is drawn with ``*``, the threshold column with ``:`` and a ``+`` on the R axis.
    """
    xs = np.linspace(0.0, 1.0, width)
    levels = np.rint(plan.candidate_probabilities(xs) * (height - 1)).astype(int)
    canvas = [[" "] * width for _ in range(height)]
    marker = int(round(plan.threshold * (width - 1)))
    for line in canvas:
        line[marker] = ":"
    for column, level in enumerate(levels):
        # Join each point to its left neighbour so that steep stretches stay connected.
        low = high = int(level)
        if column:
            low, high = min(low, int(levels[column - 1]) + 1), max(high, int(levels[column - 1]) - 1)
        for filled in range(low, high + 1):
            canvas[height - 1 - filled][column] = "*"
    labels = {0: "1.0", height - 1 - int(np.rint(0.5 * (height - 1))): "0.5", height - 1: "0.0"}
    lines = [f"  {labels.get(row, ''):>4} |{''.join(line)}" for row, line in enumerate(canvas)]
    axis = ["-"] * width
    axis[marker] = "+"
    lines.append(f"  {'':>4} +{''.join(axis)}")
    ticks = [" "] * (width + 1)
    ticks[0], ticks[width] = "0", "1"
    label = f"R0={plan.threshold:g}"
    start = min(max(marker + 1 - len(label) // 2, 2), width - len(label) - 1)
    ticks[start : start + len(label)] = list(label)
    lines.append(f"  {'':>4} {''.join(ticks)}  R")
    return lines


def _shingle_lines() -> list[str]:
    """What w, sign's shingle size, means in each script, and what it makes of a copy with a few edits."""
    w = SignOptions.shingle_size
    return [
        "",
        f"Shingles (sign's default, w = {w} word tokens; docs/languages.md):",
        f"  {w} words where words are written with spaces (Latin, Cyrillic, Greek, Hangul, Arabic, Devanagari …);",
        f"  {w} characters in Chinese and Japanese (each ideograph and hiragana is a token, each run of katakana one),",
        f"  about 2 or 3 words; {w} letters with their marks in Thai, Lao, Khmer and Myanmar, about 1 or 2 words.",
        f"  A share p of tokens changed far apart leaves R ≈ (1 − {w}p)/(1 + {w}p): "
        f"{_resemblance(w, 0.01):.2f} for 1 %, {_resemblance(w, 0.03):.2f} for 3 %",
        "  (measured on 1,000-character Chinese, Japanese and Thai texts: 0.91 and 0.75).",
    ]


def _resemblance(size: int, share: float) -> float:
    """Jaccard of a text and a copy with a share of its tokens changed, each edit w shingles apart from the next."""
    return (1 - size * share) / (1 + size * share)


def _half_bit_lines(plan: Plan) -> list[str]:
    """The storage factors of b = 1/2, 1, 2, 4, 8 (and b) at R0, and whether b = 1/2 stores least."""
    if not plan.storage_factors or plan.threshold >= 1.0:
        return []
    factors = dict(plan.storage_factors)
    half = factors[HALF_BIT]
    shown = ", ".join(f"{bits_label(bits)}: {factor:.3g}" for bits, factor in plan.storage_factors)
    indent = " " * 25
    lines = [f"  storage factor B(b)    b = {shown}",
             f"{indent}(eq. 12 at R0, r → 0: b·k·Var(R̂_b); b = 1/2 from k XOR bits of 2k permutations)"]
    best_factor, best_bits = min((factor, bits) for bits, factor in plan.storage_factors if bits != HALF_BIT)
    if half <= 0.0 or best_factor <= 0.0:  # R0 so near 1 that every variance vanishes: nothing to compare
        return lines
    if plan.recommend_half_bit:
        lines += [f"  b = 1/2                stores {best_factor / half:.3g}× less than b = {bits_label(best_bits)} at "
                  "equal accuracy: recommended, find --bits 1/2",
                  f"{indent}(sign --bits 1/2 keeps only the XOR bits, k/16 bytes, but bands them with",
                  f"{indent}T = (1 + R²)/2, which needs many permutations: see plan --stored-bits 1/2)"]
    else:
        lines.append(f"  b = 1/2                stores {half / best_factor:.3g}× more than "
                     f"b = {bits_label(best_bits)} at equal accuracy (it wins above R0 ≈ 0.58)")
    return lines


def _banding_lines(plan: Plan) -> list[str]:
    """The parameters on one line, then the banding, how it was chosen and its S-curve's formula."""
    how = f"chosen for recall ≥ {plan.recall_target:g} at R0" if plan.banding_chosen else "as given"
    if plan.banding_chosen and plan.docs is not None:
        how += f" and ≤ {plan.chance_fraction:g}·N chance candidates"
    xor_store = plan.stored_bits == HALF_BIT
    b, stored = bits_label(plan.bits), bits_label(plan.stored_bits)
    lines = [
        f"dedup plan: threshold R0 = {plan.threshold:g}, estimator b = {b} bits, k = {plan.num_perm} values, "
        + (f"a store of {plan.num_perm // 2} XOR bits" if xor_store else f"B = {stored} stored bits")
        + (f", N = {plan.docs:,} documents" if plan.docs is not None else ""),
        "",
    ]
    if xor_store:
        return lines + [
            f"Banding: {plan.bands} bands × {plan.rows} rows on the stored XOR bits ({how})",
            f"  Pr(candidate) = 1 − (1 − T^{plan.rows})^{plan.bands}; a row agrees with probability",
            "  T = (1 + R²)/2 (Li & König eq. 23; R = 0: unrelated pairs)",
            *_short_document_lines(plan),
        ]
    return lines + [
        f"Banding: {plan.bands} bands × {plan.rows} rows on the {stored}-bit stored values ({how})",
        f"  Pr(candidate) = 1 − (1 − E^{plan.rows})^{plan.bands}; a row agrees with probability",
        f"  E = 2^-{stored} + (1 − 2^-{stored})·R (R = 0: unrelated pairs)",
        *_short_document_lines(plan),
    ]


def _short_document_lines(plan: Plan) -> list[str]:
    """With --shingles and one permutation hashing: whose S-curve and standard error the plan shows."""
    if plan.pair_sizes is None:
        return []
    return [f"  for pairs of documents of {plan.shingles:,} shingles in {plan.num_perm} bins of one permutation "
            "hashing: densified",
            "  bins copy a few minima, so the curve is averaged over the spread of E (docs/estimators.md)"]


def _curve_lines(plan: Plan, width: int) -> list[str]:
    """The S-curve as a table (R with as many decimals as R0 needs, R0 marked) and as a plot."""
    decimals = min(4, max(1, len(f"{plan.threshold:g}".partition(".")[2])))
    lines = ["", "      R  Pr(candidate)"]
    for resemblance, probability in plan.curve:
        mark = "  <- R0" if resemblance == plan.threshold else ""
        lines.append(f"  {resemblance:5.{decimals}f}  {_probability(probability):>13}{mark}")
    return lines + ["", "  Pr(candidate)", *_plot(plan, width, max(8, width // 5))]


def _threshold_lines(plan: Plan) -> list[str]:
    """What banding and the estimator promise for a pair at exactly R0."""
    return [
        "",
        f"At R0 = {plan.threshold:g}:",
        f"  recall of banding      {plan.recall_at_threshold:.4f}  Pr(candidate); pairs above R0 fare better",
        f"  false-negative rate    {plan.false_negative_rate:.4f}  pairs at R0 that never become candidates",
        f"  estimator std. error   {plan.standard_error:.4f}  b = {bits_label(plan.bits)}, k = {plan.num_perm}: "
        + (f"sqrt of eq. {'D5' if plan.bits == HALF_BIT else 'D4'} (oph, {plan.shingles:,} shingles);"
           if plan.pair_sizes is not None else
           f"sqrt of Li & König eq. {26 if plan.bits == HALF_BIT else 11}, r → 0;"),
        "                                 a pair at exactly R0 is estimated below R0 about half the time;",
        "                                 find --verify borderline (the default) decides such pairs exactly",
    ]


def _recall_lines(plan: Plan) -> list[str]:
    """The banding chosen for this recall beside the default's (or 0.99 beside 0.999): what --recall buys."""
    if not plan.recall_costs:
        return []
    lines = ["", "Recall and its cost (find --recall R: bands × rows with Pr(candidate) ≥ R at R0):",
             "  --recall  banding   recall at R0  pairs at R0 missed    candidates  band time"]
    for cost in plan.recall_costs:
        missed = cost.missed_at_threshold
        one_in = f"1 in {1.0 / missed:,.0f}" if missed > 0.0 else "none"
        candidates = "–" if cost.candidates is None else _count(cost.candidates)
        mark = "  <- this plan" if cost.recall == plan.recall_target else ""
        shape = f"{cost.banding.bands}×{cost.banding.rows}"
        lines.append(f"  {cost.recall:<8g}  {shape:<8}  {recall_text(cost.recall_at_threshold, cost.recall):<12}  "
                     f"{one_in:<18}  {candidates:>12}  {cost.band_work:.2f}×{mark}")
    chance = ("expected between unrelated documents among N (near-duplicates add theirs)" if plan.docs is not None
              else "give --docs N to see those expected between unrelated documents")
    return lines + [f"  candidates: {chance};",
                    "  time: the band stage computes and sorts bands·N keys (the last column, against the first",
                    "  row); scoring and the exact checks follow the candidates. Above 0.99 the pairs estimated",
                    "  just below R0 that might reach it are checked exactly too."]


def _storage_lines(plan: Plan) -> list[str]:
    """A store row's bytes, and the space b saves against 32 and 64 bits (and against the other b)."""
    b, stored = bits_label(plan.bits), bits_label(plan.stored_bits)
    lines = [
        "",
        "Storage:",
        f"  bytes per document     {plan.bytes_per_document}  = {plan.signature_bytes} signature "
        f"({'ceil(k/16)' if plan.stored_bits == HALF_BIT else 'ceil(k·B/8)'}) "
        f"+ {plan.row_overhead_bytes} other columns",
        "                              (size, mtime, content hash, shingle count, run; id and path offsets),",
        "                              plus the id and path text; zstd shrinks all but the signature",
    ]
    if plan.stored_bits > plan.bits:
        lines.append(
            f"                              the store keeps B = {stored} bits a value for banding; "
            f"b = {b} alone would take {plan.estimator_signature_bytes} bytes"
        )
    for wide, factor in ((32, plan.storage_factor_32), (64, plan.storage_factor_64)):
        label = f"  {b} bits vs {wide} bits"
        if factor is None:
            lines.append(f"{label:<25}undefined at R0 = {plan.threshold:g}: every estimator is exact there")
        else:
            lines.append(f"{label:<25}{factor:.3g}× less space at equal accuracy (Li & König eq. 12, r → 0)")
    return lines + _half_bit_lines(plan)


def _processes_line(plan: Plan) -> str:
    """How many processes the peak sums over: the driver alone, or the driver and its workers."""
    processes = plan.memory_processes or 1
    if processes == 1:
        return "in one process"
    return f"the sum over {processes} processes (the driver and its {processes - 1} workers)"


def _jobs_lines(plan: Plan) -> list[str]:
    """What j and j_c are for this find -j."""
    if plan.jobs == 1:
        return ["    j = j_c = 1: find -j 1 runs every stage in one process; ids and paths cost their text on top."]
    return [f"    j = {plan.candidate_processes} processes banding and j_c = {plan.scoring_processes} scoring (find -j "
            f"{plan.jobs} forks workers only for enough documents or pairs;",
            "    pages they share count once); ids and paths cost their text on top."]


def _corpus_lines(plan: Plan) -> list[str]:
    """With N: the expected candidates, the chance budget, and the memory of ``find`` term by term."""
    if plan.docs is None:
        return []
    assert plan.pairs is not None and plan.expected_candidates is not None
    lines = [
        "",
        f"Corpus of N = {plan.docs:,} documents, {plan.pairs:,} pairs:",
        f"  expected candidates    {_count(plan.expected_candidates)} = N(N − 1)/2 · "
        f"{_probability(plan.candidate_probability_unrelated)} if nearly all pairs are unrelated;",
        "                         true near-duplicates add their own (Pr(candidate) at their R, above)",
        f"  chance budget          {_count(plan.chance_budget or 0.0)} = {plan.chance_fraction:g}·N: the banding is "
        "chosen with more rows as N grows to stay within it"
        + (f"; k ≥ {plan.required_num_perm} keeps it at this recall" if plan.required_num_perm else ""),
        f"  memory for find        about {_bytes(plan.memory_peak_bytes or 0)} at its peak, while "
        f"{plan.memory_peak_phase}, {_processes_line(plan)}:",
        f"    {plan.memory_peak_formula}",
        f"    with S = {plan.signature_bytes} signature bytes, "
        f"v = {plan.value_bytes} and v_b = {plan.estimator_value_bytes} bytes a value in memory, C the candidates "
        "expected above",
        "    (near-duplicates add theirs), P the band collisions before de-duplication,",
        *_jobs_lines(plan),
        "    The terms, each summed over its processes (* in the peak):",
    ]
    width = max(36, *(len(part.formula) for part in plan.memory))
    for part in plan.memory:
        peak = "*" if part.in_peak else " "
        lines.append(f"    {peak} {part.formula:<{width}} {_bytes(part.bytes):>8}  {part.name}")
    return lines


def render_plan(plan: Plan, width: int = 60) -> str:
    """A human-readable report of ``plan``: parameters, S-curve table and plot, accuracy, cost, warnings.

    Args:
        plan: from :func:`dedup_cli.api.plan.plan`.
        width: columns of the S-curve plot, at least 20 (its height is a fifth of that, at least 8 rows).
    """
    if width < 20:
        raise ValueError(f"plot width {width} is too narrow; use 20 columns or more")
    lines = [*_banding_lines(plan), *_curve_lines(plan, width), *_threshold_lines(plan), *_recall_lines(plan),
             *_storage_lines(plan),
             *_shingle_lines(), *_corpus_lines(plan)]
    if plan.warnings:
        lines += ["", "Warnings:", *(f"  - {warning}" for warning in plan.warnings)]
    return "\n".join(lines) + "\n"


def plan_record(plan: Plan) -> dict[str, Any]:
    """``plan`` as a JSON-ready dict (plain ints, floats, strings, lists and None)."""
    return {
        "threshold": plan.threshold,
        "bits": plan.bits,
        "num_perm": plan.num_perm,
        "stored_bits": plan.stored_bits,
        "scheme": plan.scheme,
        "shingles": plan.shingles,
        "recall_target": plan.recall_target,
        "bands": plan.bands,
        "rows": plan.rows,
        "band_bits": plan.stored_bits,
        "storage_factors": [{"bits": bits, "storage_factor": factor} for bits, factor in plan.storage_factors],
        "recommend_half_bit": plan.recommend_half_bit,
        "banding": "chosen" if plan.banding_chosen else "given",
        "curve": [{"resemblance": r, "candidate_probability": p} for r, p in plan.curve],
        "row_agreement_at_threshold": plan.row_agreement_at_threshold,
        "recall_at_threshold": plan.recall_at_threshold,
        "false_negative_rate": plan.false_negative_rate,
        "candidate_probability_unrelated": plan.candidate_probability_unrelated,
        "match_probability": plan.match_probability,
        "standard_error": plan.standard_error,
        "signature_bytes": plan.signature_bytes,
        "row_overhead_bytes": plan.row_overhead_bytes,
        "estimator_signature_bytes": plan.estimator_signature_bytes,
        "value_bytes": plan.value_bytes,
        "estimator_value_bytes": plan.estimator_value_bytes,
        "bytes_per_document": plan.bytes_per_document,
        "storage_factor_32": plan.storage_factor_32,
        "storage_factor_64": plan.storage_factor_64,
        "unused_values": plan.unused_values,
        "docs": plan.docs,
        "pairs": plan.pairs,
        "expected_candidates": plan.expected_candidates,
        "chance_fraction": plan.chance_fraction,
        "chance_budget": plan.chance_budget,
        "required_num_perm": plan.required_num_perm,
        "recall_costs": [{"recall": cost.recall, "bands": cost.banding.bands, "rows": cost.banding.rows,
                          "recall_at_threshold": cost.recall_at_threshold, "candidates": cost.candidates,
                          "band_work": cost.band_work} for cost in plan.recall_costs],
        "memory_peak_bytes": plan.memory_peak_bytes,
        "memory_peak_phase": plan.memory_peak_phase,
        "memory_peak_formula": plan.memory_peak_formula,
        "jobs": plan.jobs,
        "candidate_processes": plan.candidate_processes,
        "scoring_processes": plan.scoring_processes,
        "memory_processes": plan.memory_processes,
        "memory": [
            {"name": part.name, "bytes": part.bytes, "formula": part.formula, "in_peak": part.in_peak}
            for part in plan.memory
        ],
        "warnings": list(plan.warnings),
    }
