"""The vocabulary of choices and limits every command's options are judged by, and the default store."""

from __future__ import annotations

import os

# --- the vocabulary of choices and limits --------------------------------------------------------------------

INPUT_FORMATS = ("auto", "text", "lines", "jsonl", "json", "csv", "tsv", "parquet", "sets")
SHINGLE_UNITS = ("word", "char")
# How the word unit finds words: "unicode-words" as Unicode's default word boundaries do (one token per ideograph,
# kana or letter of the scripts written without spaces, combining marks kept with their letter); "w-runs" the
# maximal runs of \w, what stores signed before the first had. Character tokens are "code-points"; sets "none".
WORD_TOKENISATIONS = ("unicode-words", "w-runs")
DEFAULT_TOKENISATION = "unicode-words"  # for new stores
LEGACY_TOKENISATION = "w-runs"  # what a store whose metadata names no tokenisation was signed with
CHAR_TOKENISATION = "code-points"
# A document with fewer tokens than w (but at least one): "whole" gives it one shingle, its whole token sequence
# (so identical short documents have resemblance 1), for new stores; "none" gives it no shingle (never compared),
# what a store whose metadata names no rule was signed with.
SHORT_DOCUMENT_RULES = ("whole", "none")
SHORT_DOCUMENTS = "whole"
LEGACY_SHORT_DOCUMENTS = "none"
# "kperm": k independent hash functions (Li & König 2010); "oph": one permutation split into k bins, densified
# (Li, Owen & Zhang 2012; Shrivastava 2017).
SIGNATURE_SCHEMES = ("kperm", "oph")
DEFAULT_SCHEME = "oph"  # one permutation hashing with densification: a mix a shingle instead of k
# The signing kernels: "numba" compiled (the fast extra), "numpy" the reference; "auto" takes numba for large runs.
SIGNING_KERNELS = ("auto", "numpy", "numba")
GROUP_METHODS = ("components", "strict", "witness")
KEEP_CHOICES = ("first", "longest", "shortest", "id", "oldest", "newest")
KEEP_FIELD = "field"  # the policy of ``keep_field``: the highest value of a numeric field wins
VERIFY_MODES = ("borderline", "all", "none")
CANDIDATE_METHODS = ("lsh", "all")
OUTPUT_KINDS = ("groups", "pairs", "triples", "members")
OUTPUT_FORMATS = ("jsonl", "tsv", "csv", "parquet")
ENGINES = ("local", "dask")
READING_OPTIONS = ("input_format", "id_field", "text_field", "id_column", "text_column")
"""The input options that decide documents' ids and texts: a store records them per sign run, for ``filter``."""

MAX_STORED_BITS = 64
# b = 1/2 (Li & König 2010, Sec. 5.3): the lowest bits of two permutations combined by XOR, half a bit each.
# Wherever a b is passed along it is this float; the command line spells it 1/2 or 0.5.
HALF_BIT = 0.5
MAX_NUM_PERM = 1 << 16
DEFAULT_NUM_PERM = 128
DEFAULT_STORED_BITS = 16
"""A new store's layout when ``sign`` names none: 128 values of 16 bits, 256 bytes a document. Band keys of three
16-bit rows (48 bits) keep the chance candidates of ``find --threshold 0.5`` under 0.1 a document up to 10^10
documents, where 256 values of 8 bits (24-bit keys, the layout before) pass that at 10^5 (docs/scaling.md)."""
TEXT_UNIVERSE = 1 << 64  # hashed shingles live in 2^64
MAX_SET_UNIVERSE = 1 << 62  # integer sets: the Feistel permutations' largest domain
MAX_SEED = (1 << 63) - 1

DEFAULT_STORE = "dedup.parquet"  # in the current directory, so `dedup sign corpus/` and `dedup find` meet
STORE_VARIABLE = "DEDUP_STORE"  # names the store for every command
# What makes a directory a store (format 2): its manifest, or the writer lock its first run creates before the
# manifest; and the key of a single-file store's (format 1) Parquet metadata.
# Named here, below the readers of inputs, so that a walk of the inputs can leave stores out.
STORE_MANIFEST = "_dedup_manifest.json"
STORE_LOCK = "_dedup.lock"
STORE_METADATA_KEY = b"dedup"
BAND_MEMORY = 1 << 30  # band keys a process holds in one round of the candidate stage
GATHER_LIMIT = 20_000_000  # pairs the end of a Dask find gathers into the driver; beyond, it runs on the workers
SCHEDULER_VARIABLE = "DEDUP_SCHEDULER"  # the Dask scheduler of --engine dask, for every command


def default_store(named: str | os.PathLike[str] | None = None) -> str:
    """The store a command uses: the one named, else ``$DEDUP_STORE``, else ``./dedup.parquet``."""
    return os.fspath(named) if named else os.environ.get(STORE_VARIABLE) or DEFAULT_STORE


def bits_label(bits: float) -> str:
    """b as people write it: ``1/2`` for :data:`HALF_BIT`, else the whole number."""
    return "1/2" if bits == HALF_BIT else str(int(bits))


def band_bits_label(band_bits: float) -> str:
    """What band keys are made of, for messages: ``8 bits``, or ``XOR bits`` for a store signed with b = 1/2."""
    return "XOR bits" if band_bits == HALF_BIT else f"{int(band_bits)} bits"
