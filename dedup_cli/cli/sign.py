"""``dedup sign``: documents → signatures in a store."""

from __future__ import annotations

from typing import Any

import click

from dedup_cli.cli.common import (
    ESTIMATOR_BITS,
    EXIT_ERROR,
    allow_empty_option,
    engine_of,
    engine_options,
    fail,
    flag,
    print_warnings,
    progress_bar,
    quiet_option,
    reading_options,
    reports_errors,
    say,
    strict_option,
    warn,
)
from dedup_cli.cli.pandas_hidden import pandas_hidden
from dedup_cli.options.checks import counted, text_option_for_sets
from dedup_cli.options.input_options import InputOptions
from dedup_cli.options.signing import TEXT_OPTIONS, SignOptions
from dedup_cli.options.vocabulary import (
    DEFAULT_NUM_PERM,
    DEFAULT_STORE,
    DEFAULT_STORED_BITS,
    MAX_NUM_PERM,
    MAX_SEED,
    MAX_SET_UNIVERSE,
    SHINGLE_UNITS,
    SIGNATURE_SCHEMES,
    SIGNING_KERNELS,
    STORE_VARIABLE,
    WORD_TOKENISATIONS,
    default_store,
)


@click.command()
@click.argument("inputs", nargs=-1, type=click.Path(path_type=str, allow_dash=True))
@click.option("-o", "--out", "--output", "out", default=None, type=click.Path(path_type=str),
              help=f"The store (a directory of Parquet parts); created, or extended incrementally.  "
                   f"[default: ${STORE_VARIABLE}, else {DEFAULT_STORE}]")
@reading_options
@click.option("--max-document-bytes", type=click.IntRange(1), default=InputOptions.max_document_bytes,
              help="Skip (and count) documents larger than this.")
@click.option("--id-root", type=click.Path(file_okay=False, path_type=str), default=InputOptions.id_root,
              help="The directory file ids are relative to; fixed by a store's first run.  "
                   "[default: the store's, else the deepest directory holding the inputs]")
@click.option("--shingle-size", "-w", type=click.IntRange(1, 1000), default=SignOptions.shingle_size,
              help="Tokens per shingle (w).")
@click.option("--shingle-unit", type=click.Choice(SHINGLE_UNITS), default=SignOptions.shingle_unit,
              help="Shingle words or characters.")
@click.option("--tokenisation", type=click.Choice(WORD_TOKENISATIONS), default=SignOptions.tokenisation,
              help="How words are found: unicode-words (an ideograph, a hiragana, a Thai, Lao, Khmer or Myanmar "
                   "letter is a token, so is a run of katakana; combining marks stay in their word) or w-runs "
                   "(runs of \\w, as stores signed before had).  [default: the store's, else unicode-words]")
@click.option("--num-perm", "-k", type=click.IntRange(1, MAX_NUM_PERM), default=SignOptions.num_perm,
              help=f"Minwise hash values per document (k).  [default: the store's; a new store: {DEFAULT_NUM_PERM}, "
                   "or chosen for --docs]")
@click.option("--bits", "-b", type=ESTIMATOR_BITS, default=SignOptions.bits,
              help="Lowest bits kept of each value; find can use any --bits up to this, and bands on all of them.  "
                   "1/2: keep only the XOR of the lowest bits of permutations j and j + k/2 (k/2 bits a document), "
                   f"for --bits 1/2 alone.  [default: the store's; a new store: {DEFAULT_STORED_BITS}, or chosen for "
                   "--docs]")
@click.option("--docs", type=click.IntRange(1), default=SignOptions.docs, metavar="N",
              help="The documents a new store is expected to hold: its --num-perm and --bits are chosen so that "
                   "find serves them (256 values of 8 bits below about 10^5 documents, else 128 of 16).")
@click.option("--seed", type=click.IntRange(0, MAX_SEED), default=SignOptions.seed, help="Seed of the hash family.")
@click.option("--scheme", type=click.Choice(SIGNATURE_SCHEMES), default=SignOptions.scheme,
              help="kperm: k independent hash functions; oph: one permutation in k bins, densified.")
@click.option("--universe", "-D", type=click.IntRange(2, MAX_SET_UNIVERSE), default=InputOptions.universe,
              help="With --input-format sets: the universe size D; elements lie in [0, D).")
@click.option("-j", "--jobs", type=click.IntRange(0), default=SignOptions.jobs,
              help="Worker processes (0: one per core).")
@click.option("--kernel", type=click.Choice(SIGNING_KERNELS), default=SignOptions.kernel,
              help="Signing kernel: numba (compiled; the fast extra) or numpy, the same signatures; auto takes numba "
                   "once it is compiled (in the background, never during a run) and the run repays loading it.")
@click.option("--prune", is_flag=True,
              help="Remove stored documents that are no longer in the inputs; refused (nothing stored) when that "
                   "would remove all of them or more than half.")
@click.option("--force-prune", is_flag=True,
              help="--prune, even when it removes more than half of the stored documents, or all of them.")
@click.option("--checksum", is_flag=True,
              help="Read again the files whose size and modification time are the store's, and sign again those "
                   "whose content changed (like rsync -c): for files restored from archives or copied with their "
                   "times kept (cp -p, tar x). Slower: every file is read.")
@strict_option
@allow_empty_option
@click.option("--wait", type=click.FloatRange(0), default=SignOptions.wait,
              help="Seconds to wait for another run on the same store before giving up.")
@engine_options
@quiet_option
@click.option("-v", "--verbose", is_flag=True,
              help="List every skipped input, not only the first few; say which signing kernel ran.")
@reports_errors
def sign(inputs: tuple[str, ...], out: str | None, quiet: bool, verbose: bool, **given: Any) -> None:
    """Shingle and minhash documents into a signature store.

    INPUTS are files, directories (read recursively; hidden entries skipped) and - for stdin. Signing into
    an existing store signs only new or changed documents.

    \b
    Example:
      dedup sign corpus/
      zcat docs.jsonl.gz | dedup sign - --input-format jsonl --id-field url -o sigs.parquet
      dedup sign --input-format sets words.jsonl --universe 100000 -o words.parquet
    """
    import dedup_cli as api
    from dedup_cli.cli.summaries import kernel_line, read_warnings, sign_summary, stores_note

    reading = InputOptions(**{name: given.pop(name) for name in InputOptions.__dataclass_fields__})
    if reading.input_format == "sets":
        context = click.get_current_context()
        for name in TEXT_OPTIONS:
            if context.get_parameter_source(name) not in (None, click.core.ParameterSource.DEFAULT):
                raise text_option_for_sets(name, given[name])
            del given[name]  # integer sets are signed with permutations of their universe
    engine = engine_of(given)
    options = SignOptions(input=reading, engine=engine, **given)
    # The local engine runs as in the core install, without pandas (dedup_cli.cli.pandas_hidden: 0.27 s saved).
    with pandas_hidden(), progress_bar(quiet, "signing") as (on_start, advance):
        report = api.sign(inputs, default_store(out), options, progress=advance, on_start=on_start,
                          on_note=None if quiet else say)
    print_warnings(read_warnings(report.read, flag), verbose)
    if report.prune_skipped:
        warn("--prune skipped: some inputs could not be read, so nothing was removed")
    if not quiet:
        note = stores_note(report.read)
        if note is not None:
            say(note)
        say(sign_summary(report))
        if verbose:
            say(kernel_line(report, flag))
    unreadable = report.read.count("unreadable")
    if unreadable:
        fail(f"{counted(unreadable, 'input')} could not be read; {report.store} holds the rest", EXIT_ERROR)
