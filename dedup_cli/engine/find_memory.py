"""What the local engine's ``find`` holds in memory, from N, k, B, b, the banding and the expected candidates
alone: the model behind the memory ``plan`` reports (:mod:`dedup_cli.api.plan`), and behind the memory its warnings
and ``find``'s name for a store that would serve a corpus. It is read off the engine's code (``engine.local.find``,
``band_rounds``, ``forked``); it lives beside the engine interface rather than inside the local engine because
``plan``, a command, reads it, and the commands reach an engine only through that interface.
tests/api/test_planning.py and bench/plan_memory.py check it against the peak resident memory of real runs.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from dedup_cli import forked
from dedup_cli.candidates.buckets import DEDUPLICATE_EVERY, key_dtype
from dedup_cli.estimates.pairs import COMPARISON_BYTES
from dedup_cli.forked import useful_workers
from dedup_cli.minhash.packing import value_dtype
from dedup_cli.options.vocabulary import BAND_MEMORY

# The share of the machine's memory a wave's band keys take by default: 1 / BAND_MEMORY_SHARE.
BAND_MEMORY_SHARE = 4
_CGROUP_LIMIT = "/sys/fs/cgroup/memory.max"


def machine_memory() -> int:
    """Bytes of memory this process may use: the machine's, or its control group's limit when lower (a
    container); 0 when neither can be read."""
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        memory = 0
    try:
        with open(_CGROUP_LIMIT) as handle:
            limit = handle.read().strip()
    except OSError:
        limit = "max"
    if limit.isdigit() and (memory == 0 or int(limit) < memory):
        memory = int(limit)
    return memory


def default_round_bytes(jobs: int, memory: int | None = None) -> int:
    """``--band-memory``'s default: the j rounds of a wave share 1 / :data:`BAND_MEMORY_SHARE` of the machine's
    memory (``memory``, else :func:`machine_memory`), and a round holds 1 GiB at least."""
    memory = machine_memory() if memory is None else memory
    return max(BAND_MEMORY, memory // (BAND_MEMORY_SHARE * max(1, jobs)))


def band_rounds(bands: int, keyed_documents: int, key_bytes: int, round_bytes: int) -> list[tuple[int, int]]:
    """(first band, last band + 1) of each round, so that a round's keys take at most ``round_bytes`` (one band a
    round at least)."""
    per_round = max(1, round_bytes // max(1, keyed_documents * key_bytes))
    return [(first, min(bands, first + per_round)) for first in range(0, bands, per_round)]


def wave_rounds(rounds: list[tuple[int, int]], keyed_documents: int, key_bytes: int, round_bytes: int,
                jobs: int) -> int:
    """How many rounds a wave keys at once: one a process, within the ``jobs`` × ``round_bytes`` the processes hold
    together. A round holds one band at least, so where a band alone is more than ``round_bytes`` (past about 10^9
    documents at the default) fewer rounds run at once, down to one, rather than the wave growing with ``jobs``."""
    jobs = max(1, jobs)
    largest = max((last - first for first, last in rounds), default=1) * keyed_documents * key_bytes
    return max(1, min(jobs, jobs * round_bytes // max(1, largest)))


# Memory model of the local engine's ``find`` with LSH candidates (bytes), read off the code and checked against
# the peak resident memory of real runs (tests/api/test_planning.py says how closely). The store is never held whole:
# - Python, numpy, pyarrow and the Parquet reader, loaded and warmed up;
FIXED_BYTES = 150_000_000
# - per document while numbering: the id (a 4-byte offset and about 16 bytes of text), the run and the shingle
#   count as read (Arrow) and as numpy arrays (transient);
NUMBERING_BYTES = 4 + 16 + 2 * 8 + 2 * 8
# - per document to the end: its shingle count and run, eligibility, and its key slot while banding;
DOCUMENT_BYTES = 8 + 8 + 1 + 8
# - one round of band keys, at most band_memory's default (:func:`default_round_bytes`: a
#   quarter of the machine's memory M shared by the wave, 1 GiB a round at least), 4 or 8 bytes a key; with j
#   processes, a wave of up to j rounds at once in anonymous shared memory (``engine.local.band_rounds``), each
#   page counted once however many processes map it;
# - per document while bucketing one band, in each of the j processes that sort bands (at most one a band): the key
#   (of a 64-bit key, its prefix) and position packed into one word and sorted in place (the order and sorted keys
#   are views of it, or of 64-bit keys the few positions that may share a bucket), the positions before packing,
#   and two masks (runs of equal keys are few: most buckets hold one document);
SORT_TEMPORARY_BYTES = 8 + 4 + 2
# - per document of the row group that each of the j processes decodes while keying the signatures: the column
#   as read and decompressed (2·S), and its values unpacked (k·v; a view at 8 bits, counted all the same); the
#   keys are written from them into the round's array in place. A store written by ``dedup`` holds at most
#   GROUP_ROWS rows a row group (``store.compaction``'s; sign writes smaller ones, which cost less: the estimate
#   assumes the largest);
GROUP_ROWS = 1 << 16
# - per band collision (a pair sharing a bucket in one band, before de-duplication): its code in the
#   pending list, the concatenated copy and the sorted copy of ``primitives.sorted_unique``;
COLLISION_BYTES = 3 * 8
# - per candidate pair at the end of banding: its unique code, ``first`` and ``second`` and a temporary;
CODE_BYTES = 4 * 8
# - per document of a candidate pair, read whole: its signature as read and as one array (once, in shared memory,
#   when forked workers read), its b-bit values, and
#   about 200 bytes of id and location (as Arrow and Python strings), counts, hash, run and time;
CANDIDATE_DOCUMENT_BYTES = 200
# - per candidate pair while scoring: ``first``/``second``, match counts, r1, r2, the estimate, its
#   standard error, the interval and the float64 temporaries of the Wilson interval mapped through eq. 9; with
#   j_c > 1 processes each scores a chunk of the pairs, and the driver receives the seven result fields of every
#   pair (8 bytes each) before joining them;
SCORING_BYTES = 144
RESULT_BYTES = 7 * 8
# ``candidates.buckets.candidate_pairs`` de-duplicates pending codes once DEDUPLICATE_EVERY have piled up, and
# ``estimates.pairs.count_matches`` compares candidates in chunks of about COMPARISON_BYTES bytes of values (each
# scoring process its own). A forked worker inherits the driver's pages copy-on-write and writes few of them (its
# collector is off): what it adds is what it allocates, the terms above.


@dataclass(frozen=True)
class MemoryPart:
    """One term of the memory estimate: what it is, its size in bytes, the formula, and whether it is
    part of the peak."""

    name: str
    bytes: int
    formula: str
    in_peak: bool = False


@dataclass(frozen=True)
class FindProcesses:
    """How many processes ``find -j`` runs in each parallel stage for N documents and C candidates (as
    ``engine.local.find`` decides it: a worker for enough items only,
    :func:`dedup_cli.forked.useful_workers`)."""

    candidate_stage: int  # j: the processes that key and sort bands
    scoring: int  # j_c: the processes that score the candidates

    @classmethod
    def of(cls, jobs: int, n_docs: int, candidates: float) -> FindProcesses:
        return cls(useful_workers(jobs, n_docs, forked.BANDED_DOCUMENTS),
                   useful_workers(jobs, int(candidates), forked.SCORED_PAIRS))


def find_memory(n_docs: int, num_perm: int, stored_bits: float, bits: float, bands: int, rows: int,
                signature_bytes: int, candidates: float, collisions: float,
                processes: FindProcesses) -> tuple[tuple[MemoryPart, ...], str]:
    """The terms of the memory ``find`` needs, summed over its processes, those of its peak marked, and the phase of
    the peak.

    ``find`` numbers the documents from their ids, runs and counts, then reads the signatures once per round of
    bands, keeping one round's band keys and sorting one band at a time; then it reads the documents of the
    candidate pairs whole and scores them. Each phase holds what it inherits plus arrays of its own; the peak is
    the largest phase. With j > 1 processes (``find -j``) a wave of up to j rounds is keyed at once by forked
    workers, each decoding a row group, then each sorts a share of the bands; j_c of them score chunks of the
    candidates. A page several processes share (the driver's arrays, the shared keys) counts once.

    Args:
        n_docs, num_perm, stored_bits, bits, bands, rows: N, k, B, b and the banding.
        signature_bytes: S = ceil(k·B/8).
        candidates: C, expected distinct candidate pairs.
        collisions: P, expected band collisions summed over bands, before de-duplication.
        processes: j and j_c.
    """
    n, k = n_docs, num_perm
    key_bytes = key_dtype(rows, value_dtype(math.ceil(stored_bits))).itemsize  # an XOR bit is one byte in memory
    value_bytes = value_dtype(math.ceil(stored_bits)).itemsize
    estimator_value_bytes = value_dtype(math.ceil(bits)).itemsize
    banders, scorers = processes.candidate_stage, processes.scoring
    pending = min(collisions, candidates + DEDUPLICATE_EVERY)
    chunk = min(candidates / scorers, COMPARISON_BYTES // (k * estimator_value_bytes))
    read = min(n, 2 * candidates)
    copies = 2 if banders == 1 else 1
    # The first wave of the candidate stage's own rounds (:func:`band_rounds`, :func:`wave_rounds`): past about
    # 10^9 documents at the default a band alone is more than a round's share, and a wave keys and sorts fewer
    # bands than j.
    round_bytes = default_round_bytes(banders)
    rounds = band_rounds(bands, n, key_bytes, round_bytes)
    wave_bands = sum(last - first for first, last in rounds[:wave_rounds(rounds, n, key_bytes, round_bytes, banders)])
    scoring_formula = f"{SCORING_BYTES}·C + 3·min(C, 2^25/(k·v_b))·k·v_b"
    scoring = SCORING_BYTES * candidates + scorers * 3 * chunk * k * estimator_value_bytes
    if scorers > 1:
        scoring_formula = f"{SCORING_BYTES + RESULT_BYTES}·C + j_c·3·min(C/j_c, 2^25/(k·v_b))·k·v_b"
        scoring += RESULT_BYTES * candidates
    terms: dict[str, tuple[str, float, str]] = {
        "fixed": ("Python, numpy, pyarrow and the Parquet reader", FIXED_BYTES, "fixed"),
        "numbering": ("numbering the documents: ids, runs and counts as read (transient)", NUMBERING_BYTES * n,
                      f"{NUMBERING_BYTES}·N"),
        "documents": ("each document's count, run, eligibility and key slot", DOCUMENT_BYTES * n,
                      f"{DOCUMENT_BYTES}·N"),
        "round_keys": ("band keys of one round" if banders == 1 else "band keys of a wave of j rounds, shared",
                       wave_bands * n * key_bytes,
                       f"w·N·{key_bytes}, w ≤ bands: the bands a wave keys within max(j·2^30, "
                       f"M/{BAND_MEMORY_SHARE}), one at least"),
        # Each of the j processes decodes a row group: the largest dedup writes, or an equal share of the documents.
        "row_groups": ("a row group being decoded (transient)" if banders == 1 else "a row group decoded in each of "
                       "j workers (transient)", banders * min(math.ceil(n / banders), GROUP_ROWS)
                       * (2 * signature_bytes + k * value_bytes), "j·min(N/j, 2^16)·(2·S + k·v)"),
        # A round's bands are shared among the processes, a band to each at least: more processes than bands idle.
        "sort": ("sorting one band (transient)" if banders == 1 else "sorting one band in each of j processes "
                 "(transient)", min(banders, wave_bands) * SORT_TEMPORARY_BYTES * n,
                 f"min(j, w)·{SORT_TEMPORARY_BYTES}·N"),
        "codes": ("candidate codes while de-duplicating (transient)",
                  COLLISION_BYTES * pending + CODE_BYTES * candidates,
                  f"{COLLISION_BYTES}·min(P, C + 2^24) + {CODE_BYTES}·C"),
        # One process reads each row group's table, then joins them into one array: the signatures twice. Forked
        # readers write them into shared memory once and send back only the ids and locations.
        "candidate_documents": ("the candidates' documents, read whole",
                                read * (copies * signature_bytes + k * estimator_value_bytes
                                        + CANDIDATE_DOCUMENT_BYTES),
                                f"min(N, 2C)·({'2·S' if copies == 2 else 'S'} + k·v_b + {CANDIDATE_DOCUMENT_BYTES})"),
        "scoring": ("scoring the candidates" if scorers == 1 else "scoring the candidates in j_c processes",
                    scoring, scoring_formula),
    }
    phases = {
        "numbering the documents": ["fixed", "numbering"],
        "keying the signatures": ["fixed", "documents", "round_keys", "row_groups"],
        "bucketing": ["fixed", "documents", "round_keys", "sort", "codes"],
        "scoring": ["fixed", "documents", "candidate_documents", "scoring"],
    }
    phase = max(phases, key=lambda name: sum(terms[term][1] for term in phases[name]))
    parts = tuple(MemoryPart(name, int(round(size)), formula, term in phases[phase])
                  for term, (name, size, formula) in terms.items())
    return parts, phase


def phase_processes(phase: str, processes: FindProcesses) -> int:
    """The processes alive in a phase of :func:`find_memory`: the driver alone, or the driver and the j (or j_c)
    workers it forked, which it waits for (its memory stays in the sum)."""
    workers = {"bucketing": processes.candidate_stage, "keying the signatures": processes.candidate_stage,
               "scoring": processes.scoring}.get(phase, 1)
    return 1 + workers if workers > 1 else 1
