"""``sign_texts`` and ``find_duplicates``: the pipeline on texts in memory, without files or a store.

The same stages as ``sign`` then ``find`` (shingles → signatures → candidates → estimates → exact checks →
groups), on a list of strings: for a notebook, a web service, or a corpus already in a dataframe. Nothing is
written. The results speak the ids given (default: each text's position, ``"0"``, ``"1"``, …), and documents keep
the order given, so ``keep="first"`` keeps the earliest text of each group. Exact checks read the texts kept in
the :class:`~dedup_cli.store.memory.Signatures`.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterable, Sequence

import numpy as np

from dedup_cli.engine.engines import engine_for
from dedup_cli.engine.progress import Progress, silent
from dedup_cli.engine.stages.results import FindResult
from dedup_cli.engine.stages.sign import sign_texts as sign_batch_texts
from dedup_cli.errors import DedupWarning, OptionError, UsageError
from dedup_cli.inputs.decoding import clean
from dedup_cli.inputs.records import text_hash
from dedup_cli.kernel.background import compile_later
from dedup_cli.kernel.choice import NOT_COMPILED, choose_kernel
from dedup_cli.options.finding import FindOptions
from dedup_cli.options.signing import SignOptions
from dedup_cli.params import SignatureParams
from dedup_cli.store.memory import Signatures

# Texts signed per call of the kernel: large enough that its per-call cost vanishes, small enough to stream.
TEXTS_PER_BATCH = 4096


def sign_texts(texts: Iterable[str], ids: Sequence[str] | None = None,
               options: SignOptions | None = None) -> Signatures:
    """Sign texts in memory: w-shingles, k minwise values, the lowest b bits of each, packed as a store keeps them.

    Args:
        texts: the documents' texts: a list or any iterable of str, a pyarrow string Array or ChunkedArray, or a
            pandas Series of str.
        ids: one id per text (default: the positions, ``"0"``, ``"1"``, …).
        options: k, b, the shingles, the seed and the kernel (``SignOptions()``: the command line's defaults;
            reading options do not apply). Texts signed with the same options give the bytes ``sign`` stores.

    A lone surrogate in a text (``"\\ud800"``, which UTF-8 cannot hold; JSON can) is signed as U+FFFD, as ``sign``
    reads it from a JSON Lines file, with a :class:`~dedup_cli.errors.DedupWarning` naming the first such text.

    Raises:
        dedup_cli.errors.UsageError: a text that is not a str, ids not one per text, or an id given twice.
    """
    options = SignOptions() if options is None else options
    if options.input.input_format == "sets":
        raise OptionError("input_format", "sets", "sign_texts signs texts; sign integer sets with sign()")
    texts = as_list(texts)
    wrong = next((index for index, text in enumerate(texts) if not isinstance(text, str)), None)
    if wrong is not None:
        raise UsageError(f"text {wrong} is a {type(texts[wrong]).__name__}, not a str; decode it, or leave it out")
    names = [str(index) for index in range(len(texts))] if ids is None else [str(name) for name in ids]
    if len(names) != len(texts):
        raise UsageError(f"{len(names)} ids for {len(texts)} texts; give one id per text")
    params = SignatureParams.from_options(options)
    hashes = _content_hashes(texts, names)  # before signing: it replaces lone surrogates in ``texts``
    # One process signs them; their characters stand for their bytes. As with sign, auto never waits for the
    # compiler: numpy signs while the compiled kernel is not cached, and it is compiled in the background.
    kernel, reason = choose_kernel(len(texts), sum(len(text) for text in texts), options.kernel, 1, params)
    if reason == NOT_COMPILED:
        compile_later()
    counts, packed = [np.empty(0, np.int64)], [np.empty((0, params.signature_bytes), np.uint8)]
    for start in range(0, len(texts), TEXTS_PER_BATCH):
        batch_counts, batch_packed = sign_batch_texts(texts[start:start + TEXTS_PER_BATCH], params, kernel=kernel)
        counts.append(batch_counts.astype(np.int64))
        packed.append(batch_packed)
    return Signatures(params, names, np.concatenate(counts), np.concatenate(packed), hashes, texts)


def _content_hashes(texts: list[str], names: Sequence[str]) -> np.ndarray:
    """uint64[n], xxh3-64 of each text's UTF-8 bytes (``text_hash``); a text holding a lone surrogate, which has
    none, is replaced in ``texts`` by its :func:`~dedup_cli.inputs.decoding.clean` copy first (U+FFFD in place of
    each surrogate: what ``sign`` signs for a JSON string ``"\\ud800"``), with one warning for them all."""
    hashes = np.empty(len(texts), np.uint64)
    replaced: list[int] = []
    for index, text in enumerate(texts):
        try:
            hashes[index] = text_hash(text)
        except UnicodeEncodeError:  # only a lone surrogate cannot be encoded
            texts[index] = clean(text)[0]
            hashes[index] = text_hash(texts[index])
            replaced.append(index)
    if replaced:
        count = "1 text holds" if len(replaced) == 1 else f"{len(replaced)} texts hold"
        warnings.warn(f"{count} a lone surrogate, which UTF-8 cannot hold (the first: id {names[replaced[0]]!r}); "
                      "signed with U+FFFD in its place, as sign reads it", DedupWarning, stacklevel=3)
    return hashes


def as_list(texts: Iterable[str]) -> list[str]:
    """The texts as a list: a pyarrow Array or ChunkedArray and a pandas Series give their values (neither
    library is imported for it), any other iterable its items."""
    if hasattr(texts, "to_pylist"):  # pyarrow
        return texts.to_pylist()
    if hasattr(texts, "to_numpy") and hasattr(texts, "tolist"):  # pandas Series, numpy arrays
        return texts.tolist()
    return list(texts)


def find_duplicates(texts: Iterable[str] | Signatures, options: FindOptions | None = None,
                    ids: Sequence[str] | None = None, sign_options: SignOptions | None = None,
                    progress: Progress = silent) -> FindResult:
    """Near-duplicate groups (and pairs, triples, members) of texts in memory: ``find`` without a store.

    Args:
        texts: the texts, or what :func:`sign_texts` returned for them (signing once, finding many times).
        options: as ``find``'s (``FindOptions()``: the command line's defaults); the local engine runs, and
            options that name stores or runs (``against``, ``new_since``, ``work_dir``) do not apply.
        ids: with texts, one id per text (default: their positions).
        sign_options: with texts, how to sign them (default: ``SignOptions()``).
        progress: told each stage as it begins.

    Returns:
        A :class:`FindResult`: ``groups()``, ``pairs()``, ``triples()``, ``members()`` in the ids given.
    """
    started = time.perf_counter()
    options = FindOptions() if options is None else options
    if isinstance(texts, Signatures):
        if ids is not None or sign_options is not None:
            raise UsageError("ids and sign_options go with texts; these texts are signed already")
        signatures = texts
    else:
        signatures = sign_texts(texts, ids, sign_options)
    for name in ("against", "new_since", "work_dir"):
        if getattr(options, name) is not None:
            value = getattr(options, name)
            raise OptionError(name, value, f"{{{name}}} {value} names a store or its runs; texts in memory have "
                              "neither: use sign() and find()")
    if options.engine.name != "local":
        raise OptionError("engine", options.engine.name, "texts in memory are searched by the local engine")
    params = signatures.params
    options.check_store(params.stored_bits, params.num_perm, "the signatures", params.input_kind)
    with engine_for(options.engine) as engine:
        result = engine.find_in_memory(signatures, options, progress)
    result.seconds = time.perf_counter() - started
    return result
